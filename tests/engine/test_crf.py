"""subregweigh.crf: the CRF over cased word features, trained on real CoNLL sentences."""

from __future__ import annotations

import copy
import dataclasses
import logging

import numpy as np
import pytest

from subregweigh.crf import (
    CONTEXT_DIMS,
    FeatureTagger,
    context_vectors,
    word_features,
    word_shape,
)
from subregweigh.example import Example


@pytest.fixture(scope="module")
def sentences(conll_train):
    return conll_train[:400]


@pytest.fixture(scope="module")
def tagger(sentences):
    return FeatureTagger().fit(sentences)


@pytest.mark.parametrize(
    "word, shape",
    [("McDonald's", "XxXx'x"), ("1990s", "dx"), ("EU", "X"), ("rejects", "x"), ("U.S.", "X.X.")],
)
def test_word_shape_keeps_one_mark_per_run(word, shape):
    assert word_shape(word) == shape


def test_features_see_case_where_the_scout_does_not():
    """The uncased scout reads "Jordan" and "jordan" alike; the CRF's features differ."""
    cased, lower = word_features(["Jordan", "won"], 0), word_features(["jordan", "won"], 0)
    assert "w=jordan" in cased and "w=jordan" in lower
    assert set(cased) != set(lower)
    assert "title=1" in cased and "title=0" in lower
    # neighbours two words away, padding past the edges, the pair with the adjacent word
    features = word_features(["a", "b", "c"], 0)
    assert {"-1:pad", "-2:pad", "1:w=b", "2:w=c", "1:pair=b|a", "first"} <= set(features)


def test_it_learns_the_tags_and_doubts_a_wrong_one(tagger, sentences):
    predicted = tagger.predict(sentences)
    words = sum(len(ex.words) for ex in sentences)
    right = sum(p == g for ex, pred in zip(sentences, predicted) for p, g in zip(pred, ex.label))
    assert right / words > 0.95  # in-sample, as the scout is
    assert set(tagger.labels_) == {t for ex in sentences for t in ex.label}
    gold = tagger.gold_proba(sentences)
    assert [g.shape for g in gold] == [(len(ex.words),) for ex in sentences]
    assert all(((g >= 0) & (g <= 1)).all() for g in gold)
    # the same sentence with one entity's type changed: that word's p(gold) drops
    i, j = next(
        (i, j) for i, ex in enumerate(sentences) for j, t in enumerate(ex.label) if t == "B-LOC"
    )
    wrong = list(sentences[i].label)
    wrong[j] = "B-PER"
    flipped = dataclasses.replace(sentences[i], label=tuple(wrong))
    assert tagger.gold_proba([flipped])[0][j] < gold[i][j] - 0.5


def test_a_tag_it_never_saw_gets_zero_and_an_empty_text_nothing(tagger):
    ex = Example("x", ("Paris", "is", "nice"), ("B-CITY", "O", "O"))
    empty = Example("e", (), ())
    got = tagger.gold_proba([ex, empty])
    assert got[0][0] == 0.0 and got[0][1] > 0.5 and got[1].shape == (0,)
    assert tagger.predict([empty]) == [()]


def test_save_and_load_give_the_same_probabilities(tagger, sentences, tmp_path):
    path = tagger.save(tmp_path / "crf.npz")
    loaded = FeatureTagger.load(path)
    assert loaded.labels_ == tagger.labels_
    # the fitted tagger projects these texts as its fit's batches encoded them, the loaded one
    # in batches of its own: the same vectors up to rounding (bfloat16's, where the CPU has it)
    for a, b in zip(loaded.gold_proba(sentences[:50]), tagger.gold_proba(sentences[:50])):
        np.testing.assert_allclose(a, b, atol=1e-3)


@pytest.mark.slow
def test_the_same_examples_give_the_same_model(sentences, tagger):
    again = FeatureTagger().fit(sentences)
    assert again.model_ == tagger.model_


def test_refusals():
    with pytest.raises(RuntimeError, match="not fitted"):
        FeatureTagger().gold_proba([])
    with pytest.raises(ValueError, match="c2 must be a number >= 0"):
        FeatureTagger(c2=-1).fit([])


def test_context_vectors_give_each_word_its_first_subword_in_context(sentences):
    texts = [sentences[0].words, (), ("Paris",) * 600]  # the last runs past 512 subwords
    got = context_vectors(texts, precision="float32")
    assert [v.shape for v in got] == [(len(texts[0]), 384), (0, 384), (600, 384)]
    assert not np.isnan(got[0]).any()
    assert not np.isnan(got[2]).any()  # read in windows: every word, past 512 too
    # in context: one word form, two sentences, two vectors; in order, whatever the batching
    paris = context_vectors([("Paris", "won"), ("I", "saw", "Paris")])
    assert not np.allclose(paris[0][0], paris[1][2])
    alone = context_vectors([texts[0]], precision="float32")[0]
    np.testing.assert_allclose(alone, got[0], atol=1e-5)
    with pytest.raises(ValueError, match="layers 0 \\(embeddings\\) to 6"):
        context_vectors(texts, layer=7)


def test_context_vectors_of_a_long_text_come_from_the_windows_that_own_its_words(sentences):
    from subregweigh.crf import _subword_counts
    from subregweigh.encoder import load_tokenizer
    from subregweigh.scout import default_model
    from subregweigh.windows import plan_windows

    words = [w for ex in sentences[:120] for w in ex.words][:1500]
    short = [ex.words for ex in sentences[200:210]]
    got = context_vectors([*short, words], precision="float32")
    alone = context_vectors(short, precision="float32")
    assert all(np.array_equal(a, b) for a, b in zip(alone, got))  # short texts: to the bit
    assert got[-1].shape == (1500, 384) and not np.isnan(got[-1]).any()
    said = []  # transformers' loggers do not propagate: a handler of its own
    handler = logging.Handler()
    handler.emit = lambda record: said.append(record.getMessage())
    transformers_log = logging.getLogger("transformers")
    transformers_log.addHandler(handler)
    try:
        (lengths,) = _subword_counts(load_tokenizer(default_model()), [words])
    finally:
        transformers_log.removeHandler(handler)
    # counted whole on purpose: no "Running this sequence through the model will result in
    # indexing errors" for a user to read
    assert not [m for m in said if "longer than the specified maximum" in m], said
    windows = plan_windows(lengths, 510)  # 512 less [CLS] and [SEP]
    assert len(windows.spans) >= 3
    k = int(windows.owner[-1])
    start, end = windows.spans[k]
    (own,) = context_vectors([words[start:end]], precision="float32")
    owned = np.flatnonzero(windows.owner == k)
    np.testing.assert_allclose(got[-1][owned], own[owned - start], atol=1e-4)


def test_context_vectors_in_bfloat16_point_where_float32_ones_do(sentences):
    texts = [ex.words for ex in sentences[:20]]
    full = np.concatenate(context_vectors(texts, precision="float32"))
    half = np.concatenate(context_vectors(texts, precision="bfloat16"))
    assert half.dtype == np.float32 and half.shape == full.shape
    assert not np.array_equal(half, full)  # computed otherwise...
    cosine = (half * full).sum(axis=1) / np.linalg.norm(half, axis=1) / np.linalg.norm(full, axis=1)
    assert cosine.min() > 0.98  # ...to the same direction
    with pytest.raises(ValueError, match="precision='half': expected one of"):
        context_vectors(texts, precision="half")


@pytest.mark.slow
def test_the_crf_reads_the_context_and_keeps_it_through_save_and_load(tagger, sentences, tmp_path):
    words_only = FeatureTagger(context_dims=0).fit(sentences)
    assert not hasattr(words_only, "context_components_")
    assert tagger.context_components_.shape == (CONTEXT_DIMS, 384)
    assert tagger.context_mean_.shape == (384,)
    assert words_only.model_ != tagger.model_
    assert not np.allclose(
        np.concatenate(words_only.gold_proba(sentences)),
        np.concatenate(tagger.gold_proba(sentences)),
    )
    loaded = FeatureTagger.load(words_only.save(tmp_path / "words.npz"))
    assert loaded.context_dims == 0 and not hasattr(loaded, "context_components_")
    for a, b in zip(loaded.gold_proba(sentences[:20]), words_only.gold_proba(sentences[:20])):
        np.testing.assert_array_equal(a, b)
    layered = FeatureTagger(context_layer=6, precision="bfloat16").fit(sentences[:50])
    again = FeatureTagger.load(layered.save(tmp_path / "last.npz"))
    assert again.context_layer == 6 and again.precision == "bfloat16"
    with pytest.raises(ValueError, match="context_dims must be an int >= 0"):
        FeatureTagger(context_dims=-1).fit(sentences)


def test_a_refit_may_take_other_iterations_and_leaves_the_tagger_as_it_was(sentences):
    tagger = FeatureTagger(max_iterations=20, context_dims=0).fit(sentences[:100])
    same = tagger.refit(sentences[:100])
    fewer = tagger.refit(sentences[:100], max_iterations=3)
    assert same.model_ == tagger.model_  # the same examples and iterations: the same model
    assert (fewer.max_iterations, tagger.max_iterations) == (3, 20)
    assert fewer.model_ != tagger.model_
    again = FeatureTagger(max_iterations=3, context_dims=0).fit(sentences[:100])
    assert fewer.model_ == again.model_


def test_beside_other_work_crfsuite_trains_the_same_model_in_its_own_process(sentences):
    """FeatureTagger.fit(meanwhile=): CRFsuite in a forked process, ``meanwhile`` here with one
    torch thread fewer; the model is the one a plain fit makes. With one torch thread the two
    run one after the other, to the same model."""
    import torch

    threads = torch.get_num_threads()
    plain = FeatureTagger(max_iterations=20, context_dims=0).fit(sentences[:150])
    seen = []
    beside = FeatureTagger(max_iterations=20, context_dims=0).fit(
        sentences[:150], meanwhile=lambda: seen.append(torch.get_num_threads())
    )
    assert beside.model_ == plain.model_
    assert seen == [max(1, threads - 1) if threads > 1 else 1]
    assert torch.get_num_threads() == threads
    torch.set_num_threads(1)
    try:
        alone = FeatureTagger(max_iterations=20, context_dims=0).fit(
            sentences[:150], meanwhile=lambda: seen.append("after")
        )
    finally:
        torch.set_num_threads(threads)
    assert alone.model_ == plain.model_ and seen[-1] == "after"
    # a refit beside other work (the refresh beside the rescore): the refit a plain one makes
    relabelled = [*sentences[150:200], *sentences[:100]]
    refit = plain.refit(relabelled, meanwhile=lambda: seen.append(torch.get_num_threads()))
    assert refit.model_ == plain.refit(relabelled).model_ != plain.model_
    assert seen[-1] == max(1, threads - 1) and torch.get_num_threads() == threads


def test_when_the_work_beside_fails_crfsuite_is_stopped_and_the_error_goes_on(
    sentences, monkeypatch
):
    import os

    import torch

    forked = []
    fork = os.fork

    def recording_fork():
        pid = fork()
        if pid:
            forked.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", recording_fork)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # so that CRFsuite has a process of its own
    try:
        with pytest.raises(KeyError, match="beside"):
            FeatureTagger(max_iterations=20, context_dims=0).fit(
                sentences[:150], meanwhile=lambda: {}["beside"]
            )
    finally:
        torch.set_num_threads(threads)
    assert len(forked) == 1
    with pytest.raises(ChildProcessError):  # stopped and reaped: no child left behind
        os.waitpid(forked[0], os.WNOHANG)


def test_marginals_are_computed_once_per_text_until_the_next_training(sentences, monkeypatch):
    """A training scores the same texts twice (the CRF alone, then beside the scouts): the
    second time CRFsuite's taggers are not set again; a refit's tagger computes its own."""
    tagger = FeatureTagger(max_iterations=20, context_dims=0).fit(sentences[:100])
    first = tagger.label_proba(sentences[:60], ["B-PER", "O", "B-NOPE"])
    set_for = []
    original = FeatureTagger._set_to_each

    def counting(self, examples):
        set_for.append(len(examples))
        return original(self, examples)

    monkeypatch.setattr(FeatureTagger, "_set_to_each", counting)
    again = tagger.label_proba(sentences[:60], ["B-PER", "O", "B-NOPE"])
    gold = tagger.gold_proba(sentences[:80])
    new_texts = {tuple(ex.words) for ex in sentences[60:80]} - {
        tuple(ex.words) for ex in sentences[:60]
    }
    assert set_for == [0, len(new_texts)] and new_texts  # only the texts not asked for before
    paths = tagger.predict(sentences[:80])
    assert set_for == [0, len(new_texts), 0]  # the Viterbi paths came with the marginals
    unkept = copy.copy(tagger)
    unkept._kept_decoded = {}
    assert unkept.predict(sentences[:80]) == paths
    for a, b, g, ex in zip(first, again, gold, sentences, strict=False):
        np.testing.assert_array_equal(a, b)
        assert (a[:, 2] == 0).all()  # a label the CRF never saw
        np.testing.assert_allclose(
            g[[t == "O" for t in ex.label]], a[[t == "O" for t in ex.label], 1]
        )
    relabelled = [dataclasses.replace(ex, label=("O",) * len(ex.words)) for ex in sentences[:100]]
    refitted = tagger.refit(relabelled)
    assert not np.allclose(refitted.gold_proba(sentences[:5])[0], gold[0])
    np.testing.assert_array_equal(tagger.gold_proba(sentences[:5])[0], gold[0])  # unchanged
