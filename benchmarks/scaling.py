"""Scaling benchmark: from Label Studio's "Start Training" to scores in Label Studio, by size.

Everything is real and on loopback: Label Studio 1.23 (testbed/servers.py) and our backend
(``python _wsgi.py``; with ``--mode redis`` also redis-server and ``python -m
backend.queue.worker``). For each size, a new NER project gets that many CoNLL-2003 training
sentences drawn at random, each a task annotated with its gold entities (imported in batches; the
import is not timed), a fresh backend is connected and training is started as a user does, ``POST
/api/ml/{id}/train``. The clock stops when Label Studio's project has the new model version, which
the backend sets after it has written every task's prediction (polled every 0.5 s on the backend's
status, then confirmed in Label Studio; afterwards every task is checked to have one prediction of
that version). The backend's own phases come from its status (``phase_seconds``): fetch (read the
tasks from Label Studio), train (the scout), weigh (K re-tokenized copies of every task), save
(publish the version) and write (predictions and model version to Label Studio); *overhead* is
the rest of the end-to-end time: the webhook, the job's start and the polling.

At ``--retrain-at`` (default 1,000 tasks) a second row: ``--changes`` annotations are edited
through the API (a task's first entity retyped), Label Studio sends each as an
ANNOTATION_UPDATED webhook, and the last change makes the backend retrain (SRW_RETRAIN_AFTER =
``--changes``); timed from that last change to the new version in Label Studio. The edits
before the last are made one at a time, each timed until the backend has rewritten that task's
prediction with the version serving (the rescore of a changed annotation, no retrain) and until
the version its refresh made serves (``backend.jobs.refresh``: the CRF trained again, every task
scored again).

Peak memory: the largest peak resident set (VmHWM, restarted before each training) of the
process that trains (embedded: the backend server; redis: the rq work horse), sampled every
0.2 s. Each row also records the 1-minute load average at its start: above the number of cores,
other jobs shared the machine. The engine runs with the backend's defaults (default MiniLM,
K=10, N=500, NER 3 epochs) unless ``--epochs``, ``-k``, ``--n-samples``, ``--scouts`` or
``--crf`` say otherwise. Beyond CoNLL-2003's
14,041 training sentences a project's sentences are drawn with replacement.

With ``--tasks articles`` each task is a whole CoNLL-2003 training article (946 of them, median
about 180 words, the longest past the encoder's 512-subword window, which the engine reads in
overlapping windows) instead of a sentence; beyond 946 they are drawn with replacement (issue
62: what a project of long documents costs).

    python -m benchmarks.scaling --sizes 300 1000 3000     # about 25 min on 2 cores
    python -m benchmarks.scaling --sizes 14000 50000 --resume   # adds sizes to the same table
    python -m benchmarks.scaling --tasks articles --sizes 1000 --retrain-at 0  # 1,000 articles
    python -m benchmarks.scaling --sizes 30 --epochs 1 -k 3 --n-samples 6 --retrain-at 30 \\
        --out /tmp/scaling-smoke                            # smoke test, under a minute

Writes ``benchmarks/results/NAME.{json,md,png}`` (NAME: ``scaling``, ``scaling-redis`` with
``--mode redis``) after every size; ``--resume`` keeps the sizes already measured with the same
settings.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from benchmarks.harness import (
    DATA,
    add_backend_arguments,
    arguments,
    backend_env,
    command,
    document,
    earlier_result,
    figure,
    matmul_gflops,
    save,
    stamp,
    start,
    table,
)
from benchmarks.real_errors_articles import articles, join
from subregweigh.io import read_conll
from testbed.projects import (
    NER_CONFIG,
    TrainingFailed,
    annotated_tasks,
    conll_tasks,
    retyped,
    wait_trained,
)
from testbed.servers import (
    BackendServer,
    LabelStudioServer,
    PeakMemory,
    RedisServer,
    ServerError,
    WorkerProcess,
    cpu_seconds,
    largest_peak_mb,
    process_tree,
    reset_peaks,
)

logger = logging.getLogger("scaling")

SIZES = [300, 1000, 3000, 14000, 50000]
# The backend's phases: until its scores are in Label Studio (with the default "deterministic"
# score: one ordinary pass, "score"), then the K candidates ("weigh") and what they add
# ("complete": the unannotated tasks' predictions). Another score weighs before "save".
SCORED = ("fetch", "train", "early", "score", "save", "write")
PHASES = (*SCORED, "weigh", "complete")
IMPORT_BATCH = 1000  # tasks per import request
POLL_SECONDS = 0.5
# Issue 45's targets on a 2-core CPU: (size, kind) -> seconds from the trigger to the first
# scores, and to the full version's ("refined"); the retrain's first scores from its
# triggering edit.
FIRST, RETRAIN = "first training", "retrain after changes"
STOPS = ("done", "refined", "scores")
TARGETS = {(1000, FIRST): 20, (14000, FIRST): 120, (1000, RETRAIN): 15}
FULL_TARGETS = {(1000, FIRST): 45, (14000, FIRST): 600}


def parse_args(argv=None):
    parser = arguments(__doc__, threads=False)
    parser.add_argument("--sizes", type=int, nargs="+", default=SIZES, help="tasks per project")
    parser.add_argument("--mode", choices=("embedded", "redis"), default="embedded")
    parser.add_argument(
        "--tasks",
        choices=("sentences", "articles"),
        default="sentences",
        help="what a task holds: a CoNLL-2003 training sentence, or a whole article",
    )
    parser.add_argument("--retrain-at", type=int, default=1000, help="size of the retrain row")
    parser.add_argument("--changes", type=int, default=10, help="edits that start the retrain")
    add_backend_arguments(parser, ensemble=True)
    parser.add_argument("--seed", type=int, default=0, help="which sentences (default: 0)")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per training")
    parser.add_argument("--resume", action="store_true", help="keep sizes already measured")
    parser.add_argument(
        "--stop-at",
        choices=STOPS,
        default=STOPS[0],
        help="what to wait for: all done, the full training's scores (refined; the K-candidate "
        "pass's phases, all done and CPU s: -) or the first scores (early; the rest: -) "
        "(default: done)",
    )
    args = parser.parse_args(argv)
    if not args.name:
        args.name = "scaling" if args.mode == "embedded" else "scaling-redis"
        args.name += "-articles" if args.tasks == "articles" else ""
    return args


def engine_env(args) -> dict[str, str]:
    """The backend's SRW_* settings: its defaults, except what the command line gives."""
    return {**backend_env(args), "SRW_RETRAIN_AFTER": str(args.changes), "LOG_LEVEL": "INFO"}


def settings(args) -> dict:
    """What the numbers depend on: a resumed run must have the same."""
    return {
        "mode": args.mode,
        **({"tasks": args.tasks} if args.tasks != "sentences" else {}),  # older results: none
        "engine": engine_env(args),
        "seed": args.seed,
        "retrain_at": args.retrain_at,
        "changes": args.changes,
    }


# ----------------------------------------------------------------------------- Label Studio


def article_tasks(rng, size: int) -> list[dict]:
    """``size`` CoNLL-2003 training articles drawn at random (with replacement beyond 946), in
    file order, each a task annotated with its gold entities."""
    sentences = read_conll(DATA / "conllpp" / "conllpp_train.txt")
    groups = articles(sentences)
    chosen = sorted(rng.choice(len(groups), size, replace=size > len(groups)))
    return annotated_tasks(join(sentences, groups[k], k) for k in chosen)


def import_project(
    ls: LabelStudioServer, size: int, seed: int, unit: str = "sentences"
) -> tuple[int, list[int], float]:
    """A new NER project of ``size`` annotated CoNLL tasks, each a sentence or an article
    (``unit``): (project id, task ids, seconds)."""
    rng = np.random.default_rng(seed)
    tasks = conll_tasks(rng, size) if unit == "sentences" else article_tasks(rng, size)
    started = time.perf_counter()
    project = ls.api(
        "POST", "/api/projects", {"title": f"scaling {size}", "label_config": NER_CONFIG}
    )
    task_ids = []
    for first in tqdm(range(0, size, IMPORT_BATCH), desc=f"import {size}", unit="batch"):
        imported = ls.api(
            "POST",
            f"/api/projects/{project['id']}/import?return_task_ids=true",
            tasks[first : first + IMPORT_BATCH],
            timeout=600,
        )
        task_ids += imported["task_ids"]
    assert len(task_ids) == size, f"imported {len(task_ids)} of {size} tasks"
    return project["id"], task_ids, time.perf_counter() - started


def model_version(ls: LabelStudioServer, project: int) -> str:
    return ls.api("GET", f"/api/projects/{project}")["model_version"]


def wait_scores(ls: LabelStudioServer, backend: BackendServer, project: int, old: str, timeout):
    """Wait until a training has written its scores to Label Studio and made its version, not
    ``old``, the project's model version; that version. Polled on the backend's status, then
    confirmed in Label Studio: its project endpoint costs Label Studio CPU the training needs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = backend.get(f"/status?project={project}")[1]
        if status["state"] == "failed":
            raise TrainingFailed(f"training failed: {status['last_error']}\n{backend.log()}")
        scored = status.get("scores_in_label_studio")
        if scored not in (None, old) and model_version(ls, project) == scored:
            return scored
        time.sleep(POLL_SECONDS)
    raise TimeoutError(f"project {project}: no new model version within {timeout:.0f} s")


def wait_done(backend: BackendServer, project: int, version: str, timeout) -> dict:
    """The backend's status once the training of ``version`` has finished (its K-candidate
    pass included)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = backend.get(f"/status?project={project}")[1]
        if status["state"] == "failed":
            raise TrainingFailed(f"training failed: {status['last_error']}\n{backend.log()}")
        if status["state"] == "idle" and status.get("last_version") == version:
            return status
        time.sleep(POLL_SECONDS)
    raise TimeoutError(f"project {project}: the training did not finish within {timeout:.0f} s")


def check_predictions(ls: LabelStudioServer, project: int, version: str, task_ids) -> None:
    """Every task of ``task_ids`` has exactly one prediction of ``version``, and no other task
    has one (``[]``: no task has)."""
    listed = ls.api("GET", f"/api/predictions?project={project}", timeout=300)
    tasks = [p["task"] for p in listed if p["model_version"] == version]
    if sorted(tasks) != sorted(task_ids):
        raise AssertionError(
            f"project {project}: {len(tasks)} predictions of {version} for {len(task_ids)} tasks"
        )


def wait_deleted(ls: LabelStudioServer, project: int, version: str, timeout) -> None:
    """Wait until no task has a prediction of ``version`` (:func:`check_predictions`). Label
    Studio 1.23 can answer the listing with a 500 while it deletes them (14,000 tasks): that is
    "not yet" too."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return check_predictions(ls, project, version, [])
        except (AssertionError, ServerError):
            if time.monotonic() > deadline:
                raise
        time.sleep(4 * POLL_SECONDS)  # a listing of every prediction costs Label Studio CPU


def edits(ls: LabelStudioServer, task_ids, n: int) -> list[tuple[int, Callable[[], object]]]:
    """``n`` edits ``(task id, edit)``, each edit a function that retypes an entity of another
    task's annotation."""

    def edit(annotation: dict):
        body = {"result": retyped(annotation["result"])}
        return lambda: ls.api("PATCH", f"/api/annotations/{annotation['id']}", body)

    found = []
    for task_id in task_ids:
        annotation = ls.api("GET", f"/api/tasks/{task_id}")["annotations"][0]
        if annotation["result"]:
            found.append((task_id, edit(annotation)))
        if len(found) == n:
            return found
    raise ValueError(f"fewer than {n} tasks have an entity to retype")


def edit_seconds(
    ls: LabelStudioServer, backend: BackendServer, project: int, task_id: int, edit, timeout
) -> tuple[float, float | None, dict]:
    """Make ``edit`` and time it until (1) the task's prediction in Label Studio is rewritten
    (the backend rescored the changed annotation; no retrain) and (2) the project serves the
    version the refresh after it made (``backend.jobs.refresh``: every task scored again with the
    CRF trained on the annotations as they stand); (2) is None where no refresh came within
    ``timeout``; (3) is the refresh's own phases (``backend.jobs.refresh``'s ``phase_seconds``, {}
    without a refresh)."""

    def predictions() -> set:
        return {
            (p["model_version"], p["updated_at"])
            for p in ls.api("GET", f"/api/predictions?task={task_id}")
        }

    before, at = predictions(), time.time()
    started = time.perf_counter()
    edit()
    rescored = refreshed = None
    phases = {}
    while rescored is None or refreshed is None:
        waited = time.perf_counter() - started
        if rescored is None and predictions() != before:
            rescored = waited
        if refreshed is None:
            last = backend.get(f"/status?project={project}")[1].get("last_refresh") or {}
            if last.get("finished_at", 0) > at and model_version(ls, project) == last["version"]:
                refreshed = waited
                phases = {**(last.get("phase_seconds") or {}), "refresh": last["seconds"]}
        if waited > timeout:
            if rescored is None:
                raise TrainingFailed(f"task {task_id}: not rescored {timeout:.0f} s after its edit")
            break
        time.sleep(0.1)
    return rescored, refreshed, phases


# ----------------------------------------------------------------------------- the backend


@contextlib.contextmanager
def backend_for(ls: LabelStudioServer, args, work: Path):
    """A fresh backend connected to ``ls`` (and its rq worker with ``--mode redis``):
    ``(backend, pid of the process that trains)``."""
    env = {**engine_env(args), **ls.backend_env}
    work.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        if args.mode == "redis":
            redis = stack.enter_context(RedisServer())
            env.update(REDIS_URL=redis.url, RQ_QUEUE_NAME="srw-scaling")
        backend = stack.enter_context(BackendServer(work / "models", env, work / "backend.log"))
        trainer = backend
        if args.mode == "redis":
            worker = WorkerProcess(work / "models", env, work / "worker.log")
            trainer = stack.enter_context(worker)
        yield backend, trainer.proc.pid


def passes_used(backend: BackendServer, project: int, version: str) -> float:
    """The scout's passes over the tasks in ``version`` (its meta.json): its epochs, or fewer
    under the training budget, or an early one's; 0 for early scores of the CRF alone."""
    meta = Path(backend.env["MODEL_DIR"], str(project), "versions", version, "meta.json")
    return json.loads(meta.read_text()).get("training", {"passes": 0.0})["passes"]


def training_cpu_seconds(trainer_pid: int, since: float, timeout: float = 30.0) -> float:
    """CPU seconds the trainer has used since ``since`` (its cpu_seconds then), once the job's
    process is gone (an rq work horse counts when its worker has reaped it)."""
    deadline = time.monotonic() + timeout
    while len(process_tree(trainer_pid)) > 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    return cpu_seconds(trainer_pid) - since


def early_versions(status: dict) -> set[str]:
    """The early versions the backend's ``status`` lists for its current training."""
    return {e["version"] for e in status.get("early_scores", [])}


def timed_training(ls, backend, trainer_pid, project, task_ids, trigger, args) -> dict:
    """Call ``trigger`` and time it until the new version's scores are in Label Studio."""
    old = model_version(ls, project)
    reset_peaks(trainer_pid)
    cpu_before = cpu_seconds(trainer_pid)
    memory = PeakMemory({"trainer": trainer_pid}, measure=largest_peak_mb, interval=0.2)
    memory.start()
    load, speed = os.getloadavg()[0], matmul_gflops()
    started = time.perf_counter()
    trigger()
    first = wait_scores(ls, backend, project, old, args.timeout)
    seconds = time.perf_counter() - started
    status = backend.get(f"/status?project={project}")[1]
    early_version = status.get("early_version")
    early = early_version not in (None, old)  # this training published early scores
    # A training this short can publish its own version within one poll of its early one's:
    # then the first version seen is the full training's (the row says so).
    missed = early and first not in early_versions(status)
    version, refined = first, None  # refined: unknown when stopping at early scores
    if not (early and args.stop_at == "scores"):
        # every early version of this training (the CRF's, an ensemble's first scout's...) is
        # followed by another; early_scores only grows during a training, so a version found
        # there is early whenever the status is read
        while version in early_versions(status):
            version = wait_scores(ls, backend, project, version, args.timeout)
            status = backend.get(f"/status?project={project}")[1]
        refined = round(time.perf_counter() - started, 2)
    if args.stop_at != "done":
        all_done = None
    else:
        wait_done(backend, project, version, args.timeout)
        all_done = round(time.perf_counter() - started, 2)
        status = wait_trained(backend, project, timeout=120)
    peak = memory.stop()["trainer"]
    assert status["current_version"] == version, (status, version)
    check_predictions(ls, project, version, task_ids)
    if first != version:  # early scores, superseded: the backend deletes their predictions
        wait_deleted(ls, project, first, args.timeout)  # after it says the scores are in
    cpu = None if all_done is None else training_cpu_seconds(trainer_pid, cpu_before)
    phases = {phase: status["phase_seconds"].get(phase, 0.0) for phase in PHASES}
    return {
        "size": len(task_ids),
        "end_to_end_seconds": round(seconds, 2),
        "refined_seconds": refined,
        "early_passes": passes_used(backend, project, early_version) if early else None,
        "early_scores": [  # the backend's own clock, from the training's start
            {"what": e["what"], "seconds": round(e["seconds"], 2)}
            for e in status.get("early_scores", [])
        ],
        "early_scores_unseen": missed,
        "all_done_seconds": all_done,
        "phase_seconds": phases,
        "overhead_seconds": round(
            seconds - status["early_seconds"]
            if refined is None
            else refined - status["scores_seconds"],
            2,
        ),
        "peak_rss_mb": round(peak),
        "cpu_seconds": None if cpu is None else round(cpu, 1),
        "passes": passes_used(backend, project, version),
        "version": version,
        "load_average": round(load, 2),
        "matmul_gflops": speed,
    }


def measure_size(ls: LabelStudioServer, size: int, args, work: Path) -> list[dict]:
    """The rows of one size: the first training, and at ``--retrain-at`` the retrain."""
    project, task_ids, import_seconds = import_project(ls, size, args.seed, args.tasks)
    logger.info("size %d: project %d imported in %.1f s", size, project, import_seconds)
    with backend_for(ls, args, work / str(size)) as (backend, trainer_pid):
        ml = ls.api("POST", "/api/ml", {"project": project, "url": backend.url, "title": "srw"})

        def start_training():
            ls.api("POST", f"/api/ml/{ml['id']}/train", {})

        first = timed_training(ls, backend, trainer_pid, project, task_ids, start_training, args)
        rows = [{**first, "kind": FIRST, "import_seconds": round(import_seconds, 1)}]
        logger.info("size %d: %s", size, describe(rows[-1]))
        if size == args.retrain_at:
            *before, (_, last) = edits(ls, task_ids, args.changes)
            # One at a time, so that each is timed alone: what an annotator sees after an edit.
            timed = [
                edit_seconds(ls, backend, project, task, edit, 120)
                for task, edit in tqdm(before, desc="edits", unit="edit", leave=False)
            ]
            rescored = [round(r, 2) for r, _, _ in timed]
            refreshed = [round(r, 2) for _, r, _ in timed if r is not None]
            phases = [p for _, r, p in timed if r is not None]
            logger.info(
                "size %d: %d edits rescored in Label Studio after median %.1f s, max %.1f s; "
                "%d refreshes served after median %s s",
                size,
                len(rescored),
                np.median(rescored),
                max(rescored),
                len(refreshed),
                f"{np.median(refreshed):.1f}" if refreshed else "-",
            )
            again = timed_training(ls, backend, trainer_pid, project, task_ids, last, args)
            rows.append(
                {
                    **again,
                    "kind": RETRAIN,
                    "changes": args.changes,
                    "rescore_seconds": rescored,
                    "refresh_seconds": refreshed,
                    "refresh_phase_seconds": {
                        name: round(float(np.median([p.get(name, 0.0) for p in phases])), 3)
                        for name in dict.fromkeys(n for p in phases for n in p)
                    },
                }
            )
            logger.info("size %d: %s", size, describe(rows[-1]))
    return rows


# ----------------------------------------------------------------------------- results


def shown(value, form: str = "{:.1f}") -> str:
    """A table's or log's number of seconds; '-' when not measured."""
    return "-" if value is None else form.format(value)


def describe(row: dict) -> str:
    phases = ", ".join(f"{p} {s:.1f}" for p, s in row["phase_seconds"].items())
    done = row["all_done_seconds"]
    return (
        f"{row['kind']}: scores in Label Studio after {row['end_to_end_seconds']:.1f} s, the "
        f"full training's after {shown(row['refined_seconds'])} s, all done after "
        f"{shown(done)} s ({phases}, overhead "
        f"{row['overhead_seconds']:.1f}), peak RSS {row['peak_rss_mb']} MiB"
    )


def target(row: dict) -> str:
    """The row's targets, each met or missed: first scores, and the full version's."""
    key, out = (row["size"], row["kind"]), []
    for limits, seconds, what in (
        (TARGETS, row["end_to_end_seconds"], "scores"),
        (FULL_TARGETS, row.get("refined_seconds"), "full"),
    ):
        limit = limits.get(key)
        if limit is not None and seconds is not None:
            out.append(f"{what} ≤ {limit} s: {'met' if seconds <= limit else 'missed'}")
    return "; ".join(out)


def label(row: dict) -> str:
    return f"{row['size']:,}" + (f" (+{row['changes']} edits)" if row["kind"] == RETRAIN else "")


def early_passes(row: dict) -> str:
    """What made a row's early scores: "CRF" (the CRF alone), the scout's passes, or "-";
    rows that list them (``early_scores``, since 2026-11-28) each with the backend's seconds,
    e.g. "CRF 11.0; scout 1 of 3 + CRF 37.2"."""
    listed = row.get("early_scores")
    if listed:
        return "; ".join(f"{_early_what(e['what'])} {e['seconds']:.1f}" for e in listed)
    passes = row.get("early_passes")
    if passes is None:
        return "-"
    return f"{passes:.2f}" if passes else "CRF"


def _early_what(what: str) -> str:
    """The backend's words for early scores, short: "CRF", "scout 1 of 3 (3.00 passes) + CRF",
    "0.34 passes"."""
    if what.startswith("the CRF alone"):
        return "CRF"
    short = what.split(", ")[0]
    if " of scout " in short:
        passes, scout = short.split(" of scout ")
        short = f"scout {scout} ({passes})"
    return short + (" + CRF" if "with the CRF" in what else "")


def markdown(result: dict) -> str:
    cfg = result["settings"]
    lines = [
        f"Start Training (POST /api/ml/{{id}}/train) to scores in Label Studio, {cfg['mode']} "
        f"jobs, engine settings {cfg['engine']}; seconds (wall). *Scores*: the project's model "
        "version is the new one, every annotated task scored (by a training's early scores "
        "where it has them: a NER project's CRF alone up to 5,000 annotations, *early passes* "
        "CRF, or its scout after a third of its steps, at most 300: *early passes* "
        "over the tasks; rows since 2026-11-28 list each early version, an ensemble's first "
        "scout's too, with the backend's seconds from the training's start); "
        "*refined*: the full training's scores in their place (the same as *scores* without "
        "early scores); *early*: scoring and writing the early scores; *all done*: the "
        "K-candidate pass finished too (c/K stored, unannotated tasks pre-annotated). Peak RSS: "
        "the training process.",
        "",
    ]
    if cfg.get("tasks") == "articles":
        lines[-1:-1] = [
            "Each task is a whole CoNLL-2003 training article (not a sentence); *tasks* counts "
            "articles.",
        ]
    sentences = cfg.get("tasks", "sentences") == "sentences"
    rows = []
    for row in result["runs"]:
        sec = row["phase_seconds"]
        rows.append(
            [
                label(row),
                row["kind"],
                f"{row['end_to_end_seconds']:.1f}",
                shown(row.get("refined_seconds", row["end_to_end_seconds"])),
                early_passes(row),
            ]
            + [f"{sec.get(p, 0.0):.1f}" for p in SCORED]
            + [f"{row['overhead_seconds']:.1f}"]
            + [f"{sec.get(p, 0.0):.1f}" for p in PHASES[len(SCORED) :]]
            + [
                shown(row["all_done_seconds"]),
                shown(row["cpu_seconds"], "{:.0f}"),
                row["peak_rss_mb"],
                row.get("passes", row.get("epochs")),
                f"{row['load_average']:.1f}",
                row.get("matmul_gflops", "-"),
                target(row) if sentences else "",  # issue 45's targets are of sentences
            ]
        )
    header = ["tasks", "training", "scores s", "refined s", "early passes", *SCORED]
    header += ["overhead", *PHASES[len(SCORED) :]]
    header += ["all done s", "CPU s", "peak RSS MiB", "passes", "load avg", "GFLOP/s", "target"]
    lines += table(header, rows, align="ll" + "r" * (len(header) - 3) + "l")
    measured = {r["size"] for r in result["runs"]}
    missing = [f"{s:,}" for s in SIZES if s not in measured] if sentences else []
    lines += [
        "",
        "CPU s: CPU seconds (user + system) of the training process from the trigger to all "
        f"done. Load avg: the 1-minute load average at the row's start ({os.cpu_count()} CPUs "
        "here; above that, other jobs shared the machine). GFLOP/s: the machine's speed at the "
        "row's start, float32 matrix products in the benchmark's process (rows made before it "
        "was recorded: -).",
    ]
    for row in result["runs"]:
        if row.get("rescore_seconds"):
            seconds = row["rescore_seconds"]
            lines.append(
                f"Edits before the retrain ({row['size']:,} tasks): each changed annotation's "
                f"score was rewritten in Label Studio, by the serving version without a retrain, "
                f"after median {np.median(seconds):.1f} s, max {max(seconds):.1f} s over "
                f"{len(seconds)} edits (from the edit through the API to the new score; one "
                f"edit at a time)."
            )
            refreshed = row.get("refresh_seconds") or []
            if refreshed:
                lines.append(
                    f"The refresh after each of those edits (the CRF trained again on the "
                    f"annotations as they stood, every task scored again from the scouts' kept "
                    f"distributions, a new version served): in Label Studio after median "
                    f"{np.median(refreshed):.1f} s, max {max(refreshed):.1f} s from the edit "
                    f"({len(refreshed)} of {len(seconds)} edits refreshed)."
                )
            phases = dict(row.get("refresh_phase_seconds") or {})
            if phases:
                own = phases.pop("refresh", None)
                order = ("fetch", "crf", "score", "publish")  # the refresh's, then any other
                rank = {name: i for i, name in enumerate(order)}
                phases = dict(sorted(phases.items(), key=lambda kv: rank.get(kv[0], len(order))))
                lines.append(
                    "The refresh's own phases, median over those edits: "
                    + ", ".join(f"{name} {value:.2f} s" for name, value in phases.items())
                    + (
                        f"; {own:.2f} s in all, the rest of the wait being the edit's webhook "
                        "and rescore."
                        if own is not None
                        else "."
                    )
                )
    if missing:
        lines.append(f"Not measured yet: {', '.join(missing)} tasks.")
    if "plot" in result:
        lines += ["", f"![time against project size]({result['plot']})"]
    return document(lines, result)


def plot(result: dict, path: Path) -> None:
    """Stacked seconds per phase for every row, and the targets."""
    rows = result["runs"]
    x = np.arange(len(rows))
    parts = {p: [r["phase_seconds"].get(p, 0.0) for r in rows] for p in SCORED}
    parts["overhead"] = [max(r["overhead_seconds"], 0.0) for r in rows]
    parts.update({p: [r["phase_seconds"].get(p, 0.0) for r in rows] for p in PHASES[len(SCORED) :]})
    with figure(path) as ax:
        bottom = np.zeros(len(rows))
        for name, seconds in parts.items():
            ax.bar(x, seconds, bottom=bottom, label=name, width=0.6)
            bottom += seconds
        for i, row in enumerate(rows):
            limit = TARGETS.get((row["size"], row["kind"]))
            if limit is not None:
                ax.hlines(limit, i - 0.4, i + 0.4, colors="red", linestyles="--")
        ends = [r["end_to_end_seconds"] for r in rows]
        ax.scatter(x, ends, marker="_", s=900, c="black", zorder=3)
        ax.scatter([], [], marker="_", c="black", label="scores in Label Studio")
        refined = [r.get("refined_seconds", r["end_to_end_seconds"]) for r in rows]
        ax.scatter(
            [i for i, s in zip(x, refined) if s is not None],
            [s for s in refined if s is not None],
            marker="_",
            s=900,
            c="grey",
            zorder=3,
        )
        ax.scatter([], [], marker="_", c="grey", label="the full training's scores")
        ax.plot([], [], "r--", label="target")
        ax.set_xticks(x, [label(r) for r in rows])
        ax.set_xlim(-0.75, len(rows) - 0.25)  # one row: a bar, not a wall
        ax.set_xlabel("project size (tasks)")
        ax.set_ylabel("seconds from Start Training")
        mode = result["settings"]["mode"]
        ax.set_title(f"NER, CoNLL-2003, {mode} jobs, {os.cpu_count()} CPUs")
        ax.legend(fontsize=8, loc="upper left")
        ax.grid(alpha=0.3, axis="y")


def write(args, runs: list[dict], command_line: str) -> dict:
    result = {**stamp(command_line), "settings": settings(args), "runs": runs}
    args.out.mkdir(parents=True, exist_ok=True)
    if runs:
        png = args.out / f"{args.name}.png"
        plot(result, png)
        result["plot"] = png.name
    save(args.out, args.name, result, markdown(result))
    return result


def finished_runs(args) -> list[dict]:
    """The rows of an earlier ``NAME.json`` to keep with ``--resume`` (none without it).

    Raises ValueError if that file was made with other settings.
    """
    earlier = earlier_result(args.out, args.name, args.resume)
    if earlier is None:
        return []
    if earlier["settings"] != settings(args):
        raise ValueError(f"{args.name}.json was made with other settings: {earlier['settings']}")
    return earlier["runs"]


def main(argv=None) -> int:
    args = parse_args(argv)
    start(None)
    command_line = command("scaling", argv)
    runs = finished_runs(args)
    todo = [size for size in args.sizes if size not in {r["size"] for r in runs}]
    work = Path(tempfile.mkdtemp(prefix="srw-scaling-"))
    keep = bool(os.environ.get("SUBREGWEIGH_KEEP_TEST_SERVERS"))
    logger.info(
        "sizes to measure: %s; backend logs and models in %s (%s)",
        todo,
        work,
        "kept" if keep else "deleted at the end; SUBREGWEIGH_KEEP_TEST_SERVERS=1 keeps them",
    )
    result = write(args, runs, command_line)
    try:
        with LabelStudioServer() if todo else contextlib.nullcontext() as ls:
            for size in tqdm(todo, desc="sizes", unit="size"):
                runs = sorted(runs + measure_size(ls, size, args, work), key=lambda r: r["size"])
                result = write(args, runs, command_line)
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
