"""A per-process cache of what is made of a version's stored scores (:class:`ScoresView`)."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from backend.store.unwritten import unwritten_projects

if TYPE_CHECKING:
    from backend.store.store import ProjectStore


class ScoresView:
    """What ``build(scores)`` makes of a version's stored scores, kept per process until its
    scores.json changes (the ``limit`` most recently used versions): a project of 14,000 NER
    tasks stores 17 MiB of scores, which take about a second to parse, and a webhook or a
    rescore should not pay that every time. While a full disk keeps the project's writes in
    this process's memory, the view is built afresh on each call."""

    def __init__(self, build: Callable[[dict], Any], limit: int):
        self.build, self.limit = build, limit
        self._cache: OrderedDict[str, tuple[tuple, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, store: ProjectStore, version: str):
        path = store.versions / version / "scores.json"
        held = os.path.abspath(store.root) in unwritten_projects()
        try:
            st = path.stat()
            stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            stamp = None
        with self._lock:
            hit = self._cache.get(str(path))
            if hit is not None and hit[0] == stamp and not held:
                self._cache.move_to_end(str(path))
                return hit[1]
        value = self.build(store.scores(version))
        if stamp is not None and not held:  # read after the stat: a newer file only reloads
            with self._lock:
                self._cache[str(path)] = (stamp, value)
                while len(self._cache) > self.limit:
                    self._cache.popitem(last=False)
        return value
