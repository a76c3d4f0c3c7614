"""A fitted weigher's parts: its scouts and its CRF, the folder that keeps them, and the weigher of
the CRF alone.

The one folder layout, for the CLI (``--save-scout``, ``--scout``) and the Label Studio backend
(each version's folder) alike::

    FOLDER/scout/          the first scout (Scout.save): the one that predicts the K candidates
    FOLDER/scout-1/, ...   the others of an ensemble
    FOLDER/crf.npz         the CRF (NER with crf=True; subregweigh.crf.crf_path)
    FOLDER/memory.json     the project's memory (NER with memory_strength; subregweigh.memory)
    FOLDER/learned.json    what the scouts learned of their training annotations (NER;
                           subregweigh.learned)

:func:`save_parts` writes it, :func:`load_parts` reads it back;
:meth:`subregweigh.weigh.SubRegWeigh.save` and :meth:`~subregweigh.weigh.SubRegWeigh.load` are
the usual way in. A folder with a CRF and no scout is a :class:`CRFWeigher`'s.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

from subregweigh.crf import FeatureTagger, crf_path
from subregweigh.example import Example
from subregweigh.learned import Learned, learned_in, learned_path
from subregweigh.memory import WordMemory, memory_path, remember
from subregweigh.options import DEFAULT_W_MIN, SOFTMIN_TEMPERATURE
from subregweigh.scores import WeighResult, deterministic_result
from subregweigh.scout import STATE_FILE, Scout

FIRST_SCOUT = "scout"


def scout_folder(folder: str | os.PathLike, member: int = 0) -> Path:
    """Where scout ``member`` of the weigher kept in ``folder`` is: the first in ``scout``, the
    others in ``scout-1``, ``scout-2``..."""
    return Path(folder) / (FIRST_SCOUT if member == 0 else f"{FIRST_SCOUT}-{member}")


def saved_scouts(folder: str | os.PathLike) -> int:
    """How many scouts ``folder`` keeps (an ensemble's, one, or none)."""
    n = 0
    while scout_folder(folder, n).is_dir():
        n += 1
    return n


def save_parts(
    folder: str | os.PathLike,
    scouts: Sequence[Scout],
    crf: FeatureTagger | None,
    memory: WordMemory | None = None,
    learned: Learned | None = None,
) -> Path:
    """Write ``scouts``, ``crf``, ``memory`` and ``learned`` (each may be None) into ``folder``
    (made if missing) in the layout above; the parts of an earlier save that these do not
    replace go. Each part is written atomically; other files in ``folder`` stay."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for j, scout in enumerate(scouts):
        scout.save(scout_folder(folder, j))
    if crf is not None:
        crf.save(crf_path(folder))
    stale = len(scouts)
    while scout_folder(folder, stale).is_dir():
        shutil.rmtree(scout_folder(folder, stale))
        stale += 1
    if crf is None:
        crf_path(folder).unlink(missing_ok=True)
    for part, path in ((memory, memory_path(folder)), (learned, learned_path(folder))):
        if part is not None:
            part.save(path)
        else:
            path.unlink(missing_ok=True)
    return folder


class Parts(NamedTuple):
    """A weigher's fitted parts as :func:`load_parts` reads them (None: not kept)."""

    scouts: list[Scout]
    crf: FeatureTagger | None
    memory: WordMemory | None
    learned: Learned | None


def load_parts(
    folder: str | os.PathLike,
    *,
    crf: bool = True,
    device: str | None = None,
    progress: bool = True,
) -> Parts:
    """The :class:`Parts` :func:`save_parts` wrote into ``folder``
    (``crf=False``: the CRF is not read; None where a part is not kept). Raises
    FileNotFoundError, naming ``folder``, when it keeps neither a scout nor a CRF."""
    folder = Path(folder)
    scouts = [
        Scout.load(scout_folder(folder, j), device=device, progress=progress)
        for j in range(saved_scouts(folder))
    ]
    tagger = FeatureTagger.load(crf_path(folder)) if crf and crf_path(folder).is_file() else None
    if not scouts and tagger is None:
        if (folder / STATE_FILE).is_file():
            raise FileNotFoundError(
                f"{folder} is a saved scout (Scout.save), not a saved weigher: a weigher keeps "
                f"its first scout in {scout_folder(folder)}"
            )
        kept = "no scout" if crf_path(folder).is_file() else "neither a scout nor a CRF"
        raise FileNotFoundError(
            f"{folder} is not a saved weigher: it keeps {kept} "
            f"(expected {scout_folder(folder)}/ or {crf_path(folder).name})"
        )
    memory = memory_path(folder)
    return Parts(
        scouts, tagger, WordMemory.load(memory) if memory.is_file() else None, learned_in(folder)
    )


class CRFWeigher:
    """A NER weigher of a fitted CRF alone, no scout: what
    ``SubRegWeigh.from_parts([], crf)`` gives (:meth:`subregweigh.weigh.SubRegWeigh.from_parts`),
    e.g. early scores while the scouts train.

    With no scout there are no K candidates: :meth:`weigh` is :meth:`weigh_deterministic`, the
    CRF's p(gold) of each word (the "deterministic" score) and its own tags as the prediction.

    Parameters
    ----------
    crf : FeatureTagger
        Fitted.
    w_min, softmin_temperature, progress, memory_strength :
        As :class:`~subregweigh.weigh.SubRegWeigh`'s.
    memory : WordMemory or None, default=None
        With ``memory_strength``: the project's memory (None: each weighing's own examples').
    """

    task = "ner"
    rests_on_crf_ = False  # it is the CRF: nothing to rest on (SubRegWeigh.rests_on_crf_)
    learned_: Learned | None = None  # no scout learned anything (SubRegWeigh.learned_)

    def __init__(
        self,
        crf: FeatureTagger,
        w_min: float = DEFAULT_W_MIN,
        softmin_temperature: float = SOFTMIN_TEMPERATURE,
        progress: bool = True,
        memory_strength: float = 0.0,
        memory: WordMemory | None = None,
    ):
        if not isinstance(crf, FeatureTagger):
            raise TypeError(f"crf must be a fitted FeatureTagger, got {crf!r}")
        self.crf_ = crf
        self.scouts_: list[Scout] = []
        self.w_min = w_min
        self.softmin_temperature = softmin_temperature
        self.progress = progress
        self.memory_strength = memory_strength
        self.memory_ = memory if memory_strength else None

    def weigh_deterministic(self, examples: Sequence[Example]) -> WeighResult:
        """The CRF's prediction of each example and its p(gold), as
        :meth:`~subregweigh.weigh.SubRegWeigh.weigh_deterministic`
        computes them for scouts. With ``memory_strength``, from the CRF's marginals updated by
        the project's memory (:func:`subregweigh.memory.remember`): p(gold) and the most
        probable tag of each word."""
        if self.memory_strength:
            return self._remembered(examples)
        predicted = self.crf_.predict(examples)  # the encoder's pass, reused by the next two
        gold_proba = self.crf_.gold_proba(examples)
        predicted_proba = self.crf_.tag_proba(examples, predicted)
        return deterministic_result(
            examples,
            predicted,
            gold_proba,
            predicted_proba,
            "ner",
            self.w_min,
            self.softmin_temperature,
        )

    def _remembered(self, examples: Sequence[Example]) -> WeighResult:
        labels = sorted({*self.crf_.labels_, *(tag for ex in examples for tag in ex.label)})
        mixture = remember(
            examples,
            self.crf_.label_proba(examples, labels),
            labels,
            self.memory_strength,
            self.memory_,
        )
        index = {label: j for j, label in enumerate(labels)}
        gold_proba = [
            m[np.arange(len(ex.label)), [index[tag] for tag in ex.label]]
            for m, ex in zip(mixture, examples)
        ]
        best = [m.argmax(axis=1) for m in mixture]
        return deterministic_result(
            examples,
            [tuple(labels[j] for j in b) for b in best],
            gold_proba,
            [m[np.arange(len(b)), b] for m, b in zip(mixture, best)],
            "ner",
            self.w_min,
            self.softmin_temperature,
        )

    def weigh(self, examples: Sequence[Example]) -> WeighResult:
        """:meth:`weigh_deterministic`: no scout, no candidates."""
        return self.weigh_deterministic(examples)

    def save(self, folder: str | os.PathLike) -> Path:
        """Keep the CRF in ``folder`` (:func:`save_parts`); load it back with
        :meth:`~subregweigh.weigh.SubRegWeigh.load`."""
        return save_parts(folder, [], self.crf_, self.memory_)
