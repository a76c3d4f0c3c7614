"""Background training: at most one running and one pending job per project.

Two runners with one interface (``submit(project) -> str``, ``state(project) -> str``), both
built around a job, a callable ``job(project)`` that carries everything else it needs (the
server's :func:`~backend.web.server.create_app` binds :mod:`backend.jobs.training`'s training to its
settings):

* :class:`ThreadRunner` (no Redis, the embedded default): a thread per busy project inside the
  server process; a file lock per project under MODEL_DIR keeps two gunicorn workers from
  training one project at once, and tells every worker that a training runs.
* :class:`RQRunner` (``REDIS_URL`` set): rq jobs on a queue of our own name; ``rq worker``
  processes, on this machine or others sharing MODEL_DIR and Redis, run them. The job goes
  pickled, so it must be a module-level function or a :func:`functools.partial` of one, with
  plain arguments. A per-project Redis lock keeps two workers from training the same project
  at once.

A storm of events collapses: while a job is pending, further submissions are no-ops; while one
runs, one more may wait behind it (it will see every annotation made meanwhile).

A runner runs one ``kind`` of job: ``"training"``, or another (the backend's ``"selftest"``)
with locks and pending markers of its own, so that a self-test neither waits for a training
nor reads as one.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

logger = logging.getLogger(__name__)

QUEUED, RUNNING, IDLE, UNKNOWN = "queued", "running", "idle", "unknown"


class JobQueueUnavailable(RuntimeError):
    """The job queue (Redis) cannot be reached; the message says where and why."""


TRAINING = "training"  # the job kind of a runner; another kind (a self-test) has its own locks


def _training_lock_path(model_dir: str | os.PathLike, project: str, kind: str = TRAINING) -> Path:
    return Path(model_dir) / project / f".{kind}.lock"


class ThreadRunner:
    """Runs ``job(project)`` in background threads inside this process.

    With ``model_dir``, each run holds an exclusive ``flock`` on ``<model_dir>/<project>/
    .training.lock``: trainings of one project started by different processes (gunicorn workers)
    run one after the other, and :meth:`state` sees a training of any of them. The kernel drops
    the lock when a process dies, so a killed worker's training reads as not running.
    """

    def __init__(
        self,
        job: Callable[[str], object],
        model_dir: str | os.PathLike | None = None,
        kind: str = TRAINING,
    ):
        self.job = job
        self.model_dir = model_dir
        self.kind = kind
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
        threading.Thread(
            target=self._run, args=(project,), name=f"{self.kind}-{project}", daemon=True
        ).start()

    @contextlib.contextmanager
    def _exclusive(self, project: str):
        if self.model_dir is None:
            yield
            return
        path = _training_lock_path(self.model_dir, project, self.kind)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)  # waits for another process's training
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _locked_elsewhere(self, project: str) -> bool:
        path = (
            _training_lock_path(self.model_dir, project, self.kind)
            if self.model_dir is not None
            else None
        )
        if path is None or not path.exists():
            return False
        with open(path, "a") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(handle, fcntl.LOCK_UN)
            return False

    def _run(self, project: str) -> None:
        try:
            with self._exclusive(project):
                self.job(project)
        except Exception:  # the job records its own error; keep the runner alive
            logger.exception("project %s: %s job failed", project, self.kind)
        finally:
            with self._lock:
                self._running.discard(project)
                if project in self._pending:
                    self._start(project)

    def state(self, project: str) -> str:
        with self._lock:
            if project in self._running:
                return RUNNING
            if project in self._pending:
                return QUEUED
        return RUNNING if self._locked_elsewhere(project) else IDLE

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


def _pending_key(queue: str, project: str, kind: str = TRAINING) -> str:
    return f"{queue}:pending:{project}" if kind == TRAINING else f"{queue}:{kind}:pending:{project}"


def _lock_key(queue: str, project: str, kind: str = TRAINING) -> str:
    return f"{queue}:{kind}:{project}"


LOCK_SECONDS = 60  # a killed worker's lock expires this soon; a live one keeps extending it


def run_queued_job(
    job: Callable[[str], object],
    queue: str,
    redis_url: str,
    project: str,
    wait_seconds: int,
    lock_seconds: int = LOCK_SECONDS,
    kind: str = TRAINING,
) -> object:
    """What an rq worker executes: take the project's lock, clear "pending", run the job."""
    from redis import Redis

    redis = Redis.from_url(redis_url)
    # thread_local=False: the heartbeat thread must see the token the job's thread acquired.
    lock = redis.lock(
        _lock_key(queue, project, kind),
        timeout=lock_seconds,
        blocking_timeout=wait_seconds,
        thread_local=False,
    )
    if not lock.acquire():
        raise TimeoutError(f"project {project}: another {kind} held the lock for {wait_seconds} s")
    stop = threading.Event()

    def heartbeat():
        while not stop.wait(lock_seconds / 3):
            try:
                lock.extend(lock_seconds, replace_ttl=True)
            except Exception as err:  # Redis away for a moment: try again next beat
                logger.warning("project %s: could not extend the training lock: %s", project, err)

    beat = threading.Thread(target=heartbeat, daemon=True)
    beat.start()
    try:
        # From here on a new event may queue one more training, which waits for this lock.
        redis.delete(_pending_key(queue, project, kind))
        return job(project)
    finally:
        stop.set()
        beat.join()
        with contextlib.suppress(Exception):  # expired or Redis away: the TTL frees it anyway
            lock.release()


def redis_location(redis_url: str) -> str:
    """``host:port/db`` of a Redis URL, without credentials (for messages)."""
    from urllib.parse import urlsplit

    parts = urlsplit(redis_url)
    return f"{parts.hostname}:{parts.port or 6379}{parts.path or ''}"


class RQRunner:
    """Enqueues ``job`` (a picklable callable, called with the project id) on rq.

    Redis errors become :class:`JobQueueUnavailable` (the server answers 503) on submit, and
    ``"unknown"`` from :meth:`state`; nothing is lost: the next event submits again.
    """

    def __init__(
        self,
        job: Callable[[str], object],
        redis_url: str,
        queue: str = "subregweigh",
        job_timeout: int = 6 * 3600,
        lock_seconds: int = LOCK_SECONDS,
        kind: str = TRAINING,
    ):
        from redis import Redis
        from rq import Queue

        self.job = job
        self.kind = kind
        self.redis_url = redis_url
        self.queue_name = queue
        self.job_timeout = job_timeout
        self.lock_seconds = lock_seconds
        self.redis = Redis.from_url(redis_url, socket_connect_timeout=5, socket_timeout=30)
        self.queue = Queue(queue, connection=self.redis)

    @contextlib.contextmanager
    def _redis(self, doing: str):
        from redis.exceptions import RedisError

        try:
            yield
        except RedisError as err:
            raise JobQueueUnavailable(
                f"cannot {doing}: the job queue (Redis at {redis_location(self.redis_url)}) is "
                f"unavailable: {type(err).__name__}: {str(err)[:200]}"
            ) from None

    def _pending_job_dead(self, key: str) -> bool:
        """A pending marker whose job no longer exists or ended without running (worker gone)."""
        from rq.job import Job, JobStatus

        job_id = self.redis.get(key)
        if not job_id or job_id == b"starting":  # being enqueued right now
            return False
        try:
            status = Job.fetch(job_id.decode(), connection=self.redis).get_status()
        except Exception:  # NoSuchJobError, or a marker from an older release
            return True
        return status in {JobStatus.FAILED, JobStatus.STOPPED, JobStatus.CANCELED, None}

    def submit(self, project: str) -> str:
        key = _pending_key(self.queue_name, project, self.kind)
        with self._redis(f"queue a {self.kind} of project {project}"):
            if self.redis.exists(key) and self._pending_job_dead(key):
                logger.warning(
                    "project %s: the queued %s's job died before it started; queueing a new one",
                    project,
                    self.kind,
                )
                self.redis.delete(key)
            if not self.redis.set(key, "starting", nx=True, ex=60):
                return "already queued"
            job = self.queue.enqueue(
                run_queued_job,
                self.job,
                self.queue_name,
                self.redis_url,
                project,
                self.job_timeout,
                self.lock_seconds,
                self.kind,
                job_timeout=self.job_timeout + 60,
                result_ttl=86400,
                failure_ttl=7 * 86400,
                description=f"subregweigh {self.kind} of project {project}",
            )
            self.redis.set(
                key, job.id, xx=True, ex=self.job_timeout
            )  # no-op once a worker started it
        return "queued"

    def state(self, project: str) -> str:
        try:
            if self.redis.exists(_lock_key(self.queue_name, project, self.kind)):
                return RUNNING
            pending = _pending_key(self.queue_name, project, self.kind)
            return QUEUED if self.redis.exists(pending) else IDLE
        except Exception as err:  # RedisError; /status and /is_training must still answer
            logger.warning(
                "project %s: job state unknown: Redis at %s: %s",
                project,
                redis_location(self.redis_url),
                type(err).__name__,
            )
            return UNKNOWN
