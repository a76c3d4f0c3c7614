"""A scout's head on given logits (subregweigh.head, no model): softmax/sigmoid, p(gold),
truncation."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from subregweigh.head import Head


def fake_scout(task, labels, multi_label=False):
    """The head of a scout with this label space: enough for the logits -> probability step."""
    return Head(labels, task, multi_label)


def gold_proba(head, logits, first, gold):
    index = {label: i for i, label in enumerate(head.labels)}
    proba = head.proba(torch.tensor(logits, dtype=torch.float32), first).numpy()
    return head.gold_proba(proba, gold, index)


def test_ner_gold_probability_at_first_subwords():
    scout = fake_scout("ner", ["O", "B-PER", "I-PER"])
    ln2, ln3 = np.log(2), np.log(3)
    # 4 subword rows: [CLS], word 0 (1 subword), word 1 (rows 2-3, first at 2)
    logits = [[9, 9, 9], [0, ln3, 0], [ln2, 0, 0], [0, 0, 50]]
    # softmax row 1: [1, 3, 1] / 5; row 2: [2, 1, 1] / 4; row 3 is not a first subword
    p = gold_proba(scout, logits, [1, 2], ("B-PER", "O"))
    np.testing.assert_allclose(p, [3 / 5, 2 / 4], rtol=1e-6)
    assert p.dtype == np.float32 and p.shape == (2,)
    np.testing.assert_allclose(
        gold_proba(scout, logits, [1, 2], ("O", "I-PER")), [0.2, 0.25], rtol=1e-6
    )
    # a tag the scout never saw: 0; a truncated word (-1) is predicted O: 1 if gold O, else 0
    np.testing.assert_allclose(
        gold_proba(scout, logits, [1, -1], ("B-LOC", "O")), [0, 1], rtol=1e-6
    )
    np.testing.assert_allclose(
        gold_proba(scout, logits, [1, -1], ("B-PER", "I-PER")), [0.6, 0], rtol=1e-6
    )
    full = scout.proba(torch.tensor(logits, dtype=torch.float32), [1, -1]).numpy()
    np.testing.assert_allclose(full, [[0.2, 0.6, 0.2], [1, 0, 0]], rtol=1e-6)
    # the decoded labels agree with the probabilities' argmax
    assert scout.decode(torch.tensor(logits), [1, 2]) == ("B-PER", "O")


def test_single_label_gold_probability():
    scout = fake_scout("classification", ["neg", "pos"])
    logits = [0.0, np.log(3)]  # softmax [0.25, 0.75]
    np.testing.assert_allclose(gold_proba(scout, logits, [], ("pos",)), [0.75], rtol=1e-6)
    np.testing.assert_allclose(gold_proba(scout, logits, [], ("neg",)), [0.25], rtol=1e-6)
    np.testing.assert_allclose(gold_proba(scout, logits, [], ("meh",)), [0.0], rtol=1e-6)


def test_multi_label_gold_membership_probability():
    scout = fake_scout("classification", ["neg", "pos", "sports"], multi_label=True)
    logits = [0.0, np.log(3), -np.log(4)]  # sigmoids [0.5, 0.75, 0.2]
    p = gold_proba(scout, logits, [], ("pos", "sports"))
    # gold classes: the sigmoid; others: one minus it
    np.testing.assert_allclose(p, [0.5, 0.75, 0.2], rtol=1e-6)
    np.testing.assert_allclose(gold_proba(scout, logits, [], ()), [0.5, 0.25, 0.8], rtol=1e-6)
    # an unknown gold class adds a zero
    np.testing.assert_allclose(
        gold_proba(scout, logits, [], ("new",)), [0.5, 0.25, 0.8, 0], rtol=1e-6
    )
    assert p.min() == pytest.approx(0.2)
