"""A file beside ``status.json`` that holds some of a project's state keys apart from the
status the UI reads: the job inbox (:mod:`backend.store.inbox`) and the ledger of written
versions (:mod:`backend.store.ledger`).

The store (:class:`backend.store.store.ProjectStore`) reads each such file over status.json
(:meth:`KeyFile.read`: a status.json written before the file still holds its keys, read as the
file's until the next write moves them) and writes each its own keys (:meth:`KeyFile.write`),
before status.json, under one lock and one full-disk buffer (:mod:`backend.store.unwritten`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from subregweigh.io.atomic import atomic_write_json


@dataclass(frozen=True)
class KeyFile:
    """``name`` (``inbox.json``) in a project directory, holding the state keys ``keys``."""

    name: str
    keys: frozenset[str]

    def read(self, root: Path) -> dict:
        """The file's keys in the project directory ``root`` ({} when there is none or it is
        unreadable)."""
        try:
            value = json.loads((root / self.name).read_text())
        except (FileNotFoundError, ValueError, OSError):
            return {}
        if not isinstance(value, dict):
            return {}
        return {k: v for k, v in value.items() if k in self.keys}

    def take(self, state: dict) -> dict:
        """Remove this file's keys from ``state`` (a status as the store changes it); those
        that hold something."""
        return {k: v for k in self.keys if k in state and (v := state.pop(k))}

    def write(self, root: Path, values: dict) -> None:
        """Make ``values`` (:meth:`take`'s) the file, atomically; nothing is written when it
        holds that already (an OSError, a full disk's included, reaches the caller)."""
        if self.read(root) == values and ((root / self.name).exists() or not values):
            return
        atomic_write_json(root / self.name, values)
