"""SubRegWeigh: weigh every example by how consistently one scout reproduces its label.

For each example, K segmentations are chosen out of N subword-regularized samples
(:mod:`subregweigh.selection`) and the scout predicts each. With ``c`` the number of the K
predictions equal to the gold label (NER: the whole tag sequence),

    reliability = c / K,    weight = max(w_min, c / K).

c / K (the paper's agreement ratio) only sees argmax decisions; the same forward passes also give
the scout's probability of the gold label, a finer score: for each candidate the soft minimum
(:func:`soft_minimum`) of the gold parts' probabilities (NER: each gold entity once, the mean of
its words' p(gold tag), and each word outside the entities, :func:`entity_parts`; multi-label:
the gold membership of each class; single-label: the gold class), averaged over the K
candidates (:func:`gold_probability`; per gold entity, the minimum: :func:`entity_probability`).

Each distinct segmentation is predicted once and counted as often as it was chosen.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

import joblib
import numpy as np
from tqdm.auto import tqdm

from subregweigh.crf import FeatureTagger, mix_gold
from subregweigh.example import Example, Task
from subregweigh.scout import Scout
from subregweigh.selection import METHODS, sample_and_choose
from subregweigh.tags import entity_spans

logger = logging.getLogger(__name__)

# SubRegWeigh(n_jobs=...): inputs smaller than this are sampled in-process, and each process
# gets about this many chunks of examples.
MIN_PARALLEL_EXAMPLES = 64
CHUNKS_PER_PROCESS = 4


def sample_weights(reliability, w_min: float = 1 / 3) -> np.ndarray:
    """Training weights ``max(w_min, reliability)``, shape (n,).

    The paper prints ``min``; ``max`` is what it means (a weight floor for doubtful examples).
    """
    reliability = np.asarray(reliability, dtype=float)
    if not 0.0 <= w_min <= 1.0:
        raise ValueError(f"w_min must be in [0, 1], got {w_min}")
    return np.maximum(w_min, reliability)


def agreement(predictions: Sequence[tuple], multiplicity, gold: tuple) -> int:
    """How many of the K chosen candidates (counted with multiplicity) predict ``gold``."""
    return int(sum(m for pred, m in zip(predictions, multiplicity) if pred == gold))


def majority(predictions: Sequence[tuple], multiplicity) -> tuple[tuple, int]:
    """The most frequent prediction and its count; ties go to the earliest candidate."""
    totals: dict[tuple, int] = {}
    for pred, m in zip(predictions, multiplicity):
        totals[pred] = totals.get(pred, 0) + int(m)
    best = max(totals.items(), key=lambda item: item[1])  # max keeps the first of equals
    return best


def entity_agreement(predictions, multiplicity, gold: tuple) -> list[tuple[str, int, int, float]]:
    """For each gold entity ``(type, start, end)``: the fraction of candidates predicting it."""
    k = int(np.sum(multiplicity))
    predicted = [set(entity_spans(pred)) for pred in predictions]
    return [
        (
            etype,
            start,
            end,
            sum(m for spans, m in zip(predicted, multiplicity) if (etype, start, end) in spans) / k,
        )
        for etype, start, end in entity_spans(gold)
    ]


# The soft minimum's default temperature. On CoNLL-2003's real errors (test against CoNLL++) it
# is the one that ranks above the minimum on both halves of the test set, for one scout and for
# three; 0.15 ranks best on the whole set but only on its second half
# (benchmarks/results/softmin-temperature.md; docs/evaluation.md).
SOFTMIN_TEMPERATURE = 0.1

# Scouts a NER weigher trains by default. On CoNLL-2003's real errors, beside the CRF, three
# seeds rank at AP 0.409 ± 0.006 against 0.380 ± 0.010 for the first of them
# (real-errors-three-scouts), and raise the review loop's errors found after twice their number
# of reviews from 0.647 to 0.704. On 1,000-sentence draws the gain is smaller, on 300 nil
# (docs/evaluation.md). The first scout's scores can be used as soon as it is trained (fit's
# checkpoint). Classification keeps one: no real-error set measured an ensemble there.
NER_SCOUTS = 3


def default_scouts(task: Task) -> int:
    """The scouts a weigher of ``task`` trains unless told: :data:`NER_SCOUTS` for NER, 1
    for classification."""
    return NER_SCOUTS if task == "ner" else 1


def soft_minimum(p, temperature: float = SOFTMIN_TEMPERATURE) -> float:
    """The soft minimum of one text's gold-part probabilities, a float in [0, 1].

    ``sum_i p_i w_i / sum_i w_i`` with ``w_i = exp(-p_i / temperature)``: cleanlab's "softmin"
    sentence score (``cleanlab.token_classification.rank``). A part doubted alone among sure
    ones gives about its probability; several doubted parts give about their mean, so a text with
    one sharp doubt ranks above one of the same lowest probability whose other parts are
    doubted too. ``temperature`` 0 is the plain minimum. ``p``: shape (n_parts,); an empty one
    (a text without words: nothing can be wrong) gives 1.
    """
    p = np.asarray(p, dtype=float)
    if not p.size:
        return 1.0
    if temperature == 0:
        return float(p.min())
    w = np.exp(-(p - p.min()) / temperature)  # shifted: the same weights, no underflow
    return float(p @ w / w.sum())


def entity_parts(word_gold, tags: Sequence[str]) -> np.ndarray:
    """NER: the parts a tagged text's score is the soft minimum of, shape (n_parts,): each
    entity of ``tags`` (IOB2) once, as the mean of its words' p(gold tag), then each word outside
    the entities alone.

    An entity is one decision of the annotator, so it counts once however many words it has: a
    long name with one doubted word inside does not drag the text as a word of its own would.
    On real errors (CoNLL-2003 test against CoNLL++, 15 scouts) the soft minimum over these
    parts ranks above the one over words for every scout, on each half of the set
    (docs/evaluation.md). ``word_gold``: shape (n_words,), the p(gold tag) of each word.
    """
    p = np.asarray(word_gold, dtype=float)
    spans = entity_spans(tags)
    outside = np.ones(len(p), dtype=bool)
    means = []
    for _, start, end in spans:
        outside[start:end] = False
        means.append(p[start:end].mean())
    return np.concatenate([np.array(means, dtype=float), p[outside]])


def gold_probability(
    gold_proba: Sequence[np.ndarray], multiplicity, temperature: float = SOFTMIN_TEMPERATURE
) -> float:
    """Mean over the K candidates of the soft minimum of the gold parts' probabilities.

    Parameters
    ----------
    gold_proba : sequence of ndarray, length j (one per distinct candidate)
        Each of shape (n_parts,): see :meth:`subregweigh.scout.Scout.score_segmentations`
        (single-label: p(gold class), shape (1,); multi-label: p(gold membership) per class;
        NER: :func:`entity_parts` of each word's p(gold tag)).
    multiplicity : array-like of int, shape (j,)
        How many of the K slots each candidate fills.
    temperature : float, default 0.1
        :func:`soft_minimum`'s; 0: the lowest probability.

    Returns
    -------
    float in [0, 1]
        ``sum_j m_j * soft_minimum(gold_proba[j]) / sum_j m_j`` (1 for a part-less label).
    """
    m = np.asarray(multiplicity, dtype=float)
    lowest = np.array([soft_minimum(p, temperature) for p in gold_proba], dtype=float)
    return float(m @ lowest / m.sum())


def entity_probability(
    gold_proba: Sequence[np.ndarray], multiplicity, gold: tuple
) -> list[tuple[str, int, int, float]]:
    """For each gold entity ``(type, start, end)``: mean over K of min over its words of p(gold).

    ``gold_proba`` holds the NER arrays of shape (n_words,) of :func:`gold_probability`.
    """
    m = np.asarray(multiplicity, dtype=float)
    stacked = np.stack([np.asarray(p, dtype=float) for p in gold_proba])  # (j, n_words)
    return [
        (etype, start, end, float(m @ stacked[:, start:end].min(axis=1) / m.sum()))
        for etype, start, end in entity_spans(gold)
    ]


# The quality scores a WeighResult ranks by. "deterministic" (p(gold) on the scout's
# deterministic tokenization; SubRegWeigh.weigh_deterministic computes it alone) is the default
# ranking because it finds the most errors: it ties the K-candidate "probability" on CoNLL-2003
# and beats it on SST-2 at every size from 100 to 3,000 (AP 0.627 vs 0.552 at 3,000), and both
# beat the paper's c/K by far (benchmarks/results/detection-*-curve.md).
SCORES = ("deterministic", "probability", "agreement")
DEFAULT_SCORE = "deterministic"


@dataclass
class WeighResult:
    """Per-example results of :meth:`SubRegWeigh.weigh`; arrays have shape (n,).

    Attributes
    ----------
    ids : list of str
    predictions : list of list of tuple
        The K predictions of each example (a candidate chosen twice appears twice).
    agreement : ndarray of int, c
    k : ndarray of int
        K actually used (smaller than the requested K only when fewer distinct segmentations
        exist, as for one-word texts).
    reliability : ndarray of float, c / K
    weight : ndarray of float, max(w_min, c / K)
    majority : list of tuple
        The most frequent prediction.
    majority_share : ndarray of float
        Its share of the K predictions (self-consistency, whatever the gold label).
    entities : list of list of (type, start, end, agreement)
        NER only: every gold entity with the fraction of candidates predicting that exact span.
    probability : ndarray of float, shape (n,)
        Mean over the K candidates of the soft minimum of the gold parts' probabilities
        (:func:`gold_probability`): NER, over :func:`entity_parts` (gold entities and the
        words outside them) of p(gold tag); single-label
        classification, p(gold class); multi-label, over classes of p(gold membership).
        Lower is more doubtful. NaN where not computed.
    deterministic_probability : ndarray of float, shape (n,)
        The same soft minimum on the scout's deterministic segmentation alone: the
        "deterministic" score. NaN where not computed (``SubRegWeigh(deterministic=False)``).
    entity_probability : list of list of (type, start, end, probability)
        NER only: every gold entity with the mean over K of the min over its words of
        p(gold tag) (:func:`entity_probability`).
    majority_entities : list of list of (type, start, end, agreement)
        NER only: the same for every entity of the majority prediction (how sure the scout is
        of each region it would pre-annotate).
    labels : list of str
        Classification only, with :attr:`class_probability`: the scout's labels, in the order
        of its columns.
    class_probability : ndarray of float, shape (n, n_labels)
        Classification only: every label's probability on the deterministic segmentation
        (single-label: the softmax; multi-label: each label's sigmoid), from the forward pass
        that gives :attr:`deterministic_probability` (averaged over an ensemble's scouts, as
        p(gold) is). What :func:`subregweigh.suggest.class_suggestion` reads. Shape (0, 0)
        where not computed.
    """

    ids: list[str]
    predictions: list[list[tuple]]
    agreement: np.ndarray
    k: np.ndarray
    reliability: np.ndarray
    weight: np.ndarray
    majority: list[tuple]
    majority_share: np.ndarray
    entities: list[list[tuple[str, int, int, float]]] = field(default_factory=list)
    probability: np.ndarray = field(default_factory=lambda: np.empty(0))
    deterministic_probability: np.ndarray = field(default_factory=lambda: np.empty(0))
    entity_probability: list[list[tuple[str, int, int, float]]] = field(default_factory=list)
    majority_entities: list[list[tuple[str, int, int, float]]] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    class_probability: np.ndarray = field(default_factory=lambda: np.empty((0, 0)))

    def score(self, name: str = DEFAULT_SCORE) -> np.ndarray:
        """The per-example quality score ``name`` (one of :data:`SCORES`; lower = more
        doubtful), shape (n,): ``"deterministic"`` (:attr:`deterministic_probability`, the
        default), ``"probability"`` (:attr:`probability`) or ``"agreement"`` (the paper's c/K,
        :attr:`reliability`)."""
        if name not in SCORES:
            raise ValueError(f"unknown score {name!r}; choose one of {', '.join(SCORES)}")
        values = {
            "probability": self.probability,
            "agreement": self.reliability,
            "deterministic": self.deterministic_probability,
        }[name]
        if len(values) != len(self.ids) or np.isnan(values).any():
            raise ValueError(f"the {name!r} score was not computed for every example")
        return values

    def columns(self) -> dict[str, list]:
        """Per-example extra columns for :func:`subregweigh.io.write_weights`."""
        cols = {
            "reliability": self.reliability,
            "probability": self.probability,
            "deterministic_probability": self.deterministic_probability,
            "agreement": self.agreement,
            "k": self.k,
            "majority": [list(m) for m in self.majority],
            "majority_share": self.majority_share,
        }
        if self.entities:
            cols["entities"] = [
                [{"type": t, "start": s, "end": e, "agreement": a} for t, s, e, a in ents]
                for ents in self.entities
            ]
        if self.entity_probability:
            cols["entity_probability"] = [
                [{"type": t, "start": s, "end": e, "probability": q} for t, s, e, q in ents]
                for ents in self.entity_probability
            ]
        return cols


class SubRegWeigh:
    """Find doubtful labels with one scout and subword regularization.

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
        outside them, :func:`entity_parts`) become its score: their :func:`soft_minimum` at
        this temperature, 0 for the plain minimum. Applies to the
        "deterministic" and "probability" scores.
    n_scouts : int or None, default=None
        Scouts to train, each with its own seed (the scout's ``random_state`` + 1000 j), whose
        probabilities of the gold labels on the deterministic segmentation are averaged before
        the soft minimum over the parts: the "deterministic" score of an ensemble. ``None``:
        :data:`NER_SCOUTS` (3) for NER, 1 for classification (:func:`default_scouts`). Seeds
        disagree most where the data does; on CoNLL-2003's real errors 3 scouts with the CRF
        rank them at AP 0.409 against 0.380 for one (docs/evaluation.md), for 3 times the
        training; :meth:`fit`'s ``checkpoint`` sees the first scout as soon as it is trained,
        so a caller can use its scores while the others train. The K candidates are predicted
        by the first scout alone.
    crf : bool, default=True
        NER: also train a CRF over cased word features and the words' pretrained context
        vectors (:class:`subregweigh.crf.FeatureTagger`) on the same examples (after the
        scouts; see :meth:`fit` for early scores), and average its p(gold tag) of each word
        half and half with the scouts' mean in the "deterministic" score. On CoNLL-2003's
        real errors it raises one uncased MiniLM scout's AP by about 0.05, for about a third
        of the scout's training time (docs/evaluation.md). The K candidates and c/K stay the
        scout's. Ignored for classification.

    Attributes
    ----------
    scout_ : Scout
        The (first) fitted scout.
    scouts_ : list of Scout
        All ``n_scouts`` fitted scouts, ``scout_`` first.
    crf_ : FeatureTagger or None
        NER with ``crf``: the fitted CRF; otherwise None.
    """

    def __init__(
        self,
        scout: Scout | None = None,
        task: Task = "ner",
        p: float = 0.1,
        n_samples: int = 500,
        k: int = 10,
        method: str = "kmeans",
        w_min: float = 1 / 3,
        random_state: int = 0,
        progress: bool = True,
        deterministic: bool = True,
        batch_size: int = 64,
        n_jobs: int | None = None,
        n_scouts: int | None = None,
        softmin_temperature: float = SOFTMIN_TEMPERATURE,
        crf: bool = True,
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

    @classmethod
    def from_scout(
        cls, scout: Scout, *more: Scout, crf: FeatureTagger | None = None, **params
    ) -> SubRegWeigh:
        """A SubRegWeigh around already fitted scouts (say, :meth:`Scout.load`): ``scout`` and
        the ``more`` of an ensemble, ready to :meth:`weigh`; ``crf``: a fitted
        :class:`FeatureTagger` beside them (NER; None: the scouts alone); ``params`` are the
        other constructor parameters."""
        if crf is not None and not isinstance(crf, FeatureTagger):
            raise TypeError(f"crf must be a fitted FeatureTagger or None, got {crf!r}")
        srw = cls(scout, task=scout.task, n_scouts=1 + len(more), crf=crf is not None, **params)
        srw._validate()
        srw.scout_, srw.scouts_ = scout, [scout, *more]
        srw.crf_ = crf if scout.task == "ner" else None
        return srw

    @classmethod
    def from_crf(cls, crf: FeatureTagger, **params) -> SubRegWeigh:
        """A NER SubRegWeigh of a fitted CRF alone, no scout: early scores while the scout
        trains (``fit(on_crf=)``). With no scout there are no K candidates: :meth:`weigh` is
        :meth:`weigh_deterministic`, the CRF's p(gold) of each word and its own tags as the
        prediction. ``params``: the other constructor parameters."""
        if not isinstance(crf, FeatureTagger):
            raise TypeError(f"crf must be a fitted FeatureTagger, got {crf!r}")
        srw = cls(None, task="ner", crf=True, **params)
        srw._validate()
        srw.scout_, srw.scouts_, srw.crf_ = None, [], crf
        return srw

    @property
    def _task(self) -> Task:
        return self.scout_.task if self.scout_ is not None else "ner"

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

    def fit(
        self, examples: Sequence[Example], sample_weight=None, *, checkpoint=None, on_crf=None
    ) -> SubRegWeigh:
        """Train the scout (``n_scouts`` of them) on ``examples`` with deterministic
        tokenization. ``checkpoint``: ``(step, callback)`` for the first scout's training
        (:meth:`Scout.fit`). With several scouts, ``callback`` also sees the first scout once
        it is trained, before the others train: an ensemble's scores can come as soon as a
        single scout's. The CRF (``crf``, NER) trains unweighted, after the scouts; with
        ``on_crf``, before them, and ``on_crf`` is called with :meth:`from_crf` of it (early
        scores of the CRF alone; never called without a CRF)."""
        self._validate()
        template = self.scout if self.scout is not None else Scout(task=self.task)
        with_crf = self.crf and template.task == "ner"
        self.crf_, self.scouts_ = None, []
        if with_crf and on_crf is not None:
            self.crf_ = self._fit_crf(examples)
            on_crf(
                SubRegWeigh.from_crf(
                    self.crf_,
                    w_min=self.w_min,
                    progress=self.progress,
                    softmin_temperature=self.softmin_temperature,
                )
            )
        n_scouts = self.ensemble_size()  # template.task's
        for j in range(n_scouts):
            scout = copy.deepcopy(template)
            scout.progress = self.progress
            scout.random_state = template.random_state + 1000 * j
            if n_scouts > 1:
                logger.info("training scout %d of %d", j + 1, n_scouts)
            self.scouts_.append(
                scout.fit(
                    examples, sample_weight=sample_weight, checkpoint=checkpoint if j == 0 else None
                )
            )
            if j == 0 and checkpoint and n_scouts > 1:
                checkpoint[1](scout)
        self.scout_ = self.scouts_[0]
        if with_crf and self.crf_ is None:
            self.crf_ = self._fit_crf(examples)
        return self

    def ensemble_size(self) -> int:
        """How many scouts :meth:`fit` trains: ``n_scouts``, or :func:`default_scouts` of the
        scout's task (``task`` without a scout)."""
        if self.n_scouts is not None:
            return int(self.n_scouts)
        return default_scouts(self.scout.task if self.scout is not None else self.task)

    @staticmethod
    def _fit_crf(examples: Sequence[Example]) -> FeatureTagger:
        logger.info("training the CRF on %d examples", len(examples))
        return FeatureTagger().fit(examples)

    def _deterministic(self, examples: Sequence[Example]):
        """``(labels, gold_proba, predicted_proba, class_proba)`` of the deterministic
        segmentations: the first scout's labels and their probabilities, p(gold) averaged over
        :attr:`scouts_` (NER with :attr:`crf_`: that mean and the CRF's, half each);
        classification, every label's probability (averaged too), shape
        (n, n_labels), from the same pass (NER: None, which would be (n_words, n_labels) per
        example and is not needed)."""
        if self.scout_ is None:  # the CRF alone (from_crf)
            predicted = self.crf_.predict(examples)  # the encoder's pass, reused by the next two
            return (
                predicted,
                self.crf_.gold_proba(examples),
                self.crf_.tag_proba(examples, predicted),
                None,
            )
        gold = [ex.label for ex in examples]
        classes = self.scout_.task == "classification"
        params = dict(
            batch_size=self.batch_size,
            where=[ex.id for ex in examples],
            desc="predicting deterministic segmentations",
            with_proba=classes,
        )
        runs = [
            scout.score_segmentations([scout.segment(ex.words) for ex in examples], gold, **params)
            for scout in getattr(self, "scouts_", [self.scout_])
        ]
        predicted, gold_proba, predicted_proba = runs[0][:3]
        if len(runs) > 1:
            gold_proba = [np.mean(parts, axis=0) for parts in zip(*(r[1] for r in runs))]
        if getattr(self, "crf_", None) is not None:
            gold_proba = mix_gold(gold_proba, self.crf_.gold_proba(examples))
        class_proba = None
        if classes:
            n_labels = len(self.scout_.labels_)
            class_proba = np.mean(
                [np.reshape(np.asarray(r[3], dtype=float), (-1, n_labels)) for r in runs], axis=0
            )
        return predicted, gold_proba, predicted_proba, class_proba

    def candidates(self, examples: Sequence[Example]):
        """The chosen segmentations: ``(segmentations, owner, multiplicity)``.

        ``owner[j]`` is the example index of segmentation ``j``; ``multiplicity[j]`` how many of
        its K slots it fills. Seeded per example, so results depend neither on batch composition
        nor on ``n_jobs``.
        """
        self._validate()
        if getattr(self, "scout_", None) is None:
            raise RuntimeError(
                "no scout to sample candidates with: fit() first (from_crf has none)"
            )
        sampler = self.scout_.sampler(self.p)
        n = self.k if self.method == "random" else self.n_samples
        seeds = np.random.SeedSequence(self.random_state).spawn(len(examples))
        desc = f"sampling ({self.method})"
        n_jobs = self._n_processes(len(examples))
        if n_jobs == 1:
            texts = tqdm(
                [ex.words for ex in examples], desc=desc, unit="text", disable=not self.progress
            )
            segmentations, sizes, multiplicity = sample_and_choose(
                sampler, texts, seeds, n, self.k, self.method
            )
        else:
            segmentations, sizes, multiplicity = self._candidates_parallel(
                sampler, examples, seeds, n, n_jobs, desc
            )
        owner = np.repeat(np.arange(len(examples), dtype=np.int64), sizes)
        self._warn_if_collapsed(owner, len(examples), sampler.kind)
        return segmentations, owner, np.array(multiplicity, dtype=np.int64)

    def _n_processes(self, n_examples: int) -> int:
        """Processes for :meth:`candidates` on ``n_examples``: 1 for small inputs, where
        starting workers costs more than it saves."""
        if self.n_jobs is None or self.n_jobs == 1:
            return 1
        n_jobs = joblib.cpu_count() if self.n_jobs == -1 else int(self.n_jobs)
        if n_jobs <= 1 or n_examples < max(MIN_PARALLEL_EXAMPLES, 2 * n_jobs):
            return 1
        return n_jobs

    def _candidates_parallel(self, sampler, examples, seeds, n, n_jobs, desc):
        """:func:`sample_and_choose` over contiguous chunks of ``examples`` in ``n_jobs``
        processes (about 4 chunks each, so that slow chunks even out), concatenated in order."""
        texts = [ex.words for ex in examples]
        size = -(-len(texts) // (n_jobs * CHUNKS_PER_PROCESS))
        starts = range(0, len(texts), size)
        jobs = joblib.Parallel(n_jobs=n_jobs, backend="loky", return_as="generator")(
            joblib.delayed(sample_and_choose)(
                sampler,
                texts[start : start + size],
                seeds[start : start + size],
                n,
                self.k,
                self.method,
            )
            for start in starts
        )
        segmentations, sizes, multiplicity = [], [], []
        with tqdm(
            total=len(examples), desc=desc, unit="text", disable=not self.progress
        ) as progress:
            for segs, chunk_sizes, mult in jobs:  # in order: chunk after chunk
                segmentations.extend(segs)
                sizes.extend(chunk_sizes)
                multiplicity.extend(mult)
                progress.update(len(chunk_sizes))
        return segmentations, sizes, multiplicity

    def _warn_if_collapsed(self, owner: np.ndarray, n: int, kind: str) -> None:
        # A sampler that barely varies at this p (Unigram at p=0.1: inverse temperature 9)
        # leaves one or two distinct segmentations per text, and the K votes say little.
        few = np.bincount(owner, minlength=n) < min(self.k, 3)
        if n and few.mean() > 0.5:
            logger.warning(
                "%d of %d examples have fewer than %d distinct segmentations among their K=%d "
                "(%s at p=%g): their scores rest on one or two tokenizations. Raise p (Unigram "
                "models: 0.3 or more; python -m benchmarks.diversity measures it)",
                int(few.sum()),
                n,
                min(self.k, 3),
                self.k,
                kind,
                self.p,
            )

    def weigh(self, examples: Sequence[Example]) -> WeighResult:
        """Weigh ``examples`` (usually the scout's own training data)."""
        if not hasattr(self, "scout_"):
            raise RuntimeError("call fit() before weigh()")
        if self.scout_ is None:  # the CRF alone (from_crf): no candidates to weigh
            return self.weigh_deterministic(examples)
        return self.weigh_candidates(examples, *self.candidates(examples))

    def weigh_deterministic(self, examples: Sequence[Example]) -> WeighResult:
        """Weigh ``examples`` on the scout's deterministic segmentation alone: K=1, nothing
        sampled, one forward pass per example, about 1/K of :meth:`weigh`'s.

        Enough for the default ranking, the "deterministic" score: ``deterministic_probability``
        (equal to ``probability`` here) is what :meth:`weigh` computes. The rest describes that
        single prediction: ``majority`` is the scout's deterministic prediction, ``reliability``
        is 0 or 1 and ``majority_share`` 1; NER ``majority_entities`` give, for each predicted
        entity, the scout's lowest probability of its predicted tags (not a share of copies).
        For c/K and the training weights, use :meth:`weigh`.
        """
        if not hasattr(self, "scout_"):
            raise RuntimeError("call fit() before weigh_deterministic()")
        predicted, gold_proba, predicted_proba, class_proba = self._deterministic(examples)
        one = np.ones(len(examples), dtype=np.int64)
        result = _collect(
            examples,
            predicted,
            np.arange(len(examples)),
            one,
            self.w_min,
            self._task,
            gold_proba=gold_proba,
            deterministic_proba=gold_proba,
            temperature=self.softmin_temperature,
        )
        self._with_class_probability(result, class_proba)
        if self._task == "ner":
            result.majority_entities = [
                entity_probability([p], [1], pred) for p, pred in zip(predicted_proba, predicted)
            ]
        return result

    def _with_class_probability(self, result: WeighResult, class_proba) -> None:
        if class_proba is not None:
            result.labels, result.class_probability = list(self.scout_.labels_), class_proba

    def weigh_candidates(
        self, examples: Sequence[Example], segmentations, owner, multiplicity
    ) -> WeighResult:
        """Weigh ``examples`` on given candidates, as :meth:`candidates` returns them."""
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
            _, deterministic, _, class_proba = self._deterministic(examples)
        result = _collect(
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


def _collect(
    examples,
    predicted,
    owner,
    multiplicity,
    w_min,
    task,
    gold_proba=None,
    deterministic_proba=None,
    temperature: float = SOFTMIN_TEMPERATURE,
) -> WeighResult:
    """Aggregate per-candidate outputs into a :class:`WeighResult`.

    ``predicted``, ``owner``, ``multiplicity`` and ``gold_proba`` (optional) have one entry per
    distinct candidate, grouped by example in order; ``deterministic_proba`` (optional) one
    p(gold) array per example; ``temperature``: their :func:`soft_minimum`'s. Missing
    probabilities give NaN scores.
    """
    n = len(examples)
    bounds = np.searchsorted(owner, np.arange(n + 1))
    preds, agree, ks, majors, shares, entities, major_entities = [], [], [], [], [], [], []
    probability = np.full(n, np.nan)
    entity_probs = []
    for i, ex in enumerate(examples):
        sl = slice(bounds[i], bounds[i + 1])
        p, m = predicted[sl], multiplicity[sl]
        preds.append([pred for pred, times in zip(p, m) for _ in range(times)])
        agree.append(agreement(p, m, ex.label))
        ks.append(int(m.sum()))
        top, count = majority(p, m)
        majors.append(top)
        shares.append(count / ks[-1])
        if task == "ner":
            entities.append(entity_agreement(p, m, ex.label))
            major_entities.append(entity_agreement(p, m, top))
        if gold_proba is not None:
            probs = gold_proba[sl]
            parts = [entity_parts(q, ex.label) for q in probs] if task == "ner" else probs
            probability[i] = gold_probability(parts, m, temperature)
            if task == "ner":
                entity_probs.append(entity_probability(probs, m, ex.label))
    agree_arr, k_arr = np.array(agree), np.array(ks)
    reliability = agree_arr / k_arr
    deterministic = np.full(n, np.nan)
    if deterministic_proba is not None:
        if task == "ner":
            deterministic_proba = [
                entity_parts(q, ex.label)
                for q, ex in zip(deterministic_proba, examples, strict=True)
            ]
        deterministic = np.array([soft_minimum(q, temperature) for q in deterministic_proba])
    return WeighResult(
        ids=[ex.id for ex in examples],
        predictions=preds,
        agreement=agree_arr,
        k=k_arr,
        reliability=reliability,
        weight=sample_weights(reliability, w_min),
        majority=majors,
        majority_share=np.array(shares),
        entities=entities,
        probability=probability,
        deterministic_probability=deterministic,
        entity_probability=entity_probs,
        majority_entities=major_entities,
    )
