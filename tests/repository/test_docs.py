"""The docs: the generated pages are current, every page is in the site's navigation, the design
page names every module and test file, and the numbers typed into the README and the docs are
the result files' own. (``mkdocs build --strict``, which .ci/run runs, checks the links, the
anchors and the API reference.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from backend.config import settings_docs
from benchmarks import docs
from tests.paths import REPO

DOCS = REPO / "docs"
RESULTS = REPO / "benchmarks" / "results"
GENERATED = {DOCS / "configuration.md", DOCS / "changelog.md"}  # the latter includes CHANGELOG.md
# A decimal standing alone: 0.282, 22.9; not a version (1.23.2) nor part of a name.
DECIMAL = re.compile(r"(?<![\w.])\d+\.\d+(?![\w.])")
# Decimals that are not measurements: versions, settings, and how results are written.
NOT_MEASURED = {
    "3.10",  # Python 3.10+
    "3.11",  # python:3.11-slim
    "1.23",  # Label Studio 1.23
    "1.0",  # default scores
    "0.5",  # the review threshold, p = 0.3-0.5
    "0.3",
    "0.1",  # p, rates
    "0.02",  # the tolerance a change was checked against
    "0.01",
    "7.2",  # Redis 7.2
    "7.0",
    "1.29",  # docker-compose 1.29
    "1.1.2",
    "2.0.2",
}


def test_benchmark_pages_and_the_readme_headline_are_current():
    assert docs.stale() == [], "run: python -m benchmarks.docs"


def test_a_stale_page_is_found(tmp_path, monkeypatch):
    readme = tmp_path / "README.md"
    readme.write_text(
        docs.README.read_text().replace("| deterministic (product) |", "| stale |", 1)
    )
    pages = tmp_path / "benchmarks"
    pages.mkdir()
    (pages / "gone.md").write_text("a benchmark without results\n")
    monkeypatch.setattr(docs, "README", readme)
    monkeypatch.setattr(docs, "PAGES", pages)
    stale = docs.stale()
    assert readme in stale and pages / "gone.md" in stale and pages / "index.md" in stale
    assert docs.main(["--check"]) == 1
    assert docs.main([]) == 0 and docs.stale() == []
    assert (
        readme.read_text() == (REPO / "README.md").read_text() and not (pages / "gone.md").exists()
    )
    assert settings_docs.README_BEGIN in readme.read_text()  # the other generated block kept


@pytest.mark.parametrize("stem", docs.HEADLINES)
def test_the_headline_is_the_real_error_result(stem):
    head = docs.headline(stem)
    assert head["header"] == ["score", "AP", "P@50", "R-precision"]
    rows = {row[0]: row[1] for row in head["rows"]}
    # the served default against cleanlab on the same scouts, one scout, the baselines
    assert {"deterministic (product)", "cleanlab in-sample", "random", "length"} <= set(rows)
    assert "consistency (model-free)" in rows
    assert "an entity first" in rows or "CoNLL" in head["what"]  # the CoNLL run predates it
    if any(name.startswith("3 scouts") for name in rows):  # an ensemble: what one scout gives
        assert "one scout (SRW_SCOUTS=1)" in rows
    assert "benchmarks.real_errors" in head["command"] and "CPUs" in head["machine"]


def _nav_files(nav) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, dict):
        return [f for value in nav.values() for f in _nav_files(value)]
    return [f for item in nav for f in _nav_files(item)]


def test_every_page_is_in_the_navigation_once():
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    listed = _nav_files(config["nav"])
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert sorted(listed) == pages, "add the new page to mkdocs.yml's nav"
    assert "docs/hooks.py" in config["hooks"]


def _named(path: Path) -> list[str]:
    """How the design page may name a file: ``io/weights.py`` for the io package, else its
    name; a package's ``__init__.py`` by its folder."""
    if path.name == "__init__.py":
        return [f"{path.parent.name}/", f"`{path.parent.name}`"]
    if path.parent.name == "io":
        return [f"io/{path.name}"]
    return [path.name]


def test_the_design_page_names_every_module_and_test():
    design = (DOCS / "design.md").read_text()
    files = [
        *(REPO / "subregweigh").rglob("*.py"),
        *(REPO / "backend").rglob("*.py"),
        *(p for p in (REPO / "backend").iterdir() if (p / "__init__.py").exists()),
        *(REPO / "benchmarks").glob("*.py"),
        *(p for p in (REPO / "benchmarks").iterdir() if (p / "__init__.py").exists()),
        *(REPO / "testbed").glob("*.py"),
        *(REPO / "tests").rglob("test_*.py"),
        *(p for p in (REPO / "scripts").iterdir() if p.suffix in {".py", ".sh"}),
    ]
    skip = {"__init__.py"}
    missing = []
    for path in files:
        if path.is_dir():
            names = [f"{path.name}/"]
        elif path.name in skip and path.parent.name != "subregweigh":
            continue
        else:
            names = _named(path) if path.name != "__init__.py" else ["`__init__.py`"]
        if not any(re.search(rf"(?<![\w/.]){re.escape(name)}", design) for name in names):
            missing.append(str(path.relative_to(REPO)))
    assert not missing, "docs/design.md does not say where these live: " + ", ".join(missing)


def _hand_written() -> list[Path]:
    pages = [p for p in DOCS.glob("*.md") if p not in GENERATED]
    return [REPO / "README.md", *sorted(pages)]


def _without_generated_blocks(text: str) -> str:
    for begin, end in [
        (settings_docs.README_BEGIN, settings_docs.README_END),
        (docs.README_BEGIN, docs.README_END),
    ]:
        start, stop = text.find(begin), text.find(end)
        if start >= 0 and stop > start:
            text = text[:start] + text[stop + len(end) :]
    return text


@pytest.fixture(scope="module")
def results_text() -> str:
    """Every result file's text, the superseded ones in ``archive/`` included."""
    return "\n".join(
        p.read_text() for p in sorted(RESULTS.rglob("*")) if p.suffix in {".md", ".json"}
    )


def test_the_numbers_in_the_docs_come_from_result_files(results_text):
    """Every decimal typed into the README or a hand-written page occurs in some result file
    (or is a version or a setting): a measurement not in benchmarks/results stays out."""
    wrong = []
    for path in _hand_written():
        text = _without_generated_blocks(path.read_text())
        for number in sorted(set(DECIMAL.findall(text)) - NOT_MEASURED):
            if not re.search(rf"(?<![\d.]){re.escape(number)}(?!\d)", results_text):
                wrong.append(f"{path.relative_to(REPO)}: {number}")
    assert not wrong, "numbers in no result file:\n" + "\n".join(wrong)


def test_the_number_check_sees_a_number_from_nowhere(results_text):
    assert DECIMAL.findall("AP 0.282 ± 0.011, Label Studio 1.23.2, 22.9 s") == [
        "0.282",
        "0.011",
        "22.9",
    ]
    assert re.search(r"(?<![\d.])0\.282(?!\d)", results_text)
    assert not re.search(r"(?<![\d.])0\.28171(?!\d)", results_text)


def test_the_readme_keeps_the_commands_ci_and_users_run():
    readme = (REPO / "README.md").read_text()
    for command in ["bash install.sh", ".venv/bin/python _wsgi.py --port 9090"]:
        assert command in readme
    assert ".venv/bin/python -m pytest" in readme
    assert ".venv/bin/python -m pytest" in (REPO / ".ci" / "run").read_text()


def test_the_readme_is_a_front_door():
    """At most 160 lines; the Label Studio quick start (set-up, run, test) before any table of
    numbers; and no claim of the single model the product no longer is (NER: three scouts and
    a CRF)."""
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 160
    quick_start = readme.index("## Quick start: Label Studio")
    first_table = min(readme.index(line) for line in readme.splitlines() if line.startswith("|"))
    assert quick_start < readme.index(docs.README_BEGIN) and quick_start < first_table
    for command in ["bash install.sh", "_wsgi.py --port 9090", ".venv/bin/python -m pytest"]:
        assert quick_start < readme.index(command) < first_table
    assert "one model" not in readme.lower()
    site = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    assert "one model" not in site["site_description"].lower()


def test_the_readme_quotes_only_the_current_results_it_cites():
    """Every measurement typed into the README (outside its generated blocks) is in its
    generated headline table or in a result file it links, and every result it links is a
    current one (made with what ships now: benchmarks/results/STATUS.json)."""
    from benchmarks import index

    readme = (REPO / "README.md").read_text()
    cited = re.findall(r"\]\(benchmarks/results/([\w.-]+)\.md\)", readme)
    assert set(docs.HEADLINES) <= set(cited)
    marks = index.statuses()
    assert [stem for stem in cited if marks[stem]["status"] != "current"] == []
    start, stop = readme.index(docs.README_BEGIN), readme.index(docs.README_END)
    sources = readme[start:stop] + "".join((RESULTS / f"{stem}.md").read_text() for stem in cited)
    typed = _without_generated_blocks(readme)
    wrong = [
        number
        for number in sorted(set(DECIMAL.findall(typed)) - NOT_MEASURED)
        if not re.search(rf"(?<![\d.]){re.escape(number)}(?!\d)", sources)
    ]
    assert not wrong, f"numbers in no result the README cites: {wrong}"


# Variables that are not the backend's settings: the test suite's and the container scripts'.
NOT_SETTINGS = {"SRW_KEEP_STACK", "SRW_CONTAINER_STATE", "SRW_CONTAINER_STACK"}
NOT_SETTINGS |= {"SRW_STACK_REPO", "SRW_STACK_PROJECT", "SRW_UID"}


def test_every_srw_variable_named_is_a_setting():
    """User pages, code, scripts and deployment files name only SRW_* variables that are
    settings (the lab's switches are engine parameters): a removed one is not left behind. The
    result files and the changelog keep the history as it was."""
    from backend.config.settings import SETTINGS

    declared = {name for s in SETTINGS for name in (s.env, *s.fallbacks)} | NOT_SETTINGS
    places = [REPO / "README.md", REPO / "Dockerfile", REPO / "docker-compose.yml", REPO / ".env"]
    places += [p for p in DOCS.glob("*.md") if p not in GENERATED]
    for folder in ("backend", "subregweigh", "benchmarks", "scripts", "testbed", "tests"):
        places += [p for p in (REPO / folder).rglob("*") if p.suffix in (".py", ".sh", ".md")]
    places = [p for p in places if "results" not in p.parts and p != Path(__file__)]
    stray = {
        f"{path.relative_to(REPO)}: {name}"
        for path in places
        for name in re.findall(r"\bSRW_[A-Z_]*[A-Z]", path.read_text(encoding="utf-8"))
        if name not in declared
    }
    allowed = {"tests/backend/test_backend_settings.py: SRW_WARM_START"}  # its warning's test
    allowed |= {"tests/backend/test_backend_settings.py: SRW_SCUOTS"}
    assert stray <= allowed, sorted(stray - allowed)


def test_the_self_test_s_real_error_expectations_are_in_their_results():
    """What the self-test tells a lead to expect of real errors is the default's row of the
    current real-error results, at each size."""
    from subregweigh.selftest import REAL_ERROR_AP, real_error_expectation

    small = (RESULTS / "real-errors-300-1000-context-ensemble3.md").read_text()
    whole = (RESULTS / "real-errors-three-scouts.md").read_text()
    for size, ap, base in REAL_ERROR_AP:
        text = whole if size == 3453 else small.split(f"### {size} sentences")[1].split("###")[0]
        assert f"| deterministic (product) | {ap:.3f} ±" in text, size
        assert f"base rate {base:.3f}" in text, size
    assert real_error_expectation(250)["annotations"] == 300
    assert real_error_expectation(700)["annotations"] == 1000
    assert real_error_expectation(14000)["annotations"] == 3453
