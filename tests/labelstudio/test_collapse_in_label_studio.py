"""A small, sparse project as a new lead brings it (issue 59): 300 tweets of the Broad Twitter
Corpus B labelled by one crowd worker (judgment slot 0), imported into a real Label Studio 1.23
and trained through it with the product's own defaults (not the tests' short ENGINE_ENV
schedule: the collapse is what the defaults do on this data).

On these tweets the scout finds again well under half of its own training annotations' entities
(benchmarks/results/real-errors-tweets-0-rest-on-crf.md: 0.235 ± 0.051 on 300-tweet draws).
Asserted here, through Label Studio and the backend's own endpoints:

* the collapse is said: ``/status`` ``serving.learned`` and its message, and the report;
* the queue rests on the CRF: the served scores, read back from Label Studio, rank the worker's
  real errors (against the experts' labels) above the model-free orders a lead could use
  without any model (an entity first, entity count, length);
* the notes say the CRF judges, and the tasks that miss an expert's entity rank doubtful.

Real parts throughout: Label Studio, the backend's server, MiniLM, the crowd's and the
experts' labels from ../shared/data/btc.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import average_precision_score

from backend.labelstudio.convert import RESTING_NOTE
from benchmarks import baselines, harness
from benchmarks.tweets import load_pair
from subregweigh.tags import entity_spans
from testbed.projects import (
    ENGINE_ENV,
    NER_CONFIG,
    _annotated_task,
    connect_and_train,
    import_tasks,
    wait_trained,
)
from testbed.servers import BackendServer

pytestmark = pytest.mark.slow
N_TWEETS, SEED = 300, 0
# the product's training schedule: ENGINE_ENV without its epochs (N and K stay small: the
# candidates' count does not change the deterministic score that ranks the queue)
ENV = {key: value for key, value in ENGINE_ENV.items() if key != "SRW_EPOCHS"}


@pytest.fixture(scope="module")
def tweets_project(label_studio, tmp_path_factory):
    annotated, corrected, flags = load_pair(0)
    chosen = harness.sample_indices(len(annotated), N_TWEETS, SEED)
    worker = [annotated[i] for i in chosen]
    experts = [corrected[i] for i in chosen]
    wrong = flags[chosen]
    # the corpus' types (PER, LOC, ORG) are NER_CONFIG's labels
    tasks = [_annotated_task(ex, entity_spans(ex.label)) for ex in worker]
    folder = tmp_path_factory.mktemp("collapse")
    env = {**ENV, **label_studio.backend_env}
    with BackendServer(folder / "models", env, folder / "backend.log") as backend:
        ls = label_studio.sdk()
        project = ls.projects.create(title="300 tweets", label_config=NER_CONFIG)
        ids = import_tasks(ls, project.id, tasks)
        connect_and_train(ls, project.id, backend.url)
        status = wait_trained(backend, project.id, timeout=1200.0)
        yield {
            "ls": label_studio,
            "backend": backend,
            "project": project.id,
            "ids": ids,
            "worker": worker,
            "experts": experts,
            "wrong": wrong,
            "status": status,
        }


def _served(project) -> dict[int, dict]:
    """Each task's prediction of the serving version, as Label Studio stores it."""
    version = project["backend"].get(f"/status?project={project['project']}")[1]
    version = version["current_version"]
    predictions = project["ls"].api("GET", f"/api/predictions?project={project['project']}")
    return {p["task"]: p for p in predictions if p["model_version"] == version}


def test_the_collapse_is_said_in_status_and_report(tweets_project):
    learned = tweets_project["status"]["serving"]["learned"]
    assert learned is not None and learned["too_little"], learned
    assert learned["recall"] < 0.5
    assert "beware" in tweets_project["status"]["serving"]["message"]
    assert "CRF" in tweets_project["status"]["serving"]["message"]
    code, report = tweets_project["backend"].get(
        f"/report.json?project={tweets_project['project']}"
    )
    assert code == 200
    assert report["learned"]["too_little"] and report["learned"]["message"] == learned["message"]


def test_the_served_queue_ranks_real_errors_above_model_free_orders(tweets_project):
    served = _served(tweets_project)
    ids = tweets_project["ids"]
    assert len(served) == len(ids), f"{len(served)} of {len(ids)} tasks have a served prediction"
    doubt = [1.0 - served[task]["score"] for task in ids]
    wrong = tweets_project["wrong"]
    worker = tweets_project["worker"]
    product = average_precision_score(wrong, doubt)
    model_free = {
        "an entity first": baselines.entity_first_scores(worker, SEED),
        "entity count": baselines.entity_count_scores(worker),
        "length": baselines.length_scores(worker),
    }
    for name, scores in model_free.items():  # lower = more doubtful, as the served score
        ap = average_precision_score(wrong, -scores)
        assert product > ap + 0.05, f"served AP {product:.3f}, {name} {ap:.3f}"


def test_the_notes_say_the_crf_judges_and_missed_entities_rank_doubtful(tweets_project):
    """Every note of the served version names the span it doubts and says why the CRF judges;
    the tasks whose annotation misses an expert's entity outright rank in the doubtful part of
    the queue (median rank fraction 0.31 on this draw, the engine alone; 0.5 at random). The
    CRF with the memory suggests none of these missed entities on this draw (no "not
    annotated" note): the issue's open target, measured in benchmarks/real_errors.py's
    "missed: median rank" column."""
    served = _served(tweets_project)
    ids = tweets_project["ids"]
    notes = [
        note
        for task in ids
        for region in served[task]["result"]
        for note in (region.get("meta") or {}).get("text", [])
    ]
    assert notes, "the served version notes no region"
    assert all(note.endswith(RESTING_NOTE) for note in notes), notes[:3]
    assert any(' over "' in note and "the CRF says" in note for note in notes), notes[:3]
    missed = [
        i
        for i, (worker, expert) in enumerate(
            zip(tweets_project["worker"], tweets_project["experts"], strict=True)
        )
        if any(
            not any(s < end and start < e for _, s, e in entity_spans(worker.label))
            for _, start, end in set(entity_spans(expert.label)) - set(entity_spans(worker.label))
        )
    ]
    scores = np.array([served[task]["score"] for task in ids])
    rank = scores.argsort(kind="stable").argsort() / len(scores)  # 0 = the most doubtful
    assert len(missed) >= 20
    assert np.median(rank[missed]) < 0.4, np.median(rank[missed])
