"""A project's job inbox: what waits to be done, ``MODEL_DIR/<project>/inbox.json``, apart from
the status the UI reads (``status.json``) and the ledger of versions written to Label Studio.

What waits (:class:`Inbox`): the tasks whose changes wait for a rescore with the version serving
now (``rescore_pending``) and for a training that read the annotations before them
(``changed_since_fetch``), the slips whose repeats wait to be rewritten as served by the next
rescore (``slips_pending``: a training's rescored tasks, or a failed rescore's), and the noise
kinds a self-test was asked for (``selftest_request``). Each maps a task (or slip) to when it
came.

This module is the file's one writer. The store (:class:`backend.store.store.ProjectStore`)
changes the inbox as it changes the status, under the same lock and with the same full-disk
buffer (:mod:`backend.store.unwritten`: an annotation event's tasks land here): it reads the two
files as one (:func:`merged`), and writes each its own keys (:func:`split`, :func:`write`), the
inbox first, so that a change a full disk kept and applies again lands twice only where landing
twice changes nothing (the inbox's merges), never in the status's counters.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path

from subregweigh.io.atomic import atomic_write_json

FILE = "inbox.json"


@dataclass(frozen=True)
class Inbox:
    """What waits to be done for one project.

    Attributes
    ----------
    rescore_pending : dict
        Task id -> when its change arrived: the next rescore scores it with the version serving.
    changed_since_fetch : dict
        Task id -> when its change arrived while a training ran: rescored after that training.
    slips_pending : dict
        ``"word\\0type"`` slip -> 1: the next rescore rewrites the tasks repeating it as served.
    selftest_request : dict or None
        ``{"noises", "at"}`` of the last ``POST /selftest``; None: the annotators' mix.
    """

    rescore_pending: Mapping = field(default_factory=dict)
    changed_since_fetch: Mapping = field(default_factory=dict)
    slips_pending: Mapping = field(default_factory=dict)
    selftest_request: Mapping | None = None

    @classmethod
    def of(cls, values: Mapping) -> Inbox:
        """The inbox in ``values`` (the inbox's keys of a status or of inbox.json; a value of
        the wrong kind reads as empty)."""
        kept = {k: dict(v) for k, v in values.items() if k in KEYS and isinstance(v, dict)}
        return cls(**kept)


KEYS = frozenset(f.name for f in fields(Inbox))


def read(root: Path) -> dict:
    """inbox.json of the project directory ``root``: its keys ({} when there is none or it is
    unreadable)."""
    try:
        value = json.loads((root / FILE).read_text())
    except (FileNotFoundError, ValueError, OSError):
        return {}
    return {k: v for k, v in value.items() if k in KEYS} if isinstance(value, dict) else {}


def merged(root: Path, status: dict) -> dict:
    """``status`` (status.json as read) with the inbox's keys from inbox.json; those a
    status.json written before the inbox still holds are read as the inbox's until its next
    write moves them."""
    return {**status, **read(root)}


def split(status: dict) -> tuple[dict, dict]:
    """``(status without the inbox's keys, the inbox's keys that hold something)``."""
    rest = {k: v for k, v in status.items() if k not in KEYS}
    inbox = {k: v for k, v in status.items() if k in KEYS and v}
    return rest, inbox


def write(root: Path, inbox: dict) -> None:
    """Make ``inbox`` (:func:`split`'s) inbox.json, atomically; nothing is written when it holds
    that already (an OSError, a full disk's included, reaches the caller)."""
    if read(root) == inbox and ((root / FILE).exists() or not inbox):
        return
    atomic_write_json(root / FILE, inbox)
