"""Early scores are a courtesy: a training whose early publication fails goes on to its own
version.

Label Studio is a double here: the point is a write that fails on cue (the early scores'),
which a real server cannot be made to do; the writes of a real server are tested in
tests/labelstudio. The training itself is real (the offline MiniLM, two scouts, so that the
first scout's scores are early ones).
"""

from __future__ import annotations

import json
from typing import ClassVar

import numpy as np

import model as model_module
from backend.config.settings import Settings
from backend.jobs import training
from backend.labelstudio.client import LabelStudioUnavailable
from backend.store.store import ProjectStore
from testbed.projects import NER_CONFIG, conll_tasks
from tests.doubles import offline_settings, use_label_studio


class FailsTheFirstWrite:
    """Label Studio's API for a project of CoNLL++ sentences; its first prediction write (the
    early scores') fails as an unreachable server does."""

    task_list: ClassVar[list[dict]] = []
    writes: ClassVar[list[list[dict]]] = []
    served: ClassVar[list[str]] = []

    def __init__(self, url, api_key, **kwargs):
        pass

    def label_config(self, project):
        return NER_CONFIG

    def tasks(self, project):
        return type(self).task_list

    def users(self):
        return {}

    def write_predictions(self, project, predictions):
        type(self).writes.append(list(predictions))
        if len(type(self).writes) == 1:
            raise LabelStudioUnavailable("could not write predictions at http://ls: refused")
        return set()  # every task still in the project

    def set_model_version(self, project, version):
        type(self).served.append(version)

    def model_versions(self, project):
        return {}


def _project(monkeypatch, api: type, seed: int) -> list[dict]:
    """12 CoNLL++ tasks (ids 1 to 12) served by the Label Studio double ``api``, its records
    empty; the tasks."""
    tasks = conll_tasks(np.random.default_rng(seed), 12)
    for i, task in enumerate(tasks, 1):
        task["id"] = i
    monkeypatch.setattr(api, "task_list", tasks)
    monkeypatch.setattr(api, "writes", [])
    monkeypatch.setattr(api, "served", [])
    use_label_studio(monkeypatch, api)
    return tasks


def test_a_failed_early_publication_does_not_fail_the_training(tmp_path, monkeypatch, caplog):
    tasks = _project(monkeypatch, FailsTheFirstWrite, seed=0)
    settings = offline_settings(
        tmp_path / "models",
        epochs=1,
        k=2,
        n_samples=4,
        min_annotations=2,
        n_scouts=2,
        crf=False,  # the early scores are the first scout's alone (with a CRF, its come first)
    )
    result = model_module.SubRegWeighModel(project="7", settings=settings).fit()

    assert result["trained"] is True, result
    early, final, *_ = FailsTheFirstWrite.writes  # the early write failed; the final one landed
    assert {p["model_version"] for p in early} != {p["model_version"] for p in final}
    assert FailsTheFirstWrite.served == [result["last_version"]]
    assert {p["task"] for p in final} == {t["id"] for t in tasks}
    assert "early scores not published" in caplog.text and "refused" in caplog.text
    store = ProjectStore(tmp_path / "models", 7)
    assert store.current_version() == result["last_version"]
    assert store.status()["early_version"] is None  # no early scores were served


def test_the_stages_publish_on_the_way_and_end_where_fit_ends(tmp_path, monkeypatch, tiny_ner_data):
    """The backend's training as stages (backend.jobs.training.fit_in_stages): with EARLY_STEPS
    low enough, an ensemble of two scouts without the CRF publishes its first scout part-way
    and once trained, then ends with the weigher SubRegWeigh.fit makes of the same data; with
    the CRF, the CRF's scores come first, alone."""
    from backend.labelstudio.tasks import parse_label_config
    from backend.serving.weighers import engine, part_params

    monkeypatch.setattr(training, "EARLY_STEPS", 6)  # 60 examples: 4 steps a scout
    settings = Settings(model_dir=str(tmp_path), epochs=1, n_scouts=2, crf=False)
    spec = parse_label_config(NER_CONFIG)
    published = []

    def publish(weigher, what):
        scout = weigher.scouts_[0]
        published.append((what, scout.n_steps_, len(weigher.scouts_)))

    params = part_params(settings)
    staged = training.fit_in_stages(engine(settings, spec), tiny_ner_data, publish, params)
    assert published == [
        ("0.25 passes of scout 1 of 2, 1 steps", 1, 1),
        ("1.00 passes of scout 1 of 2, 4 steps", 4, 1),
    ]
    fitted = engine(settings, spec).fit(tiny_ner_data)
    np.testing.assert_array_equal(
        staged.weigh_deterministic(tiny_ner_data).deterministic_probability,
        fitted.weigh_deterministic(tiny_ner_data).deterministic_probability,
    )

    published.clear()
    with_crf = Settings(model_dir=str(tmp_path), epochs=1, n_scouts=1)
    staged = training.fit_in_stages(
        engine(with_crf, spec), tiny_ner_data, lambda w, what: published.append(what), params
    )
    assert published == ["the CRF alone, while the scout trains"]  # one scout: no more early
    assert staged.crf_ is not None and len(staged.scouts_) == 1

    # where the CRF comes after the scouts, the scouts score beside its training, as they
    # would after it
    monkeypatch.setattr(training, "_crf_first", lambda srw, n: False)
    beside = []
    staged = training.fit_in_stages(
        engine(with_crf, spec),
        tiny_ner_data,
        lambda w, what: None,
        params,
        beside_crf=lambda scouts: beside.append(scouts.scout_proba(tiny_ner_data)),
    )
    assert len(beside) == 1 and staged.crf_ is not None
    np.testing.assert_array_equal(
        staged.weigh_deterministic(tiny_ner_data, scout_proba=beside[0]).deterministic_probability,
        staged.weigh_deterministic(tiny_ner_data).deterministic_probability,
    )


class RecordsWrites(FailsTheFirstWrite):
    """Label Studio's API for a project of CoNLL++ sentences; every prediction write lands and
    is recorded, and so is each model version the project is switched to."""

    def write_predictions(self, project, predictions):
        type(self).writes.append(list(predictions))
        return set()

    def model_versions(self, project):
        versions: dict = {}
        for write in type(self).writes:
            for p in write:
                versions[p["model_version"]] = versions.get(p["model_version"], 0) + 1
        return versions

    def delete_model_version(self, project, version):
        pass


def test_a_retrain_publishes_no_early_version(tmp_path, monkeypatch):
    """Issue 61: early versions (the CRF alone, here) are published on a first training only.
    A retrain keeps the full version serving, here and in Label Studio, until its own full
    version is ready: Label Studio is switched from one full version to the next, nothing
    between, and the store never serves an early version."""
    _project(monkeypatch, RecordsWrites, seed=1)
    settings = offline_settings(
        tmp_path / "models", epochs=1, k=2, n_samples=4, min_annotations=2, n_scouts=1
    )  # with the CRF: 12 tasks are few enough for its scores to come first, alone
    store = ProjectStore(tmp_path / "models", 7)
    published: list[tuple[str, bool]] = []  # (version, early) of each version the store serves
    real_publish = ProjectStore.publish

    def publish(self, staging, version):
        early = bool(json.loads((staging / "meta.json").read_text()).get("early"))
        published.append((version, early))
        return real_publish(self, staging, version)

    monkeypatch.setattr(ProjectStore, "publish", publish)
    backend = model_module.SubRegWeighModel(project="7", settings=settings)

    first = backend.fit()
    assert first["trained"] is True, first
    (early, is_early), (full, _) = published  # a first training: the CRF's early version first
    assert is_early and full == first["last_version"]
    assert RecordsWrites.served == [early, full]
    assert [e["what"] for e in store.status()["early_scores"]] == [
        "the CRF alone, while the scout trains"
    ]

    published.clear()
    RecordsWrites.served.clear()
    RecordsWrites.writes.clear()
    second = backend.fit()  # a retrain: the full version serves until the next one is ready
    assert second["trained"] is True, second
    assert published == [(second["last_version"], False)]
    assert RecordsWrites.served == [second["last_version"]]
    assert {p["model_version"] for w in RecordsWrites.writes for p in w} == {second["last_version"]}
    status = store.status()
    assert status["early_version"] is None and status["early_scores"] == []
    assert store.current_version() == second["last_version"]
