"""The scores: pure functions from a scout's predictions and probabilities to an example's
reliability, probability of its label and training weight, and :class:`WeighResult`, which holds
them for a data set.

With ``c`` the number of an example's K candidate predictions equal to its gold label (NER: the
whole tag sequence),

    reliability = c / K,    weight = max(w_min, c / K).

c / K (the paper's agreement ratio) only sees argmax decisions; the same forward passes also give
the scout's probability of the gold label, a finer score: for each candidate the soft minimum
(:func:`soft_minimum`) of the gold parts' probabilities (NER: each gold entity once, the mean of
its words' p(gold tag), and each word outside the entities, :func:`entity_parts`; multi-label:
the gold membership of each class; single-label: the gold class), averaged over the K
candidates (:func:`gold_probability`; per gold entity, the minimum: :func:`entity_probability`).
:class:`subregweigh.weigh.SubRegWeigh` computes the predictions; nothing here runs a model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from subregweigh.options import DEFAULT_SCORE, DEFAULT_W_MIN, SCORES, SOFTMIN_TEMPERATURE
from subregweigh.tags import entity_spans


def sample_weights(reliability, w_min: float = DEFAULT_W_MIN) -> np.ndarray:
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


@dataclass
class WeighResult:
    """Per-example results of :meth:`~subregweigh.weigh.SubRegWeigh.weigh`; arrays have shape (n,).

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
    scout_proba : list of ndarray of float32, each shape (n_words, n_labels)
        NER, :meth:`~subregweigh.weigh.SubRegWeigh.weigh_deterministic` only: per example the
        scouts' mean tag distribution (:meth:`~subregweigh.weigh.SubRegWeigh.scout_proba`),
        what a refitted CRF is mixed with again; empty where not computed.
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
    scout_proba: list[np.ndarray] = field(default_factory=list)

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


def collect(
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


def deterministic_result(
    examples,
    predicted,
    gold_proba,
    predicted_proba,
    task,
    w_min: float,
    temperature: float = SOFTMIN_TEMPERATURE,
) -> WeighResult:
    """The :class:`WeighResult` of one prediction per example (K=1; the deterministic
    segmentation, or the CRF alone): ``predicted`` labels, their ``gold_proba`` (also the
    deterministic score) and, for NER, ``predicted_proba`` (p of each predicted tag) for
    ``majority_entities``, each predicted entity with its lowest p."""
    one = np.ones(len(examples), dtype=np.int64)
    result = collect(
        examples,
        predicted,
        np.arange(len(examples)),
        one,
        w_min,
        task,
        gold_proba=gold_proba,
        deterministic_proba=gold_proba,
        temperature=temperature,
    )
    if task == "ner":
        result.majority_entities = [
            entity_probability([p], [1], pred) for p, pred in zip(predicted_proba, predicted)
        ]
    return result
