"""A project's ledger of the versions whose predictions this backend wrote to Label Studio,
``MODEL_DIR/<project>/ledger.json``, apart from the status the UI reads (``status.json``) and
the job inbox (``inbox.json``, :mod:`backend.store.inbox`).

:class:`Ledger` holds them in the order written (``written_versions``, the newest
:data:`KEPT`): what :func:`backend.serving.publish.drop_superseded_predictions` may delete from
Label Studio once a later version serves, so that a task shows one prediction of this backend,
and only versions this backend wrote are deleted. :mod:`backend.serving.publish` is its one
writer, through :meth:`backend.store.store.ProjectStore.update_ledger`; the store reads it
(:meth:`~backend.store.store.ProjectStore.ledger`) and writes it (:data:`FILE`) as it writes the
inbox, under the status's lock and full-disk buffer. A status.json written before the ledger
holds ``written_versions``: read as the ledger's until the next write moves it here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from backend.store.keyfile import KeyFile

KEPT = 100  # versions whose predictions this backend remembers writing, per project


@dataclass(frozen=True)
class Ledger:
    """The versions whose predictions this backend wrote to one project, oldest first.

    Attributes
    ----------
    written_versions : tuple of str
        Version names in the order their predictions were written, at most :data:`KEPT`; a
        version written again (served again after a broken one) appears again.
    """

    written_versions: tuple[str, ...] = ()

    @classmethod
    def of(cls, values: Mapping) -> Ledger:
        """The ledger in ``values`` (the ledger's key of a status or of ledger.json; a value
        of the wrong kind reads as empty)."""
        written = values.get("written_versions")
        if not isinstance(written, list | tuple):
            return cls()
        return cls(tuple(str(v) for v in written))

    def written(self, version: str) -> Ledger:
        """This ledger with ``version`` written last (the oldest dropped beyond :data:`KEPT`)."""
        return Ledger((*self.written_versions[-(KEPT - 1) :], version))

    def without(self, gone: Iterable[str]) -> Ledger:
        """This ledger without the versions ``gone`` (their predictions deleted)."""
        gone = set(gone)
        return Ledger(tuple(v for v in self.written_versions if v not in gone))

    def superseded_by(self, served: str) -> list[str]:
        """The versions other than ``served`` written before its last write, each once, oldest
        first: those it supersedes (a version served again, after a broken one, supersedes
        those between); [] when ``served`` is not in the ledger."""
        written = self.written_versions
        if served not in written:
            return []
        last = len(written) - 1 - written[::-1].index(served)
        return [v for v in dict.fromkeys(written[:last]) if v != served]


KEYS = frozenset({"written_versions"})
FILE = KeyFile("ledger.json", KEYS)
