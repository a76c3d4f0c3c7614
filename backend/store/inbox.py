"""A project's job inbox: what waits to be done, ``MODEL_DIR/<project>/inbox.json``, apart from
the status the UI reads (``status.json``) and the ledger of versions written to Label Studio.

What waits (:class:`Inbox`): the tasks whose changes wait for a rescore with the version serving
now (``rescore_pending``) and for a training that read the annotations before them
(``changed_since_fetch``), the slips whose repeats wait to be rewritten as served by the next
rescore (``slips_pending``: a training's rescored tasks, or a failed rescore's), and the noise
kinds a self-test was asked for (``selftest_request``). Each maps a task (or slip) to when it
came.

The store (:class:`backend.store.store.ProjectStore`) changes the inbox as it changes the status,
under the same lock and with the same full-disk buffer (:mod:`backend.store.unwritten`: an
annotation event's tasks land here), and writes it through :data:`FILE`
(:class:`backend.store.keyfile.KeyFile`) before status.json, so that a change a full disk kept
and applies again lands twice only where landing twice changes nothing (the inbox's merges),
never in the status's counters. It reads the inbox apart (:meth:`ProjectStore.inbox`);
its status (:meth:`ProjectStore.status`) carries none of these keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields

from backend.store.keyfile import KeyFile


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

    def waiting(self) -> dict:
        """The keys that hold something, key -> value: what ``/status`` shows of the inbox."""
        return {f.name: dict(value) for f in fields(self) if (value := getattr(self, f.name))}


KEYS = frozenset(f.name for f in fields(Inbox))
FILE = KeyFile("inbox.json", KEYS)
