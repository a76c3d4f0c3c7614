from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from subregweigh.example import Example
from subregweigh.formats import read_conll, read_tsv
from subregweigh.noise import flip_labels, inject_ner_noise
from subregweigh.tags import _first_iob2_error

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture(scope="module")
def conll2000():
    return read_conll(DATA / "conll2003" / "eng.train")[:2000]


@pytest.fixture(scope="module")
def sst2():
    return read_tsv(DATA / "sst2" / "train.tsv")[:5000]


def changed_positions(a, b):
    return sum(x != y for ea, eb in zip(a, b) for x, y in zip(ea.label, eb.label))


@pytest.mark.parametrize("rate", [0.0, 0.05, 0.1, 0.3])
def test_ner_noise_valid_and_rate(conll2000, rate):
    total = sum(len(ex.words) for ex in conll2000)
    noisy, mask = inject_ner_noise(conll2000, rate, random_state=1)
    assert len(noisy) == len(conll2000) and mask.shape == (2000,) and mask.dtype == bool
    for a, b in zip(conll2000, noisy):
        assert (a.id, a.words, a.source) == (b.id, b.words, b.source)
        assert _first_iob2_error(b.label) is None
        assert set(b.label) <= {"O"} | {
            p + t for p in ("B-", "I-") for t in ("PER", "LOC", "ORG", "MISC")
        }
    assert np.array_equal(mask, [a.label != b.label for a, b in zip(conll2000, noisy)])
    k = round(rate * total)
    changed = changed_positions(conll2000, noisy)
    # repairs (I-X -> B-X right after a replacement) may change a few extra positions
    assert k <= changed <= 2 * k
    assert (changed - k) <= 0.2 * k + 1
    if rate == 0:
        assert not mask.any() and noisy == list(conll2000)


def test_ner_noise_exact_chosen_count_via_replay(conll2000):
    # Replay the generator to recover the chosen positions and check each one changed.
    rate, seed = 0.1, 7
    total = sum(len(ex.words) for ex in conll2000)
    noisy, _ = inject_ner_noise(conll2000, rate, random_state=seed)
    chosen = np.random.default_rng(seed).choice(total, size=round(rate * total), replace=False)
    flat_orig = [t for ex in conll2000 for t in ex.label]
    flat_new = [t for ex in noisy for t in ex.label]
    assert all(flat_orig[p] != flat_new[p] for p in chosen)
    assert len(chosen) == round(rate * total)
    # positions changed but not chosen are exactly repairs: I-X -> B-X
    chosen_set = set(chosen.tolist())
    for p, (o, n) in enumerate(zip(flat_orig, flat_new)):
        if o != n and p not in chosen_set:
            assert o.startswith("I-") and n == "B-" + o[2:]
        if p in chosen_set:
            assert n == "O" or n.startswith("B-")


def test_ner_noise_seeds(conll2000):
    a, ma = inject_ner_noise(conll2000, 0.1, random_state=3)
    b, mb = inject_ner_noise(conll2000, 0.1, random_state=3)
    c, _ = inject_ner_noise(conll2000, 0.1, random_state=4)
    assert a == b and np.array_equal(ma, mb)
    assert a != c
    g = np.random.default_rng(3)
    assert inject_ner_noise(conll2000, 0.1, random_state=g)[0] == a


def test_ner_noise_repairs():
    ex = [Example("0", tuple("abcd"), ("B-PER", "I-PER", "I-PER", "O"))]
    seen = set()
    for seed in range(200):
        (noisy,), mask = inject_ner_noise(ex, 0.25, entity_types=["PER", "LOC"], random_state=seed)
        assert mask[0]
        assert _first_iob2_error(noisy.label) is None
        seen.add(noisy.label)
    # replacing the middle I-PER with O splits the entity; with B-LOC too
    assert ("B-PER", "O", "B-PER", "O") in seen
    assert ("B-PER", "B-LOC", "B-PER", "O") in seen
    # replacing the first B-PER by B-LOC makes the continuation its own PER entity
    assert ("B-LOC", "B-PER", "I-PER", "O") in seen
    # replacing the middle I-PER with B-PER keeps the continuation attached
    assert ("B-PER", "B-PER", "I-PER", "O") in seen
    with pytest.raises(ValueError):
        inject_ner_noise(ex, 1.5)
    with pytest.raises(ValueError):
        inject_ner_noise([Example("0", ("a",), ("O",))], 0.5)


def test_flip_labels_rate_sst2(sst2):
    noisy, mask = flip_labels(sst2, 0.2, random_state=0)
    assert mask.sum() == round(0.2 * len(sst2)) == 1000
    diff = np.array([a.label != b.label for a, b in zip(sst2, noisy)])
    assert np.array_equal(diff, mask)
    assert all(b.label in {("0",), ("1",)} for b in noisy)
    assert [b.id for b in noisy] == [a.id for a in sst2]
    again, _ = flip_labels(sst2, 0.2, random_state=0)
    other, _ = flip_labels(sst2, 0.2, random_state=1)
    assert again == noisy and other != noisy


def test_flip_labels_multiclass_and_multilabel():
    exs = [Example(str(i), ("w",), (c,)) for i, c in enumerate("abc" * 100)]
    noisy, mask = flip_labels(exs, 0.5, random_state=0)
    assert mask.sum() == 150
    new = Counter(b.label[0] for a, b, m in zip(exs, noisy, mask) if m)
    assert set(new) == {"a", "b", "c"}
    ml = [Example(str(i), ("w",), ("x", "y")) for i in range(50)]
    noisy, mask = flip_labels(ml, 1.0, classes=["x", "y", "z"], random_state=0)
    assert mask.all()
    # exactly one class toggled in every example
    assert all(len(set(a.label) ^ set(b.label)) == 1 for a, b in zip(ml, noisy))
    assert all(list(b.label) == sorted(b.label) for b in noisy)
