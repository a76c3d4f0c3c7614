"""The project report as one static HTML page: a Jinja2 template and matplotlib PNGs inlined.

:func:`render_html` turns a :func:`subregweigh.report.build_report` dict into a page that needs
nothing else: no JavaScript, no external files (the plots are ``data:`` images), so it can be
served by the backend, written by the command line, mailed or archived as it is. Text from the
tasks is escaped (the template autoescapes). :func:`write_report` writes the page, or the JSON,
atomically.
"""

from __future__ import annotations

import base64
import io
import json
import math
import time
from pathlib import Path

from subregweigh.io.atomic import PathLike, atomic_write_text

REPORT_SUFFIXES = (".html", ".json")


def histogram_png(summary: dict, width: float = 7.0, height: float = 2.6) -> bytes:
    """The score histogram of :func:`~subregweigh.report.score_summary`, with the doubt
    threshold and the review threshold (the score that flags the expected number of errors)."""
    # The object API and the Agg canvas: no pyplot state, safe in a threaded server.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    edges, counts = summary["histogram"]["edges"], summary["histogram"]["counts"]
    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    lefts = edges[:-1]
    widths = [b - a for a, b in zip(edges[:-1], edges[1:])]
    colours = ["#c0392b" if b <= summary["threshold"] else "#7f8c8d" for b in edges[1:]]
    ax.bar(lefts, counts, width=widths, align="edge", color=colours, edgecolor="white")
    ax.axvline(summary["threshold"], color="#c0392b", linestyle="--", linewidth=1.2)
    ax.text(
        summary["threshold"],
        max(counts or [1]),
        f" doubtful < {summary['threshold']:g}",
        color="#c0392b",
        va="top",
        fontsize=8,
    )
    if summary["review_threshold"] is not None:
        ax.axvline(summary["review_threshold"], color="#2c3e50", linestyle=":", linewidth=1.2)
    ax.set_xlim(0, 1)
    ax.set_xlabel("score (lower = more doubtful)")
    ax.set_ylabel("annotations")
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


def _data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _percent(value, digits: int = 0) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{100 * value:.{digits}f}%"


def _number(value, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.{digits}f}"


def _when(value) -> str:
    """A Unix time as UTC; anything else as it is."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(value))
    return str(value)


def _plain(value) -> str:
    """A setting's value for display: floats to 4 significant digits."""
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _shade(count: int, total: int, diagonal: bool) -> str:
    """A cell's background: its share of the row, green on the diagonal, red off it."""
    share = count / total if total else 0.0
    hue = 140 if diagonal else 5
    return f"background: hsla({hue}, 60%, 45%, {0.08 + 0.6 * share:.2f})" if count else ""


def _environment():
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

    env = Environment(
        loader=PackageLoader("subregweigh", "templates"),
        autoescape=select_autoescape(["html", "j2"], default=True),
        undefined=StrictUndefined,  # a misspelt field fails the render, not the reader
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(percent=_percent, number=_number, when=_when, plain=_plain)
    env.globals.update(shade=_shade)
    return env


def render_html(report: dict, title: str = "Annotation report") -> str:
    """The page for ``report`` (a :func:`~subregweigh.report.build_report` dict)."""
    template = _environment().get_template("report.html.j2")
    return template.render(
        title=title,
        report=report,
        histogram=_data_uri(histogram_png(report["summary"])),
    )


def write_report(path: PathLike, report: dict, title: str = "Annotation report") -> None:
    """Write ``report`` to ``path``: ``.html`` the page, ``.json`` the data. Atomic."""
    suffix = Path(path).suffix.lower()
    if suffix == ".json":
        atomic_write_text(path, json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    elif suffix == ".html":
        atomic_write_text(path, render_html(report, title))
    else:
        raise ValueError(f"{path}: a report is .html or .json, not {suffix or 'no extension'!r}")
