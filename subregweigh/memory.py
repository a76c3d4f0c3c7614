"""The project's memory: what the rest of a data set's annotations say of each word.

A scout judges an example in-sample: it trained on that very annotation, so a word the
annotator missed once ("obama" left outside any entity in one tweet) can look right to it, above
all on a small or sparse project where the scout learns little. The other annotations of the
same word are evidence the scout's probability does not hold: a word form labelled PER in seven
other tasks and O here is doubtful, whatever the scout learned.

The memory turns that evidence into a probability, per word, as a Bayesian update of the
models' distribution over entity types (B-/I- folded; ``O`` is a type of its own). With ``n``
occurrences of the word form in the *other* examples (leave one example out), ``n_T`` of them
inside an entity of type ``T``, and ``m_T`` the models' probability of type ``T`` (the scouts
and the CRF mixed, as the default score reads them),

    q_T = (n_T + strength * m_T) / (n + strength),

so the models' view counts as ``strength`` pseudo-annotations: a word seen rarely elsewhere
keeps the models' probability, one seen often takes the project's. Each tag then keeps its
share of its type: ``p(tag) = q_T * p_model(tag) / m_T`` (the B-/I- split is the models'; where
the models give the type nothing, the other annotations' split). A word seen in no other example
is left as it is. Word forms are compared as written (case kept: "Apple" and "apple" differ).

:class:`WordMemory` is fitted on a project's annotations and kept with its scouts and CRF
(:data:`MEMORY_FILE`); :func:`remembered` is a pure function over arrays.
:class:`subregweigh.weigh.SubRegWeigh` applies it (``memory_strength``) to the per-word
distributions its "deterministic" score reads.
"""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from subregweigh.example import Example
from subregweigh.io.atomic import atomic_open

OUTSIDE = "O"


def entity_type(tag: str) -> str:
    """The type a tag belongs to: ``"B-PER"`` and ``"I-PER"`` -> ``"PER"``; ``"O"`` -> ``"O"``."""
    return tag.split("-", 1)[-1]


MEMORY_FILE = "memory.json"  # beside the scouts and the CRF in a saved weigher's folder


def memory_path(folder: str | os.PathLike) -> Path:
    """Where the memory kept in ``folder`` is (:data:`MEMORY_FILE`; it may not exist)."""
    return Path(folder) / MEMORY_FILE


@dataclass(frozen=True)
class WordMemory:
    """Every word form's tags across a data set, and each example's own, to leave it out.

    Fitted on a project's annotations (:meth:`of`), it judges any example against them: one
    that took part (by ``Example.id``) is left out of its own evidence, whatever its
    annotation says now, so an annotation edited since is judged against the others alone.

    Attributes
    ----------
    counts : dict of str -> Counter
        Word form -> how often each tag annotates it, over all examples.
    own : dict of str -> dict of str -> Counter
        Example id -> its own word forms' tag counts.
    """

    counts: dict[str, Counter]
    own: dict[str, dict[str, Counter]]

    @classmethod
    def of(cls, examples: Sequence[Example]) -> WordMemory:
        """The memory of ``examples`` (NER: ``label`` one tag per word)."""
        counts: dict[str, Counter] = defaultdict(Counter)
        own: dict[str, dict[str, Counter]] = defaultdict(lambda: defaultdict(Counter))
        for ex in examples:
            mine = own[ex.id]
            for word, tag in zip(ex.words, ex.label, strict=True):
                mine[word][tag] += 1
                counts[word][tag] += 1
        return cls(dict(counts), {i: dict(words) for i, words in own.items()})

    def others(self, example: Example, word: str) -> Counter:
        """The tags of ``word`` in every example of the memory but ``example``."""
        seen = self.counts.get(word)
        if seen is None:
            return Counter()
        return seen - self.own.get(example.id, {}).get(word, Counter())

    def save(self, path: str | os.PathLike) -> Path:
        """Write the memory to ``path`` (JSON, atomically); :meth:`load` reads it back."""
        path = Path(path)
        with atomic_open(path, "w") as f:
            json.dump({"counts": self.counts, "own": self.own}, f, separators=(",", ":"))
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> WordMemory:
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
        return cls(
            {w: Counter(tags) for w, tags in raw["counts"].items()},
            {i: {w: Counter(t) for w, t in words.items()} for i, words in raw["own"].items()},
        )


def remembered(
    proba: np.ndarray, labels: Sequence[str], others: Sequence[Counter], strength: float
) -> np.ndarray:
    """One example's tag distributions updated by what the other examples say, shape
    (n_words, n_labels), the columns in ``labels`` order.

    ``proba``: shape (n_words, n_labels), each row a distribution (the models' mixture);
    ``others``: per word, the tags of its form in the other examples (:meth:`WordMemory.others`;
    empty: the row is kept). ``strength`` > 0: the models' weight in pseudo-annotations.
    """
    if strength <= 0:
        raise ValueError(f"strength must be positive, got {strength}")
    proba = np.asarray(proba, dtype=np.float64)
    out = proba.copy()
    types = [entity_type(label) for label in labels]
    members: dict[str, list[int]] = defaultdict(list)
    for j, t in enumerate(types):
        members[t].append(j)
    for w, seen in enumerate(others):
        n = sum(seen.values())
        if not n:
            continue
        by_type = Counter()
        for tag, c in seen.items():
            by_type[entity_type(tag)] += c
        row = proba[w]
        for t, cols in members.items():
            mass = row[cols].sum()
            q = (by_type[t] + strength * mass) / (n + strength)
            if mass > 1e-12:
                out[w, cols] = q * row[cols] / mass
            elif by_type[t]:
                out[w, cols] = [q * seen[labels[j]] / by_type[t] for j in cols]
            else:
                out[w, cols] = 0.0
        total = out[w].sum()  # tags the models do not know take no mass: renormalize
        if total > 0:
            out[w] /= total
    return out


def remember(
    examples: Sequence[Example],
    proba: Sequence[np.ndarray],
    labels: Sequence[str],
    strength: float,
    memory: WordMemory | None = None,
) -> list[np.ndarray]:
    """:func:`remembered` for every example, against ``memory`` (None: the memory of
    ``examples`` themselves, each against all the others): per example shape
    (n_words, n_labels), float32. ``proba``: the models' tag distributions, one per example."""
    memory = WordMemory.of(examples) if memory is None else memory
    return [
        remembered(p, labels, [memory.others(ex, word) for word in ex.words], strength).astype(
            np.float32
        )
        for ex, p in zip(examples, proba, strict=True)
    ]
