"""The self-test on the test projects: how far each could trust its flags.

Builds the CoNLL-2003 NER and SST-2 sentiment projects of ``testbed.projects`` (50 tasks each, 5
of them deliberately mis-annotated, as tests/labelstudio/test_e2e_label_studio.py builds them
for its rq runs) as Label Studio JSON exports, and runs ``subregweigh selftest`` on each with the
scout settings of those end-to-end tests (``testbed.projects.ENGINE_ENV`` and each project's
own).
The self-test injects 10% known errors into a copy (NER: the paper's word-label noise, and
sentence-level noise; sentiment: flipped labels) and measures how the ranking finds them. The
projects' own 5 wrong annotations count as clean there, so the numbers are a floor.

    python -m benchmarks.selftest_projects [--threads 1] [--projects ner sentiment]

Writes ``benchmarks/results/selftest-projects.json`` and ``.md``, with the ``subregweigh
selftest`` command each project ran.
"""

from __future__ import annotations

import json
import shlex
import sys
import tempfile
from pathlib import Path

import numpy as np

from backend.config.settings import SETTINGS
from benchmarks.harness import (
    arguments,
    command,
    config,
    document,
    report,
    stamp,
    start,
    table,
    timed,
)
from subregweigh import cli
from subregweigh.options import BY_NAME as ENGINE_OPTIONS
from testbed.projects import ENGINE_ENV, PROJECTS, classification_tasks, ner_tasks

COLUMNS = (
    "project",
    "noise",
    "annotations",
    "injected",
    "of the 10 most doubtful",
    "found among as many most doubtful",
    "AP",
    "base rate",
    "s",
)


def export(tasks: list[dict]) -> list[dict]:
    """Import-format tasks as Label Studio exports them: ids on tasks and annotations."""
    return [
        {
            **task,
            "id": i + 1,
            "annotations": [
                {**a, "id": 1000 + i, "completed_by": 1, "was_cancelled": False}
                for a in task["annotations"]
            ],
        }
        for i, task in enumerate(tasks)
    ]


def flags(env: dict) -> list[str]:
    """The command line's flags for the engine settings in ``env`` (a server's SRW_*
    variables), from their declarations: each setting's variable (backend.config.settings), its
    engine option's flag (subregweigh.options); a switch as ``--crf``/``--no-crf``."""
    out = []
    for setting in SETTINGS:
        option = ENGINE_OPTIONS.get(setting.name)
        if setting.env not in env or option is None or not option.flags:
            continue
        value = setting.parse(env[setting.env], setting.env)
        if option.type is not bool:
            out += [option.flags[-1], str(value)]
        elif value != option.default:  # the switch's other side
            out.append(option.flags[-1] if value else "--no-" + option.flags[-1][2:])
    return out


def main(argv=None) -> int:
    parser = arguments(__doc__, name="selftest-projects")
    parser.add_argument("--projects", nargs="+", default=["ner", "sentiment"])
    args = parser.parse_args(argv)
    start(args.threads)
    command_line = command("selftest_projects", argv)
    makers = {"ner": ner_tasks, "sentiment": classification_tasks}
    settings = {name: env for name, _, _, env in PROJECTS}
    runs = []
    with tempfile.TemporaryDirectory(prefix="srw-selftest-") as tmp:
        for name in args.projects:
            tasks, _ = makers[name](np.random.default_rng(7))  # the e2e tests' projects
            path = Path(tmp) / f"{name}.json"
            path.write_text(json.dumps(export(tasks)))
            out = Path(tmp) / f"{name}-selftest.json"
            shown = ["selftest", f"{name}.json", "-o", "selftest.json"]
            shown += flags({**ENGINE_ENV, **settings[name]})
            real = [str(path) if a == f"{name}.json" else a for a in shown]
            real = [str(out) if a == "selftest.json" else a for a in real]
            code, seconds = timed(cli.main, ["-q", *real])
            if code:
                sys.exit(f"selftest of {name} failed with status {code}")
            result = json.loads(out.read_text())
            result.update(
                project=name,
                command="subregweigh " + shlex.join(shown),
                seconds=round(seconds, 1),
            )
            runs.append(result)
    result = {**stamp(command_line), "config": config(args), "runs": runs}
    report(args, result, markdown)
    return 0


def markdown(result: dict) -> str:
    rows = [
        [
            run["project"],
            r["noise"],
            run["n"],
            r["n_injected"],
            r["found_in_top"],
            f"{r['found']} of {r['n_injected']}",
            f"{r['average_precision']:.3f}",
            f"{r['base_rate']:.3f}",
            r["seconds"],
        ]
        for run in result["runs"]
        for r in run["results"]
    ]
    lines = table(COLUMNS, rows, align="ll" + "r" * (len(COLUMNS) - 2))
    lines += ["", "Commands of each project (on the exports this benchmark writes):", ""]
    lines += [f"    {run['command']}" for run in result["runs"]]
    return document(lines, result)


if __name__ == "__main__":
    sys.exit(main())
