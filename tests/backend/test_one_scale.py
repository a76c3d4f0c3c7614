"""Every version serves on one scale (issue 61, item 3; backend.review.served): a version keeps
the scale of its own scores in its meta, so that the share of its annotations served under 0.5
is the share its served tagging labels otherwise, whatever its raw scores; what a rescore adds
later serves on the same scale; a classification control, unmeasured, serves as stored. Stored
records as a training writes them (``agrees``: backend.labelstudio.tasks.stored_prediction);
the real trainings' scales are checked in tests/backend/test_backend_report.py and
tests/labelstudio/test_refresh.py."""

from __future__ import annotations

import numpy as np
import pytest

from backend.review import reviews, served
from backend.serving import predictions
from backend.serving.publish import with_scales
from backend.store.store import ProjectStore
from subregweigh.io.atomic import atomic_write_json
from subregweigh.scale import THRESHOLD

WORDS = ["Angela", "Merkel", "visited", "Paris", "."]
TAGS = ["B-PER", "I-PER", "O", "B-LOC", "O"]


def _record(task: int, score: float, agrees: bool | None, control: str | None = None) -> dict:
    record = {"id": f"{task}/{task}0", "words": WORDS, "tags": TAGS, "score": score}
    if agrees is not None:  # NER's; a classification record says nothing of it
        record["agrees"] = agrees
    if control is not None:
        record["control"] = control
    return record


def _entry(records: list[dict]) -> dict:
    return {"result": [], "score": min(r["score"] for r in records), "annotations": records}


def _version(store: ProjectStore, name: str, scores: dict, scaled: bool = True) -> dict:
    """Publish ``scores`` as version ``name``, its meta holding their scale as a training's does
    (``scaled=False``: a version stored before versions had one)."""
    staging = store.staging_dir()
    atomic_write_json(staging / "scores.json", scores)
    meta, _ = with_scales({"version": name}, scores) if scaled else ({"version": name}, None)
    atomic_write_json(staging / "meta.json", meta)
    store.publish(staging, name)
    return scores


def _served(store: ProjectStore, version: str) -> dict[str, float]:
    scores = store.scores(version)
    shown = reviews.served_scores(store, scores, reviews.version_scales(store, version))
    return {task: entry["score"] for task, entry in shown.items()}


def _project(raw, disagree: set[int]) -> dict:
    return {str(t): _entry([_record(t, s, t not in disagree)]) for t, s in enumerate(raw, 1)}


@pytest.fixture
def store(tmp_path):
    return ProjectStore(tmp_path / "models", 7)


def test_a_version_serves_under_half_the_share_its_tagging_disagrees_with(store):
    raw = np.linspace(0.80, 0.99, 20)  # the tweets' raw scores: none under 0.5
    _version(store, "srw-a", _project(raw, {3, 9, 14, 20}))
    got = _served(store, "srw-a")
    assert sum(s < THRESHOLD for s in got.values()) == 4  # 4 of 20 disagree
    assert not any(e["score"] < THRESHOLD for e in store.scores("srw-a").values())  # stored raw
    order = sorted(got, key=lambda t: (got[t], int(t)))
    assert order == [str(t) for t in range(1, 21)]  # the queue's order is the raw one
    meta = store.meta("srw-a")["scale"][served.ONE_CONTROL]
    assert meta["share"] == pytest.approx(4 / 20) and raw[3] < meta["knot"] < raw[4]


def test_two_versions_of_other_raw_scales_flag_by_their_own_disagreement(store):
    disagree = set(range(1, 31, 4))  # 8 of 30 in both
    crowded = np.linspace(0.90, 0.999, 30)  # a version resting on the CRF
    spread = np.linspace(0.05, 0.99, 30)  # a scout's, half of it under 0.5 raw
    _version(store, "srw-a", _project(crowded, disagree))
    _version(store, "srw-b", _project(spread, disagree))
    flagged = [sum(s < THRESHOLD for s in _served(store, v).values()) for v in ("srw-a", "srw-b")]
    assert flagged == [8, 8]
    assert sum(spread < THRESHOLD) == 14 and sum(crowded < THRESHOLD) == 0  # raw: 14 and 0


def test_what_a_rescore_adds_serves_on_the_versions_scale_unfitted(store):
    _version(store, "srw-a", _project(np.linspace(0.6, 0.99, 10), {2, 7}))
    before = store.meta("srw-a")["scale"]
    scale = reviews.version_scales(store, "srw-a")[served.ONE_CONTROL]
    # a changed task rescored: stored beside the rest (backend.serving.predictions.predict)
    store.store_scores("srw-a", {**store.scores("srw-a"), "11": _entry([_record(11, 0.3, False)])})
    got = _served(store, "srw-a")
    assert store.meta("srw-a")["scale"] == before  # the version keeps its scale
    assert got["11"] == pytest.approx(scale(0.3)) and got["11"] < THRESHOLD
    assert got["1"] == pytest.approx(scale(0.6))


def test_decisions_apply_on_the_scale(store):
    scores = _version(store, "srw-a", _project(np.linspace(0.7, 0.99, 10), {1, 2}))
    scale = reviews.version_scales(store, "srw-a")
    record = scores["5"]["annotations"][0]
    key = served.content_key("5", record)
    assert served.served_score("5", record, {key}, scale) == 1.0  # confirmed: 1, not mapped
    halved = served.served_entry("5", scores["5"], {}, scale, contradicted=1)["score"]
    assert halved == pytest.approx(0.5 * scale[served.ONE_CONTROL](record["score"]))


def test_a_project_of_several_controls_serves_as_stored(store):
    """NER beside a topic: the NER control scaled and the topic not would push the topic's
    errors down the queue (a task serves its lowest control's score): neither is scaled."""
    scores = {
        str(t): _entry([_record(t, 0.9 + t / 100, t != 1, "ner"), _record(t, 0.2, None, "topic")])
        for t in range(1, 5)
    }
    _version(store, "srw-a", scores)
    assert reviews.version_scales(store, "srw-a") == {}
    assert all(s == pytest.approx(0.2) for s in _served(store, "srw-a").values())


def test_a_version_stored_before_scales_serves_as_stored(store):
    raw = np.linspace(0.8, 0.99, 10)
    _version(store, "srw-old", _project(raw, {2, 5}), scaled=False)
    assert reviews.version_scales(store, "srw-old") == {}
    assert list(_served(store, "srw-old").values()) == pytest.approx(list(raw))


def test_status_says_what_a_filter_under_half_lists(store):
    _version(store, "srw-a", _project(np.linspace(0.80, 0.99, 20), {3, 9, 14, 20}))
    said = predictions.serving(store, training=False)
    assert said["scale"] == store.meta("srw-a")["scale"]
    assert "scores on one scale: 20.0% of the annotations serve under 0.5" in said["message"]
    _version(store, "srw-old", _project(np.linspace(0.8, 0.99, 10), {2}), scaled=False)
    said = predictions.serving(store, training=False)
    assert said["scale"] is None and "one scale" not in said["message"]
