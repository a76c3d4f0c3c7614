"""backend.queue.runners: at most one running and one pending training per project."""

from __future__ import annotations

import threading
import time

import pytest

from backend.queue.runners import IDLE, QUEUED, RUNNING, RQRunner, ThreadRunner


class BlockingJob:
    """Counts executions and concurrency; each run waits for ``release`` (set it to let runs go)."""

    def __init__(self):
        self.release = threading.Event()
        self.started = threading.Semaphore(0)
        self.lock = threading.Lock()
        self.runs: list[str] = []
        self.active = 0
        self.max_active = 0

    def __call__(self, project):
        with self.lock:
            self.runs.append(project)
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        self.started.release()
        try:
            assert self.release.wait(10), "test never released the job"
        finally:
            with self.lock:
                self.active -= 1


def _wait_until(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def test_storm_of_submits_collapses_to_one_running_one_pending():
    job = BlockingJob()
    runner = ThreadRunner(job)
    assert runner.state("1") == IDLE
    assert runner.submit("1") == "started"
    assert job.started.acquire(timeout=5)
    assert runner.state("1") == RUNNING

    outcomes = []
    outcomes_lock = threading.Lock()

    def storm():
        for _ in range(5):
            out = runner.submit("1")
            with outcomes_lock:
                outcomes.append(out)

    threads = [threading.Thread(target=storm) for _ in range(4)]  # 20 submits from 4 threads
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert len(outcomes) == 20
    assert outcomes.count("queued behind the running training") == 1
    assert outcomes.count("already queued") == 19

    # Exactly one running, at most one pending.
    assert runner._running == {"1"}
    assert runner._pending == {"1"}
    assert runner.state("1") == RUNNING
    assert job.runs == ["1"]

    job.release.set()
    assert runner.wait(timeout=5)
    assert job.runs == ["1", "1"]  # the pending one ran once, after the first
    assert job.max_active == 1
    assert runner.state("1") == IDLE
    assert runner._running == set() and runner._pending == set()


def test_states_running_then_idle():
    job = BlockingJob()
    runner = ThreadRunner(job)
    seen = [runner.state("5")]
    runner.submit("5")
    assert job.started.acquire(timeout=5)
    seen.append(runner.state("5"))
    job.release.set()
    assert runner.wait(timeout=5)
    seen.append(runner.state("5"))
    assert seen == [IDLE, RUNNING, IDLE]


def test_projects_run_independently():
    job = BlockingJob()
    runner = ThreadRunner(job)
    assert runner.submit("1") == "started"
    assert runner.submit("2") == "started"
    assert job.started.acquire(timeout=5) and job.started.acquire(timeout=5)
    assert runner.state("1") == RUNNING and runner.state("2") == RUNNING
    assert runner.state("3") == IDLE
    job.release.set()
    assert runner.wait(timeout=5)
    assert sorted(job.runs) == ["1", "2"]


def test_failing_job_keeps_runner_usable(caplog):
    calls = []

    def job(project):
        calls.append(project)
        if len(calls) == 1:
            raise RuntimeError("boom")

    runner = ThreadRunner(job)
    with caplog.at_level("ERROR", logger="backend.queue.runners"):
        assert runner.submit("7") == "started"
        assert runner.wait(timeout=5)
    assert runner.state("7") == IDLE
    assert "project 7: training job failed" in caplog.text and "boom" in caplog.text

    assert runner.submit("7") == "started"
    assert runner.wait(timeout=5)
    assert calls == ["7", "7"]
    assert runner.state("7") == IDLE


def test_failing_job_with_pending_still_runs_the_pending_one():
    release = threading.Event()
    started = threading.Event()
    calls = []

    def job(project):
        calls.append(project)
        if len(calls) == 1:
            started.set()
            release.wait(5)
            raise ValueError("first fails")

    runner = ThreadRunner(job)
    runner.submit("8")
    assert started.wait(5)
    assert runner.submit("8") == "queued behind the running training"
    assert runner.state("8") == RUNNING
    release.set()
    assert runner.wait(timeout=5)
    assert calls == ["8", "8"]


def test_wait_times_out_while_running():
    job = BlockingJob()
    runner = ThreadRunner(job)
    runner.submit("1")
    assert job.started.acquire(timeout=5)
    assert runner.wait(timeout=0.2) is False
    job.release.set()
    assert runner.wait(timeout=5) is True


# ----------------------------------------------------------------------------- RQRunner


@pytest.fixture(scope="module")
def redis_server():
    from testbed.servers import RedisServer, require_redis

    require_redis()  # skips locally, fails under CI=true
    with RedisServer() as server:
        yield server


def test_rq_runner_submit_twice(redis_server):
    runner = RQRunner(
        "tests.backend.test_backend_jobs:_never_called", redis_server.url, queue="srw-test-jobs"
    )
    assert runner.state("4") == IDLE
    assert runner.submit("4") == "queued"
    assert runner.state("4") == QUEUED
    assert runner.submit("4") == "already queued"
    assert runner.state("4") == QUEUED
    assert len(runner.queue) == 1  # one job waiting, no worker here
    job = runner.queue.jobs[0]
    assert job.args[0] == "tests.backend.test_backend_jobs:_never_called"
    assert job.args[1] == "srw-test-jobs" and job.args[3] == "4"

    # Another project is independent.
    assert runner.submit("5") == "queued"
    assert len(runner.queue) == 2
    assert runner.state("6") == IDLE


def test_rq_runner_state_running_while_lock_held(redis_server):
    runner = RQRunner(_never_called, redis_server.url, queue="srw-test-lock")
    runner.redis.set("srw-test-lock:training:9", "token", ex=30)
    assert runner.state("9") == RUNNING
    runner.redis.delete("srw-test-lock:training:9")
    assert runner.state("9") == IDLE


def test_rq_runners_on_other_queues_do_not_collide(redis_server):
    a = RQRunner(_never_called, redis_server.url, queue="srw-test-a")
    b = RQRunner(_never_called, redis_server.url, queue="srw-test-b")
    assert a.submit("1") == "queued"
    assert b.submit("1") == "queued"
    assert b.state("1") == QUEUED


def _never_called(project):  # pragma: no cover - no worker runs in these tests
    raise AssertionError("no worker should run this")


def slow_job(project):
    """A job for run_queued_job (pickled by reference, as rq sends it to a worker)."""
    time.sleep(3.0)
    return project


def test_queued_job_keeps_its_lock_beyond_the_lock_ttl(redis_server):
    """The heartbeat extends the lock from another thread: with a 1 s TTL, a 3 s job must read as
    running throughout, or the server would declare it dead."""
    from backend.queue.runners import run_queued_job

    runner = RQRunner(slow_job, redis_server.url, queue="srw-test-beat", lock_seconds=1)
    job = threading.Thread(
        target=run_queued_job, args=(runner.job, "srw-test-beat", redis_server.url, "4", 10, 1)
    )
    job.start()
    time.sleep(0.3)
    states = []
    while job.is_alive():
        states.append(runner.state("4"))
        time.sleep(0.1)
    assert len(states) > 20 and set(states[:-2]) == {RUNNING}, states
    assert runner.state("4") == IDLE


def test_rq_runners_of_two_kinds_on_one_queue(redis_server):
    """A self-test and a training of one project queue side by side, each with its own pending
    marker and lock, as the server's two runners do on the one queue its workers serve."""
    from functools import partial

    from backend.jobs import selftest

    trainings = RQRunner(_never_called, redis_server.url, queue="srw-test-kinds")
    selftests = RQRunner(
        partial(selftest.run_queued_selftest, training={"k": 3}),
        redis_server.url,
        queue="srw-test-kinds",
        kind="selftest",
    )
    assert selftests.submit("3") == "queued"
    assert (selftests.state("3"), trainings.state("3")) == (QUEUED, IDLE)
    assert trainings.submit("3") == "queued"
    assert selftests.submit("3") == "already queued"
    assert len(selftests.queue) == 2
    job = selftests.queue.jobs[0]
    assert job.args[0].func is selftest.run_queued_selftest  # pickled by reference
    assert job.args[-1] == "selftest" and "selftest of project 3" in job.description
    selftests.redis.set("srw-test-kinds:selftest:3", "token", ex=30)  # a worker holds its lock
    assert (selftests.state("3"), trainings.state("3")) == (RUNNING, QUEUED)
