"""Writing a version's predictions to Label Studio, alone, by project size: requests and seconds.

After a training the backend writes one prediction per task
(``backend.labelstudio.client.LabelStudioAPI.write_predictions``) and makes the new version the
project's model version (``set_model_version``): the *write* phase of ``benchmarks.scaling``.
This benchmark times that phase alone against a real Label Studio 1.23 on loopback, for a new
NER project of N annotated CoNLL-2003 training sentences (drawn with replacement beyond the
14,041 of the set; the import is not timed). Each prediction holds the task's entities as the
backend's regions (``backend.labelstudio.convert.labels_result``, a score per region) and a score.

Two writes per size, as the backend makes them: the first version on a project without
predictions, then a second version (a retrain) on top of it, when every task already holds one.
Every HTTP request the client sends is counted and timed (the SDK's httpx client), and after
each write every task is checked to hold exactly one prediction of that version. Last, a probe:
one import request of 100 predictions, timed: what a request costs by project size; and the
check a retried import makes first (which predictions landed), timed.

    python -m benchmarks.prediction_writes --sizes 1000 14000 50000   # about 15 min on 2 cores

Writes ``benchmarks/results/prediction-writes.{json,md}`` after every size.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections import Counter

import numpy as np
from tqdm.auto import tqdm

from backend.labelstudio import client as labelstudio
from backend.labelstudio.client import LabelStudioAPI
from backend.labelstudio.convert import labels_result
from benchmarks.harness import (
    arguments,
    command,
    document,
    earlier_result,
    save,
    stamp,
    start,
    table,
)
from benchmarks.scaling import IMPORT_BATCH
from subregweigh.io import read_conll
from subregweigh.tags import entity_spans
from testbed.projects import DATA, NER_CONFIG
from testbed.servers import LabelStudioServer

logger = logging.getLogger("prediction_writes")
WRITES = ("first version", "second version")
PROBE = 100  # predictions in the probe's one request


def parse_args(argv=None):
    parser = arguments(__doc__, name="prediction-writes", threads=False)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 14000])
    parser.add_argument("--seed", type=int, default=0, help="which sentences (default: 0)")
    parser.add_argument(
        "--versions", type=int, choices=(1, 2), default=2, help="writes a size (default: 2)"
    )
    parser.add_argument(
        "--batch",
        type=int,
        help="predictions an import request, as the backend cut writes until issue 30 (5000); "
        "default: the backend's own cut",
    )
    parser.add_argument(
        "--resume", action="store_true", help="keep the other sizes of an earlier result"
    )
    return parser.parse_args(argv)


def batched_by_count(batch: int):
    """The backend's cut of a write until issue 30: ``batch`` predictions a request."""

    def cut(predictions, limit):
        return [list(predictions[i : i + batch]) for i in range(0, len(predictions), batch)]

    return cut


def sentences(size: int, seed: int) -> list:
    """``size`` CoNLL-2003 training sentences at random; with replacement beyond the set."""
    pool = read_conll(DATA / "conllpp" / "conllpp_train.txt")
    rng = np.random.default_rng(seed)
    return [pool[i] for i in rng.choice(len(pool), size, replace=size > len(pool))]


def regions(ex, rng) -> list[dict]:
    """The sentence's entities as the backend's prediction regions, each with a score."""
    text = " ".join(ex.words)
    starts = np.cumsum([0] + [len(w) + 1 for w in ex.words])
    spans = [(int(starts[s]), int(starts[e] - 1), t) for t, s, e in entity_spans(ex.label)]
    return labels_result(text, spans, "label", "text", scores=rng.random(len(spans)))


def import_tasks(ls: LabelStudioServer, examples: list) -> tuple[int, list[int]]:
    """A new NER project with one task per example, annotated with its entities."""
    rng = np.random.default_rng(0)
    project = ls.api(
        "POST", "/api/projects", {"title": f"writes {len(examples)}", "label_config": NER_CONFIG}
    )
    task_ids = []
    for first in tqdm(range(0, len(examples), IMPORT_BATCH), desc="import", unit="batch"):
        batch = [
            {"data": {"text": " ".join(ex.words)}, "annotations": [{"result": regions(ex, rng)}]}
            for ex in examples[first : first + IMPORT_BATCH]
        ]
        imported = ls.api(
            "POST",
            f"/api/projects/{project['id']}/import?return_task_ids=true",
            batch,
            timeout=600,
        )
        task_ids += imported["task_ids"]
    return project["id"], task_ids


class CountedRequests:
    """Every request ``api``'s httpx client sends: ``(method, path, seconds, body bytes)``."""

    def __init__(self, api: LabelStudioAPI):
        self.seen: list[tuple[str, str, float, int]] = []
        client = api.client._client_wrapper.httpx_client.httpx_client
        send = client.send

        def timed_send(request, *args, **kwargs):
            started = time.perf_counter()
            try:
                return send(request, *args, **kwargs)
            finally:
                self.seen.append(
                    (
                        request.method,
                        request.url.path,
                        time.perf_counter() - started,
                        len(request.content or b""),
                    )
                )

        client.send = timed_send

    def take(self) -> list[tuple[str, str, float, int]]:
        seen, self.seen = self.seen, []
        return seen


def one_each(ls: LabelStudioServer, project: int, task_ids: list[int], version: str) -> None:
    """Fail unless every task holds exactly one prediction of ``version``."""
    listed = ls.api("GET", f"/api/predictions?project={project}", timeout=600)
    per_task = Counter(p["task"] for p in listed if p["model_version"] == version)
    assert per_task == Counter(task_ids), f"{version}: not one prediction per task"


def measure_size(ls: LabelStudioServer, size: int, args, keep) -> dict:
    """The row of ``size``; ``keep(row)`` after each step, so a stopped run keeps what it has."""
    examples = sentences(size, args.seed)
    project, task_ids = import_tasks(ls, examples)
    api = LabelStudioAPI(ls.url, ls.token, retries=0)
    counted = CountedRequests(api)
    rng = np.random.default_rng(args.seed)
    row = {"size": size, "load_average": round(os.getloadavg()[0], 2), "writes": {}}
    for n, write in enumerate(WRITES[: args.versions], 1):
        version = f"writes-v{n}"
        predictions = [
            {"task": t, "result": regions(ex, rng), "score": float(rng.random())}
            | {"model_version": version}
            for t, ex in zip(task_ids, examples, strict=True)
        ]
        started = time.perf_counter()
        api.write_predictions(project, predictions)
        api.set_model_version(project, version)
        seconds = time.perf_counter() - started
        requests = counted.take()
        one_each(ls, project, task_ids, version)
        row["writes"][write] = {
            "seconds": round(seconds, 2),
            "requests": len(requests),
            "requests_by_kind": dict(Counter(f"{m} {_kind(p)}" for m, p, _, _ in requests)),
            "largest_request_seconds": round(max(s for _, _, s, _ in requests), 2),
            "request_seconds": [round(s, 2) for _, _, s, _ in requests],
            "body_mb": round(sum(b for *_, b in requests) / 2**20, 1),
        }
        logger.info("%d tasks, %s: %s", size, write, describe(row["writes"][write], size))
        keep(row)
    # What a retry costs before it sends anything: which predictions already landed.
    started = time.perf_counter()
    assert api._not_yet_written(project, predictions) == [], "a written prediction was missed"
    row["retry_check_seconds"] = round(time.perf_counter() - started, 2)
    row["probe_seconds"] = probe(api, project, task_ids)
    logger.info("%d tasks: one import of %d predictions %.2f s", size, PROBE, row["probe_seconds"])
    keep(row)
    return row


def probe(api: LabelStudioAPI, project: int, task_ids: list[int]) -> float:
    """Seconds of one import request of :data:`PROBE` predictions (of a version of their own):
    what a request costs whatever it carries, by project size."""
    predictions = [
        {"task": t, "result": [], "score": 0.5, "model_version": "writes-probe"}
        for t in task_ids[:PROBE]
    ]
    started = time.perf_counter()
    api.client.projects.import_predictions(
        id=project, request=predictions, request_options=labelstudio.IMPORT_ONCE
    )
    return round(time.perf_counter() - started, 2)


def _kind(path: str) -> str:
    """A request's path with its ids as ``{id}``: ``/api/projects/{id}/import/predictions``."""
    return "/".join("{id}" if part.isdigit() else part for part in path.split("/"))


def describe(write: dict, size: int) -> str:
    per_1000 = write["seconds"] / size * 1000
    return f"{write['requests']} requests, {write['seconds']:.1f} s ({per_1000:.2f} s per 1,000)"


def batching(result: dict) -> str:
    """How the backend cut a write into requests when ``result`` was measured."""
    if "prediction_batch" in result:  # until issue 30
        return f"Predictions per import request: {result['prediction_batch']:,}."
    return f"One import request a write, up to {result['request_bytes'] / 2**20:.0f} MiB."


def markdown(result: dict) -> str:
    lines = [
        "## Writing a version's predictions to Label Studio",
        "",
        "The write phase alone (predictions, then the project's model version); seconds (wall). "
        "*first*: a project without predictions; *second*: a retrain's version on top of the "
        "first (every task already holds a prediction). Requests: every HTTP request the "
        f"client sent. {batching(result)} "
        f"*One request of {PROBE}*: a single import of {PROBE} predictions afterwards, what a "
        "request costs by project size whatever it carries. *Retry check*: what a retried import "
        "reads first, every prediction of the project, to leave out those that landed.",
        "",
    ]
    rows = []
    for row in result["runs"]:
        size = row["size"]
        cells = [f"{size:,}"]
        for write in WRITES:
            done = row["writes"].get(write)
            if done is None:
                cells += ["-"] * 4
                continue
            cells += [
                str(done["requests"]),
                f"{done['seconds']:.1f}",
                f"{done['seconds'] / size * 1000:.2f}",
                f"{done['largest_request_seconds']:.1f}",
            ]
        cells.append(f"{row['writes'][WRITES[0]]['body_mb']:.1f}")
        cells.append(f"{row['probe_seconds']:.2f}" if "probe_seconds" in row else "-")
        cells.append(f"{row['retry_check_seconds']:.1f}" if "retry_check_seconds" in row else "-")
        cells.append(f"{row['load_average']:.1f}" if "load_average" in row else "-")
        rows.append(cells)
    header = ["tasks"]
    for write in ("first", "second"):
        header += [f"{write}: requests", "s", "s per 1,000 tasks", "longest request s"]
    header += ["MiB sent", f"one request of {PROBE} s", "retry check s", "load avg"]
    lines += table(header, rows, align="r" * len(header))
    lines += [
        "",
        f"Load avg: the 1-minute load average before the size's writes ({os.cpu_count()} CPUs "
        "here; above that, other jobs shared the machine; -: not recorded).",
    ]
    return document(lines, result)


def main(argv=None) -> int:
    args = parse_args(argv)
    start(None)
    cut = {"request_bytes": labelstudio.PREDICTION_REQUEST_BYTES}
    if args.batch:
        labelstudio._batches = batched_by_count(args.batch)
        cut = {"prediction_batch": args.batch}
    result = {**stamp(command("prediction_writes", argv)), **cut, "runs": []}
    earlier = earlier_result(args.out, args.name, args.resume)
    if earlier:
        result["commands"] = [*earlier.get("commands", [earlier["command"]]), result["command"]]
        del result["command"]
        result["runs"] = [run for run in earlier["runs"] if run["size"] not in args.sizes]
    with LabelStudioServer() as ls:
        for size in args.sizes:
            others = [run for run in result["runs"] if run["size"] != size]

            def keep(row, others=others):
                result["runs"] = sorted([*others, row], key=lambda run: run["size"])
                save(args.out, args.name, result, markdown(result))

            measure_size(ls, size, args, keep)
    print(markdown(result))
    print(json.dumps(result["runs"][-1]["writes"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
