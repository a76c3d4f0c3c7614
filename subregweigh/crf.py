"""A conditional random field over word features: the NER scout's cased second opinion.

The default scout (the offline MiniLM) is uncased: "Jordan" the country and "jordan" read the
same to it, and case is much of what separates names in CoNLL-style annotation. A linear-chain
CRF over hand-made word features (the word, its shape and case, its affixes and its
neighbours; :func:`word_features`) sees case and trains in seconds. Its p(gold tag) of each
word, averaged half and half with the scouts' (``SubRegWeigh(crf=True)``, the default for NER),
ranks CoNLL-2003's real errors above the scouts alone (docs/evaluation.md); a CRF over
lowercased words adds nearly nothing, so it is the case that helps.

The CRF is python-crfsuite's (CRFsuite, L-BFGS with an L2 penalty ``c2``); it is trained on the
same examples as the scout and, like the scout, judges them in-sample.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from subregweigh.example import Example
from subregweigh.io.atomic import atomic_open

# The model file's name where it is kept beside a scout (the CLI's --save-scout folder, a Label
# Studio version's folder).
CRF_FILE = "crf.crfsuite"


# The CRF's share of a word's p(gold) beside the scouts' mean: on CoNLL-2003's real errors a half
# ranks near the best on each half of the test set, and the best share of one half ranks below
# it on the other (docs/evaluation.md).
CRF_SHARE = 0.5

# Up to how many examples a CRF is quick enough to train first and publish its scores alone
# while the scout trains (the Label Studio backend's early scores). CRFsuite's training time
# grows faster than the data (one core: about 1 s at 1,000 CoNLL sentences, 10 s at 3,453,
# 80 s at 14,041): beyond this, the scout's own early scores come sooner.
CRF_FIRST_EXAMPLES = 5000


def mix_gold(scout_gold, crf_gold, share: float = CRF_SHARE) -> list[np.ndarray]:
    """Per example, ``(1 - share) * scout + share * CRF`` of each word's p(gold tag): what the
    default NER score takes its soft minimum of. ``scout_gold`` and ``crf_gold``: sequences of
    arrays of shape (n_words,), one per example, in the same order."""
    return [(1 - share) * s + share * c for s, c in zip(scout_gold, crf_gold, strict=True)]


def word_shape(word: str) -> str:
    """``word`` with each run of upper-case letters as ``X``, lower-case ``x``, digits ``d``
    and other characters kept: "McDonald's" -> "XxXx'x", "1990s" -> "dx"."""
    shape: list[str] = []
    for char in word:
        kind = "X" if char.isupper() else "x" if char.islower() else "d" if char.isdigit() else char
        if not shape or shape[-1] != kind:
            shape.append(kind)
    return "".join(shape)


def word_features(words: Sequence[str], i: int) -> list[str]:
    """The CRF's binary features of ``words[i]``: the lowercased word, its shape, whether it is
    title-case or upper-case, its first and last three letters, and the lowercased word and shape
    of the two words on each side (the adjacent ones also as a pair with this word)."""
    word = words[i]
    lower = word.lower()
    features = [
        "bias",
        f"w={lower}",
        f"shape={word_shape(word)}",
        f"title={int(word.istitle())}",
        f"upper={int(word.isupper())}",
        f"prefix={lower[:3]}",
        f"suffix={lower[-3:]}",
    ]
    for offset in (-2, -1, 1, 2):
        j = i + offset
        if not 0 <= j < len(words):
            features.append(f"{offset}:pad")
            continue
        other = words[j]
        features += [f"{offset}:w={other.lower()}", f"{offset}:shape={word_shape(other)}"]
        if abs(offset) == 1:
            features.append(f"{offset}:pair={other.lower()}|{lower}")
    if i == 0:
        features.append("first")
    return features


def sentence_features(words: Sequence[str]) -> list[list[str]]:
    """:func:`word_features` of every word, shape (n_words, n_features)."""
    return [word_features(words, i) for i in range(len(words))]


class FeatureTagger:
    """A linear-chain CRF tagger over :func:`word_features`, for IOB2 tags.

    Parameters
    ----------
    c2 : float, default=0.3
        The L2 penalty. On CoNLL-2003's real errors 0.3 ranks best of 0.1, 0.3, 1 and 3, alone
        and beside the scout, on both halves of the set (docs/evaluation.md).
    max_iterations : int or None, default=None
        L-BFGS iterations; None: until CRFsuite's convergence test stops it. The same examples
        give the same model.

    Attributes
    ----------
    labels_ : list of str
        The tags seen in training.
    model_ : bytes
        The trained CRFsuite model (what :meth:`save` writes).
    """

    def __init__(self, c2: float = 0.3, max_iterations: int | None = None):
        self.c2 = c2
        self.max_iterations = max_iterations

    def fit(self, examples: Sequence[Example]) -> FeatureTagger:
        """Train on ``examples`` (NER: one tag per word); examples without words are skipped."""
        import pycrfsuite

        if not 0 <= self.c2 < np.inf:
            raise ValueError(f"c2 must be a number >= 0, got {self.c2!r}")
        trainer = pycrfsuite.Trainer(verbose=False)
        for ex in examples:
            if ex.words:
                trainer.append(sentence_features(ex.words), list(ex.label))
        params = {"c1": 0.0, "c2": self.c2, "feature.possible_transitions": True}
        if self.max_iterations is not None:
            params["max_iterations"] = self.max_iterations
        trainer.set_params(params)
        handle, path = tempfile.mkstemp(suffix=".crfsuite")  # CRFsuite writes only to a file
        os.close(handle)
        try:
            trainer.train(path)
            self.model_ = Path(path).read_bytes()
        finally:
            os.unlink(path)
        self.labels_ = sorted(self._tagger().labels())
        return self

    def _tagger(self):
        import pycrfsuite

        if not hasattr(self, "model_"):
            raise RuntimeError("this FeatureTagger is not fitted yet: call fit() or load()")
        tagger = pycrfsuite.Tagger()
        tagger.open_inmemory(self.model_)
        return tagger

    def gold_proba(self, examples: Sequence[Example]) -> list[np.ndarray]:
        """Per example, the marginal probability of each word's gold tag, shape (n_words,)
        (float32; 0 for a tag the CRF never saw)."""
        return self.tag_proba(examples, [ex.label for ex in examples])

    def tag_proba(self, examples: Sequence[Example], tags) -> list[np.ndarray]:
        """:meth:`gold_proba` of other ``tags`` (one sequence per example, one tag per word),
        e.g. of the CRF's own :meth:`predict`."""
        tagger = self._tagger()
        known = set(tagger.labels())
        out = []
        for ex, sequence in zip(examples, tags, strict=True):
            if ex.words:
                tagger.set(sentence_features(ex.words))
            out.append(
                np.array(
                    [
                        tagger.marginal(tag, i) if tag in known else 0.0
                        for i, tag in enumerate(sequence)
                    ],
                    dtype=np.float32,
                )
            )
        return out

    def predict(self, examples: Sequence[Example]) -> list[tuple[str, ...]]:
        """The most probable tag sequence of each example (Viterbi)."""
        tagger = self._tagger()
        return [
            tuple(tagger.tag(sentence_features(ex.words))) if ex.words else () for ex in examples
        ]

    def save(self, path: str | os.PathLike) -> Path:
        """Write the model to ``path`` (a CRFsuite model file), atomically."""
        self._tagger()  # fitted?
        with atomic_open(path, "wb") as f:
            f.write(self.model_)
        return Path(path)

    @classmethod
    def load(cls, path: str | os.PathLike) -> FeatureTagger:
        """A tagger from a model file :meth:`save` wrote (its ``c2`` is not kept: the
        default is shown)."""
        tagger = cls()
        tagger.model_ = Path(path).read_bytes()
        tagger.labels_ = sorted(tagger._tagger().labels())
        return tagger
