"""A training's budget of wall time and memory (SRW_TRAINING_SECONDS, SRW_TRAINING_MEMORY_MB).

A training runs in a thread of the server (embedded) or in an rq work horse, and may run for
as long as its settings and the project make it. :func:`within` watches it from a second
thread: once the training has run past its seconds, or its process has grown past its memory
beyond what it held at the start, the watcher raises :class:`BudgetExceeded` in the training's
thread. Python delivers it at the thread's next bytecode (between two of torch's operations, so
within one training step), and the training fails as any failing training does: its staging
directory is discarded, the status says why, and the last good version keeps serving.

The memory check samples the process's resident size once a second: it stops a training whose
memory grows, not a single allocation larger than the machine (the per-project limits,
SRW_PROJECT_LIMITS, bound what one step may ask for). The growth is the process's, so a
process trains one project at a time (:func:`training_slot`; the others wait their turn):
three projects training at once in one worker failed together, each charged the others'
memory (issue 58), where each alone passed.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import threading
import time
from collections.abc import Callable

logger = logging.getLogger(__name__)

CHECK_SECONDS = 1.0
# Trainings and self-tests one process runs at once: what its memory budget can tell apart.
TRAININGS_PER_PROCESS = 1
_slots = threading.BoundedSemaphore(TRAININGS_PER_PROCESS)


class BudgetExceeded(RuntimeError):
    """A training ran past its wall time or memory budget; the message says which."""


def resident_mb() -> float:
    """This process's resident memory in MB (0 where /proc is not readable)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _raise_in(thread_id: int) -> None:
    # Only a class can be sent; :func:`within` gives the exception its message.
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(BudgetExceeded)
    )


# What a job's status says while it waits for a slot (training_slot's on_wait).
WAITING = "waiting for another project's training in this process to finish"


@contextlib.contextmanager
def training_slot(on_wait: Callable[[], object] | None = None):
    """Run the ``with`` block as one of this process's :data:`TRAININGS_PER_PROCESS`
    trainings, waiting for a slot when all are taken (``on_wait`` is called first, to say so)."""
    if not _slots.acquire(blocking=False):
        if on_wait is not None:
            on_wait()
        _slots.acquire()
    try:
        yield
    finally:
        _slots.release()


@contextlib.contextmanager
def within(seconds: float, memory_mb: float, what: str = "the training"):
    """Run the ``with`` block (in the calling thread) within ``seconds`` of wall time and
    ``memory_mb`` MB of growth of the process's resident memory; past either,
    :class:`BudgetExceeded` is raised in it, naming the budget."""
    target = threading.get_ident()
    start, base = time.monotonic(), resident_mb()
    done = threading.Event()
    why: list[str] = []

    def watch():
        while not done.wait(CHECK_SECONDS):
            elapsed, grown = time.monotonic() - start, resident_mb() - base
            if elapsed > seconds:
                why.append(f"{what} ran past its budget of {seconds:g} s (SRW_TRAINING_SECONDS)")
            elif grown > memory_mb:
                why.append(
                    f"{what} grew by {grown:.0f} MB, past its budget of {memory_mb:g} MB "
                    "(SRW_TRAINING_MEMORY_MB)"
                )
            if why:
                logger.error("%s; stopping it", why[0])
                _raise_in(target)
                return

    watcher = threading.Thread(target=watch, name="training-budget", daemon=True)
    watcher.start()
    try:
        yield
    except BudgetExceeded:
        raise BudgetExceeded(why[0] if why else f"{what} ran past its budget") from None
    finally:
        done.set()
        watcher.join()
        if why:  # the block ended as the watcher fired: drop what was not delivered
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(target), None)
