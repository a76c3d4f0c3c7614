"""The project's memory (subregweigh.memory): the other annotations of a word form as evidence
beside the models' probability."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from subregweigh.example import Example
from subregweigh.memory import WordMemory, remember, remembered

LABELS = ("O", "B-PER", "I-PER", "B-LOC", "I-LOC")


def ex(i, words, tags):
    return Example(id=str(i), words=tuple(words), label=tuple(tags))


def sure(n_words, tag="O", p=0.9):
    """Models' rows giving ``tag`` p and the rest shared evenly."""
    row = np.full(len(LABELS), (1 - p) / (len(LABELS) - 1))
    row[LABELS.index(tag)] = p
    return np.tile(row, (n_words, 1))


def test_a_word_the_others_call_a_person_is_doubted_as_outside():
    others = [Counter({"B-PER": 3})]
    out = remembered(sure(1, "O", 0.9), LABELS, others, strength=1.0)
    # q_O = (0 + 1 * 0.9) / (3 + 1); PER takes the rest, B- and I- in the models' split
    assert out[0, 0] == pytest.approx(0.9 / 4)
    assert out[0, 1] + out[0, 2] == pytest.approx((3 + 0.05) / 4)
    assert out[0].sum() == pytest.approx(1.0)
    assert out[0].argmax() in (1, 2)


def test_a_stronger_memory_weighs_the_models_more():
    others = [Counter({"B-PER": 3})]
    weak = remembered(sure(1, "O", 0.9), LABELS, others, strength=1.0)
    strong = remembered(sure(1, "O", 0.9), LABELS, others, strength=30.0)
    assert weak[0, 0] < strong[0, 0] < 0.9


def test_a_word_seen_nowhere_else_keeps_the_models_row():
    proba = sure(2, "B-LOC", 0.7)
    out = remembered(proba, LABELS, [Counter(), Counter()], strength=2.0)
    np.testing.assert_allclose(out, proba)


def test_agreeing_others_make_the_models_surer():
    out = remembered(sure(1, "B-LOC", 0.6), LABELS, [Counter({"B-LOC": 5})], strength=2.0)
    assert out[0, 3] > 0.6


def test_b_and_i_are_one_type_a_name_inside_a_longer_one_is_not_doubted():
    """'Jordan' alone (B-PER) elsewhere, inside 'Michael Jordan' (I-PER) here: the same type."""
    proba = sure(1, "I-PER", 0.8)
    out = remembered(proba, LABELS, [Counter({"B-PER": 4})], strength=2.0)
    assert out[0, 1] + out[0, 2] == pytest.approx((4 + 2 * (proba[0, 1] + proba[0, 2])) / 6)
    assert out[0, 2] > out[0, 1]  # the B-/I- split stays the models'


def test_where_the_models_give_a_type_nothing_the_others_split_it():
    proba = np.array([[1.0, 0.0, 0.0, 0.0, 0.0]])
    out = remembered(proba, LABELS, [Counter({"B-LOC": 3, "I-LOC": 1})], strength=1.0)
    assert out[0, 3] == pytest.approx(0.75 * 4 / 5)
    assert out[0, 4] == pytest.approx(0.25 * 4 / 5)
    assert out[0, 0] == pytest.approx(1 / 5)


def test_tags_the_models_do_not_know_take_no_mass():
    out = remembered(sure(1, "O", 0.9), LABELS, [Counter({"B-ORG": 3})], strength=1.0)
    np.testing.assert_allclose(out, sure(1, "O", 0.9))  # nothing known to move it to


def test_strength_must_be_positive():
    with pytest.raises(ValueError, match="strength must be positive"):
        remembered(sure(1), LABELS, [Counter()], strength=0)


def test_each_example_is_left_out_of_its_own_memory():
    data = [
        ex(0, ["Paris", "Paris"], ["B-LOC", "B-LOC"]),
        ex(1, ["Paris"], ["O"]),
    ]
    memory = WordMemory.of(data)
    assert memory.others(data[0], "Paris") == Counter({"O": 1})
    assert memory.others(data[1], "Paris") == Counter({"B-LOC": 2})
    assert memory.others(data[1], "London") == Counter()
    # an example the memory never saw is judged against all of it; an edited one, by its id,
    # against the others alone
    assert memory.others(ex(7, ["Paris"], ["O"]), "Paris") == Counter({"B-LOC": 2, "O": 1})
    assert memory.others(ex(1, ["Paris"], ["B-LOC"]), "Paris") == Counter({"B-LOC": 2})


def test_the_memory_saved_reads_back_the_same(tmp_path):
    data = [ex(0, ["Paris", "is"], ["B-LOC", "O"]), ex(1, ["Paris"], ["O"])]
    memory = WordMemory.of(data)
    loaded = WordMemory.load(memory.save(tmp_path / "memory.json"))
    assert loaded == memory
    assert loaded.others(data[1], "Paris") == Counter({"B-LOC": 1})


def test_remember_doubts_the_one_missed_occurrence():
    """Three tweets call 'obama' a person; a fourth leaves him out. With models that learned
    nothing (every word O at 0.95), only the fourth's 'obama' loses its p(gold)."""
    data = [ex(i, ["obama", "speaks"], ["B-PER", "O"]) for i in range(3)]
    data.append(ex(3, ["obama", "speaks"], ["O", "O"]))
    proba = [sure(2, "O", 0.95) for _ in data]
    out = remember(data, proba, LABELS, strength=1.0)
    p_gold = [m[np.arange(2), [LABELS.index(t) for t in e.label]] for m, e in zip(out, data)]
    assert p_gold[3][0] == pytest.approx(0.95 / 4)  # (0 + 0.95) / (3 + 1)
    assert out[3][0].argmax() in (1, 2)  # the suggestion: a person
    # the annotated ones: (2 + 0.025) / (3 + 1) each, doubted less than the missed one
    assert min(p[0] for p in p_gold[:3]) > p_gold[3][0]
    assert all(m.dtype == np.float32 for m in out)


@given(
    st.lists(st.floats(0.01, 1.0), min_size=len(LABELS), max_size=len(LABELS)),
    st.dictionaries(st.sampled_from(LABELS), st.integers(0, 20)),
    st.floats(0.1, 50.0),
)
def test_rows_stay_distributions(weights, seen, strength):
    row = np.array(weights) / np.sum(weights)
    out = remembered(row[None, :], LABELS, [Counter(seen)], strength)
    assert out.shape == (1, len(LABELS))
    assert np.all(out >= 0)
    assert out.sum() == pytest.approx(1.0)
