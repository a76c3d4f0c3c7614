"""The self-test on the test projects: how far each could trust its flags.

Builds the CoNLL-2003 NER and SST-2 sentiment projects of testbed/projects.py (50 tasks each, 5
of them deliberately mis-annotated, as tests/test_e2e_label_studio.py builds them for its rq
runs) as Label Studio JSON exports, and runs ``subregweigh selftest`` on each with the scout
settings of those end-to-end tests (testbed.projects.ENGINE_ENV and each project's own). The
self-test injects 10% known errors into a copy (NER: the paper's word-label noise, and
sentence-level noise; sentiment: flipped labels) and measures how the ranking finds them. The
projects' own 5 wrong annotations count as clean there, so the numbers are a floor.

    python benchmarks/selftest_projects.py [--threads 1] [--projects ner sentiment]

Writes ``benchmarks/results/selftest-projects.json`` and ``.md``, with the ``subregweigh
selftest`` command each project ran.
"""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

from subregweigh import cli  # noqa: E402
from testbed.projects import ENGINE_ENV, PROJECTS, classification_tasks, ner_tasks  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"
# The backend's variables -> the command line's flags (the same settings).
FLAGS = {
    "SRW_N": "-n",
    "SRW_K": "-k",
    "SRW_EPOCHS": "--epochs",
    "SRW_LEARNING_RATE": "--learning-rate",
}


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
    out = []
    for name, flag in FLAGS.items():
        if name in env:
            out += [flag, env[name]]
    if env.get("SRW_FREEZE_ENCODER") == "1":
        out.append("--freeze-encoder")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--projects", nargs="+", default=["ner", "sentiment"])
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    args = parser.parse_args()
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    makers = {"ner": ner_tasks, "sentiment": classification_tasks}
    settings = {name: env for name, _, _, env in PROJECTS}
    runs = []
    with tempfile.TemporaryDirectory(prefix="srw-selftest-") as tmp:
        for name in args.projects:
            tasks, _ = makers[name](np.random.default_rng(7))  # the e2e tests' projects
            path = Path(tmp) / f"{name}.json"
            path.write_text(json.dumps(export(tasks)))
            out = Path(tmp) / f"{name}-selftest.json"
            argv = ["selftest", f"{name}.json", "-o", "selftest.json"]
            argv += flags({**ENGINE_ENV, **settings[name]})
            started = time.perf_counter()
            real = [str(path) if a == f"{name}.json" else a for a in argv]
            real = [str(out) if a == "selftest.json" else a for a in real]
            code = cli.main(["-q", *real])
            if code:
                sys.exit(f"selftest of {name} failed with status {code}")
            result = json.loads(out.read_text())
            result.update(
                project=name,
                command="subregweigh " + shlex.join(argv),
                seconds=round(time.perf_counter() - started, 1),
            )
            runs.append(result)
    machine = (
        f"{platform.machine()}, {torch.get_num_threads()} torch threads, torch {torch.__version__}"
    )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "selftest-projects.json").write_text(
        json.dumps({"machine": machine, "runs": runs}, indent=1) + "\n"
    )
    lines = [
        "| project | noise | annotations | injected | of the 10 most doubtful | found among as "
        "many most doubtful | AP | base rate | s |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for run in runs:
        for r in run["results"]:
            lines.append(
                f"| {run['project']} | {r['noise']} | {run['n']} | {r['n_injected']} | "
                f"{r['found_in_top']} | {r['found']} of {r['n_injected']} | "
                f"{r['average_precision']:.3f} | {r['base_rate']:.3f} | {r['seconds']} |"
            )
    lines += ["", f"Machine: {machine}. Commands (on the exports this script writes):", ""]
    lines += [f"    {run['command']}" for run in runs]
    (RESULTS / "selftest-projects.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
