"""A conditional random field over word features: the NER scout's cased second opinion.

The default scout (the offline MiniLM) is uncased: "Jordan" the country and "jordan" read the
same to it, and case is much of what separates names in CoNLL-style annotation. A linear-chain
CRF over hand-made word features (the word, its shape and case, its affixes and its
neighbours; :func:`word_features`) sees case and trains in seconds. Its p(gold tag) of each
word, averaged half and half with the scouts' (``SubRegWeigh(crf=True)``, the default for NER),
ranks CoNLL-2003's real errors above the scouts alone (docs/evaluation.md); a CRF over
lowercased words adds nearly nothing, so it is the case that helps.

Beside those binary features the CRF reads each word in context: its vector from the middle
layer of a pretrained encoder (the offline MiniLM, not fine-tuned: a view of the words that
owes nothing to the annotation), reduced by PCA to ``context_dims`` real-valued features
(:func:`context_vectors`). On the same real errors they raise the CRF alone and the mix.

The CRF is python-crfsuite's (CRFsuite, L-BFGS with an L2 penalty ``c2``); it is trained on the
same examples as the scout and, like the scout, judges them in-sample.
"""

from __future__ import annotations

import copy
import functools
import io
import os
import signal
import tempfile
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from transformers import AutoConfig, AutoModel
from transformers.utils import logging as hf_logging

from subregweigh.encoder import bfloat16_native, load_tokenizer
from subregweigh.example import Example
from subregweigh.io.atomic import atomic_open
from subregweigh.options import PRECISIONS
from subregweigh.scout import default_model
from subregweigh.windows import plan_windows

# The model file's name where it is kept beside the scouts (subregweigh.parts: the CLI's
# --save-scout folder, a Label Studio version's folder).
CRF_FILE = "crf.npz"


def crf_path(folder: str | os.PathLike) -> Path:
    """Where the CRF kept in ``folder`` is (:data:`CRF_FILE`; it may not exist)."""
    return Path(folder) / CRF_FILE


# The CRF's share of a word's p(gold) beside the scouts' mean: on CoNLL-2003's real errors a half
# ranks near the best on each half of the test set, and the best share of one half ranks below
# it on the other (docs/evaluation.md).
CRF_SHARE = 0.5

# Up to how many examples a CRF is quick enough to train first and publish its scores alone
# while the scout trains (the Label Studio backend's early scores). CRFsuite's training time
# grows faster than the data (one core, word features alone: about 1 s at 1,000 CoNLL
# sentences, 10 s at 3,453, 80 s at 14,041; the context features add the encoder's pass and
# triple it, 31 s at 3,453): beyond this, the scout's own early scores come sooner.
CRF_FIRST_EXAMPLES = 5000

# CRFsuite's L-BFGS iterations. Until convergence its time grows faster than the data (some 150 s
# of 2 cores at 14,041 CoNLL sentences, near 200 iterations); 100 rank CoNLL-2003's real errors as
# well beside the scouts (AP 0.398 against 0.399 on the whole set, 0.265 against 0.265 on
# 1,000-sentence draws) and tag CoNLL++ dev as well (F1 0.910 against 0.910), in 37% less time at
# 3,453 sentences and 63% less at 14,041 (benchmarks/results/crf-iterations*.md).
CRF_ITERATIONS = 100

# How many texts' projected context features a tagger keeps (FeatureTagger._cache) beyond those of
# the call at hand: about 50 MB of CoNLL-length sentences.
PROJECTED_TEXTS = 20_000


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


# How many PCA components of the context vectors the CRF reads, and their standard deviation
# as features (beside binary features of value 1). On CoNLL-2003's real errors beside the same
# scouts, 16 components rank as 64 (AP 0.399 ± 0.008 against 0.398 ± 0.009 on the whole set,
# 0.271 against 0.265 on 1,000-sentence draws; the CRF alone 0.329 against 0.334) and CRFsuite
# trains in 46% less time, which the refresh between trainings waits for; 8 lower the CRF alone
# and none the mix (benchmarks/results/crf-context-dims.md). The scale: 0.25 and 1.0 ranked
# alike in a scratch comparison.
CONTEXT_DIMS = 16
CONTEXT_SCALE = 0.5


@functools.lru_cache(maxsize=4)
def _pretrained(path: str, layer: int | None):
    """The tokenizer and the pretrained encoder at ``path`` cut at ``layer`` (None: the middle
    one), and that layer: the layers above it would be computed for nothing (the MiniLM's
    vectors at layer 3 come at half the cost of its 6)."""
    config = AutoConfig.from_pretrained(path)
    if layer is None:
        layer = config.num_hidden_layers // 2
    if not 0 <= layer <= config.num_hidden_layers:
        raise ValueError(
            f"layer {layer}: the encoder has layers 0 (embeddings) to {config.num_hidden_layers}"
        )
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # the unused upper layers' weights are expected
    try:
        model = AutoModel.from_pretrained(path, num_hidden_layers=layer).eval()
    finally:
        hf_logging.set_verbosity(verbosity)
    return load_tokenizer(path), model, layer


@functools.lru_cache(maxsize=4)
def _context_keys(dims: int) -> tuple[str, ...]:
    """The feature names of the context components: ``c0``, ``c1``, ..."""
    return tuple(f"c{k}" for k in range(dims))


def context_vectors(
    texts: Sequence[Sequence[str]],
    encoder: str | None = None,
    layer: int | None = None,
    batch_size: int = 64,
    precision: str = "auto",
) -> list[np.ndarray]:
    """Each word's vector in context: the hidden state of its first subword at ``layer`` of the
    pretrained ``encoder`` (a Hugging Face name or path; None: the offline MiniLM), as loaded,
    not fine-tuned. ``layer``: 0 is the embeddings, None the middle transformer layer (3 of the
    MiniLM's 6). ``precision``: the forward pass's arithmetic on the CPU, as the scout's
    (``float32``, ``bfloat16`` under ``torch.autocast``, or ``auto``: bfloat16 where the CPU
    computes it natively). Per text an array of shape (n_words, hidden_size), float32; a word
    with no subword gets NaN. A text longer than the encoder's limit (512 subwords) is read in
    overlapping windows (:func:`~subregweigh.windows.plan_windows`), batched apart from the
    texts that fit, each word's vector from the window that owns it."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision={precision!r}: expected one of {PRECISIONS}")
    bf16 = precision == "bfloat16" or (precision == "auto" and bfloat16_native(torch.device("cpu")))
    tokenizer, model, layer = _pretrained(encoder or default_model(), layer)
    limit = min(tokenizer.model_max_length, 512)
    budget = limit - tokenizer.num_special_tokens_to_add()
    out: list = [None] * len(texts)
    for i, text in enumerate(texts):
        if not text:
            out[i] = np.zeros((0, model.config.hidden_size), dtype=np.float32)
    present = [i for i, text in enumerate(texts) if text]
    lengths = _subword_counts(tokenizer, [texts[i] for i in present])
    windowed = {i: plan_windows(n, budget) for i, n in zip(present, lengths) if n.sum() > budget}
    pieces = [(i, span) for i, windows in windowed.items() for span in windows.spans]
    window_vectors: dict = {}
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        # batches pad little; the empty texts count in them, as they always have
        order = sorted(
            (i for i in range(len(texts)) if i not in windowed), key=lambda i: len(texts[i])
        )
        for start in range(0, len(order), batch_size):
            rows = [i for i in order[start : start + batch_size] if texts[i]]
            if not rows:
                continue
            vectors = _first_subword_states(
                tokenizer, model, layer, limit, [texts[i] for i in rows]
            )
            for i, v in zip(rows, vectors):
                out[i] = v
        order = sorted(range(len(pieces)), key=lambda j: pieces[j][1][1] - pieces[j][1][0])
        for start in range(0, len(order), batch_size):
            rows = [pieces[j] for j in order[start : start + batch_size]]
            words = [texts[i][a:b] for i, (a, b) in rows]
            vectors = _first_subword_states(tokenizer, model, layer, limit, words)
            for (i, span), v in zip(rows, vectors):
                window_vectors[i, span] = v
    for i, windows in windowed.items():
        vectors = np.empty((len(texts[i]), model.config.hidden_size), dtype=np.float32)
        for word, k in enumerate(windows.owner):
            a, b = windows.spans[k]
            vectors[word] = window_vectors[i, (a, b)][word - a]
        out[i] = vectors
    return out


def _subword_counts(tokenizer, texts: Sequence[Sequence[str]]) -> list[np.ndarray]:
    """Each word's subword count in each of ``texts`` (special tokens left out)."""
    if not texts:
        return []
    encoded = tokenizer(  # counted whole: verbose=False, no "longer than the maximum" warning
        [list(text) for text in texts],
        is_split_into_words=True,
        add_special_tokens=False,
        verbose=False,
    )
    counts = []
    for b, text in enumerate(texts):
        words = [w for w in encoded.word_ids(b) if w is not None]
        counts.append(np.bincount(words, minlength=len(text)).astype(np.int64))
    return counts


def _first_subword_states(tokenizer, model, layer: int, limit: int, texts) -> list[np.ndarray]:
    """The hidden state at ``layer`` of each word's first subword, per text of one padded
    batch (NaN: a word with no subword, or cut past ``limit``)."""
    encoded = tokenizer(
        [list(text) for text in texts],
        is_split_into_words=True,
        truncation=True,
        max_length=limit,
        padding=True,
        return_tensors="pt",
    )
    states = model(**encoded, output_hidden_states=True).hidden_states[layer]
    out = []
    for b, text in enumerate(texts):
        first: dict[int, int] = {}
        for position, word in enumerate(encoded.word_ids(b)):
            if word is not None:
                first.setdefault(word, position)
        vectors = np.full((len(text), states.shape[-1]), np.nan, dtype=np.float32)
        seen = sorted(first)
        vectors[seen] = states[b, [first[w] for w in seen]].float().numpy()
        out.append(vectors)
    return out


def train_beside(trainer, path: str, meanwhile: Callable[[], object]) -> None:
    """``trainer.train(path)`` (a ``pycrfsuite.Trainer`` with its data appended) in a forked
    process while ``meanwhile()`` runs in this one with one torch thread fewer: CRFsuite's
    L-BFGS is single-threaded and holds the GIL, so in this process it would leave a core idle
    and every other thread waiting. The child runs CRFsuite alone (no Python logging, no torch)
    and exits. Where there is no fork or a single torch thread, the two run one after the
    other. Raises RuntimeError when the child fails; when ``meanwhile`` raises, the child is
    stopped and the exception goes on."""
    threads = torch.get_num_threads()
    if not hasattr(os, "fork") or threads < 2:
        trainer.train(path)
        meanwhile()
        return
    with warnings.catch_warnings():  # the child touches none of the threads' state
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child; coverage does not follow it
        code = 1
        try:
            trainer.train(path)
            code = 0
        finally:
            os._exit(code)
    torch.set_num_threads(threads - 1)
    try:
        meanwhile()
    except BaseException:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise
    finally:
        torch.set_num_threads(threads)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise RuntimeError(f"CRFsuite's training failed in its own process (exit status {code})")


class FeatureTagger:
    """A linear-chain CRF tagger over :func:`word_features` and the words' context vectors
    (:func:`context_vectors`), for IOB2 tags.

    Parameters
    ----------
    c2 : float, default=0.3
        The L2 penalty. On CoNLL-2003's real errors 0.3 ranks best of 0.1, 0.3, 1 and 3, alone
        and beside the scout, on both halves of the set (docs/evaluation.md).
    max_iterations : int or None, default=100
        L-BFGS iterations at most (:data:`CRF_ITERATIONS`); None: until CRFsuite's convergence
        test stops it. The same examples give the same model.
    context_dims : int, default=16
        PCA components of the context vectors given to the CRF as real-valued features; 0:
        the binary word features alone.
    encoder : str or None, default=None
        The pretrained encoder of the context vectors (None: the offline MiniLM).
    context_layer : int or None, default=None
        Its layer (None: the middle one; on CoNLL-2003's real errors the MiniLM's middle layer
        ranked above its last and its embeddings).
    precision : {"float32", "bfloat16", "auto"}, default="auto"
        The encoder's arithmetic for the context vectors (:func:`context_vectors`): ``auto``,
        bfloat16 where the CPU computes it natively, as the scout's. On CoNLL-2003's real
        errors bfloat16 vectors rank as float32 ones beside the scouts (AP 0.395 ± 0.006
        against 0.398 ± 0.005 on the whole set, 0.265 against 0.265 on 1,000-sentence draws)
        in less than half the time (benchmarks/results/crf-precision.md).

    Attributes
    ----------
    labels_ : list of str
        The tags seen in training.
    model_ : bytes
        The trained CRFsuite model.
    context_mean_ : ndarray of shape (hidden_size,)
    context_components_ : ndarray of shape (context_dims, hidden_size)
        The PCA of the training words' context vectors, scaled so that each feature's standard
        deviation is ``CONTEXT_SCALE`` (absent with ``context_dims=0``).
    """

    def __init__(
        self,
        c2: float = 0.3,
        max_iterations: int | None = CRF_ITERATIONS,
        context_dims: int = CONTEXT_DIMS,
        encoder: str | None = None,
        context_layer: int | None = None,
        precision: str = "auto",
    ):
        self.c2 = c2
        self.max_iterations = max_iterations
        self.context_dims = context_dims
        self.encoder = encoder
        self.context_layer = context_layer
        self.precision = precision

    def fit(
        self, examples: Sequence[Example], meanwhile: Callable[[], object] | None = None
    ) -> FeatureTagger:
        """Train on ``examples`` (NER: one tag per word); examples without words are skipped.

        ``meanwhile``: work to do while CRFsuite trains, which takes one core: CRFsuite then
        trains in a forked process (:func:`train_beside`) and ``meanwhile()`` runs here with
        one torch thread fewer. The tagger is the same either way.
        """
        from sklearn.decomposition import PCA

        self._check_params()
        examples = [ex for ex in examples if ex.words]
        for stale in ("context_mean_", "context_components_"):
            self.__dict__.pop(stale, None)
        self._projected = {}
        vectors = None
        if self.context_dims:
            vectors = self._vectors(examples)
            words = np.concatenate(vectors)
            words = words[~np.isnan(words).any(axis=1)]
            dims = min(self.context_dims, *words.shape)
            pca = PCA(dims, random_state=0).fit(words)
            spread = pca.transform(words).std()
            self.context_mean_ = pca.mean_.astype(np.float32)
            self.context_components_ = (pca.components_ * CONTEXT_SCALE / spread).astype(np.float32)
        return self._train(examples, vectors, meanwhile)

    def refit(
        self,
        examples: Sequence[Example],
        max_iterations: int | None | Literal["same"] = "same",
        meanwhile: Callable[[], object] | None = None,
        c2: float | Literal["same"] = "same",
    ) -> FeatureTagger:
        """A new tagger of the same parameters and context projection, trained on ``examples``:
        the annotations as they stand now. The projection is fitted on the words' vectors
        alone, never on the tags, so that on the same texts this equals a :meth:`fit`; the
        texts this tagger has projected are not sent through the encoder again. This tagger
        is left as it is. ``max_iterations``, ``c2``: the new tagger's (``"same"``: this
        one's). ``meanwhile``: work to do while CRFsuite trains, as in :meth:`fit`."""
        self._check_params()
        fresh = copy.copy(self)
        if max_iterations != "same":
            fresh.max_iterations = max_iterations
        if c2 != "same":
            fresh.c2 = c2
            fresh._check_params()
        fresh.__dict__.pop("model_", None)
        fresh._projected = self._cache()  # shared: the same texts project the same
        return fresh._train([ex for ex in examples if ex.words], meanwhile=meanwhile)

    def _check_params(self) -> None:
        if not 0 <= self.c2 < np.inf:
            raise ValueError(f"c2 must be a number >= 0, got {self.c2!r}")
        if not isinstance(self.context_dims, (int, np.integer)) or self.context_dims < 0:
            raise ValueError(f"context_dims must be an int >= 0, got {self.context_dims!r}")

    def _train(self, examples: Sequence[Example], vectors=None, meanwhile=None) -> FeatureTagger:
        """CRFsuite's training on ``examples`` (all with words) over the fitted features
        (beside ``meanwhile``: :meth:`fit`)."""
        import pycrfsuite

        trainer = pycrfsuite.Trainer(verbose=False)
        for ex, items in zip(examples, self._items(examples, vectors), strict=True):
            trainer.append(items, list(ex.label))
        params = {"c1": 0.0, "c2": self.c2, "feature.possible_transitions": True}
        if self.max_iterations is not None:
            params["max_iterations"] = self.max_iterations
        trainer.set_params(params)
        handle, path = tempfile.mkstemp(suffix=".crfsuite")  # CRFsuite writes only to a file
        os.close(handle)
        try:
            if meanwhile is None:
                trainer.train(path)
            else:
                train_beside(trainer, path, meanwhile)
            self.model_ = Path(path).read_bytes()
        finally:
            os.unlink(path)
        self.labels_ = sorted(self._tagger().labels())
        self._kept_decoded = {}  # of the model before
        return self

    def _vectors(self, examples: Sequence[Example]) -> list[np.ndarray]:
        words = [ex.words for ex in examples]
        return context_vectors(words, self.encoder, self.context_layer, precision=self.precision)

    def _cache(self) -> dict:
        """Text (its words) -> its projected context features, for the texts projected so far:
        the weighing right after a fit, the CRF-alone weigher's two passes and a
        :meth:`refit` read the same texts again, and the encoder runs once for each."""
        return self.__dict__.setdefault("_projected", {})

    def _room(self, name: str, texts) -> dict:
        """This tagger's per-text store ``name`` (text -> what it computed), with room for
        ``texts`` (a set of word tuples): where those missing would take it past
        :data:`PROJECTED_TEXTS`, only the entries of ``texts`` stay, in a new dict so that a
        reader of the old one is not disturbed."""
        kept = self.__dict__.setdefault(name, {})
        missing = sum(text not in kept for text in texts)
        if missing and len(kept) + missing > PROJECTED_TEXTS:  # keep this call's alone
            kept = {key: value for key, value in kept.items() if key in texts}
            setattr(self, name, kept)
        return kept

    def _items(self, examples: Sequence[Example], vectors=None) -> list:
        """Per example CRFsuite's input: each word's binary features, with the fitted context
        features when there are any (``vectors``: :func:`context_vectors` if already
        computed)."""
        if not hasattr(self, "context_components_"):
            return [sentence_features(ex.words) for ex in examples]
        import pycrfsuite

        cache = self._room("_projected", {tuple(ex.words) for ex in examples})
        missing = [i for i, ex in enumerate(examples) if tuple(ex.words) not in cache]
        if missing:
            if vectors is None:
                vectors = self._vectors([examples[i] for i in missing])
            else:
                vectors = [vectors[i] for i in missing]
            for i, words in zip(missing, vectors, strict=True):
                cache[tuple(examples[i].words)] = np.nan_to_num(
                    (words - self.context_mean_) @ self.context_components_.T
                )
        keys = _context_keys(len(self.context_components_))
        return [
            pycrfsuite.ItemSequence(
                [
                    dict.fromkeys(binary, 1.0) | dict(zip(keys, row))
                    for binary, row in zip(
                        sentence_features(ex.words), cache[tuple(ex.words)].tolist(), strict=True
                    )
                ]
            )
            for ex in examples
        ]

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
        column = {label: j for j, label in enumerate(getattr(self, "labels_", ()))}
        out = []
        for proba, seq in zip(self._marginals(examples), tags, strict=True):
            picked = [proba[i, column[tag]] if tag in column else 0.0 for i, tag in enumerate(seq)]
            out.append(np.array(picked, dtype=np.float32))
        return out

    def label_proba(self, examples: Sequence[Example], labels: Sequence[str]) -> list[np.ndarray]:
        """Per example, the marginal probability of each of ``labels`` at each word, shape
        (n_words, len(labels)) (float32; 0 for a label the CRF never saw)."""
        known = {label: j for j, label in enumerate(getattr(self, "labels_", ()))}
        columns = np.array([known.get(label, -1) for label in labels], dtype=int)
        present = columns >= 0
        out = []
        for proba in self._marginals(examples):
            picked = np.zeros((len(proba), len(labels)), dtype=np.float32)
            picked[:, present] = proba[:, columns[present]]
            out.append(picked)
        return out

    def _marginals(self, examples: Sequence[Example]) -> list[np.ndarray]:
        """Per example its words' marginal probability of each of :attr:`labels_`, shape
        (n_words, n_labels) (:meth:`_decoded`)."""
        return [marginals for marginals, _ in self._decoded(examples)]

    def predict(self, examples: Sequence[Example]) -> list[tuple[str, ...]]:
        """The most probable tag sequence of each example (Viterbi)."""
        return [path for _, path in self._decoded(examples)]

    def _decoded(self, examples: Sequence[Example]) -> list[tuple[np.ndarray, tuple]]:
        """Per example its words' marginals over :attr:`labels_` (n_words, n_labels) and its
        Viterbi path, from one setting of CRFsuite's tagger to its features, kept per text until
        the next training: a training scores the same texts more than once (the CRF alone, then
        beside the scouts), and CRFsuite would build their features and run the same
        forward-backward pass each time."""
        self._tagger()  # fitted?
        texts = dict.fromkeys(tuple(ex.words) for ex in examples)  # in order: deterministic
        kept = self._room("_kept_decoded", texts)
        missing = [Example(id="", words=t, label=()) for t in texts if t not in kept]
        labels = list(self.labels_)
        for tagger, ex in zip(self._set_to_each(missing), missing, strict=True):
            if tagger is None:
                kept[tuple(ex.words)] = (np.zeros((0, len(labels)), np.float32), ())
                continue
            marginals = [
                [tagger.marginal(label, i) for label in labels] for i in range(len(ex.words))
            ]
            kept[tuple(ex.words)] = (np.array(marginals, dtype=np.float32), tuple(tagger.tag()))
        return [kept[tuple(ex.words)] for ex in examples]

    def _set_to_each(self, examples: Sequence[Example]):
        """Per example a CRFsuite tagger set to its words' features, or None for a text
        without words. The context vectors are computed once for all of them, and not again
        for the same texts' next call (:meth:`_items`)."""
        tagger = self._tagger()
        items = iter(self._items([ex for ex in examples if ex.words]))
        for ex in examples:
            if ex.words:
                tagger.set(next(items))
                yield tagger
            else:
                yield None

    def save(self, path: str | os.PathLike) -> Path:
        """Write the model to ``path`` (an ``.npz``: the CRFsuite model, the context PCA and
        the encoder's settings), atomically."""
        self._tagger()  # fitted?
        arrays = {
            "crfsuite": np.frombuffer(self.model_, dtype=np.uint8),
            "encoder": np.array(self.encoder or ""),
            "context_layer": np.array(-1 if self.context_layer is None else self.context_layer),
            "precision": np.array(self.precision),
            "c2": np.array(float(self.c2)),  # a refresh's refit trains at the same penalty
        }
        if hasattr(self, "context_components_"):
            arrays |= {"mean": self.context_mean_, "components": self.context_components_}
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        with atomic_open(path, "wb") as f:
            f.write(buffer.getvalue())
        return Path(path)

    @classmethod
    def load(cls, path: str | os.PathLike) -> FeatureTagger:
        """A tagger from a file :meth:`save` wrote (files written before its ``c2`` was kept:
        the default)."""
        data = Path(path).read_bytes()
        with np.load(io.BytesIO(data), allow_pickle=False) as saved:
            layer = int(saved["context_layer"])
            tagger = cls(
                encoder=str(saved["encoder"]) or None,
                context_layer=None if layer < 0 else layer,
                context_dims=len(saved["components"]) if "components" in saved else 0,
            )
            if "precision" in saved:  # files of before it was kept: the default
                tagger.precision = str(saved["precision"])
            if "c2" in saved:
                tagger.c2 = float(saved["c2"])
            tagger.model_ = saved["crfsuite"].tobytes()
            if "components" in saved:
                tagger.context_mean_ = saved["mean"]
                tagger.context_components_ = saved["components"]
        tagger.labels_ = sorted(tagger._tagger().labels())
        return tagger
