"""What a NER weigher's scouts learned of the annotations they trained on, and whether that is
too little for their doubts to be read as the project's.

After a training, the scouts' own prediction of each training text (the most probable tag of
each word, averaged over the scouts, on the deterministic segmentation) is compared with its
annotation: of the annotated entities, how many it holds again exactly, per type
(:func:`subregweigh.metrics.entity_recall`). A scout that finds under
:data:`LEARNED_TOO_LITTLE` of them has collapsed: on a small or sparse project it predicts O
almost everywhere, so every entity looks doubtful and no missed entity can surface. The weigher
then rests its scores on the CRF with the project's memory
(:attr:`subregweigh.weigh.SubRegWeigh.rests_on_crf_`), and every place that shows the scores
says so (:meth:`Learned.message`).

A weigher keeps it as ``learned.json`` beside its parts (:mod:`subregweigh.parts`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from subregweigh.io.atomic import atomic_write_json
from subregweigh.metrics import entity_recall

LEARNED_FILE = "learned.json"

# Below this share of its training annotations' entities found again, a NER scout has learned
# too little of the project for its doubts to be read as its own. Between what the default
# scout finds on the tweets, 0.235 to 0.428 (300 and 788 tweets, both judgment slots, 3 seeds
# each), and on CoNLL, 0.660 (300 sentences) to 0.899 (1,000)
# (benchmarks/results/real-errors-*-crf-memory.json, "training_recall").
LEARNED_TOO_LITTLE = 0.5


@dataclass(frozen=True)
class LabelLearned:
    """Of the annotated entities of one type, how many the scouts found again."""

    label: str
    found: int
    total: int

    @property
    def recall(self) -> float:
        return self.found / self.total


@dataclass(frozen=True)
class Learned:
    """What the scouts learned of the entities of the annotations they trained on.

    Attributes
    ----------
    found, total : int
        Of the annotated entities (``total`` > 0), how many the scouts' prediction holds
        exactly (the same words, the same type).
    by_label : tuple of LabelLearned
        The same per entity type, lowest recall first.
    """

    found: int
    total: int
    by_label: tuple[LabelLearned, ...]

    @classmethod
    def of(
        cls, gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]
    ) -> Learned | None:
        """From the annotations' IOB2 tags and the scouts' tags of the same texts (sequence
        ``i`` of the same length in both); None when ``gold`` holds no entity."""
        counts = entity_recall(gold, predicted)
        if not counts:
            return None
        every = counts.pop("all")
        rows = (LabelLearned(label, c["found"], c["total"]) for label, c in counts.items())
        return cls(
            every["found"],
            every["total"],
            tuple(sorted(rows, key=lambda row: (row.recall, row.label))),
        )

    @classmethod
    def of_proba(
        cls, gold: Sequence[Sequence[str]], proba: Sequence[np.ndarray], labels: Sequence[str]
    ) -> Learned | None:
        """:meth:`of` the most probable tag of each word of ``proba`` (per text shape
        (n_words, len(labels)), columns in ``labels``' order: the scouts'
        :meth:`~subregweigh.weigh.SubRegWeigh.scout_proba`)."""
        predicted = [tuple(labels[j] for j in np.asarray(p).argmax(axis=1)) for p in proba]
        return cls.of(gold, predicted)

    @property
    def recall(self) -> float:
        return self.found / self.total

    @property
    def too_little(self) -> bool:
        """Whether the scouts found under :data:`LEARNED_TOO_LITTLE` of the entities."""
        return self.recall < LEARNED_TOO_LITTLE

    def message(self) -> str:
        """In words, for a status line, a report or a prediction's note."""
        told = (
            f"the scout finds {self.found} of the {self.total} entities of the annotations it "
            f"trained on ({self.recall:.0%})"
        )
        if not self.too_little:
            return told
        weakest = ", ".join(f"{r.label} {r.found} of {r.total}" for r in self.by_label[:3])
        return (
            f"{told}: it learned too little for its doubts to mean much ({weakest}), so the "
            "scores rest on the CRF and on how the rest of the project labels each word; "
            "annotate more tasks with entities, or train the scout longer (its epochs)"
        )

    def to_json(self) -> dict:
        """Plain JSON: ``found``, ``total``, ``recall``, ``too_little``, ``message`` and
        ``by_label`` (``[{"label", "found", "total", "recall"}]``, lowest recall first)."""
        return {
            "found": self.found,
            "total": self.total,
            "recall": self.recall,
            "too_little": self.too_little,
            "message": self.message(),
            "by_label": [
                {"label": r.label, "found": r.found, "total": r.total, "recall": r.recall}
                for r in self.by_label
            ],
        }

    @classmethod
    def from_json(cls, data: Mapping) -> Learned:
        """What :meth:`to_json` wrote (its derived keys are computed again)."""
        try:
            rows = tuple(
                LabelLearned(str(r["label"]), int(r["found"]), int(r["total"]))
                for r in data["by_label"]
            )
            learned = cls(int(data["found"]), int(data["total"]), rows)
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"not a Learned: {err!r}") from None
        if learned.total < 1 or not 0 <= learned.found <= learned.total:
            raise ValueError(f"not a Learned: found {learned.found} of {learned.total}")
        return learned

    def save(self, path: str | os.PathLike) -> Path:
        path = Path(path)
        atomic_write_json(path, self.to_json())
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> Learned:
        """What :meth:`save` wrote; ValueError naming ``path`` when it is not that."""
        try:
            return cls.from_json(json.loads(Path(path).read_text(encoding="utf-8")))
        except (ValueError, json.JSONDecodeError) as err:
            raise ValueError(f"{path}: {err}") from None


def learned_path(folder: str | os.PathLike) -> Path:
    """Where a weigher kept in ``folder`` keeps what its scouts learned."""
    return Path(folder) / LEARNED_FILE


def learned_in(folder: str | os.PathLike) -> Learned | None:
    """What the weigher kept in ``folder`` learned (:meth:`Learned.load`), None when it keeps
    none (classification, no annotated entity, or saved before it was measured)."""
    path = learned_path(folder)
    return Learned.load(path) if path.is_file() else None
