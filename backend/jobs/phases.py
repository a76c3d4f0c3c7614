"""Where a job's time goes: wall seconds per phase, for its status and its log."""

from __future__ import annotations

import time


class PhaseClock:
    """Wall seconds per phase of a training or a refresh, e.g. ``{"fetch": 1.2, "train": 40.1,
    ...}``: kept in the project's status so a slow one says where its time went."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, phase: str) -> None:
        """The time since the last lap goes to ``phase`` (added to what it had)."""
        now = time.perf_counter()
        self.seconds[phase] = round(self.seconds.get(phase, 0.0) + now - self._last, 3)
        self._last = now

    def total(self) -> float:
        return round(sum(self.seconds.values()), 3)

    def __str__(self) -> str:
        return ", ".join(f"{phase} {s:.1f} s" for phase, s in self.seconds.items())
