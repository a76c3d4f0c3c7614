"""Load test: concurrent /predict for a scored project while a training job runs.

Everything is real and on loopback: Label Studio 1.23 (``testbed.servers``), redis-server, our
backend under gunicorn (gunicorn.conf.py) with an rq worker (python -m backend.queue.worker). A
CoNLL NER project of --tasks tasks is trained once; then a second training starts on the worker
and, while it runs, --concurrency clients send Label Studio's /predict call (all tasks, served
from stored scores) until --duration seconds or --max-requests requests have passed.

    python -m benchmarks.load_test                     # 100 tasks, 8 clients, 60 s
    python -m benchmarks.load_test --workers 4 --threads 8 --concurrency 16
    python -m benchmarks.load_test --worker-class gthread --name load-test-gthread
    python -m benchmarks.load_test --slow-clients 200 --name load-test-slow-clients

``--worker-class gthread`` runs the server as it was before issue 26 (gunicorn's threads read the
requests; gunicorn.conf.py's worker reads them in waitress's loop); ``--slow-clients N`` keeps N
hostile connections open throughout the load (testbed.slow_clients: half send their headers,
half their body, a byte a second).

Prints (and writes to ``benchmarks/results/load-test.{json,md}``) requests/s, latency percentiles,
errors, the server's CPU time per request, and the peak resident memory of the server's processes
and of the training worker.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from pathlib import Path

import numpy as np

from benchmarks.harness import arguments, command, config, document, report, stamp, start, table
from testbed.projects import NER_CONFIG, ner_tasks
from testbed.servers import (
    BackendServer,
    BackgroundProcess,
    LabelStudioServer,
    PeakMemory,
    RedisServer,
    cpu_seconds,
    http_json,
    process_tree,
)
from testbed.slow_clients import SlowClients

# the table's columns: title -> key of the result
COLUMNS = {
    "requests": "requests",
    "s": "seconds",
    "req/s": "requests_per_second",
    "p50 ms": "p50_ms",
    "p95 ms": "p95_ms",
    "p99 ms": "p99_ms",
    "max ms": "max_ms",
    "errors": "errors",
    "server CPU ms/req": "server_cpu_ms_per_request",
    "peak RSS server": "peak_rss_server_mb",
    "peak RSS training worker": "peak_rss_training_worker_mb",
}


def _wait_status(backend, project, done, what, timeout=900.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code, status = backend.get(f"/status?project={project}")
        if code == 200 and done(status):
            return status
        if code == 200 and status.get("state") == "failed":
            raise SystemExit(f"{what}: training failed: {status['last_error']}")
        time.sleep(0.5)
    raise SystemExit(f"{what}: not within {timeout:.0f} s")


def main(argv=None) -> int:
    parser = arguments(__doc__, name="load-test", threads=False)
    parser.add_argument(
        "--tasks", type=int, default=100, help="tasks in the project, all sent per /predict"
    )
    parser.add_argument("--concurrency", type=int, default=8, help="client threads")
    parser.add_argument(
        "--duration", type=float, default=60.0, help="seconds of load (upper bound)"
    )
    parser.add_argument("--max-requests", type=int, default=5000, help="requests (upper bound)")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn WORKERS")
    parser.add_argument("--threads", type=int, default=4, help="gunicorn THREADS")
    parser.add_argument(
        "--worker-class",
        help="gunicorn's worker class (default: gunicorn.conf.py's; gthread: before issue 26)",
    )
    parser.add_argument(
        "--slow-clients", type=int, default=0, help="slow connections open throughout the load"
    )
    args = parser.parse_args(argv)
    start(None)
    command_line = command("load_test", argv)

    from label_studio_sdk.client import LabelStudio

    work = Path(tempfile.mkdtemp(prefix="srw-load-"))
    print(f"load test: logs in {work}")
    engine = {
        "SRW_N": "100",
        "SRW_K": "10",
        "SRW_MIN_ANNOTATIONS": "10",
        "SRW_RETRAIN_AFTER": "100000",
        "SRW_EPOCHS": "3",
        "LOG_LEVEL": "WARNING",
    }
    with LabelStudioServer() as ls, RedisServer() as redis:
        env = {
            **engine,
            **ls.backend_env,
            "REDIS_URL": redis.url,
            "RQ_QUEUE_NAME": "srw-load",
        }
        backend = BackendServer(
            work / "models",
            env,
            work / "gunicorn.log",
            workers=args.workers,
            threads=args.threads,
            worker_class=args.worker_class,
        )

        def worker(log: str) -> BackgroundProcess:
            return BackgroundProcess(
                [sys.executable, "-m", "backend.queue.worker"],
                {**backend.env, "OMP_NUM_THREADS": "1"},
                work / log,
            )

        with backend:
            sdk = LabelStudio(base_url=ls.url, api_key=ls.token)
            tasks, _ = ner_tasks(np.random.default_rng(11), args.tasks, args.tasks // 10)
            project = sdk.projects.create(title="load test", label_config=NER_CONFIG).id
            sdk.projects.import_tasks(id=project, request=tasks)
            trigger = {"action": "START_TRAINING", "project": {"id": project}}

            started = time.perf_counter()
            with worker("worker-first.log").start():
                backend.post("/webhook", trigger)
                version = _wait_status(
                    backend,
                    project,
                    lambda s: s["current_version"] and s["job"] == "idle",
                    "first training",
                )["current_version"]
            print(f"first training: version {version} in {time.perf_counter() - started:.0f} s")
            # A training computes with the server's settings (its job carries them): the long
            # second training (many epochs) that keeps the worker busy for the whole load needs
            # a server started with them.
            backend.stop()
            backend.env.update(SRW_EPOCHS="200")
            backend.start()

            body = {
                "tasks": [
                    {"id": t.id, "data": t.data, "annotations": t.annotations}
                    for t in sdk.tasks.list(project=project, fields="all")
                ],
                "project": f"{project}.1",
                "label_config": NER_CONFIG,
            }
            code, warm = backend.post(
                "/predict", body
            )  # the scores are stored: this only reads them
            assert code == 200 and len(warm["results"]) == args.tasks, warm

            training = worker("worker-long.log").start()
            try:
                backend.post("/webhook", trigger)
                _wait_status(
                    backend,
                    project,
                    lambda s: (
                        s["job"] == "running"
                        and str(s.get("message", "")).startswith("training on")
                    ),
                    "second training",
                )
                memory = PeakMemory({"server": backend.proc.pid, "worker": training.proc.pid})
                memory.start()
                latencies: list[float] = []
                errors: list[str] = []
                lock = threading.Lock()
                deadline = time.monotonic() + args.duration
                budget = iter(range(args.max_requests))

                def client():
                    while time.monotonic() < deadline:
                        with lock:
                            if next(budget, None) is None:
                                return
                        start = time.perf_counter()
                        try:
                            code, reply = http_json(
                                "POST", backend.url + "/predict", body=body, timeout=60
                            )
                            ok = code == 200 and len(reply["results"]) == args.tasks
                            problem = None if ok else f"HTTP {code}: {str(reply)[:200]}"
                        except Exception as err:  # a refused or reset connection is an error too
                            problem = f"{type(err).__name__}: {err}"
                        with lock:
                            latencies.append(time.perf_counter() - start)
                            if problem:
                                errors.append(problem)

                slow = (
                    SlowClients(
                        "127.0.0.1",
                        backend.port,
                        headers=args.slow_clients // 2,
                        bodies=args.slow_clients - args.slow_clients // 2,
                    )
                    if args.slow_clients
                    else nullcontext()
                )
                with slow:
                    cpu_start = _tree_cpu(backend.proc.pid)
                    load_start = time.perf_counter()
                    with ThreadPoolExecutor(args.concurrency) as pool:
                        for future in [pool.submit(client) for _ in range(args.concurrency)]:
                            future.result()
                    elapsed = time.perf_counter() - load_start
                    cpu = _tree_cpu(backend.proc.pid) - cpu_start
                    slow_open = slow.open() if args.slow_clients else 0
                memory.stop()
                still_training = backend.get(f"/status?project={project}")[1]["job"] == "running"
            finally:
                training.stop()

    ms = np.array(latencies) * 1000
    result = {
        **stamp(command_line),
        "config": config(args),
        "tasks_per_request": args.tasks,
        "concurrency": args.concurrency,
        "gunicorn_workers": args.workers,
        "gunicorn_threads": args.threads,
        "worker_class": args.worker_class or "backend.web.waitress_worker.WaitressWorker",
        "slow_clients": args.slow_clients,
        "slow_clients_open_at_end": slow_open,
        "requests": len(latencies),
        "seconds": round(elapsed, 1),
        "requests_per_second": round(len(latencies) / elapsed, 1),
        "p50_ms": round(float(np.percentile(ms, 50)), 1),
        "p95_ms": round(float(np.percentile(ms, 95)), 1),
        "p99_ms": round(float(np.percentile(ms, 99)), 1),
        "max_ms": round(float(ms.max()), 1),
        "errors": len(errors),
        "first_errors": errors[:5],
        "server_cpu_ms_per_request": round(cpu / len(latencies) * 1000, 2),
        "peak_rss_server_mb": round(memory.peak["server"]),
        "peak_rss_training_worker_mb": round(memory.peak["worker"]),
        "training_ran_throughout": still_training,
        "cpu_count": os.cpu_count(),
    }
    report(args, result, markdown)
    if errors:
        print("errors, first 5:", *errors[:5], sep="\n  ")
    return 0


def _tree_cpu(pid: int) -> float:
    """CPU seconds of the server: the master and its workers."""
    return sum(cpu_seconds(member) for member in process_tree(pid))


def markdown(result: dict) -> str:
    worker = result.get("worker_class", "gthread").rsplit(".", 1)[-1]
    header = (
        f"/predict of {result['tasks_per_request']} stored tasks, {result['concurrency']} "
        f"clients, gunicorn {result['gunicorn_workers']}x{result['gunicorn_threads']} "
        f"({worker} workers), a training running throughout: "
        f"{result['training_ran_throughout']}, {result['cpu_count']} CPUs"
    )
    if result.get("slow_clients"):
        header += (
            f"; {result['slow_clients']} slow clients open throughout "
            f"({result['slow_clients_open_at_end']} still open at the end)"
        )
    row = [result[key] for key in COLUMNS.values()]
    row[-2:] = [f"{mb} MiB" for mb in row[-2:]]
    lines = table(list(COLUMNS), [row], align="r" * len(COLUMNS))
    return document([header, "", *lines], result)


if __name__ == "__main__":
    sys.exit(main())
