"""/predict latency of the Label Studio backend: served from stored scores vs computed cold.

Trains a MiniLM scout on CoNLL-2003 sentences (as a finished training job would), publishes it
as a project version with stored scores for all tasks, then times POST /predict (through the
real Flask app, in process) for 1, 10, 100 and 1,000 tasks:

* cached: every task's score is in the version's stored scores (what Label Studio normally hits);
* cold: the same tasks with no stored scores, so SubRegWeigh runs (N samples, K predictions).

    python -m benchmarks.predict_latency                 # K=10, N=500, sizes 1,10,100,1000
    python -m benchmarks.predict_latency --sizes 1,10 --train 100

Writes ``benchmarks/results/predict-latency.{json,md}``.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

from backend.config.settings import Settings
from backend.labelstudio.tasks import parse_label_config, read_tasks, score_tasks
from backend.serving.weighers import engine
from backend.store.store import ProjectStore
from backend.store.versions import new_version_name
from backend.web.server import create_app
from benchmarks.harness import (
    arguments,
    command,
    config,
    footer,
    read_dataset,
    report,
    stamp,
    start,
    table,
    timed,
)
from subregweigh.io import atomic_write_json
from subregweigh.tags import entity_spans

CONFIG = (
    '<View><Labels name="label" toName="text"><Label value="PER"/><Label value="LOC"/>'
    '<Label value="ORG"/><Label value="MISC"/></Labels><Text name="text" value="$text"/></View>'
)


def as_task(task_id: int, ex) -> dict:
    starts = np.cumsum([0] + [len(w) + 1 for w in ex.words])
    result = [
        {
            "from_name": "label",
            "to_name": "text",
            "type": "labels",
            "value": {"start": int(starts[s]), "end": int(starts[e] - 1), "labels": [t]},
        }
        for t, s, e in entity_spans(ex.label)
    ]
    return {
        "id": task_id,
        "data": {"text": " ".join(ex.words)},
        "annotations": [{"id": task_id, "result": result}],
    }


class _NoJobs:  # /predict never trains; nothing is submitted in this benchmark
    def submit(self, project):
        raise AssertionError("unexpected training")

    def state(self, project):
        return "idle"


def main(argv=None) -> int:
    parser = arguments(__doc__, name="predict-latency")
    parser.add_argument("--sizes", default="1,10,100,1000")
    parser.add_argument("--train", type=int, default=300, help="sentences to train the scout on")
    parser.add_argument("-k", type=int, default=10)
    parser.add_argument("-n", type=int, default=500)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats of each cached call")
    args = parser.parse_args(argv)
    start(args.threads)
    command_line = command("predict_latency", argv)
    sizes = [int(s) for s in args.sizes.split(",")]

    _, sentences = read_dataset("conll")
    tasks = [as_task(i + 1, ex) for i, ex in enumerate(sentences[: max(sizes)])]
    root = Path(tempfile.mkdtemp(prefix="srw-latency-"))
    try:
        settings = Settings(model_dir=str(root), k=args.k, n_samples=args.n, epochs=args.epochs)
        spec = parse_label_config(CONFIG)
        srw = engine(settings, spec).fit(sentences[-args.train :])
        store = ProjectStore(root, 1)
        staging = store.staging_dir()
        srw.save(staging)  # every scout and the CRF, as the backend publishes a version
        stored, scoring_seconds = timed(score_tasks, srw, spec, read_tasks(tasks, spec).tasks)
        atomic_write_json(staging / "scores.json", stored)
        version = new_version_name()
        store.publish(staging, version)
        client = create_app(settings, runner=_NoJobs()).test_client()

        def predict(batch) -> float:
            body = {"tasks": batch, "project": "1.0", "label_config": CONFIG}
            response, elapsed = timed(client.post, "/predict", json=body)
            assert response.status_code == 200 and len(response.json["results"]) == len(batch)
            return elapsed

        predict(tasks[:1])  # load the scout once, as a warm server has
        rows = []
        for size in sizes:
            cached = min(predict(tasks[:size]) for _ in range(args.repeats))
            # Cold: a fresh copy of the version without stored scores.
            atomic_write_json(store.versions / version / "scores.json", {})
            cold = predict(tasks[:size])
            atomic_write_json(store.versions / version / "scores.json", stored)
            rows.append(
                {"tasks": size, "cached_seconds": round(cached, 4), "cold_seconds": round(cold, 2)}
            )
            print(rows[-1], flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    result = {
        **stamp(command_line),
        "config": config(args),
        "rows": rows,
        "scoring_seconds": scoring_seconds,
    }
    report(args, result, markdown)
    return 0


def markdown(result: dict) -> str:
    cfg, rows = result["config"], result["rows"]
    lines = [f"### /predict latency, MiniLM scout, K={cfg['k']}, N={cfg['n']}", ""]
    lines += table(
        ["tasks", "served from stored scores (s)", "computed cold (s)"],
        [[r["tasks"], f"{r['cached_seconds']:.3f}", f"{r['cold_seconds']:.1f}"] for r in rows],
        align="rrr",
    )
    lines += [
        "",
        f"Scoring all {max(r['tasks'] for r in rows)} tasks in the training job: "
        f"{result['scoring_seconds']:.1f} s.",
        "",
        *footer(result),
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
