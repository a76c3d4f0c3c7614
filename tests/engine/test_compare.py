"""subregweigh.compare: which examples two annotations disagree on, and how each entity
changed; checked on the real pair, CoNLL-2003 test against its correction CoNLL++."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.baselines import consistency_scores
from subregweigh.compare import SpanChange, change_counts, differs, span_changes
from subregweigh.example import Example
from subregweigh.io import read_conll
from tests.paths import DATA


@pytest.mark.parametrize(
    "original, corrected, changes",
    [
        ("B-PER I-PER O", "B-PER I-PER O", []),
        ("B-PER I-PER O", "B-ORG I-ORG O", [SpanChange("type", ("PER", 0, 2), ("ORG", 0, 2))]),
        (
            "B-ORG I-ORG I-ORG",
            "B-ORG I-ORG O",
            [SpanChange("boundary", ("ORG", 0, 3), ("ORG", 0, 2))],
        ),
        ("O B-LOC O", "O O O", [SpanChange("spurious", ("LOC", 1, 2), None)]),
        ("O O B-MISC", "O O B-MISC", []),
        ("O O O", "B-PER O O", [SpanChange("missing", None, ("PER", 0, 1))]),
        (  # one entity split in two: both halves are boundary changes of it
            "B-LOC I-LOC O",
            "B-LOC B-LOC O",
            [
                SpanChange("boundary", ("LOC", 0, 2), ("LOC", 0, 1)),
                SpanChange("boundary", ("LOC", 0, 2), ("LOC", 1, 2)),
            ],
        ),
        (  # a retype and a missed entity in one sentence, in order of position
            "B-PER O O O",
            "B-ORG O B-LOC O",
            [
                SpanChange("type", ("PER", 0, 1), ("ORG", 0, 1)),
                SpanChange("missing", None, ("LOC", 2, 3)),
            ],
        ),
    ],
)
def test_span_changes(original, corrected, changes):
    assert span_changes(original.split(), corrected.split()) == changes


def test_span_changes_refuses_other_lengths():
    with pytest.raises(ValueError, match="differ in length: 2 and 1"):
        span_changes(["O", "O"], ["O"])


def test_differs_names_the_example_that_is_not_the_same_text():
    a = [Example("0", ("a", "b"), ("O", "O"), "x.conll:1")]
    b = [Example("0", ("a", "c"), ("O", "O"), "y.conll:1")]
    with pytest.raises(ValueError, match=r"example 0 \(x.conll:1\) has other words"):
        differs(a, b)
    with pytest.raises(ValueError, match="1 examples against 0"):
        differs(a, [])


def test_conll2003_test_against_conllpp():
    original = read_conll(DATA / "conll2003" / "eng.testb")  # IOB1, converted
    corrected = read_conll(DATA / "conllpp" / "conllpp_test.txt")
    flags = differs(original, corrected)
    assert flags.shape == (3453,) and flags.sum() == 186  # the number CrossWeigh's README gives
    counts = change_counts(original, corrected)
    assert sum(counts.values()) >= 186 and all(counts[k] > 0 for k in counts)
    # Every flagged sentence has at least one change, every other none.
    assert all(
        bool(span_changes(a.label, b.label)) == f for a, b, f in zip(original, corrected, flags)
    )


def test_consistency_scores_flag_a_word_labelled_against_the_rest():
    examples = [Example(str(i), ("Reuters", "said"), ("B-ORG", "O")) for i in range(3)] + [
        Example("3", ("Reuters", "said"), ("B-MISC", "O")),
        Example("4", ("hello",), ("O",)),
    ]
    scores = consistency_scores(examples, "ner")
    np.testing.assert_allclose(scores, [0.75, 0.75, 0.75, 0.25, 1.0])
    texts = [Example(str(i), ("good",), ("pos",)) for i in range(3)]
    texts.append(Example("3", ("good",), ("neg",)))
    np.testing.assert_allclose(consistency_scores(texts, "classification"), [0.75] * 3 + [0.25])
