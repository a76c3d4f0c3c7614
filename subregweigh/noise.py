"""Synthetic label noise for detection experiments.

:func:`inject_ner_noise` follows SubRegWeigh's "pseudo-incorrect label" procedure: a fixed
fraction of all word labels in the data set is replaced by a different label. The chosen
positions are known, so a detector's ranking of examples can be scored against them.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .example import Example
from .tags import entity_types as _entity_types

RandomState = int | np.random.Generator | None


def _n_chosen(rate: float, total: int) -> int:
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"rate must be in [0, 1], got {rate}")
    return int(round(rate * total))


def inject_ner_noise(
    examples: Sequence[Example],
    rate: float = 0.1,
    *,
    entity_types: Sequence[str] | None = None,
    random_state: RandomState = None,
) -> tuple[list[Example], np.ndarray]:
    """Corrupt a fraction of the word labels of an IOB2 NER data set.

    ``k = round(rate * total_words)`` word positions are drawn without replacement over the
    whole data set. Positions are processed in data set order; each one gets a tag drawn
    uniformly from ``{O} ∪ {B-X : X in entity_types}`` minus its original tag and minus its
    current tag (so every chosen position ends up changed, and ``I-X`` positions, whose tag
    is never a candidate, may become any candidate).

    Repair, to keep valid IOB2: after a position is set, if the next word is ``I-X`` and the
    new tag is neither ``B-X`` nor ``I-X``, that word becomes ``B-X`` (the rest of the old
    entity survives as its own entity). So a replaced ``B-X``/``I-X`` splits or shortens the
    old entity, and a new ``B-Y`` in front of ``I-X`` does not swallow it. Repairs only turn a
    later ``I-X`` into ``B-X`` and never touch an earlier position, so a chosen position keeps
    the tag it was given. Repaired, non-chosen positions also differ from the original; they
    are not counted in ``k``.

    Parameters
    ----------
    examples : sequence of Example, length n
        NER examples with valid IOB2 tags.
    rate : float in [0, 1], default 0.1
        Fraction of all word labels to replace.
    entity_types : sequence of str, optional
        Types ``X`` for the ``B-X`` candidates. Default: the types found in ``examples``.
    random_state : int, numpy Generator or None, default None

    Returns
    -------
    corrupted : list of Example, length n
        Same ids, words and sources; new labels.
    mask : ndarray of bool, shape (n,)
        True where an example's tag sequence differs from the original.
    """
    rng = np.random.default_rng(random_state)
    types = sorted(entity_types) if entity_types is not None else _entity_types(examples)
    candidates = ["O"] + ["B-" + t for t in types]
    if len(candidates) < 2:
        raise ValueError("need at least one entity type to draw replacement tags from")

    lengths = np.array([len(ex.label) for ex in examples], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    total = int(offsets[-1])
    k = _n_chosen(rate, total)
    chosen = np.sort(rng.choice(total, size=k, replace=False)) if k else np.empty(0, np.int64)
    ex_idx = np.searchsorted(offsets, chosen, side="right") - 1

    tags = [list(ex.label) for ex in examples]
    for flat, i in zip(chosen.tolist(), ex_idx.tolist()):
        seq, j = tags[i], flat - int(offsets[i])
        original = examples[i].label[j]
        options = [c for c in candidates if c != original and c != seq[j]]
        new = options[int(rng.integers(len(options)))]
        seq[j] = new
        nxt = seq[j + 1] if j + 1 < len(seq) else ""
        if nxt.startswith("I-") and new[2:] != nxt[2:]:
            seq[j + 1] = "B-" + nxt[2:]

    corrupted = [Example(ex.id, ex.words, tuple(t), ex.source) for ex, t in zip(examples, tags)]
    mask = np.array([c.label != ex.label for c, ex in zip(corrupted, examples)], dtype=bool)
    return corrupted, mask


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
        Same ids, words and sources.
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
        out[i] = Example(ex.id, ex.words, label, ex.source)
    mask = np.zeros(n, dtype=bool)
    mask[chosen] = True
    return out, mask
