"""subregweigh.review: a fix's slips, and their weight after a review (net_slips);
subregweigh.served: the score the queue serves from them."""

from __future__ import annotations

import numpy as np

from subregweigh import served
from subregweigh.example import Example
from subregweigh.review import convention_pairs, net_slips, slip_keys, slip_repeats

WORDS = ("EASTERN", "CONFERENCE", "in", "Czech", "Republic")


def _ex(tags: tuple[str, ...]) -> Example:
    return Example(id="s", words=WORDS, label=tags)


MISSED = _ex(("O", "O", "O", "B-LOC", "I-LOC"))
FIXED = _ex(("B-MISC", "I-MISC", "O", "B-LOC", "I-LOC"))


def test_a_fix_names_the_pairs_it_changed_and_a_sentence_its_conventions():
    assert slip_keys(MISSED, FIXED) == {("EASTERN", "O"), ("CONFERENCE", "O")}
    # an entity is one convention, its words and type; lower-case words outside entities
    # carry none
    assert convention_pairs(MISSED.words, MISSED.label) == {
        ("EASTERN", "O"),
        ("CONFERENCE", "O"),
        ("Czech Republic", "LOC"),
    }
    # a fix of an entity names the whole entity it changed, whatever part the fix touched
    czech_alone = _ex(("O", "O", "O", "B-LOC", "O"))
    assert slip_keys(MISSED, czech_alone) == {("Czech Republic", "LOC")}
    assert slip_keys(czech_alone, MISSED) == {("Czech", "LOC")}
    assert convention_pairs(czech_alone.words, czech_alone.label) == {
        ("EASTERN", "O"),
        ("CONFERENCE", "O"),
        ("Czech", "LOC"),
        ("Republic", "O"),
    }


def test_a_slip_weighs_its_fixes_less_the_sentences_that_held_it_unchanged():
    pairs = convention_pairs(MISSED.words, MISSED.label)
    fix = (pairs, slip_keys(MISSED, FIXED))
    # the fix's own sentence holds its slip, changed: it does not weigh against it
    assert net_slips([fix]) == {("EASTERN", "O"): 1, ("CONFERENCE", "O"): 1}
    assert net_slips([fix, fix]) == {("EASTERN", "O"): 2, ("CONFERENCE", "O"): 2}
    # a sentence confirmed with EASTERN as O: one fix less one confirmation, EASTERN drops
    confirmed = ({("EASTERN", "O"), ("Czech Republic", "LOC")}, ())
    assert net_slips([fix, confirmed]) == {("CONFERENCE", "O"): 1}
    assert net_slips([fix, fix, confirmed]) == {("EASTERN", "O"): 1, ("CONFERENCE", "O"): 2}
    # confirmations alone, or before any fix, never make a slip; lists read as tuples (JSON)
    assert net_slips([confirmed]) == {}
    assert net_slips([([["EASTERN", "O"]], [["EASTERN", "O"]])]) == {("EASTERN", "O"): 1}


def test_a_sentence_repeats_each_slip_by_its_weight():
    slips = [(set(), {("EASTERN", "O")})] * 2 + [(set(), {("Czech Republic", "LOC")})]
    weights = net_slips(slips)
    assert slip_repeats(MISSED.words, MISSED.label, weights) == 3
    assert slip_repeats(FIXED.words, FIXED.label, weights) == 1  # EASTERN is MISC there
    # "Czech" as LOC alone is another convention than "Czech Republic" as LOC: no repeat
    czech_alone = _ex(("O", "O", "O", "B-LOC", "O"))
    assert slip_repeats(czech_alone.words, czech_alone.label, weights) == 2


def test_the_served_score_halves_per_repeat_and_a_confirmation_serves_one():
    """One policy for the backend and the review-loop benchmark: a score times SLIP_BOOST per
    repeat of a fixed slip, 1 once confirmed, a task at its lowest annotation's."""
    assert served.SLIP_BOOST == 0.5
    assert served.served_score(0.8) == 0.8 and served.served_score(0.8, 2) == 0.2
    assert served.served_score(0.1, 3, confirmed=True) == 1.0
    assert served.served_score(0.8, 1, boost=0.1) == 0.8 * 0.1
    # arrays elementwise, as the benchmark ranks a whole corpus
    got = served.served_score(np.array([0.8, 0.4, 0.2]), np.array([0, 1, 2]), [False, True, False])
    np.testing.assert_allclose(got, [0.8, 1.0, 0.05])
    np.testing.assert_allclose(served.slip_factor(np.array([0, 1, 3])), [1.0, 0.5, 0.125])
    assert served.task_score([0.9, 0.3, 1.0]) == 0.3
