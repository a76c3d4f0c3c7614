"""End to end against a real Label Studio 1.23 and a real redis-server, both on loopback.

NER (CoNLL-2003) and classification (SST-2) projects get annotated tasks, 10% of them
deliberately wrong. The backend is connected and trained through Label Studio's API; then the
API must show a scored prediction on every task, the project's model_version set to the new
version, and the wrong annotations near the top when tasks are ordered by prediction score.
Runs with the embedded job runner (100 tasks, where detection is checked) and, for NER, with rq +
Redis and `python -m backend.queue.worker` (50 tasks: the same training code, so only the plumbing
is checked there).
"""

from __future__ import annotations

import contextlib
import json
import time

import numpy as np
import pytest
from sklearn.metrics import average_precision_score

from testbed.projects import (
    ENGINE_ENV,
    N_TASKS,
    NER_CONFIG,
    PROJECTS,
    connect_and_train,
    field,
    import_tasks,
    ner_tasks,
    retyped,
    undecided_score,
    wait_trained,
)
from testbed.servers import BackendServer, backend_with_jobs

# Detection is checked where a rank statistic means something: with 10 wrong of 100 tasks, a
# random order reaches AP 0.42 once in 1,000 projects (0.14 on average; simulated). Measured
# (training is seeded; the epochs of testbed.projects.PROJECTS): NER AP 0.900, sentiment 0.551.
DETECTION_TASKS, DETECTION_WRONG, MIN_AP = 100, 10, 0.45
# With rq + Redis only the plumbing is checked: a short training does.
# So is it in the tests of what a training publishes when: they check versions, not rankings.
PLUMBING_ENV = {"SRW_EPOCHS": "2", "SRW_N": "30", "SRW_K": "5"}


# rq + Redis once: its jobs are the embedded runner's code, whatever the project's task.
@pytest.mark.parametrize(
    ("project_kind", "jobs"), [("ner", "embedded"), ("ner", "redis"), ("sentiment", "embedded")]
)
def test_label_studio_end_to_end(label_studio, jobs, project_kind, tmp_path):
    name, config, make, scout_env = next(p for p in PROJECTS if p[0] == project_kind)
    checks_detection = jobs == "embedded"
    n_tasks, n_wrong = (DETECTION_TASKS, DETECTION_WRONG) if checks_detection else (N_TASKS, 5)
    env = {**ENGINE_ENV, **scout_env, **label_studio.backend_env}
    if jobs == "redis":
        env.update(PLUMBING_ENV)  # no detection checked: the smallest training that runs
    with backend_with_jobs(jobs, env, tmp_path) as (backend, worker):
        ls = label_studio.sdk()
        tasks, wrong = make(np.random.default_rng(7), n_tasks, n_wrong)
        project = ls.projects.create(title=f"{name} {jobs}", label_config=config)
        task_ids = import_tasks(ls, project.id, tasks)
        wrong_ids = {task_ids[i] for i in wrong}

        ml = connect_and_train(ls, project.id, backend.url)
        status = wait_trained(backend, project.id)
        version = status["current_version"]

        # The project now sorts by our scores: its model_version is the new version ...
        assert ls.projects.get(id=project.id).model_version == version
        listed = list(ls.tasks.list(project=project.id, fields="all"))
        assert len(listed) == n_tasks
        scores = {}
        for task in listed:  # ... and every task has exactly one scored prediction of it.
            mine = [p for p in task.predictions or [] if field(p, "model_version") == version]
            assert len(mine) == 1, f"task {task.id}: {task.predictions}"
            scores[task.id] = field(mine[0], "score")
            assert scores[task.id] is not None and 0.0 <= scores[task.id] <= 1.0

        ordered = [
            t.id
            for t in ls.tasks.list(
                project=project.id, query=json.dumps({"ordering": ["tasks:predictions_score"]})
            )
        ]
        assert [scores[t] for t in ordered] == sorted(scores.values())
        top = ordered[:n_wrong]
        found = len(wrong_ids & set(top))
        ap = average_precision_score(
            [t in wrong_ids for t in ordered], [-scores[t] for t in ordered]
        )
        wrong_mean = np.mean([scores[t] for t in wrong_ids])
        clean_mean = np.mean([s for t, s in scores.items() if t not in wrong_ids])
        print(
            f"{name}/{jobs}: AP {ap:.3f} (base rate {n_wrong / n_tasks:.2f}); {found} of "
            f"{n_wrong} wrong annotations among the {n_wrong} lowest-scored tasks; mean score "
            f"wrong {wrong_mean:.2f}, correct {clean_mean:.2f}; {status['message']}"
        )
        if checks_detection:
            assert ap >= MIN_AP, f"AP {ap:.3f} of the stored scores against the wrong tasks"
            assert wrong_mean < clean_mean

        # Label Studio's own /predict call shape: served from storage, one item per task, in order.
        code, body = backend.post(
            "/predict",
            {
                "tasks": [
                    {"id": t.id, "data": t.data, "annotations": t.annotations} for t in listed
                ],
                "project": f"{project.id}.0",
                "label_config": config,
            },
        )
        assert code == 200, body
        assert [r["score"] for r in body["results"]] == [scores[t.id] for t in listed]
        assert all(r["model_version"] == version for r in body["results"])
        assert "computed" not in backend.log(40)

        if worker is not None:  # a retrain runs on the worker and replaces the version
            ls.ml.train(id=ml.id)
            again = wait_trained(backend, project.id, previous=version)
            assert set(again["phase_seconds"]) - {"early"} == {
                *("fetch", "train", "score", "save", "write", "weigh", "complete")
            }
            assert ls.projects.get(id=project.id).model_version == again["current_version"]

        if worker is not None and name == "ner":  # a rescore job runs on the rq worker too
            task = next(
                t
                for t in map(lambda i: label_studio.api("GET", f"/api/tasks/{i}"), task_ids)
                if t["annotations"][0]["result"]
            )
            annotation = task["annotations"][0]
            body = {"result": retyped(annotation["result"])}
            label_studio.api("PATCH", f"/api/annotations/{annotation['id']}", body)
            deadline = time.monotonic() + 120
            status = backend.get(f"/status?project={project.id}")[1]
            while "last_rescore" not in status:
                assert time.monotonic() < deadline, (status, worker.log())
                time.sleep(0.5)
                status = backend.get(f"/status?project={project.id}")[1]
            assert status["last_rescore"]["tasks"] == 1
            assert status["last_rescore"]["version"] == again["current_version"]
            assert f"subregweigh rescore of project {project.id}" in worker.log(200)


@contextlib.contextmanager
def _trained(label_studio, tmp_path, title, tasks, env=None):
    """A backend with ENGINE_ENV (and ``env``) and a new NER project of ``tasks`` connected to
    it, its training started and waited for: ``(ls, backend, project, task ids, the trained
    status)``."""
    env = {**ENGINE_ENV, **(env or {}), **label_studio.backend_env}
    with BackendServer(tmp_path / "models", env, tmp_path / "backend.log") as backend:
        ls = label_studio.sdk()
        project = ls.projects.create(title=title, label_config=NER_CONFIG)
        ids = import_tasks(ls, project.id, tasks)
        connect_and_train(ls, project.id, backend.url)
        yield ls, backend, project, ids, wait_trained(backend, project.id)


def test_scores_reach_label_studio_before_the_k_candidates(label_studio, tmp_path):
    """With the default "deterministic" score, a training writes the annotated tasks' scores
    after one pass over their ordinary segmentations, then weighs the K candidates: it adds
    c/K to the stored annotations and writes the unannotated tasks' pre-annotations. In the
    end every task has exactly one prediction of the version, the annotated ones scored by
    the lowest p(gold) of the ordinary segmentation."""
    tasks, _ = ner_tasks(np.random.default_rng(11), 30, 3)
    unannotated = {2, 9, 17, 25}
    for i in unannotated:
        tasks[i] = {"data": tasks[i]["data"]}
    with _trained(label_studio, tmp_path, "quick scores", tasks, PLUMBING_ENV) as (
        ls,
        backend,
        project,
        ids,
        status,
    ):
        version = status["current_version"]

        assert status["scores_in_label_studio"] == version
        phases = status["phase_seconds"]
        expected = {"fetch", "train", "early", "score", "save", "write", "weigh", "complete"}
        assert set(phases) == expected  # early: the CRF's scores, while the scout trained
        assert 0 < status["scores_seconds"] < sum(phases.values())
        log = backend.log(200)
        assert log.index("the review queue is sorted by version") < log.index(
            "annotated tasks weighed"
        )

        stored = json.loads(
            (
                tmp_path / "models" / str(project.id) / "versions" / version / "scores.json"
            ).read_text()
        )
        predictions = {}
        for task in ls.tasks.list(project=project.id, fields="all"):
            mine = [p for p in task.predictions or [] if field(p, "model_version") == version]
            assert len(mine) == 1, f"task {task.id}: {task.predictions}"
            predictions[task.id] = field(mine[0], "score")
        assert set(predictions) == set(ids)
        for i, task_id in enumerate(ids):
            entry = stored[str(task_id)]
            root = tmp_path / "models" / str(project.id)
            assert predictions[task_id] == pytest.approx(
                undecided_score(root, version, task_id, entry)
            )
            if i in unannotated:
                assert "annotations" not in entry and 0 < entry["score"] <= 1  # self-consistency
                continue
            (annotation,) = entry["annotations"]
            assert entry["score"] == pytest.approx(annotation["deterministic_probability"])
            assert 0 <= annotation["reliability"] <= 1 and 0 <= annotation["probability"] <= 1


def _final_and_early(status: dict) -> tuple[str, str]:
    """A finished training's final and early versions, the early one published first and the
    final one's scores the ones in Label Studio."""
    final, early = status["current_version"], status["early_version"]
    assert early and early < final and status["scores_in_label_studio"] == final
    return final, early


def _served_and_early_scores(ls, project, versions, final: str, early: str):
    """``(scores, early_scores)``: task id -> the score of its one prediction in Label Studio,
    which must be ``final``'s, and the ``early`` version's stored score of those tasks."""
    scores = {}
    for task in ls.tasks.list(project=project.id, fields="all"):
        for prediction in task.predictions or []:
            assert field(prediction, "model_version") == final, task.predictions
            assert task.id not in scores, f"task {task.id}: {task.predictions}"
            scores[task.id] = field(prediction, "score")
    stored = json.loads((versions / early / "scores.json").read_text())
    return scores, {int(t): e["score"] for t, e in stored.items() if int(t) in scores}


def test_a_ner_training_publishes_its_crf_s_scores_while_the_scout_trains(label_studio, tmp_path):
    """A NER project with the CRF (the default) and at most CRF_FIRST_EXAMPLES annotations
    gets the CRF's scores first: a version with the CRF and no scout, in Label Studio before
    the scout has trained; the full version (scout and CRF) replaces it and its predictions."""
    tasks, _ = ner_tasks(np.random.default_rng(12), 30, 3)
    with _trained(label_studio, tmp_path, "crf early", tasks, PLUMBING_ENV) as (
        ls,
        backend,
        project,
        ids,
        status,
    ):
        final, early = _final_and_early(status)
        versions = tmp_path / "models" / str(project.id) / "versions"
        assert sorted(
            p.name for p in (versions / early).iterdir() if p.name.startswith(("scout", "crf"))
        ) == ["crf.npz"]
        assert {"scout", "crf.npz"} <= {p.name for p in (versions / final).iterdir()}
        assert "training" not in json.loads((versions / early / "meta.json").read_text())
        log = backend.log(200)
        assert log.index(
            f"early scores of version {early} in Label Studio (the CRF alone"
        ) < log.index(f"the review queue is sorted by version {final}")
        scores, early_scores = _served_and_early_scores(ls, project, versions, final, early)
        assert set(scores) == set(ids)
        assert set(early_scores) == set(ids) and early_scores != scores


def test_an_ensemble_publishes_its_first_scout_s_scores_then_its_own(label_studio, tmp_path):
    """With SRW_SCOUTS=2, a training too short for early scores mid-way still publishes its
    first scout's scores, with the CRF's, as soon as that scout is trained (after the CRF's
    alone); the ensemble's
    version, both scouts averaged, follows and is what the project ends with, the early
    versions' predictions deleted."""
    tasks, _ = ner_tasks(np.random.default_rng(12), 30, 3)
    # 4 steps a scout (2 batches, 2 epochs), far below twice backend.jobs.training.EARLY_STEPS
    env = {**PLUMBING_ENV, "SRW_SCOUTS": "2"}
    with _trained(label_studio, tmp_path, "ensemble", tasks, env) as (ls, _, project, ids, status):
        final, early = _final_and_early(status)
        assert ls.projects.get(id=project.id).model_version == final
        assert 0 < status["early_seconds"] < status["scores_seconds"]
        versions = tmp_path / "models" / str(project.id) / "versions"
        assert sorted(p.name for p in (versions / early).glob("scout*")) == ["scout"]
        assert (versions / early / "crf.npz").is_file()  # beside the CRF, which trained first
        assert len([p for p in (versions / final).glob("scout*") if p.is_dir()]) == 2
        meta = json.loads((versions / early / "meta.json").read_text())
        assert meta["training"] == {"steps": 4, "passes": 2.0}  # the first scout, whole
        scores, early_scores = _served_and_early_scores(ls, project, versions, final, early)
        assert set(scores) == set(ids)
        assert set(early_scores) == set(ids)
        assert early_scores != scores  # one scout is not the two averaged


def test_changed_annotations_are_rescored_without_a_retrain(label_studio, tmp_path):
    """An annotation edited while the scout trains is scored by the version that training
    publishes, from its edited labels. One edited afterwards is rescored by that version a few
    seconds later, without a retrain, and the refresh after it serves a version of the same
    scouts with the CRF trained again: the task's one prediction of that version has the new
    score."""
    from backend.labelstudio.tasks import fingerprint, parse_label_config, read_tasks

    env = {**ENGINE_ENV, **label_studio.backend_env}
    spec = parse_label_config(NER_CONFIG)
    tasks, _ = ner_tasks(np.random.default_rng(12), 30, 3)
    with BackendServer(tmp_path / "models", env, tmp_path / "backend.log") as backend:
        ls = label_studio.sdk()
        project = ls.projects.create(title="rescored edits", label_config=NER_CONFIG)
        ids = import_tasks(ls, project.id, tasks)
        with_entities = [
            task
            for task in map(lambda i: label_studio.api("GET", f"/api/tasks/{i}"), ids)
            if task["annotations"][0]["result"]
        ]
        during, after = with_entities[0], with_entities[1]

        def edit(task: dict) -> str:
            """Retype the task's first entity; the fingerprint of the task as edited."""
            annotation = task["annotations"][0]
            body = {"result": retyped(annotation["result"])}
            label_studio.api("PATCH", f"/api/annotations/{annotation['id']}", body)
            edited = label_studio.api("GET", f"/api/tasks/{task['id']}")
            (item,) = read_tasks([edited], spec).tasks
            return fingerprint(item)

        def stored(version: str) -> dict:
            path = tmp_path / "models" / str(project.id) / "versions" / version / "scores.json"
            return json.loads(path.read_text())

        def prediction(task_id: int, version: str):
            mine = [
                p for p in ls.predictions.list(task=task_id) if field(p, "model_version") == version
            ]
            assert len(mine) == 1, f"task {task_id}: {mine}"
            return mine[0]

        connect_and_train(ls, project.id, backend.url)
        deadline = time.monotonic() + 120
        while not backend.get(f"/status?project={project.id}")[1]["message"].startswith(
            "training on"
        ):  # the annotations are read: the edit below is not among them
            assert time.monotonic() < deadline, backend.log()
            time.sleep(0.2)
        edited_during = edit(during)
        status = wait_trained(backend, project.id)
        version = status["current_version"]
        entry = stored(version)[str(during["id"])]
        assert entry["fingerprint"] == edited_during
        root = tmp_path / "models" / str(project.id)
        shown = undecided_score(root, version, during["id"], entry)  # on the version's scale
        assert field(prediction(during["id"], version), "score") == pytest.approx(shown)
        assert "rescored 1 changed tasks with version" in backend.log(300)

        before = field(prediction(after["id"], version), "score")
        edited_after = edit(after)
        # rescored by the version serving, then refreshed: the CRF trained again on the edit,
        # every task scored again, a new version of the same scouts served (backend.jobs.refresh)
        wait = time.monotonic() + 150
        status = backend.get(f"/status?project={project.id}")[1]
        while (status.get("last_refresh") or {}).get("of") != version:
            assert time.monotonic() < wait, (status, backend.log(60))
            time.sleep(0.2)
            status = backend.get(f"/status?project={project.id}")[1]
        rescore, refreshed = status["last_rescore"], status["last_refresh"]
        assert rescore["tasks"] == 1 and rescore["version"] == version
        assert 0 < rescore["seconds"] <= rescore["since_change_seconds"] < 150  # waited above
        new = refreshed["version"]
        assert status["current_version"] == new != version and status["events_since_training"] == 2
        assert ls.projects.get(id=project.id).model_version == new
        entry = stored(new)[str(after["id"])]
        assert entry["fingerprint"] == edited_after
        shown = undecided_score(root, new, after["id"], entry)
        assert field(prediction(after["id"], new), "score") == pytest.approx(shown)
        assert shown != pytest.approx(before)  # the models disagree with the new type
