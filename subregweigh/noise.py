"""Synthetic label noise for detection experiments.

Two models of noise, each returning the corrupted data set and a per-example flag, so that a
detector's ranking of examples can be scored against the known corruptions:

* :func:`inject_ner_noise`, the paper's "pseudo-incorrect labels" (Tsuji et al. 2025, appendix;
  the authors' ``add_noise.py``): word labels are replaced one by one until a fixed share of all
  word labels differs, each replacement carrying the rest of its entity along (:func:`retag`).
  Most sentences of CoNLL end up corrupted at 10%.
* :func:`inject_sentence_noise`: a fixed share of the examples gets exactly one corruption each
  (NER: one entity retyped, dropped, added or with one boundary shifted; classification: one
  flipped label, :func:`flip_labels`), so the flags mark the corrupted sentences one to one.
* :func:`inject_annotator_noise`: the same, with each corruption of a kind drawn as often as
  real annotators make it (:data:`ANNOTATOR_MIX`): mostly missed entities and boundaries.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Literal, Sequence

import numpy as np

from .example import Example, Task
from .tags import _split, entity_spans, iob1_to_iob2, spans_to_tags
from .tags import entity_types as _entity_types

RandomState = int | np.random.Generator | None
SENTENCE_CORRUPTIONS = ("retype", "drop", "add", "shift")

# How often real annotators make each kind of error, as a corruption of the correct labels: a
# missed entity is a "drop", a span one word off a "shift", a wrong type a "retype", an entity
# that is none an "add". The mean of the shares of the entity changes on CoNLL-2003 test against
# CoNLL++ (type 0.376, boundary 0.254, missing 0.329, spurious 0.042) and on the crowd's tweets
# against the experts' (both judgment slots: 0.024, 0.289, 0.687, 0.000): the two kinds of real
# errors weigh the same (python -m benchmarks.selftest_real, "error mix").
ANNOTATOR_MIX = {"drop": 0.508, "shift": 0.271, "retype": 0.200, "add": 0.021}


def _n_chosen(rate: float, total: int) -> int:
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"rate must be in [0, 1], got {rate}")
    return int(round(rate * total))


def _replacement_candidates(types: Sequence[str]) -> list[str]:
    candidates = ["O"] + ["B-" + t for t in types]
    if len(candidates) < 2:
        raise ValueError("need at least one entity type to draw replacement tags from")
    return candidates


def retag(tags: Sequence[str], j: int, new: str) -> list[str]:
    """Give word ``j`` the tag ``new`` (``"O"`` or ``"B-Y"``) the way the paper's noise does.

    * ``O -> B-Y`` right before a ``B-Y``: that entity now starts at ``j`` (its ``B-Y`` becomes
      ``I-Y``): ``[O B-LOC] -> [B-LOC I-LOC]``.
    * ``B-X``/``I-X -> B-Y``: the rest of the entity follows the new type:
      ``[B-ORG I-ORG I-ORG]`` with word 0 set to ``B-LOC`` is ``[B-LOC I-LOC I-LOC]``; word 1
      set to ``B-ORG`` splits it, ``[B-ORG B-ORG I-ORG]``.
    * ``B-X``/``I-X -> O``: the rest of the entity stays an entity of its own:
      ``[B-PER I-PER I-PER]`` with word 1 set to ``O`` is ``[B-PER O B-PER]``.

    Then any ``I-X`` left without its ``B-X``/``I-X`` becomes ``B-X`` (IOB2 repair; valid IOB2
    input never needs it).

    Parameters
    ----------
    tags : sequence of str, shape (n_words,)
        IOB2 tags.
    j : int, 0 <= j < n_words
    new : str, ``"O"`` or ``"B-Y"``

    Returns
    -------
    list of str, shape (n_words,)
    """
    if new != "O" and not new.startswith("B-"):
        raise ValueError(f"the new tag must be O or B-X, got {new!r}")
    out = list(tags)
    current, n = out[j], len(out)
    if current == "O":
        if j + 1 < n and out[j + 1] == new:
            out[j + 1] = "I-" + new[2:]
    elif new == "O":
        if j + 1 < n and out[j + 1].startswith("I-"):
            out[j + 1] = "B-" + out[j + 1][2:]
    else:
        k = j + 1
        while k < n and out[k].startswith("I-"):
            out[k] = "I-" + new[2:]
            k += 1
    out[j] = new
    return iob1_to_iob2(out)


def inject_ner_noise(
    examples: Sequence[Example],
    rate: float = 0.1,
    *,
    entity_types: Sequence[str] | None = None,
    random_state: RandomState = None,
) -> tuple[list[Example], np.ndarray]:
    """Corrupt a share of the word labels of an IOB2 NER data set, as the paper does.

    Word positions are visited in a random order over the whole data set until
    ``k = round(rate * total_words)`` word labels differ from the original. Each visited word
    gets a tag drawn uniformly from ``{O} ∪ {B-X : X in entity_types}`` minus its current tag
    when that is ``O`` or ``B-X`` (an ``I-X`` word may get any candidate), applied with
    :func:`retag`, so the rest of an entity follows a retyped word and a new ``B-X`` in front
    of ``B-X`` merges with it. Changes that :func:`retag` carries to other words count towards
    ``k``, as in the authors' ``add_noise.py``; unlike it, ``k`` counts labels that really
    differ from the original (the authors count writes, including ones that leave a label
    as it was) and each example is corrupted on its own (the authors give repeated sentences
    one shared corruption).

    Parameters
    ----------
    examples : sequence of Example, length n
        NER examples with valid IOB2 tags.
    rate : float in [0, 1], default 0.1
        Share of all word labels that end up changed (the last replacement may overshoot by
        the rest of its entity).
    entity_types : sequence of str, optional
        Types ``X`` for the ``B-X`` candidates. Default: the types found in ``examples``.
    random_state : int, numpy Generator or None, default None

    Returns
    -------
    corrupted : list of Example, length n
        Same ids, words, sources and annotators; new labels.
    mask : ndarray of bool, shape (n,)
        True where an example's tag sequence differs from the original.
    """
    rng = np.random.default_rng(random_state)
    types = sorted(entity_types) if entity_types is not None else _entity_types(examples)
    candidates = _replacement_candidates(types)

    lengths = np.array([len(ex.label) for ex in examples], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    total = int(offsets[-1])
    k = _n_chosen(rate, total)

    tags = [list(ex.label) for ex in examples]
    differ = np.zeros(len(examples), dtype=np.int64)  # changed word labels per example
    changed = 0
    if k:
        order = rng.permutation(total)
        ex_idx = np.searchsorted(offsets, order, side="right") - 1
        for flat, i in zip(order.tolist(), ex_idx.tolist()):
            if changed >= k:
                break
            seq, j = tags[i], flat - int(offsets[i])
            current = seq[j]
            options = [c for c in candidates if c != current]
            seq = tags[i] = retag(seq, j, options[int(rng.integers(len(options)))])
            now = sum(a != b for a, b in zip(seq, examples[i].label))
            changed += now - int(differ[i])
            differ[i] = now

    corrupted = [replace(ex, label=tuple(t)) for ex, t in zip(examples, tags)]
    return corrupted, differ > 0


def _sentence_corruptions(tags: Sequence[str], n_types: int) -> list[str]:
    """The kinds of :data:`SENTENCE_CORRUPTIONS` that can change this IOB2 sequence."""
    spans = entity_spans(tags)
    kinds = []
    if spans and n_types >= 2:
        kinds.append("retype")
    if spans:
        kinds.append("drop")
    if "O" in tags:
        kinds.append("add")
    if any(_boundary_moves(tags, s) for s in spans):
        kinds.append("shift")
    return kinds


def _boundary_moves(tags: Sequence[str], span: tuple[str, int, int]) -> list[tuple[int, int]]:
    """``(start, end)`` of the span with one boundary moved by one word, into ``O`` words only."""
    _, start, end = span
    moves = []
    if start > 0 and tags[start - 1] == "O":
        moves.append((start - 1, end))
    if end < len(tags) and tags[end] == "O":
        moves.append((start, end + 1))
    if end - start > 1:
        moves += [(start + 1, end), (start, end - 1)]
    return moves


def corrupt_sentence(
    tags: Sequence[str],
    kind: str,
    types: Sequence[str],
    rng: np.random.Generator,
    max_added_length: int = 3,
) -> list[str]:
    """One IOB2-consistent corruption of an IOB2 tag sequence.

    Parameters
    ----------
    tags : sequence of str, shape (n_words,)
    kind : {"retype", "drop", "add", "shift"}
        ``retype``: one entity (uniform) gets another type (uniform). ``drop``: one entity
        becomes ``O``. ``add``: a new entity of a uniform type on ``O`` words: a uniform ``O``
        word starts it, its length is uniform in 1..``max_added_length`` within the run of
        ``O`` words. ``shift``: one entity (uniform among those that can move) gets one
        boundary moved by one word (uniform among the moves): it grows into an ``O``
        neighbour, or, if longer than one word, loses its first or last word.
    types : sequence of str
        Entity types to draw from.
    rng : numpy Generator

    Returns
    -------
    list of str, shape (n_words,)
        Valid IOB2, different from ``tags``.

    Raises
    ------
    ValueError
        If ``kind`` cannot change ``tags`` (see :func:`_sentence_corruptions`).
    """
    if kind not in _sentence_corruptions(tags, len(types)):
        raise ValueError(f"corruption {kind!r} cannot change {list(tags)}")
    spans = entity_spans(tags)
    n = len(tags)
    if kind in ("retype", "drop"):
        idx = int(rng.integers(len(spans)))
        etype, start, end = spans.pop(idx)
        if kind == "retype":
            others = [t for t in types if t != etype]
            spans.insert(idx, (others[int(rng.integers(len(others)))], start, end))
    elif kind == "add":
        free = [i for i, t in enumerate(tags) if t == "O"]
        start = free[int(rng.integers(len(free)))]
        run = 1
        while start + run < n and tags[start + run] == "O":
            run += 1
        length = 1 + int(rng.integers(min(run, max_added_length)))
        spans.append((types[int(rng.integers(len(types)))], start, start + length))
    else:
        movable = [i for i, s in enumerate(spans) if _boundary_moves(tags, s)]
        idx = movable[int(rng.integers(len(movable)))]
        moves = _boundary_moves(tags, spans[idx])
        start, end = moves[int(rng.integers(len(moves)))]
        spans[idx] = (spans[idx][0], start, end)
    return spans_to_tags(spans, n)


def _infer_task(examples: Sequence[Example]) -> Task:
    for ex in examples:
        if len(ex.label) != len(ex.words) or any(_split(t) is None for t in ex.label):
            return "classification"
    return "ner"


def inject_sentence_noise(
    examples: Sequence[Example],
    rate: float = 0.15,
    *,
    task: Task | None = None,
    entity_types: Sequence[str] | None = None,
    classes: Sequence[str] | None = None,
    kinds: Sequence[Literal["retype", "drop", "add", "shift"]] = SENTENCE_CORRUPTIONS,
    random_state: RandomState = None,
) -> tuple[list[Example], np.ndarray]:
    """Corrupt a share of the examples, each with exactly one error.

    NER: ``round(rate * n)`` examples are drawn uniformly among those that at least one of
    ``kinds`` can change (every example with a word, for the default kinds; fewer if there
    are not enough); each gets one corruption of a kind drawn uniformly among those possible
    for it, applied by :func:`corrupt_sentence`. Classification: :func:`flip_labels`.

    Parameters
    ----------
    examples : sequence of Example, length n
        NER examples in valid IOB2, or classification examples.
    rate : float in [0, 1], default 0.15
        Share of the examples to corrupt.
    task : {"ner", "classification"} or None, default None
        ``None``: NER if every label has one ``O``/``B-X``/``I-X`` tag per word.
    entity_types : sequence of str, optional
        NER: types for retyped and added entities. Default: the types found in ``examples``.
    classes : sequence of str, optional
        Classification: see :func:`flip_labels`.
    kinds : sequence of {"retype", "drop", "add", "shift"}, default all four
        NER: the corruptions to draw from.
    random_state : int, numpy Generator or None, default None

    Returns
    -------
    corrupted : list of Example, length n
        Same ids, words, sources and annotators.
    mask : ndarray of bool, shape (n,)
        True for the corrupted (hence changed) examples.
    """
    task = task or _infer_task(examples)
    if task == "classification":
        return flip_labels(examples, rate, classes=classes, random_state=random_state)
    unknown = set(kinds) - set(SENTENCE_CORRUPTIONS)
    if unknown or not kinds:
        raise ValueError(f"kinds must be among {SENTENCE_CORRUPTIONS}, got {list(kinds)}")
    rng = np.random.default_rng(random_state)
    types = sorted(entity_types) if entity_types is not None else _entity_types(examples)
    if not types:
        raise ValueError("need at least one entity type to corrupt NER labels")
    n = len(examples)
    k = _n_chosen(rate, n)
    possible = [
        [c for c in _sentence_corruptions(ex.label, len(types)) if c in kinds] for ex in examples
    ]
    eligible = np.flatnonzero([bool(p) for p in possible])
    chosen = np.sort(rng.choice(eligible, size=min(k, eligible.size), replace=False))
    out = list(examples)
    for i in chosen.tolist():
        ex = examples[i]
        kind = possible[i][int(rng.integers(len(possible[i])))]
        out[i] = replace(ex, label=tuple(corrupt_sentence(ex.label, kind, types, rng)))
    mask = np.zeros(n, dtype=bool)
    mask[chosen] = True
    return out, mask


def inject_annotator_noise(
    examples: Sequence[Example],
    rate: float = 0.1,
    *,
    kind_weights: Mapping[str, float] = ANNOTATOR_MIX,
    entity_types: Sequence[str] | None = None,
    random_state: RandomState = None,
) -> tuple[list[Example], np.ndarray]:
    """Corrupt a share of NER examples, each with exactly one error of a kind drawn as real
    annotators make them.

    For each of the ``round(rate * n)`` corruptions, a kind is drawn with ``kind_weights``
    (among those some unchosen example can still take), then an example uniformly among the
    unchosen ones it can change, which :func:`corrupt_sentence` changes so. The kind comes
    first: on sparse text most examples hold no entity and could only get one added, which real
    annotators seldom do.

    Parameters
    ----------
    examples : sequence of Example, length n
        NER examples in valid IOB2.
    rate : float in [0, 1], default 0.1
        Share of the examples to corrupt (fewer when not enough can take a kind).
    kind_weights : mapping of {"retype", "drop", "add", "shift"} to float, default ANNOTATOR_MIX
        Relative frequency of each kind (a kind left out or at 0 never happens).
    entity_types : sequence of str, optional
        Types for retyped and added entities. Default: the types found in ``examples``.
    random_state : int, numpy Generator or None, default None

    Returns
    -------
    corrupted : list of Example, length n
    mask : ndarray of bool, shape (n,)
        True for the corrupted examples.
    """
    unknown = set(kind_weights) - set(SENTENCE_CORRUPTIONS)
    if unknown or not any(w > 0 for w in kind_weights.values()):
        raise ValueError(
            f"kind_weights must weigh some of {SENTENCE_CORRUPTIONS} above 0, got "
            f"{dict(kind_weights)}"
        )
    rng = np.random.default_rng(random_state)
    types = sorted(entity_types) if entity_types is not None else _entity_types(examples)
    if not types:
        raise ValueError("need at least one entity type to corrupt NER labels")
    kinds = [k for k in SENTENCE_CORRUPTIONS if kind_weights.get(k, 0) > 0]
    weights = np.array([kind_weights[k] for k in kinds], dtype=float)
    takers = {k: [] for k in kinds}
    for i, ex in enumerate(examples):
        for kind in _sentence_corruptions(ex.label, len(types)):
            if kind in takers:
                takers[kind].append(i)
    out, mask = list(examples), np.zeros(len(examples), dtype=bool)
    for _ in range(_n_chosen(rate, len(examples))):
        open_kinds = [j for j, k in enumerate(kinds) if any(not mask[i] for i in takers[k])]
        if not open_kinds:
            break
        p = weights[open_kinds] / weights[open_kinds].sum()
        kind = kinds[open_kinds[int(rng.choice(len(open_kinds), p=p))]]
        free = [i for i in takers[kind] if not mask[i]]
        i = free[int(rng.integers(len(free)))]
        out[i] = replace(out[i], label=tuple(corrupt_sentence(out[i].label, kind, types, rng)))
        mask[i] = True
    return out, mask


def flip_labels(
    examples: Sequence[Example],
    rate: float = 0.1,
    *,
    classes: Sequence[str] | None = None,
    random_state: RandomState = None,
) -> tuple[list[Example], np.ndarray]:
    """Corrupt the labels of ``round(rate * n)`` classification examples.

    Single-label data (every example has exactly one class): the chosen example's class is
    replaced by a different class drawn uniformly. Multi-label data (any example with a
    label count other than one): one class drawn uniformly from ``classes`` is toggled
    (removed if present, added otherwise), which may leave an empty label.

    Parameters
    ----------
    examples : sequence of Example, length n
    rate : float in [0, 1], default 0.1
    classes : sequence of str, optional
        Class names. Default: the classes found in ``examples``.
    random_state : int, numpy Generator or None, default None

    Returns
    -------
    corrupted : list of Example, length n
        Same ids, words, sources and annotators.
    mask : ndarray of bool, shape (n,)
        True for the chosen (hence changed) examples.
    """
    rng = np.random.default_rng(random_state)
    classes = sorted(
        set(classes) if classes is not None else {c for ex in examples for c in ex.label}
    )
    multi = any(len(ex.label) != 1 for ex in examples)
    if len(classes) < 2 and not multi:
        raise ValueError("need at least two classes to flip labels")

    n = len(examples)
    chosen = np.sort(rng.choice(n, size=_n_chosen(rate, n), replace=False))
    out = list(examples)
    for i in chosen.tolist():
        ex = examples[i]
        if multi:
            c = classes[int(rng.integers(len(classes)))]
            label = tuple(sorted(set(ex.label) ^ {c}))
        else:
            options = [c for c in classes if c != ex.label[0]]
            label = (options[int(rng.integers(len(options)))],)
        out[i] = replace(ex, label=label)
    mask = np.zeros(n, dtype=bool)
    mask[chosen] = True
    return out, mask
