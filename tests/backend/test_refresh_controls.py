"""The refresh of a version of several labeling controls (issue 62; backend.jobs.refresh), in this
process: NER (``label``) beside a document-level topic (``topic``), each control's weigher
trained for real (a one-epoch scout, the CRF) and published as a training of several controls
publishes it (backend.jobs.training.fit_control, stage_controls_version), without Label Studio.
A reviewer's convention fix (an entity retyped in every task but one) reaches the rescore job
through a Label Studio double answering what it asks; the job rescores the changed tasks and
refreshes: a new version serves whose NER control holds a CRF trained again (the task left with
the old convention scores lower), whose topic control's entries are kept as they were, whose
scouts and kept distributions are linked, and each control parses the changed tasks once.
Through a real Label Studio: tests/labelstudio/test_team_configs_ls.py."""

from __future__ import annotations

import json
import time

import pytest

from backend.jobs import refresh, rescore
from backend.jobs.training import fit_control, stage_controls
from backend.labelstudio.tasks import TaskRead, annotated_examples, parse_label_config, score_tasks
from backend.review import reviews
from backend.review.served import on_scale
from backend.serving.controls import control_entry, read_each
from backend.serving.predictions import predict
from backend.serving.publish import serve_here, stage_version
from backend.serving.scout_proba import SCOUT_PROBA, save_scout_proba
from backend.store import snapshot
from backend.store.store import ProjectStore
from tests.backend.test_rescore_reads_once import count_parses
from tests.doubles import offline_settings

PROJECT = "5"
CONFIG = (
    '<View><Labels name="label" toName="text"><Label value="PER"/><Label value="ORG"/>'
    '<Label value="LOC"/><Label value="MISC"/></Labels><Text name="text" value="$text"/>'
    '<Choices name="topic" toName="text" choice="single"><Choice value="sport"/>'
    '<Choice value="other"/></Choices></View>'
)
# (text, entities (mention, type), topic): "Reuters" is an ORG in ten tasks, the convention the
# reviewer changes to MISC in all of them but the first
TEXTS = [
    ("Reuters reported the result on Monday .", [("Reuters", "ORG")], "sport"),
    ("Reuters said the talks ended .", [("Reuters", "ORG")], "other"),
    ("The match was shown by Reuters .", [("Reuters", "ORG")], "sport"),
    ("Reuters quoted the coach after the game .", [("Reuters", "ORG")], "sport"),
    ("Prices fell , Reuters said .", [("Reuters", "ORG")], "other"),
    ("Reuters counted the votes .", [("Reuters", "ORG")], "other"),
    ("The team won , Reuters reported .", [("Reuters", "ORG")], "sport"),
    ("Reuters asked the minister .", [("Reuters", "ORG")], "other"),
    ("Reuters saw the race .", [("Reuters", "ORG")], "sport"),
    ("Shares rose , according to Reuters .", [("Reuters", "ORG")], "other"),
    ("Smith won in Paris .", [("Smith", "PER"), ("Paris", "LOC")], "sport"),
    ("The German bank lost money .", [("German", "MISC")], "other"),
]
KEPT = 1  # the task left with the old convention
SAVED = "2026-01-01T10:00:00.000000Z"


def _task(task_id: int, text: str, entities, topic: str, saved: str = SAVED) -> dict:
    regions = []
    for i, (mention, etype) in enumerate(entities):
        start = text.index(mention)
        regions.append(
            {
                "id": f"r{task_id}-{i}",
                "from_name": "label",
                "to_name": "text",
                "type": "labels",
                "value": {"start": start, "end": start + len(mention), "labels": [etype]},
            }
        )
    regions.append(
        {
            "id": f"t{task_id}",
            "from_name": "topic",
            "to_name": "text",
            "type": "choices",
            "value": {"choices": [topic]},
        }
    )
    annotation = {"id": task_id * 10, "result": regions, "updated_at": saved}
    return {"id": task_id, "data": {"text": text}, "annotations": [annotation]}


def _tasks(fixed: set[int] = frozenset()) -> dict[int, dict]:
    out = {}
    for i, (text, entities, topic) in enumerate(TEXTS, start=1):
        if i in fixed:
            entities = [(m, "MISC" if m == "Reuters" else t) for m, t in entities]
        out[i] = _task(
            i, text, entities, topic, "2026-01-01T10:05:00.000000Z" if i in fixed else SAVED
        )
    return out


class _LabelStudio:
    """What a rescore and its refresh ask Label Studio, answered from ``held``; the predictions
    written kept in ``written``, the model version set in ``model_version``."""

    config: str = CONFIG
    held: dict = {}
    written: list = []
    model_version: list = []

    def __init__(self, url=None, api_key=None, **kwargs):
        pass

    def label_config(self, project: int) -> str:
        return type(self).config

    def project_tasks(self, project: int, ids) -> list[dict]:
        return [type(self).held[i] for i in ids if i in type(self).held]

    def tasks(self, project: int) -> list[dict]:
        raise AssertionError("the refresh read the whole project: its tasks were kept")

    def users(self) -> dict:
        return {}

    def replace_predictions(self, project: int, predictions: list) -> None:
        type(self).written.extend(predictions)

    def write_predictions(self, project: int, predictions: list) -> list:
        type(self).written.extend(predictions)
        return []

    def set_model_version(self, project: int, version: str) -> None:
        type(self).model_version.append(version)

    def model_versions(self, project: int) -> dict:
        return {}

    def delete_model_version(self, project: int, version: str) -> None:
        pass


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """The project's version of both controls, trained on :data:`TEXTS` as a training of
    several controls trains it: (settings, spec, version)."""
    root = tmp_path_factory.mktemp("controls")
    settings = offline_settings(
        root / "models",
        epochs=1,
        k=3,
        n_samples=6,
        n_scouts=1,
        write_reason=False,
        retrain_after=1000,
    )
    spec = parse_label_config(CONFIG)
    assert spec.several
    store = ProjectStore(settings.model_dir, PROJECT)
    staged, _, _ = stage_controls(
        store, settings, spec, read_each(list(_tasks().values()), spec), time.time()
    )
    assert serve_here(staged)
    return settings, spec, staged.version


def _scores(store: ProjectStore, version: str) -> dict:
    return json.loads((store.versions / version / "scores.json").read_text())


def test_a_convention_fix_refreshes_the_ner_control_and_keeps_the_topic(trained, monkeypatch):
    settings, spec, base = trained
    store = ProjectStore(settings.model_dir, PROJECT)
    meta = store.meta(base)
    ner_folder, topic_folder = (p["folder"] for p in meta["weighers"])
    assert (store.versions / base / ner_folder / SCOUT_PROBA).is_file()  # the NER control's
    assert not (store.versions / base / topic_folder / SCOUT_PROBA).exists()
    before = _scores(store, base)

    fixed = {
        i for i, (_, entities, _) in enumerate(TEXTS, start=1) if ("Reuters", "ORG") in entities
    }
    fixed -= {KEPT}
    double = type(
        "LS", (_LabelStudio,), {"held": _tasks(fixed), "written": [], "model_version": []}
    )
    monkeypatch.setattr(rescore, "LabelStudioAPI", double)
    parsed = count_parses(monkeypatch)
    store.update_status(rescore_pending={str(task): time.time() for task in fixed})

    done = rescore.rescore_project(PROJECT, settings, refresh.refresh_project)

    assert done["rescored"] == len(fixed)
    # the changed tasks parsed once per control; the refresh read its tasks kept, per control
    assert parsed == [sorted(fixed)] * len(spec.each())
    status = store.status()
    last = status["last_refresh"]
    current = store.current_version()
    assert last["refreshed"] and last["version"] == current != base and last["of"] == base
    assert last["read_project"] is False and last["annotations"] == len(TEXTS)
    after = _scores(store, current)
    assert set(after) == set(before)
    assert last["tasks"] == len(TEXTS)  # every task covered, the fixed ones as rescored
    # the NER control's CRF-based scores changed; the task left with the old convention lower
    assert after[str(KEPT)]["controls"]["label"] < before[str(KEPT)]["controls"]["label"]
    assert any(
        after[t]["controls"]["label"] != before[t]["controls"]["label"]
        for t in before
        if int(t) not in fixed and int(t) != KEPT
    )
    # the topic control's entries kept as they were, every task merged with them
    rescored = _scores(store, base)  # the changed tasks as their rescore stored them
    for task in before:
        assert control_entry(after[task], "topic") == control_entry(rescored[task], "topic")
        if int(task) not in fixed:
            assert control_entry(after[task], "topic") == control_entry(before[task], "topic")
        assert after[task]["score"] == min(after[task]["controls"].values())
    # the scouts and their distributions linked, the NER control's CRF trained again
    old, new = store.versions / base, store.versions / current
    parts = [p.relative_to(old) for p in (old / "controls").rglob("*") if p.is_file()]
    crf = old / ner_folder / "crf.npz"
    assert crf.relative_to(old) in parts
    for part in parts:
        same = (new / part).stat().st_ino == (old / part).stat().st_ino
        assert same is (part != crf.relative_to(old)), part
    assert (new / ner_folder / "crf.npz").read_bytes() != crf.read_bytes()
    meta = store.meta(current)
    assert meta["refreshed"]["of"] == base and meta["weighers"] == store.meta(base)["weighers"]
    # served: Label Studio was given the version with every task, and /predict serves it
    assert double.model_version[-1] == current
    assert {p["task"] for p in double.written if p["model_version"] == current} == set(
        map(int, before)
    )
    now = list(double.held.values())
    served = predict(settings, PROJECT, spec, TaskRead.of(now, spec), from_label_studio=True)
    assert {s["model_version"] for s in served} == {current}
    kept = served[KEPT - 1]
    # on the refreshed version's scale (none for several controls: served as
    # stored); a contradicted copy may halve it
    scales = reviews.version_scales(store, current)
    assert scales == {} == meta["scale"]  # several controls: served as stored
    records = after[str(KEPT)]["annotations"]
    assert kept["score"] <= min(on_scale(r, scales) for r in records) + 1e-9


def test_the_tasks_are_kept_per_ner_control(trained):
    """What the training kept: the NER control's reading of every annotated task, apart from
    a project of one control's (which it would be read as); the topic's none."""
    settings, spec, _ = trained
    store = ProjectStore(settings.model_dir, PROJECT)
    kept = snapshot.load(store, "label")
    assert kept is not None and [item.id for item in kept] == [str(i) for i in _tasks()]
    (first,) = kept[KEPT - 1].examples
    assert first.label == ("B-ORG", "O", "O", "O", "O", "O", "O")
    assert snapshot.path(store, "label").is_file() and not snapshot.path(store).exists()
    assert snapshot.load(store, "topic") is None


NER_ONLY = CONFIG[: CONFIG.index("<Choices")] + "</View>"


def test_a_version_of_one_control_refreshes_as_before(tmp_path, monkeypatch):
    """The one-control path, after its steps became functions shared with several controls:
    the same convention fix, in a project labelling NER alone, refreshes the version (its CRF
    trained again, its scouts linked) and lowers the task left with the old convention."""
    settings = offline_settings(
        tmp_path / "models", epochs=1, k=3, n_samples=6, n_scouts=1, write_reason=False
    )
    spec = parse_label_config(NER_ONLY)
    assert not spec.several
    store = ProjectStore(settings.model_dir, PROJECT)
    read = TaskRead.of(list(_tasks().values()), spec)
    snapshot.keep_project(store, read.items, time.time())
    annotated = annotated_examples(read.items)
    srw, ordinary = fit_control(settings, spec, annotated)
    scores = score_tasks(srw, spec, read.items, ordinary=ordinary)
    staged = stage_version(
        store,
        srw,
        scores,
        (spec, settings, read.items, len(annotated), 0),
        keep=lambda folder: save_scout_proba(folder, annotated, ordinary),
    )
    assert serve_here(staged)
    base = staged.version
    fixed = set(range(2, 11))
    double = type(
        "LS",
        (_LabelStudio,),
        {"config": NER_ONLY, "held": _tasks(fixed), "written": [], "model_version": []},
    )
    monkeypatch.setattr(rescore, "LabelStudioAPI", double)
    store.update_status(rescore_pending={str(task): time.time() for task in fixed})

    rescore.rescore_project(PROJECT, settings, refresh.refresh_project)

    last = store.status()["last_refresh"]
    current = store.current_version()
    assert last["of"] == base and last["version"] == current != base
    assert last["tasks"] == len(TEXTS) and last["read_project"] is False
    before, after = _scores(store, base), _scores(store, current)
    assert after[str(KEPT)]["score"] < before[str(KEPT)]["score"]
    old, new = store.versions / base, store.versions / current
    assert (new / "crf.npz").read_bytes() != (old / "crf.npz").read_bytes()
    parts = [p.relative_to(old) for p in old.rglob("*") if p.is_file()]
    linked = [
        p
        for p in parts
        if (new / p).is_file() and (new / p).stat().st_ino == (old / p).stat().st_ino
    ]
    assert {str(p) for p in set(parts) - set(linked)} == {
        "crf.npz",
        "scores.json",
        "meta.json",
        "COMPLETE",
    }
    assert double.model_version[-1] == current
