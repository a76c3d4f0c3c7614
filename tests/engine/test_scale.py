"""The one scale of a version's scores (subregweigh.scale): monotone, the share under 0.5 the
share its served tagging disagrees with."""

from __future__ import annotations

import numpy as np
import pytest

from subregweigh.scale import THRESHOLD, ScoreScale, disagreements, fit_scale, scale_at


def test_the_share_under_the_threshold_is_the_share_that_disagrees():
    rng = np.random.default_rng(0)
    score = rng.beta(5, 1, size=1000)  # raw p(gold): crowded near 1, as on the tweets
    disagrees = rng.random(1000) < 0.2
    scale = fit_scale(score, disagrees)
    assert scale.share == pytest.approx(disagrees.mean())
    mapped = scale(score)
    assert np.mean(mapped < THRESHOLD) == pytest.approx(disagrees.mean(), abs=2 / 1000)
    assert np.mean(score < THRESHOLD) < 0.1  # raw, few fall under 0.5


def test_the_map_keeps_the_order_its_ties_and_the_ends():
    score = np.array([0.0, 0.2, 0.2, 0.7, 0.95, 1.0])
    mapped = scale_at(score, 0.5)(score)
    assert np.all(np.diff(mapped) >= 0) and mapped[1] == mapped[2]
    assert np.all(np.diff(mapped)[np.diff(score) > 0] > 0)  # strictly where the scores differ
    assert mapped[0] == 0.0 and mapped[-1] == 1.0
    assert list(np.argsort(mapped, kind="stable")) == list(np.argsort(score, kind="stable"))


def test_no_disagreement_flags_nothing_and_all_flags_all_but_the_top():
    score = np.linspace(0.3, 0.9, 11)
    none = fit_scale(score, np.zeros(11, dtype=bool))
    assert none.share == 0 and not np.any(none(score) < THRESHOLD)
    every = fit_scale(score, np.ones(11, dtype=bool))
    assert np.sum(every(score) < THRESHOLD) == 10  # the highest is the knot itself: 0.5


def test_the_knot_stays_inside_so_the_map_is_strictly_increasing():
    ones = np.ones(5)
    scale = scale_at(ones, 0.4)
    assert 0 < scale.knot < 1
    assert scale(0.5) < scale(0.9) < scale(1.0) == 1.0
    zeros = scale_at(np.zeros(5), 0.4)
    assert 0 < zeros.knot and zeros(0.0) == 0.0 < zeros(0.1)


def test_a_float_gives_a_float_and_an_array_its_shape():
    scale = ScoreScale(knot=0.8, share=0.1)
    assert isinstance(scale(0.8), float) and scale(0.8) == THRESHOLD
    assert scale(0.4) == pytest.approx(0.25) and scale(0.9) == pytest.approx(0.75)
    assert scale(np.full((2, 3), 0.8)).shape == (2, 3)


def test_a_scale_round_trips_through_json():
    scale = fit_scale([0.1, 0.5, 0.9, 0.99], [True, False, False, False])
    assert ScoreScale.from_json(scale.to_json()) == scale


def test_disagreements_compare_whole_label_sequences():
    got = disagreements([["O", "B-PER"], ["O"], ["B-LOC"]], [("O", "B-PER"), ("B-ORG",), ["O"]])
    assert got.tolist() == [False, True, True]


def test_mismatched_or_empty_inputs_are_refused_by_name():
    with pytest.raises(ValueError, match="at least one score"):
        scale_at([], 0.1)
    with pytest.raises(ValueError, match="disagreements for"):
        fit_scale([0.1, 0.2], [True])
    with pytest.raises(ValueError, match="taggings for 2 annotations"):
        disagreements([["O"], ["O"]], [["O"]])
