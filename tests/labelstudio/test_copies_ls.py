"""Copies that disagree, through a real Label Studio 1.23 (issue 61 item 6): two identical
tweets of the Broad Twitter Corpus, one with its entity as PER and one as ORG, among CoNLL
tasks. After the training, each one's prediction in Label Studio has a note naming the other
task; a reviewer's confirmation of one (saved unchanged through the API) moves the other up the
queue: its served score halves, and its note says the copy was confirmed."""

from __future__ import annotations

import time

import numpy as np
import pytest

from benchmarks.tweets import load_pair
from subregweigh.tags import entity_spans
from testbed.projects import (
    ENGINE_ENV,
    NER_CONFIG,
    _annotated_task,
    connect_and_train,
    import_tasks,
    ner_tasks,
    serving_prediction,
    serving_score,
    wait_trained,
)
from testbed.servers import label_studio_and_backend, require_label_studio

pytestmark = pytest.mark.slow
TWEET = "Trendspotting with Louis Vuitton"  # a tweet whose one entity reads as PER or ORG


def _tweet():
    annotated, _, _ = load_pair(0)
    return next(ex for ex in annotated if " ".join(ex.words).startswith(TWEET))


@pytest.fixture(scope="module")
def copies_project(tmp_path_factory):
    require_label_studio()
    tweet = _tweet()
    (span,) = entity_spans(tweet.label)
    tasks, _ = ner_tasks(np.random.default_rng(61), 20, 2)
    tasks += [
        _annotated_task(tweet, [("PER", span[1], span[2])]),
        _annotated_task(tweet, [("ORG", span[1], span[2])]),
    ]
    folder = tmp_path_factory.mktemp("copies")
    with label_studio_and_backend(folder, {**ENGINE_ENV, "SRW_EPOCHS": "4"}) as (
        label_studio,
        backend,
    ):
        ls = label_studio.sdk()
        project = ls.projects.create(title="copies", label_config=NER_CONFIG)
        ids = import_tasks(ls, project.id, tasks)
        connect_and_train(ls, project.id, backend.url)
        wait_trained(backend, project.id)
        yield {
            "label_studio": label_studio,
            "backend": backend,
            "project": project.id,
            "root": folder / "models" / str(project.id),
            "pair": ids[-2:],
        }


def _prediction(ctx, task: int) -> dict:
    return serving_prediction(ctx["backend"], ctx["label_studio"], ctx["project"], task)


def _notes(prediction: dict) -> list[str]:
    return [t for r in prediction["result"] for t in (r.get("meta") or {}).get("text", ())]


def _wait(ctx, condition, what: str, timeout: float = 120):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what}\n{ctx['backend'].log(80)}"
        time.sleep(0.5)


def test_identical_tweets_labelled_otherwise_name_each_other_and_a_confirm_moves_the_other(
    copies_project,
):
    ctx = copies_project
    per, org = ctx["pair"]
    notes = {task: _notes(_prediction(ctx, task)) for task in (per, org)}
    assert f"task {org}, the same text, labels 'Louis Vuitton' as ORG" in notes[per], notes
    assert f"task {per}, the same text, labels 'Louis Vuitton' as PER" in notes[org], notes
    before = _prediction(ctx, org)["score"]
    stored = serving_score(ctx["backend"], ctx["root"], ctx["project"], org)
    assert before == pytest.approx(stored)

    # a reviewer confirms the PER one: saved unchanged, as Update sends it
    (annotation,) = ctx["label_studio"].api("GET", f"/api/tasks/{per}")["annotations"]
    path = f"/api/annotations/{annotation['id']}"
    ctx["label_studio"].api("PATCH", path, {"result": annotation["result"]})
    _wait(ctx, lambda: _prediction(ctx, per)["score"] == pytest.approx(1.0), "not confirmed")
    _wait(
        ctx,
        lambda: _prediction(ctx, org)["score"] == pytest.approx(stored * 0.5),
        "the contradicting copy did not move up",
    )
    confirmed = f"task {per}, the same text, labels 'Louis Vuitton' as PER, confirmed by a reviewer"
    assert confirmed in _notes(_prediction(ctx, org))
