"""The bookkeeping bugs of issue 44, found by the held-out check through a real Label Studio, on
the project of tests/backend/test_reviews.py (a published version, tasks as Label Studio returns
them; no scout needed to judge a decision):

* a decision recorded the stored score, not the one served: a task moved up by a fix's slip
  was never counted as a flag at the threshold it was served under;
* a fix later reverted to the original labels kept counting as a fix (twice, even).

Each test fails on the commit before the fix (db4b908) and passes after. The third bug, a
region's note with numbers from two sources, is tests/backend/test_suggestions.py's
``test_a_notes_two_numbers_come_from_the_models_the_score_comes_from``.
"""

from __future__ import annotations

import pytest

from backend.review import reviews
from subregweigh.report import review_summary
from tests.backend.test_reviews import MERKEL_LOC, MERKEL_PER, _at, _decide, _judge, _task
from tests.backend.test_reviews import project as project  # noqa: F401  (the fixture)


def test_a_decision_counts_the_score_the_reviewer_saw(project):  # noqa: F811
    """Fix task 2 (Angela Merkel PER -> LOC): task 1, stored at 0.1, repeats the slipped entity
    and is served at 0.1 * 0.5 = 0.05. Fix task 1 as well: its decision records 0.05, what the
    reviewer saw, so at a threshold of 0.08 it is a flag, and a precise one."""
    _, store = project
    assert _decide(store, _task(2, [(21, MERKEL_LOC, _at(5))])) == {"2/21": "fixed"}
    assert _decide(store, _task(1, [(11, MERKEL_LOC, _at(6))])) == {"1/11": "fixed"}
    decision = reviews.load(store)["decisions"]["1/11"]
    assert decision["score"] == pytest.approx(0.05)
    inputs = reviews.review_inputs(store)
    at = dict(zip(inputs["tasks"], inputs["score"]))
    assert at == pytest.approx({"1": 0.05, "2": 0.2})
    flags = review_summary(inputs["score"], inputs["fixed"], inputs["labels"], threshold=0.08)
    assert (flags["reviewed"], flags["fixed"], flags["precision"]) == (1, 1, 1.0)


def test_a_fix_reverted_to_the_original_labels_stops_counting_as_a_fix(project):  # noqa: F811
    """Task 2 fixed PER -> LOC, then saved back as PER: the fix is undone. It no longer counts
    as a fix in the report, its slips move nothing up, and the history says it was reverted
    (before: two "fixed" decisions)."""
    _, store = project
    assert _decide(store, _task(2, [(21, MERKEL_LOC, _at(5))])) == {"2/21": "fixed"}
    assert reviews.fixed_slips(store).counts  # Angela Merkel as PER moves up
    reverted = _judge(store, _task(2, [(21, MERKEL_PER, _at(8))]))
    assert reverted.made != {"2/21": "fixed"}
    decision = reviews.load(store)["decisions"]["2/21"]
    assert decision["fixed"] is False and not decision.get("slips")
    assert reviews.fixed_slips(store).counts == {}
    assert "2" not in (reviews.review_inputs(store) or {}).get("tasks", [])
    history = [entry[3] for entry in reviews.load(store)["history"]]
    assert history.count("fixed") == 1
    # the repeats the fix had moved up are rewritten as served now (handed to the rescore)
    assert set(reverted.slips) == {"Angela Merkel\0PER"}
    # a confirmation of the original labels afterwards is a confirmation, not a fix
    assert _decide(store, _task(2, [(21, MERKEL_PER, _at(9))])) == {"2/21": "confirmed"}
    assert reviews.review_inputs(store)["fixed"] == [False]
