"""The docs site's MkDocs hooks (mkdocs.yml ``hooks:``): the standard library and MkDocs only.

* :func:`on_files`: every ``benchmarks/results/*.png`` goes into the site as
  ``benchmarks/img/NAME.png``, where the generated benchmark pages (``python -m benchmarks.docs``)
  link them. The plots are not copied into ``docs/``: none is stored twice, and a rerun
  benchmark's plot is in the next build as it is.
* :func:`on_page_content`: the docstrings' Sphinx roles, which the API reference would show as
  written (``:func:`read_dataset```, ``:class:`~subregweigh.example.DataError```), shown as the
  code they name (``read_dataset``, ``DataError``).
"""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.plugins import event_priority

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
IMG = "benchmarks/img"  # benchmarks.docs.IMG, under the benchmark pages
ROLE = re.compile(r":(?:mod|func|class|meth|attr|data|exc|obj):(<code>)~?((?:[\w.]+\.)?)([\w]+)")


def on_files(files, config):
    from mkdocs.structure.files import File

    for png in sorted(RESULTS.glob("*.png")):
        files.append(File.generated(config, f"{IMG}/{png.name}", abs_src_path=str(png)))
    return files


def _code(match: re.Match) -> str:
    tilde = match.group(0).split("<code>", 1)[1].startswith("~")
    return match.group(1) + ("" if tilde else match.group(2)) + match.group(3)


@event_priority(100)  # before the search plugin indexes the page
def on_page_content(html: str, page, config, files) -> str:
    return ROLE.sub(_code, html)
