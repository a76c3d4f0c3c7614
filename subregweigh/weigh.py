"""SubRegWeigh: weigh every example by how consistently scouts reproduce its label.

For each example, K segmentations are chosen out of N subword-regularized samples
(:mod:`subregweigh.selection`) and the first scout predicts each; c / K, the share of them equal
to the gold label, is the paper's reliability and gives the training weight. The same forward
passes, and one more on the deterministic segmentation for every scout of an ensemble (beside
a CRF for NER), give the scouts' probability of the gold label, the finer scores. The scores
themselves are pure functions of those predictions (:mod:`subregweigh.scores`).

Each distinct segmentation is predicted once and counted as often as it was chosen.

A weigher is made of parts: its scouts and, for NER, a CRF. :meth:`SubRegWeigh.fit` trains
them all; a caller that shows progress trains them itself, one at a time
(:meth:`SubRegWeigh.crf_template`, :meth:`SubRegWeigh.scout_templates`,
:meth:`subregweigh.scout.Scout.staged_fit`), and composes the fitted parts
(:meth:`SubRegWeigh.from_parts`). :meth:`SubRegWeigh.save` and :meth:`SubRegWeigh.load` keep them
in one folder (:mod:`subregweigh.parts`).
"""

from __future__ import annotations

import copy
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from subregweigh.crf import FeatureTagger, mix_gold
from subregweigh.example import Example, Task
from subregweigh.learned import Learned
from subregweigh.memory import WordMemory, remember
from subregweigh.options import (
    DEFAULT_K,
    DEFAULT_METHOD,
    DEFAULT_N_SAMPLES,
    DEFAULT_P,
    DEFAULT_W_MIN,
    METHODS,
    RESTING_CRF_C2,
    RESTING_MEMORY_STRENGTH,
    SOFTMIN_TEMPERATURE,
    default_scouts,
)
from subregweigh.parts import CRFWeigher, load_parts, save_parts
from subregweigh.scores import WeighResult, collect, deterministic_result
from subregweigh.scout import Scout
from subregweigh.selection import choose_candidates

logger = logging.getLogger(__name__)


def _aligned(proba: np.ndarray, own, index: dict) -> np.ndarray:
    """``proba`` (columns in ``own``'s order) with its columns moved to ``index``'s (label ->
    column); a label ``index`` lacks is dropped, one ``own`` lacks is 0."""
    out = np.zeros((len(proba), len(index)), dtype=np.float32)
    for j, label in enumerate(own):
        if label in index:
            out[:, index[label]] = proba[:, j]
    return out


class SubRegWeigh:
    """Find doubtful labels with scouts and subword regularization.

    Parameters
    ----------
    scout : Scout or None, default=None
        An unfitted :class:`Scout` carrying the encoder and training settings (copied, not
        modified). ``None``: ``Scout(task=task)``.
    task : {"ner", "classification"}, default="ner"
        Used only when ``scout`` is None.
    p : float, default=0.1
        Subword regularization strength (dropout rate; see :mod:`subregweigh.subword`).
    n_samples : int, default=500
        N, segmentations sampled per example for Cos-Sim and K-means.
    k : int, default=10
        K, segmentations predicted per example.
    method : {"kmeans", "cossim", "random", "kmeans-distinct", "cossim-sum"}, default="kmeans"
        See :mod:`subregweigh.selection`.
    w_min : float, default=1/3
        Weight floor.
    random_state : int, default=0
    progress : bool, default=True
    deterministic : bool, default=True
        Also score the deterministic segmentation (``WeighResult.deterministic_probability``, the
        default ranking of ``WeighResult.score()``): n more forward passes, about 1/K of the
        candidates' cost. False leaves that score NaN; rank by ``"probability"`` then.
    batch_size : int, default=64
        Segmentations per forward pass of the weighing (sorted by length, so little padding).
    n_jobs : int or None, default=None
        Processes that sample and choose the candidates (:meth:`candidates`, CPU-bound): None
        or 1, this process alone; -1, one per CPU core; a positive int, that many. The examples
        go to the processes in contiguous chunks, so the results are the same for any value.
        Inputs under 64 examples (or 2 per process) stay in this process.
    softmin_temperature : float, default=0.1
        How a text's gold-part probabilities (NER: one per gold entity and one per word
        outside them, :func:`~subregweigh.scores.entity_parts`) become its score: their
        :func:`~subregweigh.scores.soft_minimum` at
        this temperature, 0 for the plain minimum. Applies to the
        "deterministic" and "probability" scores.
    n_scouts : int or None, default=None
        Scouts to train, each with its own seed (the scout's ``random_state`` + 1000 j), whose
        probabilities of the gold labels on the deterministic segmentation are averaged before
        the soft minimum over the parts: the "deterministic" score of an ensemble. ``None``:
        for NER :data:`~subregweigh.options.NER_SCOUTS` (3) on 2,000 to 5,000 examples
        (:data:`~subregweigh.options.ENSEMBLE_EXAMPLES`) and one otherwise, 1 for
        classification (:func:`~subregweigh.options.default_scouts`). Seeds disagree most where
        the data does: on real errors an ensemble ranks better than one scout, for n times the
        training (docs/evaluation.md). The K candidates are predicted by the first scout alone.
        A caller that wants each scout's scores as soon as it is trained fits the parts itself
        (:meth:`scout_templates`, :meth:`crf_template`, :meth:`from_parts`).
    crf : bool, default=True
        NER: also train a CRF over cased word features and the words' pretrained context
        vectors (:class:`subregweigh.crf.FeatureTagger`) on the same examples, and average its
        p(gold tag) of each word half and half with the scouts' mean in the "deterministic"
        score. On real errors it ranks better beside the uncased default scout, for about a
        third of a scout's training time (docs/evaluation.md). The K candidates and c/K stay
        the scout's. Ignored for classification.
    memory_strength : float, default=0.0
        NER: update each word's tag distribution (the scouts' and the CRF's mixture) by how the
        *other* examples annotate the same word form, the models counting as this many
        annotations (:mod:`subregweigh.memory`); 0: off. The in-sample scouts cannot doubt
        a word their own annotation taught them; the rest of the project can. Applies to the
        "deterministic" score and its suggestions.
    rest_on_crf : bool, default=True
        NER with ``crf``: where the scouts learned too little of their training annotations
        (:attr:`learned_` ``.too_little``: they find under
        :data:`~subregweigh.learned.LEARNED_TOO_LITTLE` of its entities again), the
        "deterministic" score and its suggestions are the CRF's alone, updated by the project's
        memory at :data:`~subregweigh.options.RESTING_MEMORY_STRENGTH` (or ``memory_strength``
        if stronger), the CRF trained again at L2 penalty
        :data:`~subregweigh.options.RESTING_CRF_C2` (:meth:`assess`): a collapsed scout's
        doubts are noise, and it suggests no entity. The K candidates and c/K stay the first
        scout's.

    Attributes
    ----------
    scout_ : Scout
        The first fitted scout: the one that predicts the K candidates.
    scouts_ : list of Scout
        All ``n_scouts`` fitted scouts, ``scout_`` first.
    crf_ : FeatureTagger or None
        NER with ``crf``: the fitted CRF; otherwise None.
    memory_ : WordMemory or None
        NER with ``memory_strength``: the memory of the annotations :meth:`fit` (or
        :meth:`refit_crf`) saw, or the one given to :meth:`from_parts`; otherwise None.
        A weigher that :attr:`rests_on_crf_` keeps one whatever ``memory_strength``.
    learned_ : Learned or None
        NER: what the scouts learned of the entities of their training annotations, measured
        by :meth:`fit` (or :meth:`assess`; given to :meth:`from_parts`); None for
        classification, without an annotated entity, or not measured.
    """

    def __init__(
        self,
        scout: Scout | None = None,
        task: Task = "ner",
        p: float = DEFAULT_P,
        n_samples: int = DEFAULT_N_SAMPLES,
        k: int = DEFAULT_K,
        method: str = DEFAULT_METHOD,
        w_min: float = DEFAULT_W_MIN,
        random_state: int = 0,
        progress: bool = True,
        deterministic: bool = True,
        batch_size: int = 64,
        n_jobs: int | None = None,
        n_scouts: int | None = None,
        softmin_temperature: float = SOFTMIN_TEMPERATURE,
        crf: bool = True,
        memory_strength: float = 0.0,
        rest_on_crf: bool = True,
    ):
        self.scout = scout
        self.task = task
        self.p = p
        self.n_samples = n_samples
        self.k = k
        self.method = method
        self.w_min = w_min
        self.random_state = random_state
        self.progress = progress
        self.deterministic = deterministic
        self.batch_size = batch_size
        self.n_jobs = n_jobs
        self.n_scouts = n_scouts
        self.softmin_temperature = softmin_temperature
        self.crf = crf
        self.memory_strength = memory_strength
        self.rest_on_crf = rest_on_crf

    @classmethod
    def from_parts(
        cls,
        scouts: Sequence[Scout],
        crf: FeatureTagger | None = None,
        memory: WordMemory | None = None,
        learned: Learned | None = None,
        **params,
    ) -> SubRegWeigh | CRFWeigher:
        """A fitted weigher of fitted parts, ready to :meth:`weigh`.

        Parameters
        ----------
        scouts : sequence of Scout
            Fitted scouts (say, :meth:`Scout.load`); the first predicts the K candidates.
        crf : FeatureTagger or None, default=None
            A fitted CRF beside them (NER; ignored for classification).
        memory : WordMemory or None, default=None
            With ``memory_strength``: the project's memory (:meth:`WordMemory.of` the
            annotations the parts trained on); None: each weighing's own examples'.
        learned : Learned or None, default=None
            What the scouts learned of their training annotations (:meth:`assess`); None: not
            measured (the weigher never :attr:`rests_on_crf_`).
        **params
            The other constructor parameters (not ``scout``, ``task``, ``n_scouts``: the
            parts say them).

        Returns
        -------
        SubRegWeigh, or CRFWeigher when ``scouts`` is empty (NER: the CRF alone; no K
        candidates, :meth:`CRFWeigher.weigh` is its one pass).
        """
        if crf is not None and not isinstance(crf, FeatureTagger):
            raise TypeError(f"crf must be a fitted FeatureTagger or None, got {crf!r}")
        if not scouts:
            if crf is None:
                raise ValueError("a weigher needs a scout or a CRF; got neither")
            checked = cls(None, task="ner", crf=True, **params)
            checked._validate()
            return CRFWeigher(
                crf,
                w_min=checked.w_min,
                softmin_temperature=checked.softmin_temperature,
                progress=checked.progress,
                memory_strength=checked.memory_strength,
                memory=memory,
            )
        first = scouts[0]
        srw = cls(first, task=first.task, n_scouts=len(scouts), crf=crf is not None, **params)
        srw._validate()
        srw._set_parts(list(scouts), crf, memory, learned)
        return srw

    def _set_parts(
        self,
        scouts: list[Scout],
        crf: FeatureTagger | None,
        memory: WordMemory | None = None,
        learned: Learned | None = None,
    ) -> None:
        self.scouts_, self.scout_ = scouts, scouts[0]
        ner = self.scout_.task == "ner"
        self.crf_ = crf if ner else None
        self.learned_ = learned if ner else None
        self.memory_ = memory if ner and self._strength() else None

    @property
    def rests_on_crf_(self) -> bool:
        """Whether the "deterministic" score is the CRF's with the project's memory, not the
        scouts': ``rest_on_crf``, a CRF, and scouts that learned too little
        (:attr:`learned_`)."""
        return bool(
            self.rest_on_crf
            and self.crf_ is not None
            and self.learned_ is not None
            and self.learned_.too_little
        )

    def _strength(self) -> float:
        """The memory's strength in the "deterministic" score (0: no memory)."""
        if self.rests_on_crf_:
            return max(self.memory_strength, RESTING_MEMORY_STRENGTH)
        return self.memory_strength

    def assess(
        self,
        examples: Sequence[Example],
        scout_proba: Sequence[np.ndarray] | None = None,
        trained_on: Sequence[Example] | None = None,
    ) -> SubRegWeigh:
        """This fitted weigher with :attr:`learned_` measured on ``examples`` (the annotations
        its scouts trained on; NER), and, where it then :attr:`rests_on_crf_`, the memory of
        ``examples`` and its CRF trained again at
        :data:`~subregweigh.options.RESTING_CRF_C2` on ``trained_on`` (the examples the parts
        trained on, ``examples`` by default; the texts' context vectors are not computed
        again). ``scout_proba``: the scouts' :meth:`scout_proba` of ``examples`` when already
        computed (else one pass of each scout). Classification: unchanged. Returns self."""
        self._check_fitted()
        if self.scout_.task != "ner":
            return self
        if scout_proba is None:
            scout_proba = self.scout_proba(examples)
        learned = Learned.of_proba([ex.label for ex in examples], scout_proba, self.scout_.labels_)
        memory = self.memory_
        self._set_parts(self.scouts_, self.crf_, None, learned)
        if self.rests_on_crf_ and self.crf_.c2 != RESTING_CRF_C2:
            self.crf_ = self.crf_.refit(
                examples if trained_on is None else trained_on, c2=RESTING_CRF_C2
            )
        if self._strength():
            self.memory_ = memory if memory is not None else WordMemory.of(examples)
        return self

    def _validate(self):
        if self.method not in METHODS:
            raise ValueError(f"unknown method {self.method!r}; choose one of {', '.join(METHODS)}")
        if self.k < 1 or self.n_samples < self.k:
            raise ValueError(
                f"need 1 <= k <= n_samples, got k={self.k}, n_samples={self.n_samples}"
            )
        if self.n_jobs is not None and (
            isinstance(self.n_jobs, bool)
            or not isinstance(self.n_jobs, (int, np.integer))
            or self.n_jobs == 0
            or self.n_jobs < -1
        ):
            raise ValueError(f"n_jobs must be None, -1 or a positive int, got {self.n_jobs!r}")
        if self.n_scouts is not None and (
            isinstance(self.n_scouts, bool)
            or not isinstance(self.n_scouts, (int, np.integer))
            or self.n_scouts < 1
        ):
            raise ValueError(f"n_scouts must be None or a positive int, got {self.n_scouts!r}")
        if not 0 <= self.softmin_temperature < np.inf:
            raise ValueError(
                f"softmin_temperature must be a number >= 0, got {self.softmin_temperature!r}"
            )
        if not 0 <= self.memory_strength < np.inf:
            raise ValueError(f"memory_strength must be a number >= 0, got {self.memory_strength!r}")

    def _template(self) -> Scout:
        return self.scout if self.scout is not None else Scout(task=self.task)

    def scout_templates(self, n_examples: int | None = None) -> list[Scout]:
        """The unfitted scouts :meth:`fit` trains on ``n_examples`` examples, in its order:
        :meth:`ensemble_size` copies of the template (``scout``, or ``Scout(task=task)``), scout j
        seeded ``random_state`` + 1000 j. Fit each on the same examples and give them to
        :meth:`from_parts`, first first, to get what :meth:`fit` makes."""
        self._validate()
        template = self._template()
        scouts = []
        for j in range(self.ensemble_size(n_examples)):
            scout = copy.deepcopy(template)
            scout.progress = self.progress
            scout.random_state = template.random_state + 1000 * j
            scouts.append(scout)
        return scouts

    def crf_template(self) -> FeatureTagger | None:
        """The unfitted CRF :meth:`fit` trains (unweighted) beside the scouts: NER with
        ``crf``; otherwise None. Its training is deterministic: it may come before the scouts
        or after them."""
        self._validate()
        return FeatureTagger() if self.crf and self._template().task == "ner" else None

    def fit(self, examples: Sequence[Example], sample_weight=None) -> SubRegWeigh:
        """Train the scouts (:meth:`scout_templates`) on ``examples`` with deterministic
        tokenization, weighted by ``sample_weight`` (shape (n,); None: 1 each), then the CRF
        (:meth:`crf_template`, NER), unweighted; NER: then :meth:`assess` them on
        ``examples``."""
        scouts, crf = self.scout_templates(len(examples)), self.crf_template()
        for j, scout in enumerate(scouts):
            if len(scouts) > 1:
                logger.info("training scout %d of %d", j + 1, len(scouts))
            scout.fit(examples, sample_weight=sample_weight)
        if crf is not None:
            logger.info("training the CRF on %d examples", len(examples))
            crf.fit(examples)
        self._set_parts(scouts, crf)
        return self.assess(examples)  # NER: one more pass of each scout over ``examples``

    def ensemble_size(self, n_examples: int | None = None) -> int:
        """How many scouts :meth:`fit` trains on ``n_examples`` examples: ``n_scouts``, or
        :func:`~subregweigh.options.default_scouts` of the scout's task (``task`` without a
        scout) and of ``n_examples`` (None: the most it may be)."""
        if self.n_scouts is not None:
            return int(self.n_scouts)
        return default_scouts(self._template().task, n_examples)

    def save(self, folder: str | os.PathLike) -> Path:
        """Keep the fitted scouts, CRF, memory and :attr:`learned_` in ``folder``
        (:func:`subregweigh.parts.save_parts`: the first scout in ``folder/scout``, scout j in
        ``folder/scout-j``, the CRF in ``folder/crf.npz``, the memory in
        ``folder/memory.json``, what the scouts learned in ``folder/learned.json``);
        :meth:`load` reads them back."""
        self._check_fitted()
        return save_parts(folder, self.scouts_, self.crf_, self.memory_, self.learned_)

    @classmethod
    def load(
        cls,
        folder: str | os.PathLike,
        *,
        device: str | None = None,
        precision: str | None = None,
        quantize: bool | None = None,
        crf: bool = True,
        **params,
    ) -> SubRegWeigh | CRFWeigher:
        """The weigher :meth:`save` kept in ``folder``: :meth:`from_parts` of its scouts and
        CRF (a folder of the CRF alone gives a :class:`~subregweigh.parts.CRFWeigher`).

        ``device``: where the scouts predict; ``precision`` and ``quantize``, when given, how
        (whatever they trained with); ``crf=False`` leaves the CRF out; ``params``: the other
        constructor parameters. Raises FileNotFoundError, naming ``folder``, when it keeps
        neither a scout nor a CRF.
        """
        parts = load_parts(folder, crf=crf, device=device, progress=params.get("progress", True))
        for scout in parts.scouts:
            if precision is not None:
                scout.precision = precision
            if quantize is not None:
                scout.quantize = quantize
        return cls.from_parts(*parts, **params)

    def _check_fitted(self) -> None:
        if not hasattr(self, "scouts_"):
            raise RuntimeError("this SubRegWeigh is not fitted yet: call fit() or from_parts()")

    def _deterministic(self, examples: Sequence[Example], scout_proba=None):
        """``(labels, gold_proba, predicted_proba, class_proba, scout_proba)`` of the
        deterministic segmentations: p(gold) averaged over :attr:`scouts_` (NER with
        :attr:`crf_`: that mean and the CRF's, half each); the predicted labels and their
        probabilities from the same models (NER: the most probable tags of the same mixture, so
        that a suggested entity is never less probable than the annotated one it replaces);
        classification, every label's probability (averaged too), shape (n, n_labels), from the
        same pass (NER: None); NER, the scouts' mean tag distributions (:meth:`scout_proba`;
        classification: None), read from ``scout_proba`` when given instead of computed."""
        if self.scout_.task == "ner":
            if scout_proba is None:
                scout_proba = self.scout_proba(examples)
            elif len(scout_proba) != len(examples):
                raise ValueError(
                    f"scout_proba holds {len(scout_proba)} examples, expected {len(examples)}"
                )
            return (*self._from_scout_proba(examples, scout_proba), None, scout_proba)
        runs = [
            scout.score_segmentations(
                [scout.segment(ex.words) for ex in examples],
                [ex.label for ex in examples],
                batch_size=self.batch_size,
                where=[ex.id for ex in examples],
                desc="predicting deterministic segmentations",
                with_proba=True,
            )
            for scout in self.scouts_
        ]
        predicted, gold_proba, predicted_proba = runs[0][:3]
        if len(runs) > 1:
            gold_proba = [np.mean(parts, axis=0) for parts in zip(*(r[1] for r in runs))]
        n_labels = len(self.scout_.labels_)
        class_proba = np.mean(
            [np.reshape(np.asarray(r[3], dtype=float), (-1, n_labels)) for r in runs], axis=0
        )
        return predicted, gold_proba, predicted_proba, class_proba, None

    def scout_proba(self, examples: Sequence[Example]) -> list[np.ndarray]:
        """NER: each word's tag distribution on its deterministic segmentation, averaged over
        :attr:`scouts_`; per example shape (n_words, n_labels), float32, columns in
        ``scout_.labels_`` order (a tag a scout does not know: 0). What
        :meth:`weigh_deterministic` reads p(gold) and the suggestions from, with the CRF's;
        kept, it lets :meth:`refit_crf` rescore without the scouts' passes."""
        self._check_fitted()
        if self.scout_.task != "ner":
            raise ValueError("scout_proba is NER's: classification keeps its class_probability")
        labels = list(self.scout_.labels_)
        index = {label: j for j, label in enumerate(labels)}
        total = None
        for scout in self.scouts_:
            proba = scout.predict_proba(examples, batch_size=self.batch_size)
            if list(scout.labels_) != labels:
                proba = [_aligned(p, scout.labels_, index) for p in proba]
            total = proba if total is None else [t + p for t, p in zip(total, proba)]
        return [(t / len(self.scouts_)).astype(np.float32) for t in total]

    def _from_scout_proba(self, examples: Sequence[Example], scout_proba) -> tuple[list, ...]:
        """NER's ``(labels, gold_proba, predicted_proba)`` from the scouts' mean tag
        distributions, mixed with the CRF's marginals as p(gold) is when there is a CRF."""
        labels = list(self.scout_.labels_)
        index = {label: j for j, label in enumerate(labels)}
        gold_proba, mixture, gold_columns = [], [], []
        for ex, proba in zip(examples, scout_proba, strict=True):
            proba = np.asarray(proba, dtype=np.float32)
            if proba.shape != (len(ex.words), len(labels)):
                raise ValueError(
                    f"example {ex.id!r}: scout_proba has shape {proba.shape}, expected "
                    f"({len(ex.words)}, {len(labels)})"
                )
            cols = np.array([index.get(tag, -1) for tag in ex.label], dtype=np.int64)
            gold_columns.append(cols)
            gold = proba[np.arange(len(cols)), np.maximum(cols, 0)]
            gold_proba.append(np.where(cols >= 0, gold, 0.0).astype(np.float32))
            mixture.append(proba)
        if self.crf_ is not None:  # one pass of the CRF: every tag's marginal, gold ones too
            extra = sorted({tag for ex in examples for tag in ex.label} - set(labels))
            columns = {label: j for j, label in enumerate([*labels, *extra])}
            marginals = self.crf_.label_proba(examples, list(columns))
            crf_gold = [
                m[np.arange(len(ex.label)), [columns[tag] for tag in ex.label]]
                for m, ex in zip(marginals, examples, strict=True)
            ]
            crf_mixture = [m[:, : len(labels)] for m in marginals]
            if self.rests_on_crf_:  # the scouts learned too little: their doubts are noise
                gold_proba, mixture = crf_gold, crf_mixture
            else:
                gold_proba = mix_gold(gold_proba, crf_gold)
                mixture = mix_gold(mixture, crf_mixture)
        strength = self._strength()
        if strength:  # p(gold) read again, from the remembered mixture
            mixture = remember(examples, mixture, labels, strength, self.memory_)
            gold_proba = [
                np.where(cols >= 0, m[np.arange(len(cols)), np.maximum(cols, 0)], g).astype(
                    np.float32
                )
                for m, cols, g in zip(mixture, gold_columns, gold_proba, strict=True)
            ]
        best = [p.argmax(axis=1) for p in mixture]
        predicted = [tuple(labels[j] for j in b) for b in best]
        predicted_proba = [
            p[np.arange(len(b)), b].astype(np.float32) for p, b in zip(mixture, best)
        ]
        return predicted, gold_proba, predicted_proba

    def refit_crf(
        self, examples: Sequence[Example], meanwhile: Callable[[], object] | None = None
    ) -> SubRegWeigh:
        """A copy of this weigher with its CRF trained again on ``examples`` (the annotations as
        they stand now; :meth:`FeatureTagger.refit`), the scouts shared. With the
        ``scout_proba`` of an earlier pass, :meth:`weigh_deterministic` then reflects a
        changed convention in every sentence's p(gold) in seconds, with no scout trained or
        run; with a memory, it is of ``examples`` too; :attr:`learned_` stays. NER with a CRF
        only. ``meanwhile``: work to do while CRFsuite trains on its own core
        (:meth:`FeatureTagger.fit`); the copy is the same either way."""
        self._check_fitted()
        if self.crf_ is None:
            raise ValueError("refit_crf needs a NER weigher with a CRF (crf=True)")
        refitted = copy.copy(self)
        refitted._set_parts(
            list(self.scouts_),
            self.crf_.refit(examples, meanwhile=meanwhile),
            WordMemory.of(examples) if self._strength() else None,
            self.learned_,
        )
        return refitted

    def candidates(self, examples: Sequence[Example]):
        """The chosen segmentations: ``(segmentations, owner, multiplicity)``
        (:func:`subregweigh.selection.choose_candidates` with the first scout's sampler).

        ``owner[j]`` is the example index of segmentation ``j``; ``multiplicity[j]`` how many of
        its K slots it fills. Seeded per example, so results depend neither on batch composition
        nor on ``n_jobs``.
        """
        self._validate()
        self._check_fitted()
        return choose_candidates(
            self.scout_.sampler(self.p),
            [ex.words for ex in examples],
            n=self.k if self.method == "random" else self.n_samples,
            k=self.k,
            method=self.method,
            random_state=self.random_state,
            n_jobs=self.n_jobs,
            progress=self.progress,
        )

    def weigh(self, examples: Sequence[Example]) -> WeighResult:
        """Weigh ``examples`` (usually the scouts' own training data)."""
        self._check_fitted()
        return self.weigh_candidates(examples, *self.candidates(examples))

    def weigh_deterministic(
        self, examples: Sequence[Example], scout_proba: Sequence[np.ndarray] | None = None
    ) -> WeighResult:
        """Weigh ``examples`` on the scouts' deterministic segmentation alone: K=1, nothing
        sampled, one forward pass per example and scout, about 1/K of :meth:`weigh`'s.

        Enough for the default ranking, the "deterministic" score: ``deterministic_probability``
        (equal to ``probability`` here) is what :meth:`weigh` computes. The rest describes that
        single prediction: ``majority`` is the deterministic prediction (one scout's own; of
        several models, the most probable tags of the mixture p(gold) is read from),
        ``reliability`` is 0 or 1 and ``majority_share`` 1; NER ``majority_entities`` give, for
        each predicted entity, the lowest probability of its predicted tags, from the models
        p(gold) comes from (not a share of copies). For c/K and the training weights, use
        :meth:`weigh`. NER: ``scout_proba`` is the scouts' part when already computed (the
        ``scout_proba`` of an earlier result on the same texts, see :meth:`refit_crf`): the
        scouts do not run.
        """
        self._check_fitted()
        predicted, gold_proba, predicted_proba, class_proba, scout_proba = self._deterministic(
            examples, scout_proba
        )
        result = deterministic_result(
            examples,
            predicted,
            gold_proba,
            predicted_proba,
            self.scout_.task,
            self.w_min,
            self.softmin_temperature,
        )
        self._with_class_probability(result, class_proba)
        if scout_proba is not None:
            result.scout_proba = list(scout_proba)
        return result

    def _with_class_probability(self, result: WeighResult, class_proba) -> None:
        if class_proba is not None:
            result.labels, result.class_probability = list(self.scout_.labels_), class_proba

    def weigh_candidates(
        self, examples: Sequence[Example], segmentations, owner, multiplicity
    ) -> WeighResult:
        """Weigh ``examples`` on given candidates, as :meth:`candidates` returns them."""
        self._check_fitted()
        # One pass gives both the labels (for c/K) and p(gold) (for the probability scores).
        predicted, gold_proba, _ = self.scout_.score_segmentations(
            segmentations,
            [examples[i].label for i in owner],
            batch_size=self.batch_size,
            where=[examples[i].id for i in owner],
            desc="predicting candidates",
        )
        deterministic = class_proba = None
        if self.deterministic:
            _, deterministic, _, class_proba, _ = self._deterministic(examples)
        result = collect(
            examples,
            predicted,
            owner,
            multiplicity,
            self.w_min,
            self.scout_.task,
            gold_proba=gold_proba,
            deterministic_proba=deterministic,
            temperature=self.softmin_temperature,
        )
        self._with_class_probability(result, class_proba)
        logger.info(
            "weighed %d examples (%s, K=%d, N=%d, p=%g): %d predictions, mean reliability %.3f, "
            "%d below 0.5",
            len(examples),
            self.method,
            self.k,
            self.n_samples,
            self.p,
            len(predicted),
            result.reliability.mean() if len(examples) else float("nan"),
            int((result.reliability < 0.5).sum()),
        )
        return result
