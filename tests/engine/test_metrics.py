from __future__ import annotations

import math

import numpy as np
import pytest

from subregweigh.metrics import accuracy, detection_report, entity_f1


def test_perfect_and_reversed_ranking():
    corrupted = np.array([True] * 10 + [False] * 90)
    rel = np.where(corrupted, 0.1, 0.9) + np.linspace(0, 0.05, 100)
    rep = detection_report(rel, corrupted)
    assert rep["average_precision"] == pytest.approx(1.0) and rep["auroc"] == pytest.approx(1.0)
    assert rep["n"] == 100 and rep["n_corrupted"] == 10 and rep["n_clean"] == 90
    # default ks: n_corrupted, 1%, 5%, 10% of n (10 appears once)
    assert list(rep["precision_at_k"]) == [10, 1, 5]
    assert rep["precision_at_k"] == {10: 1.0, 1: 1.0, 5: 1.0}
    assert rep["recall_at_k"] == {10: 1.0, 1: 0.1, 5: 0.5}
    assert rep["mean_reliability_corrupted"] < rep["mean_reliability_clean"]
    assert rep["note"] == ""

    rev = detection_report(1 - rel, corrupted)
    assert rev["auroc"] == 0.0
    assert rev["average_precision"] < 0.15
    assert rev["precision_at_k"][10] == 0.0


def test_known_average_precision_and_precision_at_k():
    # ranking by score (1 - reliability): pos, neg, pos, neg -> AP = (1/1 + 2/3) / 2
    rel = [0.1, 0.2, 0.3, 0.4]
    y = [1, 0, 1, 0]
    rep = detection_report(rel, y, ks=[1, 2, 3])
    assert rep["average_precision"] == pytest.approx(5 / 6)
    assert rep["auroc"] == pytest.approx(0.75)
    assert rep["precision_at_k"] == pytest.approx({1: 1.0, 2: 0.5, 3: 2 / 3})
    assert rep["recall_at_k"] == pytest.approx({1: 0.5, 2: 0.5, 3: 1.0})


def test_ties_are_order_independent():
    rel = np.array([0.5, 0.5, 0.5, 0.5, 0.9])
    y = np.array([True, False, False, False, False])
    a = detection_report(rel, y, ks=[1, 2])
    b = detection_report(rel[::-1], y[::-1], ks=[1, 2])
    assert a == b
    assert a["precision_at_k"][1] == pytest.approx(0.25)  # 1 of 4 tied examples is positive


def test_undefined_cases_and_errors():
    rep = detection_report([0.2, 0.8], [False, False])
    assert math.isnan(rep["average_precision"]) and math.isnan(rep["auroc"])
    assert "no corrupted" in rep["note"]
    assert math.isnan(rep["recall_at_k"][1])
    rep = detection_report([0.2, 0.8], [True, True])
    assert math.isnan(rep["auroc"]) and "no clean" in rep["note"]
    with pytest.raises(ValueError, match="equal length"):
        detection_report([0.1, 0.2], [True])
    with pytest.raises(ValueError):
        detection_report([1.2, 0.2], [True, False])
    with pytest.raises(ValueError):
        detection_report([0.1, 0.2], [True, False], ks=[3])


def test_entity_f1():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG"]]
    assert entity_f1(gold, gold) == {"precision": 1.0, "recall": 1.0, "f1": 1.0}
    pred = [["B-PER", "O", "O", "B-LOC"], ["O"]]  # 1 of 2 predicted correct, 1 of 3 gold found
    r = entity_f1(gold, pred)
    assert r["precision"] == pytest.approx(0.5)
    assert r["recall"] == pytest.approx(1 / 3)
    assert r["f1"] == pytest.approx(0.4)
    # strict IOB2 ignores an entity that starts with I-, the lenient mode counts it
    assert entity_f1([["B-PER"]], [["I-PER"]])["f1"] == 0.0
    assert entity_f1([["B-PER"]], [["I-PER"]], mode=None)["f1"] == 1.0
    with pytest.raises(ValueError):
        entity_f1(gold, gold[:1])


def test_accuracy():
    assert accuracy([("a",), ("b",), ("a", "b")], [("a",), ("a",), ("a", "b")]) == pytest.approx(
        2 / 3
    )
    assert accuracy([("B-PER", "O")], [["B-PER", "O"]]) == 1.0
    assert accuracy(["x", "y"], [("x",), ("x",)]) == 0.5
    with pytest.raises(ValueError):
        accuracy([("a",)], [])


def test_entity_recall_counts_exact_entities_per_type():
    from subregweigh.metrics import entity_recall

    gold = [("B-PER", "I-PER", "O", "B-LOC"), ("B-ORG", "O"), ("O", "O")]
    pred = [("B-PER", "O", "O", "B-LOC"), ("B-ORG", "O"), ("B-PER", "O")]
    assert entity_recall(gold, pred) == {
        "PER": {"found": 0, "total": 1},  # a boundary short: not found
        "LOC": {"found": 1, "total": 1},
        "ORG": {"found": 1, "total": 1},
        "all": {"found": 2, "total": 3},
    }
    assert entity_recall([("O",)], [("B-PER",)]) == {}
