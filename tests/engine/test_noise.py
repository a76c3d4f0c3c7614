from __future__ import annotations

from collections import Counter
from dataclasses import replace

import numpy as np
import pytest

from subregweigh.example import Example
from subregweigh.io import read_conll, read_tsv
from subregweigh.noise import (
    corrupt_sentence,
    flip_labels,
    inject_ner_noise,
    inject_sentence_noise,
    retag,
)
from subregweigh.tags import _first_iob2_error, entity_spans
from tests.paths import DATA


@pytest.fixture(scope="module")
def conll2000():
    return read_conll(DATA / "conll2003" / "eng.train")[:2000]


@pytest.fixture(scope="module")
def sst2():
    return read_tsv(DATA / "sst2" / "train.tsv")[:5000]


def changed_positions(a, b):
    return sum(x != y for ea, eb in zip(a, b) for x, y in zip(ea.label, eb.label))


# ------------------------------------------------------------------------------ retag


@pytest.mark.parametrize(
    "tags, j, new, expected",
    [
        # a retyped B-X carries the whole entity along
        ("B-ORG I-ORG I-ORG", 0, "B-LOC", "B-LOC I-LOC I-LOC"),
        # a retyped I-X starts a new entity that takes the rest of the old one
        ("B-ORG I-ORG I-ORG O", 1, "B-LOC", "B-ORG B-LOC I-LOC O"),
        ("B-ORG I-ORG I-ORG", 1, "B-ORG", "B-ORG B-ORG I-ORG"),
        # O inside an entity: the rest stays an entity of its own
        ("B-PER I-PER I-PER", 1, "O", "B-PER O B-PER"),
        ("B-PER I-PER I-PER", 0, "O", "O B-PER I-PER"),
        ("B-PER I-PER I-PER", 2, "O", "B-PER I-PER O"),
        # O -> B-X in front of B-X merges into one entity
        ("O B-LOC I-LOC", 0, "B-LOC", "B-LOC I-LOC I-LOC"),
        # ... but not in front of another type, nor in front of O
        ("O B-LOC I-LOC", 0, "B-PER", "B-PER B-LOC I-LOC"),
        ("O O B-LOC", 0, "B-LOC", "B-LOC O B-LOC"),
        # the entity after the retyped one is untouched
        ("B-ORG I-ORG B-ORG", 0, "B-PER", "B-PER I-PER B-ORG"),
        ("B-ORG", 0, "O", "O"),
    ],
)
def test_retag_hand_made(tags, j, new, expected):
    out = retag(tags.split(), j, new)
    assert out == expected.split()
    assert _first_iob2_error(out) is None


def test_retag_repairs_and_rejects():
    # invalid input (a stray I-X) comes out as valid IOB2
    assert retag(["O", "O", "I-PER"], 0, "B-LOC") == ["B-LOC", "O", "B-PER"]
    with pytest.raises(ValueError, match="O or B-X"):
        retag(["O"], 0, "I-PER")


# ------------------------------------------------------------------------------ paper noise


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
    # replacing stops once k labels differ; the last one may carry the rest of its entity
    longest = max(len(ex.words) for ex in conll2000)
    assert k <= changed <= k + longest
    if rate == 0:
        assert not mask.any() and noisy == list(conll2000)


def test_ner_noise_one_replacement_outcomes():
    # k = 1 word label: every possible single replacement, and nothing else, comes out
    ex = [Example("0", tuple("abcd"), ("B-PER", "I-PER", "I-PER", "O"))]
    seen = Counter()
    for seed in range(400):
        (noisy,), mask = inject_ner_noise(ex, 0.25, entity_types=["PER", "LOC"], random_state=seed)
        assert mask[0]
        seen[" ".join(noisy.label)] += 1
    expected = {
        "O B-PER I-PER O",  # word 0 -> O
        "B-LOC I-LOC I-LOC O",  # word 0 -> B-LOC: the whole entity
        "B-PER O B-PER O",  # word 1 -> O
        "B-PER B-PER I-PER O",  # word 1 -> B-PER: split
        "B-PER B-LOC I-LOC O",  # word 1 -> B-LOC: the rest follows
        "B-PER I-PER O O",
        "B-PER I-PER B-PER O",
        "B-PER I-PER B-LOC O",
        "B-PER I-PER I-PER B-PER",  # word 3 -> B-X
        "B-PER I-PER I-PER B-LOC",
    }
    assert set(seen) == expected
    # never the head retyped and the tail left as an entity of the old type
    assert "B-LOC B-PER I-PER O" not in seen


def test_ner_noise_merge_counts_towards_rate():
    ex = [Example("0", tuple("abc"), ("O", "B-LOC", "I-LOC"))]
    outcomes = {inject_ner_noise(ex, 1 / 3, random_state=s)[0][0].label for s in range(100)}
    # word 0 -> B-LOC merges (2 labels changed, past k = 1); every outcome is valid IOB2
    assert ("B-LOC", "I-LOC", "I-LOC") in outcomes
    assert all(_first_iob2_error(o) is None for o in outcomes)


def test_ner_noise_seeds(conll2000):
    a, ma = inject_ner_noise(conll2000, 0.1, random_state=3)
    b, mb = inject_ner_noise(conll2000, 0.1, random_state=3)
    c, _ = inject_ner_noise(conll2000, 0.1, random_state=4)
    assert a == b and np.array_equal(ma, mb)
    assert a != c
    g = np.random.default_rng(3)
    assert inject_ner_noise(conll2000, 0.1, random_state=g)[0] == a


def test_ner_noise_rejects():
    ex = [Example("0", tuple("abcd"), ("B-PER", "I-PER", "I-PER", "O"))]
    with pytest.raises(ValueError):
        inject_ner_noise(ex, 1.5)
    with pytest.raises(ValueError):
        inject_ner_noise([Example("0", ("a",), ("O",))], 0.5)


# ------------------------------------------------------------------------------ sentence noise


def one_corruption(before, after):
    """The kind of the single corruption turning ``before`` into ``after``, or None."""
    a, b = set(entity_spans(before)), set(entity_spans(after))
    gone, new = a - b, b - a
    if len(gone) == 1 and not new:
        return "drop"
    if len(new) == 1 and not gone:
        return "add"
    if len(gone) == len(new) == 1:
        (t0, s0, e0), (t1, s1, e1) = gone.pop(), new.pop()
        if (s0, e0) == (s1, e1) and t0 != t1:
            return "retype"
        if t0 == t1 and abs(s0 - s1) + abs(e0 - e1) == 1:
            return "shift"
    return None


@pytest.mark.parametrize(
    "tags, kind, expected",
    [
        ("O B-PER O", "retype", {"O B-LOC O"}),
        ("O B-PER O", "drop", {"O O O"}),
        ("O B-PER O", "shift", {"B-PER I-PER O", "O B-PER I-PER"}),
        ("B-PER I-PER", "shift", {"O B-PER", "B-PER O"}),
        ("B-PER B-LOC", "shift", None),  # nowhere to move: no O neighbour, one word each
        (
            "B-PER O O",
            "add",
            {"B-PER B-PER O", "B-PER B-PER I-PER", "B-PER O B-PER"}
            | {"B-PER B-LOC O", "B-PER B-LOC I-LOC", "B-PER O B-LOC"},
        ),
        ("B-PER I-PER", "add", None),  # no O word
        ("O O", "drop", None),
    ],
)
def test_corrupt_sentence_hand_made(tags, kind, expected):
    types = ["LOC", "PER"]
    if expected is None:
        with pytest.raises(ValueError, match="cannot change"):
            corrupt_sentence(tags.split(), kind, types, np.random.default_rng(0))
        return
    rng = np.random.default_rng(0)
    seen = {" ".join(corrupt_sentence(tags.split(), kind, types, rng)) for _ in range(200)}
    assert seen == expected
    assert all(one_corruption(tags.split(), s.split()) == kind for s in seen)


def test_corrupt_sentence_retype_needs_two_types():
    with pytest.raises(ValueError, match="cannot change"):
        corrupt_sentence(["B-PER"], "retype", ["PER"], np.random.default_rng(0))


@pytest.mark.parametrize("rate", [0.0, 0.15, 0.5])
def test_sentence_noise_one_error_per_chosen_sentence(conll2000, rate):
    noisy, mask = inject_sentence_noise(conll2000, rate, random_state=2)
    assert mask.dtype == bool and mask.shape == (2000,)
    assert mask.sum() == round(rate * 2000)
    kinds = Counter()
    for a, b, m in zip(conll2000, noisy, mask):
        assert (a.id, a.words, a.source) == (b.id, b.words, b.source)
        assert _first_iob2_error(b.label) is None
        if m:
            kind = one_corruption(a.label, b.label)
            assert kind is not None, (a.label, b.label)
            kinds[kind] += 1
        else:
            assert a.label == b.label
    if rate:
        assert set(kinds) == {"retype", "drop", "add", "shift"}


def test_sentence_noise_seeds_kinds_and_classification(conll2000, sst2):
    a, ma = inject_sentence_noise(conll2000, 0.2, random_state=9)
    b, mb = inject_sentence_noise(conll2000, 0.2, random_state=9)
    c, _ = inject_sentence_noise(conll2000, 0.2, random_state=10)
    assert a == b and np.array_equal(ma, mb) and a != c
    only, mask = inject_sentence_noise(conll2000, 0.2, kinds=["drop"], random_state=0)
    assert all(
        one_corruption(x.label, y.label) == "drop" for x, y, m in zip(conll2000, only, mask) if m
    )
    # "drop" needs an entity: with more sentences asked for than have one, all of those
    with_entity = sum(any(t != "O" for t in ex.label) for ex in conll2000)
    _, mask = inject_sentence_noise(conll2000, 1.0, kinds=["drop"], random_state=0)
    assert mask.sum() == with_entity
    # classification is one flipped label per chosen example
    flipped = inject_sentence_noise(sst2, 0.1, random_state=4)
    expected = flip_labels(sst2, 0.1, random_state=4)
    assert flipped[0] == expected[0] and np.array_equal(flipped[1], expected[1])
    with pytest.raises(ValueError, match="kinds"):
        inject_sentence_noise(conll2000, 0.1, kinds=["swap"])


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


def test_annotator_noise_draws_each_kind_as_real_annotators_make_it(tiny_ner_data):
    """Issue 59: the self-test's realistic errors. The kind is drawn first, so a sparse data set
    (most sentences without an entity) still gets mostly missed entities, not added ones; each
    corrupted example differs by one change of its kind."""
    from subregweigh.compare import span_changes
    from subregweigh.noise import ANNOTATOR_MIX, inject_annotator_noise

    sparse = [*tiny_ner_data, *(replace(ex, label=("O",) * len(ex.words)) for ex in tiny_ner_data)]
    sparse = sparse * 5  # 600 examples, half without an entity
    noisy, mask = inject_annotator_noise(sparse, 0.2, random_state=3)
    assert mask.sum() == 120 and abs(sum(ANNOTATOR_MIX.values()) - 1) < 1e-9
    kinds = Counter()
    for i in np.flatnonzero(mask):
        changes = span_changes(noisy[i].label, sparse[i].label)  # the annotation, the truth
        assert changes
        kinds[changes[0].kind] += 1
    assert kinds["missing"] > kinds["boundary"] > kinds["spurious"]
    assert kinds["spurious"] < 0.1 * mask.sum()  # "an entity first" must not find these
    again, same = inject_annotator_noise(sparse, 0.2, random_state=3)
    assert np.array_equal(mask, same) and again == noisy
    with pytest.raises(ValueError, match="kind_weights"):
        inject_annotator_noise(sparse, 0.2, kind_weights={"typo": 1.0})
