"""How long the backend takes to read a project's tasks from Label Studio, by endpoint.

A training starts by reading every task of the project with its annotations
(``backend.labelstudio.client.LabelStudioAPI.tasks``). It reads them with Label Studio's JSON export
of all tasks; where the export answers 404 (Label Studio Enterprise), with the paged task list
(``/api/tasks?fields=all``, 500 per page). This benchmark imports a NER project of N annotated
CoNLL-2003 sentences into a real Label Studio 1.23 on loopback (as ``benchmarks.scaling`` does;
the import is not timed) and times both reads of it, alternating, ``--repeats`` times each; the
fallback is made to run by answering the export with a 404 in-process. Both must return the
same tasks.

    python -m benchmarks.fetch --sizes 1000 3000 14000     # about 10 min on 2 cores

Writes ``benchmarks/results/fetch.{json,md}``.
"""

from __future__ import annotations

import logging
import sys
import time

import numpy as np
from tqdm.auto import tqdm

from backend.labelstudio.client import LabelStudioAPI
from benchmarks.harness import arguments, command, document, save, stamp, start, table
from benchmarks.scaling import import_project
from testbed.servers import LabelStudioServer

logger = logging.getLogger("fetch")
READS = ("export", "task list")


def parse_args(argv=None):
    parser = arguments(__doc__, name="fetch", threads=False)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 3000])
    parser.add_argument("--repeats", type=int, default=2, help="reads of each kind (default: 2)")
    parser.add_argument("--seed", type=int, default=0, help="which sentences (default: 0)")
    return parser.parse_args(argv)


def task_list_only(api: LabelStudioAPI) -> LabelStudioAPI:
    """``api`` as it behaves against a Label Studio that refuses the export (Enterprise)."""
    from label_studio_sdk.core.api_error import ApiError

    def refused(**kwargs):
        raise ApiError(status_code=404, body={"detail": "export refused by the benchmark"})

    api.client.projects.exports.download_sync = refused
    return api


def essentials(tasks: list[dict]) -> list[tuple]:
    return [(t["id"], t["data"], [(a["id"], a["result"]) for a in t["annotations"]]) for t in tasks]


def measure_size(ls: LabelStudioServer, size: int, args) -> dict:
    project, _, _ = import_project(ls, size, args.seed)
    apis = {
        "export": LabelStudioAPI(ls.url, ls.token, retries=0),
        "task list": task_list_only(LabelStudioAPI(ls.url, ls.token, retries=0)),
    }
    seconds: dict[str, list[float]] = {read: [] for read in READS}
    read_tasks = {}
    for _ in tqdm(range(args.repeats), desc=f"reads of {size}", unit="pair"):
        for read, api in apis.items():
            started = time.perf_counter()
            read_tasks[read] = api.tasks(project)
            seconds[read].append(round(time.perf_counter() - started, 2))
    assert len(read_tasks["export"]) == size
    assert essentials(read_tasks["export"]) == essentials(read_tasks["task list"])
    row = {"size": size, "seconds": seconds}
    logger.info("%d tasks: %s", size, describe(row))
    return row


def describe(row: dict) -> str:
    return ", ".join(f"{read} {np.median(row['seconds'][read]):.1f} s" for read in READS)


def markdown(result: dict) -> str:
    lines = [
        "## Reading a project's tasks from Label Studio",
        "",
        f"Median of {result['repeats']} reads of each kind, alternating; seconds.",
        "",
    ]
    rows = []
    for row in result["runs"]:
        export, listed = (np.median(row["seconds"][read]) for read in READS)
        rows.append(
            [f"{row['size']:,}", f"{export:.1f}", f"{listed:.1f}", f"{listed / export:.1f}x"]
        )
    header = ["tasks", "export (default)", "task list, fields=all (Enterprise)", "ratio"]
    lines += table(header, rows, align="rrrr")
    return document(lines, result)


def main(argv=None) -> int:
    args = parse_args(argv)
    start(None)
    result = {**stamp(command("fetch", argv)), "repeats": args.repeats, "runs": []}
    with LabelStudioServer() as ls:
        for size in args.sizes:
            result["runs"].append(measure_size(ls, size, args))
            save(args.out, args.name, result, markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
