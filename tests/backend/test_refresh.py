"""The refresh's bookkeeping (backend.jobs.refresh) without Label Studio: what a version keeps of
its scouts, which tasks may be scored again from it, and what a refreshed entry carries over. The
refresh itself, through a real Label Studio, is tests/labelstudio/test_refresh.py."""

from __future__ import annotations

import numpy as np
import pytest

from backend.jobs import refresh
from backend.labelstudio.tasks import fingerprint, parse_label_config, read_tasks
from backend.serving import scout_proba
from backend.store.store import ProjectStore
from subregweigh.example import Example
from subregweigh.scores import WeighResult
from tests.backend.test_backend_server import NER_CONFIG


def _result(proba) -> WeighResult:
    empty = np.empty(0)
    return WeighResult([], [], empty, empty, empty, empty, [], empty, scout_proba=proba)


def test_a_version_keeps_each_annotation_s_distribution_by_id_and_text(tmp_path):
    examples = [
        Example("7/70", ("Jordan", "won"), ("B-PER", "O")),
        Example("8/80", ("in", "Amman", "today"), ("O", "B-LOC", "O")),
    ]
    proba = [
        np.random.default_rng(0).random((len(ex.words), 5), dtype=np.float32) for ex in examples
    ]
    assert scout_proba.save_scout_proba(tmp_path, examples, _result(proba))
    kept = scout_proba.load_scout_proba(tmp_path)
    assert set(kept) == {"7/70", "8/80"}
    for ex, p in zip(examples, proba):
        text, got = kept[ex.id]
        assert text == scout_proba.text_key(ex.words) != scout_proba.text_key(("jordan", "won"))
        np.testing.assert_array_equal(got, p)
    # classification keeps none; a version without the file has nothing to refresh from
    assert not scout_proba.save_scout_proba(tmp_path / "none", examples, _result([]))
    assert scout_proba.load_scout_proba(tmp_path / "none") == {}


def _task(task_id: int, text: str, tags: list[tuple[int, int, str]]) -> dict:
    regions = [
        {
            "id": f"r{i}",
            "from_name": "label",
            "to_name": "text",
            "type": "labels",
            "value": {"start": s, "end": e, "labels": [t]},
        }
        for i, (s, e, t) in enumerate(tags)
    ]
    return {
        "id": task_id,
        "data": {"text": text},
        "annotations": [{"id": task_id * 10, "result": regions}],
    }


def test_only_tasks_scored_as_they_stand_with_their_texts_kept_are_scored_again():
    spec = parse_label_config(NER_CONFIG)
    items = read_tasks(
        [
            _task(1, "Jordan won", [(0, 6, "PER")]),
            _task(2, "Jordan won", [(0, 6, "LOC")]),
            _task(3, "Amman wins", [(0, 5, "LOC")]),
            {"id": 4, "data": {"text": "nothing here"}, "annotations": []},
        ],
        spec,
    ).tasks
    kept = {ex.id: (scout_proba.text_key(ex.words), None) for item in items for ex in item.examples}
    stored = {item.id: {"fingerprint": fingerprint(item)} for item in items}
    assert [refresh._covered(item, stored, kept) for item in items] == [True, True, True, False]
    changed = {**stored, "2": {"fingerprint": "scored before the change"}}
    assert [refresh._covered(item, changed, kept) for item in items][:3] == [True, False, True]
    other_text = {**kept, items[2].examples[0].id: ("another text", None)}
    assert [refresh._covered(item, stored, other_text) for item in items][:3] == [True, True, False]


def test_a_refreshed_entry_keeps_what_the_k_candidates_gave_the_same_annotations():
    old = {
        "score": 0.4,
        "reliability": {"1/10": 0.7},
        "probability": {"1/10": 0.6},
        "annotations": [{"id": "1/10", "score": 0.4, "reliability": 0.7, "probability": 0.6}],
    }
    new = {
        "score": 0.2,
        "result": [],
        "reliability": {},
        "probability": {},
        "annotations": [{"id": "1/10", "score": 0.2}],
    }
    got = refresh._with_k_columns(new, old)
    assert got["score"] == 0.2 and got["reliability"] == {"1/10": 0.7}
    assert got["annotations"] == [
        {"id": "1/10", "score": 0.2, "reliability": 0.7, "probability": 0.6}
    ]


@pytest.mark.parametrize(
    ("meta", "files", "reason"),
    [
        ({"early": "the CRF alone"}, ["scout_proba.npz", "crf.npz"], "an early version serves"),
        ({}, ["crf.npz"], "kept no scout distributions"),
        ({}, ["scout_proba.npz"], "has no CRF"),
        ({}, ["scout_proba.npz", "crf.npz"], None),
    ],
)
def test_what_may_be_refreshed(tmp_path, meta, files, reason):
    import json

    store = ProjectStore(tmp_path, 1)
    folder = store.versions / "srw-1"
    folder.mkdir(parents=True)
    (folder / "meta.json").write_text(json.dumps(meta))
    for name in files:
        (folder / name).write_bytes(b"x")
    spec = parse_label_config(NER_CONFIG)
    got = refresh._not_refreshable(store, "srw-1", spec)
    assert (got is None) if reason is None else (reason in got)
    assert refresh._not_refreshable(store, None, spec) == "no version yet"


def test_the_refit_counts_an_annotation_a_reviewer_decided_as_it_stands(tmp_path):
    from backend.review import reviews
    from backend.review.decisions import content_hash
    from subregweigh.io.atomic import atomic_write_json
    from subregweigh.io.dataset import example_record

    store = ProjectStore(tmp_path, "1")
    store.root.mkdir(parents=True)
    now = [
        Example("7/70", ("Jordan", "won"), ("B-PER", "O")),  # confirmed as it is
        Example("8/80", ("in", "Amman", "today"), ("O", "B-LOC", "O")),  # fixed into this
        Example("9/90", ("Paris", "fell"), ("B-ORG", "O")),  # confirmed, then changed
        Example("6/60", ("Rome",), ("B-LOC",)),  # never decided
    ]
    before = Example("9/90", ("Paris", "fell"), ("B-LOC", "O"))
    kept = {
        ex.id: {"decision": decision, "hash": content_hash(example_record(ex, "ner"))}
        for ex, decision in ((now[0], "confirmed"), (now[1], "fixed"), (before, "confirmed"))
    }
    atomic_write_json(store.root / "reviews.json", {"decisions": kept, "history": []})
    assert reviews.decided(store, now, "ner") == {"7/70", "8/80"}


@pytest.mark.parametrize("fails", ["before the CRF", "after the rescore", "in the rescore"])
def test_the_rescore_beside_the_refresh_runs_once_and_only_its_own_failure_fails_the_job(
    tmp_path, fails
):
    """The rescore of the changed tasks runs beside the refresh's CRF (refresh_project's
    ``meanwhile``). Whatever the refresh does, the rescore runs once; a failed refresh is logged
    and the rescore's scores stand; a failed rescore fails the job. Faults injected: the
    refresh itself is tested through a real Label Studio (tests/labelstudio/test_refresh.py)."""
    from backend.jobs import rescore

    runs = []

    def write():
        runs.append("write")
        if fails == "in the rescore":
            raise KeyError("rescore")
        return 3

    def failing_refresh(api, store, settings, spec, meanwhile):
        if fails != "before the CRF":
            meanwhile()
        raise RuntimeError("refresh")

    once = rescore._Once(write)
    store = ProjectStore(tmp_path, "1")
    if fails == "in the rescore":
        with pytest.raises(KeyError, match="rescore"):
            rescore._refresh(None, store, None, None, meanwhile=once, refresh=failing_refresh)
        with pytest.raises(KeyError, match="rescore"):
            once()
    else:
        outcome = rescore._refresh(None, store, None, None, meanwhile=once, refresh=failing_refresh)
        assert outcome == {"refreshed": False, "reason": "RuntimeError: refresh"}
        assert once() == 3 and once() == 3
    assert runs == ["write"]


def test_a_running_retrain_leaves_the_refresh_on_and_a_due_one_stops_it(tmp_path):
    """Issue 61: a retrain publishes no early version, so the full version serving while it
    runs is refreshed after each change, until the retrain saves its own; changes enough to
    start the next training stop it (that training's version replaces whatever a refresh would
    make), and so does a first training."""
    from backend.config.settings import Settings
    from backend.jobs import rescore

    store = ProjectStore(tmp_path, 1)
    settings = Settings(model_dir=str(tmp_path), retrain_after=10)
    store.update_status(state="running", events_since_training=3, refresh_while_training=True)
    assert rescore._training_due(store, settings) is False
    store.update_status(events_since_training=10)
    assert rescore._training_due(store, settings) is True
    # a first training, or a retrain once it saves its own version: no refresh until it ends
    store.update_status(events_since_training=3, refresh_while_training=False)
    assert rescore._training_due(store, settings) is True
    store.update_status(state="idle", events_since_training=2)
    assert rescore._training_due(store, settings) is False


NER_AND_TOPIC = (
    '<View><Labels name="label" toName="text"><Label value="PER"/><Label value="LOC"/></Labels>'
    '<Text name="text" value="$text"/><Choices name="topic" toName="text" choice="single">'
    '<Choice value="sport"/><Choice value="other"/></Choices></View>'
)
TWO_CHOICES = (
    '<View><Text name="text" value="$text"/><Choices name="topic" toName="text" '
    'choice="single"><Choice value="sport"/><Choice value="other"/></Choices>'
    '<Choices name="tone" toName="text" choice="single"><Choice value="cold"/>'
    '<Choice value="warm"/></Choices></View>'
)
_LABEL = {"control": "label", "folder": "controls/0", "task": "ner"}
_TOPIC = {"control": "topic", "folder": "controls/1", "task": "classification"}
_TONE = {"control": "tone", "folder": "controls/1", "task": "classification"}


@pytest.mark.parametrize(
    ("config", "weighers", "files", "reason"),
    [
        (NER_AND_TOPIC, [_LABEL, _TOPIC], ["scout_proba.npz", "crf.npz"], None),
        (NER_AND_TOPIC, [_LABEL, _TOPIC], ["crf.npz"], "'label': the version kept no scout"),
        (NER_AND_TOPIC, [_LABEL, _TOPIC], ["scout_proba.npz"], "'label': the version has no CRF"),
        (TWO_CHOICES, [{**_TOPIC, "folder": "controls/0"}, _TONE], [], "classification: no CRF"),
        (NER_AND_TOPIC, [], ["scout_proba.npz", "crf.npz"], "a version of one"),
        (NER_CONFIG, [_LABEL, _TOPIC], ["scout_proba.npz", "crf.npz"], "controls changed"),
    ],
)
def test_what_may_be_refreshed_of_several_controls(tmp_path, config, weighers, files, reason):
    """Issue 62: a version of several controls is refreshed per NER control; each NER
    control's folder must keep its scouts' distributions and its CRF."""
    import json

    store = ProjectStore(tmp_path, 1)
    folder = store.versions / "srw-1"
    (folder / "controls" / "0").mkdir(parents=True)
    (folder / "meta.json").write_text(json.dumps({"weighers": weighers} if weighers else {}))
    for name in files:
        (folder / "controls" / "0" / name).write_bytes(b"x")
    got = refresh._not_refreshable(store, "srw-1", parse_label_config(config))
    assert (got is None) if reason is None else (reason in got), got


def test_a_control_s_entry_comes_back_out_of_the_merged_one():
    """What a refresh keeps of the controls it does not score again: each control's entry as
    merge_entries took it, notes and keys without the control's name."""
    from backend.serving.controls import control_entry, merge_entries

    spec = parse_label_config(NER_AND_TOPIC)
    label = {
        "result": [
            {"from_name": "label", "value": {"labels": ["PER"]}, "meta": {"text": ["doubt"]}}
        ],
        "score": 0.3,
        "fingerprint": "f-label",
        "reliability": {"1/10": 0.5},
        "probability": {"1/10": 0.4},
        "annotations": [{"id": "1/10", "score": 0.3, "saved": {"at": "t", "hash": "h"}}],
    }
    topic = {
        "result": [{"from_name": "topic", "value": {"choices": ["sport"]}}],
        "score": 0.8,
        "fingerprint": "f-topic",
        "reliability": {"1/10": 1.0},
        "probability": {"1/10": 0.8},
        "annotations": [{"id": "1/10", "score": 0.8}],
    }
    merged = merge_entries(spec, [{"1": label}, {"1": topic}])["1"]
    assert merged["result"][0]["meta"]["text"] == ["label: doubt"] and merged["score"] == 0.3
    assert control_entry(merged, "label") == label
    assert control_entry(merged, "topic") == topic
    assert merge_entries(spec, [{"1": label}, {"1": control_entry(merged, "topic")}])["1"] == merged
    older = {k: v for k, v in merged.items() if k != "fingerprints"}  # stored before this
    assert control_entry(older, "topic") is None and control_entry(merged, "tone") is None
