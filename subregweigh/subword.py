"""Subword regularization: many plausible segmentations of the same words.

One sampler per subword model kind, all over a Hugging Face *fast* tokenizer:

* WordPiece (BERT, MiniLM): MaxMatch-dropout (Hiraoka, 2022). In greedy longest-match-first,
  each vocabulary match longer than one character is skipped with probability ``p``.
* BPE (GPT-2, RoBERTa): BPE-dropout (Provilkov et al., 2020). At every merge step each
  applicable merge is dropped with probability ``p``; the best surviving merge is applied.
* Unigram (SentencePiece, T5, XLM-R): sampling from the segmentation lattice with inverse
  temperature ``alpha = (1 - p) / p`` (forward-filtering backward-sampling), so ``p=0`` is Viterbi,
  ``p=0.5`` samples from the model's own distribution and ``p -> 1`` approaches uniform.

The tokenizer's own normalizer and pre-tokenizer run first, on each word separately, exactly as
``tokenizer(words, is_split_into_words=True)`` does; the samplers only replace the subword model
step. The tokenizers library does implement BPE-dropout and Unigram sampling, but it draws from an
unseeded thread-local RNG, so its samples cannot be reproduced; the segmentation rules here read
the library's own vocabulary and merge table, and at ``p=0`` reproduce its output exactly (tested).

A :data:`Segmentation` is word-aligned by construction: one tuple of token ids per word.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

Segmentation = tuple[tuple[int, ...], ...]
"""Token ids of a text, one inner tuple per word (no special tokens)."""

_UNIGRAM_UNK_PENALTY = 10.0  # as in SentencePiece and tokenizers: unk scores min_score - 10


def check_random_state(seed: int | np.random.Generator | None) -> np.random.Generator:
    """Turn ``None``, an int or a Generator into a Generator (scikit-learn's convention)."""
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(seed)


class SubwordSampler:
    """Base class: word handling shared by all subword model kinds.

    Parameters
    ----------
    tokenizer : transformers.PreTrainedTokenizerFast or tokenizers.Tokenizer
        The scout's tokenizer. Its normalizer, pre-tokenizer and vocabulary are used as they are.
    p : float, default=0.1
        Regularization strength in [0, 1). ``p=0`` reproduces the tokenizer's segmentation.
    """

    kind = ""

    def __init__(self, tokenizer, p: float = 0.1):
        if not 0.0 <= p < 1.0:
            raise ValueError(f"p must be in [0, 1), got {p}")
        self.p = float(p)
        backend = getattr(tokenizer, "backend_tokenizer", tokenizer)
        self._normalizer = backend.normalizer
        self._pre_tokenizer = backend.pre_tokenizer
        self._model = json.loads(backend.to_str())["model"]
        self.vocab: dict[str, int] = backend.get_vocab(with_added_tokens=False)
        self.unk_id = self._unk_id()
        added = backend.get_added_tokens_decoder()
        # Added and special tokens are cut out before the subword model runs, as the library
        # does: raw-text ones before normalization, the others after.
        self._added_raw = _alternation([t.content for t in added.values() if not t.normalized])
        self._added_normalized = _alternation([t.content for t in added.values() if t.normalized])
        self._added_id = {t.content: i for i, t in added.items()}
        self._pieces = lru_cache(maxsize=200_000)(self._pieces_uncached)
        self.n_terms = backend.get_vocab_size(with_added_tokens=True)
        self._deterministic = lru_cache(maxsize=200_000)(self._segment_piece)

    # -- pickling (SubRegWeigh(n_jobs=...) sends samplers to worker processes) -------------------
    def __getstate__(self) -> dict:
        # The caches wrap bound methods, which do not pickle: leave them out, rebuild them empty.
        state = self.__dict__.copy()
        caches = {}
        for name, value in self.__dict__.items():
            if hasattr(value, "cache_parameters") and hasattr(value, "__wrapped__"):
                caches[name] = (value.__wrapped__.__name__, value.cache_parameters()["maxsize"])
                del state[name]
        state["_caches"] = caches
        return state

    def __setstate__(self, state: dict) -> None:
        caches = state.pop("_caches", {})
        self.__dict__.update(state)
        for name, (method, maxsize) in caches.items():
            setattr(self, name, lru_cache(maxsize=maxsize)(getattr(self, method)))

    # -- per kind -------------------------------------------------------------------------------
    def _unk_id(self) -> int | None:
        raise NotImplementedError

    def _segment_piece(self, piece: str) -> tuple[int, ...]:
        """Deterministic segmentation of one pre-tokenized piece."""
        raise NotImplementedError

    def _sample_piece(self, piece: str, n: int, rng: np.random.Generator):
        """``n`` sampled segmentations of one piece as ``(distinct, index)``.

        ``distinct`` is a list of token-id tuples, ``index`` an int array of shape (n,) into it.
        The default draws one sample at a time; kinds may vectorize.
        """
        samples = [self._sample_one(piece, rng) for _ in range(n)]
        distinct = list(dict.fromkeys(samples))
        position = {s: i for i, s in enumerate(distinct)}
        return distinct, np.fromiter((position[s] for s in samples), dtype=np.int64, count=n)

    def _sample_one(self, piece: str, rng: np.random.Generator) -> tuple[int, ...]:
        raise NotImplementedError

    # -- shared ---------------------------------------------------------------------------------
    def _pieces_uncached(self, word: str) -> tuple[str | tuple[int, ...], ...]:
        """The pieces the subword model sees; an added token comes as its fixed id tuple."""
        pieces: list[str | tuple[int, ...]] = []
        for raw, raw_added in _split(word, self._added_raw):
            if raw_added:
                pieces.append((self._added_id[raw],))
                continue
            text = self._normalizer.normalize_str(raw) if self._normalizer is not None else raw
            for part, added in _split(text, self._added_normalized):
                if added:
                    pieces.append((self._added_id[part],))
                elif self._pre_tokenizer is None:
                    pieces.append(part)
                else:
                    pieces.extend(piece for piece, _ in self._pre_tokenizer.pre_tokenize_str(part))
        return tuple(piece for piece in pieces if piece)

    def _slots(self, words: Sequence[str]) -> list[tuple[int, str | tuple[int, ...]]]:
        """(word index, piece) for every piece. A fixed id tuple stands for an added token, or
        for a word that normalizes to nothing (a lone control character): it becomes the unk
        token, since the word still needs a position to carry its label."""
        slots: list[tuple[int, str | tuple[int, ...]]] = []
        for w, word in enumerate(words):
            pieces = self._pieces(word)
            slots.extend((w, piece) for piece in pieces) if pieces else slots.append(
                (w, self._empty_word())
            )
        return slots

    def _empty_word(self) -> tuple[int, ...]:
        return (self.unk_id,) if self.unk_id is not None else ()

    def segment(self, words: Sequence[str]) -> Segmentation:
        """The tokenizer's deterministic segmentation of ``words``, one id tuple per word."""
        per_word: list[list[int]] = [[] for _ in words]
        for w, piece in self._slots(words):
            per_word[w].extend(piece if isinstance(piece, tuple) else self._deterministic(piece))
        return tuple(tuple(ids) for ids in per_word)

    def sample(self, words: Sequence[str], n: int, random_state=None) -> Candidates:
        """Draw ``n`` regularized segmentations of ``words``, deduplicated.

        Every piece is sampled independently (also repeated ones), ``n`` times at once.
        """
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        rng = check_random_state(random_state)
        slots = self._slots(words)
        variants, columns = [], []
        for _, piece in slots:
            if isinstance(piece, tuple):
                distinct, index = [piece], np.zeros(n, dtype=np.int64)
            elif self.p == 0.0:
                distinct, index = [self._deterministic(piece)], np.zeros(n, dtype=np.int64)
            else:
                distinct, index = self._sample_piece(piece, n, rng)
            variants.append(distinct)
            columns.append(index)
        choice = np.stack(columns, axis=1) if columns else np.zeros((n, 0), dtype=np.int64)
        first, inverse, counts = _unique_rows(choice)
        return Candidates(
            n_words=len(words),
            slot_word=np.array([w for w, _ in slots], dtype=np.int64),
            variants=variants,
            choice=choice[first],
            counts=counts,
        )


def _alternation(tokens: list[str]) -> re.Pattern | None:
    """A regex matching any of ``tokens``, longest first (as the library matches them)."""
    tokens = sorted((t for t in tokens if t), key=len, reverse=True)
    return re.compile("|".join(map(re.escape, tokens))) if tokens else None


def _split(text: str, pattern: re.Pattern | None) -> list[tuple[str, bool]]:
    """``text`` cut into (part, is_match) around the matches of ``pattern``."""
    if pattern is None:
        return [(text, False)]
    parts, start = [], 0
    for match in pattern.finditer(text):
        parts.append((text[start : match.start()], False))
        parts.append((match.group(), True))
        start = match.end()
    parts.append((text[start:], False))
    return [(part, is_match) for part, is_match in parts if part]


def _unique_rows(matrix: np.ndarray):
    """``np.unique(matrix, axis=0)`` in order of first appearance, without sorting wide rows.

    Returns (first row index of each distinct row, inverse of shape (n,), counts).
    """
    key = np.zeros(matrix.shape[0], dtype=np.int64)
    for column in matrix.T:
        # Densify after every column so the mixed-radix key never overflows.
        _, key = np.unique(key * (int(column.max()) + 1) + column, return_inverse=True)
    _, first, inverse, counts = np.unique(
        key, return_index=True, return_inverse=True, return_counts=True
    )
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return first[order], rank[inverse], counts[order]


class Candidates:
    """The distinct segmentations drawn for one text, with how often each was drawn.

    Stored factored, per pre-tokenized piece ("slot"): ``choice[i, s]`` indexes the variant of
    slot ``s`` used by candidate ``i``. Selection works on :meth:`term_counts` and builds full
    segmentations only for the candidates it keeps.

    Attributes
    ----------
    counts : ndarray of shape (m,)
        Draw count of each distinct candidate, in order of first appearance; sums to ``n``.
    """

    def __init__(self, n_words, slot_word, variants, choice, counts):
        self.n_words = n_words
        self.slot_word = slot_word
        self.variants = variants
        self.choice = choice
        self.counts = counts

    def __len__(self) -> int:
        return len(self.counts)

    def __getitem__(self, i: int) -> Segmentation:
        per_word: list[list[int]] = [[] for _ in range(self.n_words)]
        for s, w in enumerate(self.slot_word):
            per_word[w].extend(self.variants[s][self.choice[i, s]])
        return tuple(tuple(ids) for ids in per_word)

    def term_counts(self, n_terms: int):
        """Bag-of-subwords counts, a sparse matrix of shape (m, n_terms)."""
        from scipy import sparse

        # One matrix of every slot's distinct variants (row: variant, column: subword id),
        # then each candidate sums the rows of the variants it uses: a few large sparse
        # operations instead of some per word (selection's cost was mostly scipy overhead).
        rows, ids, cols, offset = [], [], [], 0
        for s, distinct in enumerate(self.variants):
            for r, variant in enumerate(distinct):
                rows.extend([offset + r] * len(variant))
                ids.extend(variant)
            cols.append(self.choice[:, s] + offset)
            offset += len(distinct)
        m = len(self)
        if not cols:
            return sparse.csr_matrix((m, n_terms))
        variants = sparse.csr_matrix((np.ones(len(ids)), (rows, ids)), shape=(offset, n_terms))
        incidence = sparse.csr_matrix(
            (
                np.ones(m * len(cols)),
                (np.repeat(np.arange(m), len(cols)), np.stack(cols, 1).ravel()),
            ),
            shape=(m, offset),
        )
        return (incidence @ variants).tocsr()


class MaxMatchDropout(SubwordSampler):
    """WordPiece with MaxMatch-dropout.

    As in the paper, the last resort at each position (a single character) is never dropped;
    unlike a naive implementation, dropping never strands the walk where no match continues.
    """

    kind = "WordPiece"

    def __init__(self, tokenizer, p: float = 0.1):
        super().__init__(tokenizer, p)
        self.prefix = self._model.get("continuing_subword_prefix") or ""
        self.max_chars = int(self._model.get("max_input_chars_per_word") or 100)
        self._matches = lru_cache(maxsize=200_000)(self._matches_uncached)

    def _unk_id(self):
        return self.vocab.get(self._model.get("unk_token"))

    def _matches_uncached(self, piece: str) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
        """For every start position: the ends and ids of the matches that may be taken.

        The longest match (greedy's choice) always; shorter ones only if the rest of the word
        can still be segmented from their end, so a dropped match never leads to a dead end
        (and an [UNK] word) where the tokenizer found a segmentation.
        """
        found = []
        for start in range(len(piece)):
            ends, ids = [], []
            for end in range(len(piece), start, -1):
                sub = piece[start:end] if start == 0 else self.prefix + piece[start:end]
                if sub in self.vocab:
                    ends.append(end)
                    ids.append(self.vocab[sub])
            found.append((ends, ids))
        completes = [False] * len(piece) + [True]
        for start in range(len(piece) - 1, -1, -1):
            completes[start] = any(completes[end] for end in found[start][0])
        out = []
        for ends, ids in found:
            keep = [i for i, end in enumerate(ends) if i == 0 or completes[end]]
            out.append(
                (
                    np.array([ends[i] for i in keep], dtype=np.int64),
                    np.array([ids[i] for i in keep], dtype=np.int64),
                )
            )
        return tuple(out)

    def _segment_piece(self, piece: str) -> tuple[int, ...]:
        distinct, index = self._walk(piece, 1, None)
        return distinct[index[0]]

    def _sample_piece(self, piece, n, rng):
        return self._walk(piece, n, rng)

    def _walk(self, piece: str, n: int, rng: np.random.Generator | None):
        """Greedy longest-match for ``n`` samples at once; ``rng=None`` means no dropout."""
        if len(piece) > self.max_chars:
            return [(self.unk_id,)], np.zeros(n, dtype=np.int64)
        matches = self._matches(piece)
        position = np.zeros(n, dtype=np.int64)
        # Row i marks where sample i's tokens end; the last column flags "no match found".
        cuts = np.zeros((n, len(piece) + 2), dtype=bool)
        active = np.arange(n)
        while active.size:
            for start in np.unique(position[active]):
                rows = active[position[active] == start]
                ends, _ = matches[start]
                if ends.size == 0:
                    cuts[rows, -1] = True
                    position[rows] = len(piece)
                    continue
                keep = np.ones((rows.size, ends.size), dtype=bool)
                if rng is not None:
                    # The shortest match is never dropped (the paper: single characters).
                    keep = rng.random((rows.size, ends.size)) >= self.p
                    keep[:, -1] = True
                accepted = keep.any(axis=1)
                chosen = ends[keep.argmax(axis=1)]
                cuts[rows[accepted], chosen[accepted]] = True
                cuts[rows[~accepted], -1] = True
                position[rows] = np.where(accepted, chosen, len(piece))
            active = active[position[active] < len(piece)]
        if cuts.shape[1] <= 62:  # pack each row into one int64: far faster to dedupe
            keys = cuts.astype(np.int64) @ (np.int64(1) << np.arange(cuts.shape[1], dtype=np.int64))
            _, first, index = np.unique(keys, return_index=True, return_inverse=True)
            rows = cuts[first]
        else:
            rows, index = np.unique(cuts, axis=0, return_inverse=True)
        return [self._tokens_from_cuts(piece, row) for row in rows], index.reshape(-1)

    def _tokens_from_cuts(self, piece: str, cuts: np.ndarray) -> tuple[int, ...]:
        if cuts[-1]:  # no vocabulary match somewhere: the whole word is unknown, as in WordPiece
            return (self.unk_id,)
        ids, start = [], 0
        for end in np.flatnonzero(cuts[:-1]):
            sub = piece[start:end] if start == 0 else self.prefix + piece[start:end]
            ids.append(self.vocab[sub])
            start = end
        return tuple(ids)


class BPEDropout(SubwordSampler):
    """BPE with BPE-dropout over the tokenizer's own merge table."""

    kind = "BPE"

    def __init__(self, tokenizer, p: float = 0.1):
        super().__init__(tokenizer, p)
        merges = self._model.get("merges") or []
        pairs = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in merges]
        self.ranks = {pair: rank for rank, pair in enumerate(pairs)}
        self.prefix = self._model.get("continuing_subword_prefix") or ""
        self.suffix = self._model.get("end_of_word_suffix") or ""
        self.ignore_merges = bool(self._model.get("ignore_merges"))
        self.byte_fallback = bool(self._model.get("byte_fallback"))

    def _unk_id(self):
        token = self._model.get("unk_token")
        return self.vocab.get(token) if token is not None else None

    def _symbols(self, piece: str) -> list[str]:
        symbols = list(piece)
        if self.prefix:
            symbols = symbols[:1] + [self.prefix + s for s in symbols[1:]]
        if self.suffix and symbols:
            symbols[-1] += self.suffix
        return symbols

    def _merge(self, piece: str, rng: np.random.Generator | None) -> tuple[int, ...]:
        if self.ignore_merges and piece in self.vocab:
            return (self.vocab[piece],)
        symbols = self._symbols(piece)
        while len(symbols) > 1:
            ranked = [
                (self.ranks[pair], i)
                for i, pair in enumerate(zip(symbols, symbols[1:]))
                if pair in self.ranks
            ]
            if rng is not None and ranked:
                keep = rng.random(len(ranked)) >= self.p
                ranked = [r for r, k in zip(ranked, keep) if k]
            if not ranked:
                break
            _, i = min(ranked)
            merged = symbols[i] + symbols[i + 1][len(self.prefix) :]
            symbols[i : i + 2] = [merged]
        return self._ids(symbols)

    def _ids(self, symbols: list[str]) -> tuple[int, ...]:
        ids: list[int] = []
        for s in symbols:
            if s in self.vocab:
                ids.append(self.vocab[s])
            elif self.byte_fallback:
                ids.extend(self.vocab[f"<0x{b:02X}>"] for b in s.encode("utf-8"))
            elif self.unk_id is not None:
                # The library fuses runs of unknowns only when fuse_unk is set.
                if not (self._model.get("fuse_unk") and ids and ids[-1] == self.unk_id):
                    ids.append(self.unk_id)
        return tuple(ids)

    def _segment_piece(self, piece):
        return self._merge(piece, None)

    def _sample_one(self, piece, rng):
        return self._merge(piece, rng)


class UnigramSampling(SubwordSampler):
    """Unigram language model segmentation: Viterbi at ``p=0``, lattice sampling above."""

    kind = "Unigram"

    def __init__(self, tokenizer, p: float = 0.1):
        super().__init__(tokenizer, p)
        vocab = self._model["vocab"]
        self.scores = {piece: float(score) for piece, score in vocab}
        self.piece_id = {piece: i for i, (piece, _) in enumerate(vocab)}
        self.max_len = max(len(piece) for piece, _ in vocab)
        self.unk_score = min(self.scores.values()) - _UNIGRAM_UNK_PENALTY
        self.byte_fallback = bool(self._model.get("byte_fallback"))
        self.alpha = math.inf if self.p == 0 else (1.0 - self.p) / self.p
        self._lattice = lru_cache(maxsize=200_000)(self._lattice_uncached)

    def _unk_id(self):
        unk = self._model.get("unk_id")
        return int(unk) if unk is not None else None

    def _lattice_uncached(self, piece: str):
        """Edges ending at each position: (start, token id or None for unk, score)."""
        edges: list[list[tuple[int, int | None, float]]] = [[] for _ in range(len(piece) + 1)]
        for start in range(len(piece)):
            found_single = False
            for end in range(start + 1, min(len(piece), start + self.max_len) + 1):
                sub = piece[start:end]
                if sub in self.piece_id:
                    edges[end].append((start, self.piece_id[sub], self.scores[sub]))
                    found_single |= end == start + 1
            if not found_single:
                edges[start + 1].append((start, None, self.unk_score))
        return edges

    def _backtrack(self, piece: str, choose) -> tuple[int, ...]:
        """Walk back from the end of the lattice, ``choose`` picking the edge into each position."""
        edges = self._lattice(piece)
        path = []
        end = len(piece)
        while end > 0:
            start, token = choose(edges[end], end)
            path.append((start, end, token))
            end = start
        ids: list[int] = []
        for start, end, token in reversed(path):
            if token is not None:
                ids.append(token)
            elif self.byte_fallback:
                ids.extend(self.vocab[f"<0x{b:02X}>"] for b in piece[start:end].encode("utf-8"))
            elif not ids or ids[-1] != self.unk_id:  # consecutive unknowns fuse into one
                ids.append(self.unk_id)
        return tuple(ids)

    def _segment_piece(self, piece):
        edges = self._lattice(piece)
        best = [0.0] + [-math.inf] * len(piece)
        back: list[tuple[int, int | None]] = [(0, None)] * (len(piece) + 1)
        for end in range(1, len(piece) + 1):
            for start, token, score in edges[end]:
                if best[start] + score > best[end]:
                    best[end] = best[start] + score
                    back[end] = (start, token)
        return self._backtrack(piece, lambda _edges, end: back[end])

    def _sample_one(self, piece, rng):
        edges = self._lattice(piece)
        forward = [0.0] + [-math.inf] * len(piece)
        for end in range(1, len(piece) + 1):
            forward[end] = _logsumexp([forward[s] + self.alpha * sc for s, _, sc in edges[end]])

        def choose(candidates, _end):
            logits = np.array([forward[s] + self.alpha * sc for s, _, sc in candidates])
            probs = np.exp(logits - logits.max())
            pick = rng.choice(len(candidates), p=probs / probs.sum())
            return candidates[pick][0], candidates[pick][1]

        return self._backtrack(piece, choose)


def _logsumexp(values: list[float]) -> float:
    top = max(values)
    if top == -math.inf:
        return top
    return top + math.log(sum(math.exp(v - top) for v in values))


SAMPLERS = {cls.kind: cls for cls in (MaxMatchDropout, BPEDropout, UnigramSampling)}


def make_sampler(tokenizer, p: float = 0.1) -> SubwordSampler:
    """The sampler for ``tokenizer``'s subword model kind.

    Raises
    ------
    ValueError
        For a slow (Python) tokenizer, or a model kind without subword regularization
        (WordLevel, for instance); the message names the kind.
    """
    backend = getattr(tokenizer, "backend_tokenizer", tokenizer)
    if not hasattr(backend, "to_str"):
        raise ValueError(
            f"{type(tokenizer).__name__} is not a fast tokenizer; subword regularization needs "
            "a Hugging Face fast tokenizer (load it with use_fast=True)"
        )
    kind = json.loads(backend.to_str())["model"]["type"]
    if kind not in SAMPLERS:
        raise ValueError(
            f"subword regularization is not available for the {kind!r} tokenizer model; "
            f"supported: {', '.join(SAMPLERS)}"
        )
    return SAMPLERS[kind](tokenizer, p)
