"""Write ``benchmarks/results/INDEX.md``: every result there, current ones first, from its
provenance and its status.

For each result (a stem: ``STEM.json`` with its ``.md``, ``.png``, ``.weights.json``): the
benchmark that made it, the command (``command``, or the first of ``commands``), the date and
the machine recorded in its JSON, and its status from :data:`STATUS` (``STATUS.json``):

* ``current``: made with what ships now, for what it measures; the README and the guides quote
  only these;
* ``superseded``: a newer result (its ``by``) measures the same thing with what ships now; its
  files live in :data:`ARCHIVE` (``benchmarks/results/archive/``) unless its ``kept`` says why
  they stay;
* ``exploration``: a comparison, a variant or a study; the evaluation page says what it chose.

The benchmark is the command's module, else the longest benchmark name the stem starts with
(``engine-scaling-cpu`` -> ``engine_scaling``). Generated, never edited by hand; results keep
only their current version under their name (git keeps the history).

    python -m benchmarks.index            # rewrite INDEX.md
    python -m benchmarks.index --check    # exit 1 if INDEX.md is not what it would write, or a
                                          # result has no status (or a wrong one)
"""

from __future__ import annotations

import argparse
import json
import pkgutil
import re
import sys
from pathlib import Path

import benchmarks
from benchmarks.harness import RESULTS, atomic_write, table

INDEX = "INDEX.md"
STATUS = "STATUS.json"  # every result's status: see the module's docstring
ARCHIVE = "archive"  # the superseded results' folder, inside the results folder
STATUSES = ("current", "exploration", "superseded")  # in the order the index shows them
NOT_RESULTS = {INDEX, STATUS}
# the benchmarks whose current results lead: how well errors are found, then how fast
LEADING = ("real_errors", "review_loop", "detection", "scaling")
# helpers of the benchmarks, not benchmarks (docs: the docs site's benchmark pages)
NOT_BENCHMARKS = {
    "baselines",
    "crossweigh",
    "docs",
    "harness",
    "index",
    "review_ranker",
    "word_slips",
}
# results made before benchmarks/ was a package recorded "python benchmarks/NAME.py"
OLD_COMMAND = re.compile(r"\bpython benchmarks/(\w+)\.py\b")
COMMAND = re.compile(r"\bpython -m benchmarks\.(\w+)\b")


def benchmark_names() -> list[str]:
    """The modules of this package that are benchmarks (subpackages, e.g. exploration/, are not)."""
    modules = pkgutil.iter_modules(benchmarks.__path__)
    return sorted(m.name for m in modules if not m.ispkg and m.name not in NOT_BENCHMARKS)


def stem_of(path: Path) -> str:
    name = path.name
    for suffix in (".weights.json", ".json", ".md", ".png"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return path.stem


def result_files(results: Path = RESULTS) -> dict[str, list[Path]]:
    """stem -> its files, of ``results`` and of its :data:`ARCHIVE` folder, by stem."""
    stems: dict[str, list[Path]] = {}
    for folder in (results, results / ARCHIVE):
        if not folder.is_dir():
            continue
        for path in sorted(folder.iterdir()):
            if path.is_file() and path.name not in NOT_RESULTS and not path.name.startswith("."):
                stems.setdefault(stem_of(path), []).append(path)
    return dict(sorted(stems.items()))


def statuses(results: Path = RESULTS) -> dict[str, dict]:
    """stem -> its entry of ``STATUS.json`` (``status``, and ``note``, ``by``, ``kept`` where
    given); {} when there is no such file."""
    path = results / STATUS
    return json.loads(path.read_text())["results"] if path.exists() else {}


def status_problems(results: Path = RESULTS) -> list[str]:
    """What is wrong with the results' statuses: a result without one, an entry without a
    result, an unknown status, a superseded result whose ``by`` is not a result, a superseded
    result outside :data:`ARCHIVE` without a ``kept`` reason, any other inside it."""
    files, marks = result_files(results), statuses(results)
    problems = [f"{stem}: no status in {STATUS}" for stem in files if stem not in marks]
    problems += [f"{stem}: in {STATUS}, but no such result" for stem in marks if stem not in files]
    for stem, mark in marks.items():
        if stem not in files:
            continue
        status, archived = mark.get("status"), files[stem][0].parent.name == ARCHIVE
        if status not in STATUSES:
            problems.append(f"{stem}: status {status!r}, not one of {', '.join(STATUSES)}")
        elif status == "superseded":
            if mark.get("by") not in files:
                problems.append(f"{stem}: superseded by {mark.get('by')!r}, not a result")
            if not archived and not mark.get("kept"):
                problems.append(f"{stem}: superseded, so its files belong in {ARCHIVE}/")
        elif archived:
            problems.append(f"{stem}: {status}, so its files belong outside {ARCHIVE}/")
        if any(f.parent != files[stem][0].parent for f in files[stem]):
            problems.append(f"{stem}: its files are split between two folders")
    return problems


def benchmark_of(stem: str, command: str | None, names: list[str]) -> str:
    found = COMMAND.search(command or "")
    if found:
        return found.group(1)
    prefixed = [
        n
        for n in names
        if stem == n.replace("_", "-") or stem.startswith(n.replace("_", "-") + "-")
    ]
    return max(prefixed, key=len) if prefixed else "-"


def command_of(data: dict) -> str | None:
    """A result's command (its JSON's ``command``, or the first of ``commands``), in its
    ``python -m benchmarks.NAME`` form."""
    command = data.get("command") or next(iter(data.get("commands", [])), None)
    return OLD_COMMAND.sub(r"python -m benchmarks.\1", command).strip() if command else None


def entry(stem: str, files: list[Path], names: list[str], mark: dict | None = None) -> dict:
    """What INDEX.md says of one result."""
    data = {}
    json_path = next((f for f in files if f.name == f"{stem}.json"), None)
    if json_path is not None:
        data = json.loads(json_path.read_text())
    command = command_of(data)
    date = data.get("date", "not recorded")
    if data.get("commit"):
        date += f", commit {data['commit']}" + ("+" if data.get("uncommitted_changes") else "")
    mark = mark or {}
    folder = f"{ARCHIVE}/" if files[0].parent.name == ARCHIVE else ""
    return {
        "stem": stem,
        "benchmark": benchmark_of(stem, command, names),
        "status": mark.get("status", "not recorded"),
        "about": cell(describe(mark)),
        "files": folder + ", ".join(sorted(f.name[len(stem) :] for f in files)),
        "date": date,
        "machine": cell(data.get("machine", "not recorded")),
        "command": f"`{cell(command)}`" if command else "not recorded",
    }


def describe(mark: dict) -> str:
    """A status entry in words: its note, what superseded it, why it was kept in place."""
    parts = [mark["note"]] if mark.get("note") else []
    if mark.get("by"):
        parts.append(f"superseded by `{mark['by']}`")
    if mark.get("kept"):
        parts.append(f"kept in place: {mark['kept']}")
    return "; ".join(parts)


def cell(text: str) -> str:
    return str(text).replace("|", "\\|")


def order(status: str) -> int:
    """Where results of ``status`` come: current, exploration, superseded, then any other."""
    return STATUSES.index(status) if status in STATUSES else len(STATUSES)


def lead(benchmark: str) -> tuple[int, str]:
    """The order of the benchmarks' current results: :data:`LEADING` first, then by name."""
    return (LEADING.index(benchmark) if benchmark in LEADING else len(LEADING), benchmark)


def render(results: Path = RESULTS) -> str:
    """INDEX.md for the results in ``results``."""
    names, marks = benchmark_names(), statuses(results)
    entries = [entry(s, f, names, marks.get(s)) for s, f in result_files(results).items()]
    counts = {s: sum(e["status"] == s for e in entries) for s in STATUSES}
    lines = [
        "# Benchmark results",
        "",
        "Generated by `python -m benchmarks.index` from the results' JSON and `STATUS.json`; do "
        "not edit. Each result is the latest run of its name (git keeps the earlier ones). "
        f"Status (`{STATUS}`): **current** ({counts['current']}), made with what ships now, "
        "for what it measures, and what the README and the guides quote; **exploration** "
        f"({counts['exploration']}), a comparison, a variant or a study; **superseded** "
        f"({counts['superseded']}), measured again with what ships now by the result named, "
        f"its files in `{ARCHIVE}/`. Commands are given as `python -m benchmarks.NAME`; "
        "results made before 2026-11-25 recorded them as `python benchmarks/NAME.py`, the same "
        "command. Date: when the result was last written (UTC), with the commit it ran at "
        "where recorded (+: with uncommitted changes).",
        "",
        "## Current results",
        "",
    ]
    current = sorted(
        (e for e in entries if e["status"] == "current"),
        key=lambda e: (lead(e["benchmark"]), e["stem"]),
    )
    rows = [[f"`{e['stem']}`", e["benchmark"], e["about"], e["date"]] for e in current]
    lines += table(["result", "benchmark", "what", "date"], rows, align="llll")
    lines.append("")
    for benchmark in sorted({e["benchmark"] for e in entries}):
        mine = sorted(
            (e for e in entries if e["benchmark"] == benchmark),
            key=lambda e: (order(e["status"]), e["stem"]),
        )
        lines += [f"## {benchmark}", ""]
        rows = [
            [
                f"`{e['stem']}`",
                e["status"] + (f": {e['about']}" if e["about"] else ""),
                e["files"],
                e["date"],
                e["machine"],
                e["command"],
            ]
            for e in mine
        ]
        header = ["result", "status", "files", "date", "machine", "command"]
        lines += table(header, rows, align="llllll")
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--results", type=Path, default=RESULTS, help="(default: %(default)s)")
    parser.add_argument("--check", action="store_true", help="only check INDEX.md is current")
    args = parser.parse_args(argv)
    text = render(args.results)
    path = args.results / INDEX
    problems = status_problems(args.results) if (args.results / STATUS).exists() else []
    for problem in problems:
        print(f"{STATUS}: {problem}", file=sys.stderr)
    if args.check:
        if not path.exists() or path.read_text() != text:
            print(f"{path} is out of date: run python -m benchmarks.index", file=sys.stderr)
            return 1
        return 1 if problems else 0
    atomic_write(path, text)
    print(f"wrote {path}: {text.count(chr(10) + '## ') - 1} benchmarks")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
