"""Background training: at most one running and one pending job per project.

Two runners with one interface (``submit(project) -> str``, ``state(project) -> str``):

* :class:`ThreadRunner` (no Redis, the embedded default): a thread per busy project inside the
  server process.
* :class:`RQRunner` (``REDIS_URL`` set): rq jobs on a queue of our own name; ``rq worker``
  processes, on this machine or others sharing MODEL_DIR and Redis, run them. A per-project
  Redis lock keeps two workers from training the same project at once.

A storm of events collapses: while a job is pending, further submissions are no-ops; while one
runs, one more may wait behind it (it will see every annotation made meanwhile).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

logger = logging.getLogger(__name__)

QUEUED, RUNNING, IDLE = "queued", "running", "idle"


class ThreadRunner:
    """Runs ``job(project)`` in background threads inside this process."""

    def __init__(self, job: Callable[[str], object]):
        self.job = job
        self._lock = threading.Lock()
        self._running: set[str] = set()
        self._pending: set[str] = set()

    def submit(self, project: str) -> str:
        with self._lock:
            if project in self._pending:
                return "already queued"
            self._pending.add(project)
            if project in self._running:
                return "queued behind the running training"
            self._start(project)
            return "started"

    def _start(self, project: str) -> None:
        self._pending.discard(project)
        self._running.add(project)
        threading.Thread(target=self._run, args=(project,), name=f"train-{project}", daemon=True).start()

    def _run(self, project: str) -> None:
        try:
            self.job(project)
        except Exception:  # the job records its own error; keep the runner alive
            logger.exception("project %s: training job failed", project)
        finally:
            with self._lock:
                self._running.discard(project)
                if project in self._pending:
                    self._start(project)

    def state(self, project: str) -> str:
        with self._lock:
            if project in self._running:
                return RUNNING
            return QUEUED if project in self._pending else IDLE

    def wait(self, timeout: float | None = None) -> bool:
        """Block until no job runs (tests and shutdown); True if idle."""
        import time

        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                if not self._running and not self._pending:
                    return True
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(0.1)


def _pending_key(queue: str, project: str) -> str:
    return f"{queue}:pending:{project}"


def _lock_key(queue: str, project: str) -> str:
    return f"{queue}:training:{project}"


LOCK_SECONDS = 60  # a killed worker's lock expires this soon; a live one keeps extending it


def run_queued_job(job_path: str, queue: str, redis_url: str, project: str, wait_seconds: int) -> object:
    """What an rq worker executes: take the project's lock, clear "pending", run the job."""
    import importlib

    from redis import Redis

    redis = Redis.from_url(redis_url)
    lock = redis.lock(_lock_key(queue, project), timeout=LOCK_SECONDS, blocking_timeout=wait_seconds)
    if not lock.acquire():
        raise TimeoutError(f"project {project}: another training held the lock for {wait_seconds} s")
    stop = threading.Event()

    def heartbeat():
        while not stop.wait(LOCK_SECONDS / 3):
            lock.extend(LOCK_SECONDS, replace_ttl=True)

    beat = threading.Thread(target=heartbeat, daemon=True)
    beat.start()
    try:
        # From here on a new event may queue one more training, which waits for this lock.
        redis.delete(_pending_key(queue, project))
        module, _, name = job_path.partition(":")
        return getattr(importlib.import_module(module), name)(project)
    finally:
        stop.set()
        beat.join()
        lock.release()


class RQRunner:
    """Enqueues ``job_path`` (``"module:function"``, called with the project id) on rq."""

    def __init__(self, job_path: str, redis_url: str, queue: str = "subregweigh", job_timeout: int = 6 * 3600):
        from redis import Redis
        from rq import Queue

        self.job_path = job_path
        self.redis_url = redis_url
        self.queue_name = queue
        self.job_timeout = job_timeout
        self.redis = Redis.from_url(redis_url)
        self.queue = Queue(queue, connection=self.redis)

    def submit(self, project: str) -> str:
        if not self.redis.set(_pending_key(self.queue_name, project), "1", nx=True, ex=self.job_timeout):
            return "already queued"
        self.queue.enqueue(
            run_queued_job, self.job_path, self.queue_name, self.redis_url, project, self.job_timeout,
            job_timeout=self.job_timeout + 60, result_ttl=86400, failure_ttl=7 * 86400,
            description=f"subregweigh training of project {project}",
        )
        return "queued"

    def state(self, project: str) -> str:
        if self.redis.exists(_lock_key(self.queue_name, project)):
            return RUNNING
        return QUEUED if self.redis.exists(_pending_key(self.queue_name, project)) else IDLE
