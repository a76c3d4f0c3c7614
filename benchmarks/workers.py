"""Several rq workers on one Redis queue: no job runs twice, and what one more worker buys.

Everything is real and on loopback: Label Studio 1.23, redis-server, our backend (``python
_wsgi.py`` with ``REDIS_URL``) and ``--workers`` separate ``python -m backend.queue.worker``
processes, each in a session of its own; they share nothing but Redis, ``MODEL_DIR`` and Label
Studio's address, as workers on separate machines would. For each worker count a fresh backend,
Redis and worker set; ``--projects`` new NER projects of ``--size`` annotated CoNLL-2003
sentences each are connected to the backend, and Start Training (``POST /api/ml/{id}/train``)
is sent ``--triggers`` times to every project at once, as a storm of events would.

Timed: from the first trigger to the last job's end (rq's ``ended_at``). Checked, and recorded:
every job rq finished ran on exactly one worker (its ``Job OK`` line is in one worker's log,
once) and none failed; each project published as many versions as jobs that trained it; a
project's trainings never overlapped (a training's span: the job's end less the seconds of its
phases); every task holds exactly one prediction of every version.

    python -m benchmarks.workers --workers 1 2 3 --projects 3 --size 300   # about 6 min

Writes ``benchmarks/results/workers.{json,md}``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import tempfile
import time
from datetime import timezone
from pathlib import Path

from benchmarks.harness import (
    add_backend_arguments,
    arguments,
    backend_env,
    command,
    footer,
    matmul_gflops,
    save,
    stamp,
    start,
    table,
)
from benchmarks.scaling import check_predictions, import_project
from testbed.projects import wait_trained
from testbed.servers import BackendServer, BackgroundProcess, LabelStudioServer, RedisServer

logger = logging.getLogger("workers")
QUEUE = "srw-workers"


def parse_args(argv=None):
    parser = arguments(__doc__, name="workers", threads=False)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--projects", type=int, default=2, help="projects (default: 2)")
    parser.add_argument("--size", type=int, default=300, help="tasks a project (default: 300)")
    parser.add_argument(
        "--triggers", type=int, default=1, help="Start Training a project, at once (default: 1)"
    )
    parser.add_argument(
        "--worker-threads",
        type=int,
        default=2,
        help="torch threads a worker, OMP_NUM_THREADS (default: 2, compose's WORKER_THREADS)",
    )
    add_backend_arguments(parser)
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds for a round")
    parser.add_argument("--seed", type=int, default=0, help="which sentences (default: 0)")
    return parser.parse_args(argv)


def engine_env(args) -> dict[str, str]:
    """The backend's SRW_* settings: its defaults, except what the command line gives; no
    retrain from events (only the triggers train)."""
    return {**backend_env(args), "SRW_RETRAIN_AFTER": "1000000", "LOG_LEVEL": "INFO"}


def _seconds(moment) -> float:
    """An rq timestamp (UTC, naive or not) as seconds since the epoch."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def wait_for_workers(redis, n: int, timeout: float = 120.0) -> None:
    """Block until ``n`` rq workers have registered with ``redis``."""
    from rq import Worker

    deadline = time.monotonic() + timeout
    while len(Worker.all(connection=redis)) < n:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{n} rq workers did not register within {timeout:.0f} s")
        time.sleep(0.3)


def wait_idle(redis, queue, timeout: float) -> None:
    """Block until the queue is empty and no job runs."""
    from rq.registry import StartedJobRegistry

    deadline = time.monotonic() + timeout
    while queue.count or StartedJobRegistry(queue=queue).count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"jobs still queued or running after {timeout:.0f} s")
        time.sleep(0.3)


def jobs_run(queue) -> list[dict]:
    """Every job rq finished or failed on ``queue``: project, worker, times, what it did."""
    from rq.job import Job
    from rq.registry import FailedJobRegistry, FinishedJobRegistry

    found = []
    for registry, outcome in ((FinishedJobRegistry, "finished"), (FailedJobRegistry, "failed")):
        for job_id in registry(queue=queue).get_job_ids():
            job = Job.fetch(job_id, connection=queue.connection)
            result = job.return_value() if outcome == "finished" else None
            trained = bool(result and result.get("trained"))
            busy = sum(result["phase_seconds"].values()) if trained else 0.0
            found.append(
                {
                    "id": job_id,
                    "project": int(job.args[3]),
                    "outcome": outcome,
                    "worker": job.worker_name,
                    "started": _seconds(job.started_at),
                    "ended": _seconds(job.ended_at),
                    "trained": trained,
                    "version": result.get("last_version") if trained else None,
                    "training_seconds": round(busy, 2),
                }
            )
    return sorted(found, key=lambda job: job["started"])


def ok_lines(logs: list[Path]) -> dict[str, list[int]]:
    """Job id -> the workers (indices of ``logs``) whose log says ``Job OK`` for it, once per
    line."""
    seen: dict[str, list[int]] = {}
    for i, log in enumerate(logs):
        for job_id in re.findall(r"Job OK \(([^)]+)\)", log.read_text(errors="replace")):
            seen.setdefault(job_id, []).append(i)
    return seen


def overlapping(jobs: list[dict]) -> list[tuple[str, str]]:
    """Pairs of one project's trainings whose spans (the end less the phases) overlap."""
    spans = sorted(
        (job["ended"] - job["training_seconds"], job["ended"], job["id"], job["project"])
        for job in jobs
        if job["trained"]
    )
    pairs = []
    for i, (_, end, first, project) in enumerate(spans):
        for begin, _, second, other in spans[i + 1 :]:
            if other == project and begin < end:
                pairs.append((first, second))
    return pairs


def run_round(ls: LabelStudioServer, n_workers: int, args, work: Path) -> dict:
    """``args.projects`` fresh projects trained by ``n_workers`` workers; the round's record,
    with what was checked (``double_work``, ``overlaps``, ``failed``: empty when all is well)."""
    from redis import Redis
    from rq import Queue

    work.mkdir(parents=True, exist_ok=True)
    projects = [import_project(ls, args.size, args.seed + i)[:2] for i in range(args.projects)]
    env = {
        **engine_env(args),
        **ls.backend_env,
        "RQ_QUEUE_NAME": QUEUE,
        "OMP_NUM_THREADS": str(args.worker_threads),
    }
    logs = [work / f"worker-{i}.log" for i in range(n_workers)]
    with contextlib.ExitStack() as stack:
        redis_server = stack.enter_context(RedisServer())
        env["REDIS_URL"] = redis_server.url
        backend = stack.enter_context(BackendServer(work / "models", env, work / "backend.log"))
        for log in logs:
            worker = [sys.executable, "-m", "backend.queue.worker"]
            stack.enter_context(BackgroundProcess(worker, backend.env, log))
        redis = Redis.from_url(redis_server.url)
        queue = Queue(QUEUE, connection=redis)
        wait_for_workers(redis, n_workers)
        mls = [
            ls.api("POST", "/api/ml", {"project": project, "url": backend.url, "title": "srw"})
            for project, _ in projects
        ]
        load, speed = os.getloadavg()[0], matmul_gflops()
        started = time.time()
        for _ in range(args.triggers):
            for ml in mls:
                ls.api("POST", f"/api/ml/{ml['id']}/train", {})
        for project, _ in projects:
            wait_trained(backend, project, timeout=args.timeout)
        wait_idle(redis, queue, args.timeout)
        jobs = jobs_run(queue)
        # each training's own version (its early ones, and versions past the store's bound,
        # may be gone): one a job that trained, each different
        versions = {
            project: sorted(
                {j["version"] for j in jobs if j["trained"] and j["project"] == project}
            )
            for project, _ in projects
        }
    seen = ok_lines(logs)
    for project, task_ids in projects:
        # the newest training's version serves, on every task; the ones it superseded left
        # Label Studio (issue 61: a task shows one prediction of this backend)
        *older, newest = versions[project]
        check_predictions(ls, project, newest, task_ids)
        for version in older:
            check_predictions(ls, project, version, [])
    finished = [job for job in jobs if job["outcome"] == "finished"]
    return {
        "workers": n_workers,
        "wall_seconds": round(max(job["ended"] for job in jobs) - started, 2),
        "load_average": round(load, 2),
        "matmul_gflops": speed,
        "jobs": [
            {
                **job,
                "started": round(job["started"] - started, 2),
                "ended": round(job["ended"] - started, 2),
            }
            for job in jobs
        ],
        "jobs_by_worker": {
            name: sum(job["worker"] == name for job in jobs) for name in {j["worker"] for j in jobs}
        },
        "versions": {str(project): names for project, names in versions.items()},
        "double_work": sorted(job["id"] for job in finished if len(seen.get(job["id"], [])) != 1),
        "overlaps": overlapping(jobs),
        "failed": [job["id"] for job in jobs if job["outcome"] == "failed"],
        "versions_match_trainings": all(
            len(versions[project]) == sum(j["trained"] and j["project"] == project for j in jobs)
            for project, _ in projects
        ),
    }


def describe(row: dict) -> str:
    return (
        f"{row['workers']} workers: {len(row['jobs'])} jobs in {row['wall_seconds']:.1f} s, "
        f"by worker {sorted(row['jobs_by_worker'].values())}, double work {row['double_work']}, "
        f"overlaps {row['overlaps']}, failed {row['failed']}"
    )


def markdown(result: dict) -> str:
    cfg = result["settings"]
    lines = [
        "## Several rq workers on one queue",
        "",
        f"{cfg['projects']} projects of {cfg['size']:,} annotated tasks, Start Training sent "
        f"{cfg['triggers']} time(s) to each at once; engine settings {cfg['engine']}; each "
        "worker a separate `python -m backend.queue.worker` process of "
        f"{cfg['worker_threads']} torch threads. *Wall*: the first trigger to the "
        "last job's end. *Trainings*: the phases of each training, seconds. *Each job once*: "
        "every finished job's `Job OK` is in exactly one worker's log, "
        "no job failed, each project has one version a training job, and one project's "
        "trainings never overlapped.",
        "",
    ]
    ones = [row for row in result["runs"] if row["workers"] == 1] or result["runs"]
    base = ones[0]["wall_seconds"] if ones else None
    rows = []
    for row in result["runs"]:
        trainings = sorted(j["training_seconds"] for j in row["jobs"] if j["trained"])
        clean = not (row["double_work"] or row["overlaps"] or row["failed"])
        clean = clean and row["versions_match_trainings"]
        rows.append(
            [
                row["workers"],
                len(row["jobs"]),
                " + ".join(str(n) for n in sorted(row["jobs_by_worker"].values(), reverse=True)),
                f"{row['wall_seconds']:.1f}",
                f"{base / row['wall_seconds']:.2f}x",
                ", ".join(f"{t:.1f}" for t in trainings) or "-",
                f"{row['load_average']:.1f}",
                row.get("matmul_gflops", "-"),
                "yes" if clean else "NO",
            ]
        )
    header = ["workers", "jobs", "jobs per worker", "wall s", "speed-up", "trainings s"]
    header += ["load avg", "GFLOP/s", "each job once"]
    lines += table(header, rows, align="rrrrrrrrl")
    lines += [
        "",
        f"Load avg: the 1-minute load average at the round's start ({os.cpu_count()} CPUs here; "
        "above that, other jobs shared the machine). GFLOP/s: the machine's speed at the round's "
        "start, float32 matrix products (-: not recorded). Speed-up: against one worker.",
        "",
    ]
    return "\n".join([*lines, *footer(result), ""])


def main(argv=None) -> int:
    args = parse_args(argv)
    start(None)
    settings = {
        "projects": args.projects,
        "size": args.size,
        "triggers": args.triggers,
        "worker_threads": args.worker_threads,
        "engine": engine_env(args),
        "seed": args.seed,
    }
    result = {**stamp(command("workers", argv)), "settings": settings, "runs": []}
    with tempfile.TemporaryDirectory(prefix="srw-workers-") as tmp, LabelStudioServer() as ls:
        for n in args.workers:
            row = run_round(ls, n, args, Path(tmp) / f"{n}-workers")
            logger.info("%s", describe(row))
            result["runs"].append(row)
            save(args.out, args.name, result, markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
