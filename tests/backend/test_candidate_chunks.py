"""The K-candidate pass after a training's scores are served gives way to a due retrain
(backend.jobs.training._weigh_candidates): it weighs in chunks and stops once the changes counted
call for a retrain. A real scout and CRF, real CoNLL tasks."""

from __future__ import annotations

import numpy as np
import pytest

from backend.config.settings import Settings
from backend.jobs import training
from backend.labelstudio.tasks import annotated_examples, parse_label_config, read_tasks
from backend.store.store import ProjectStore
from subregweigh.scout import Scout
from subregweigh.weigh import SubRegWeigh
from testbed.projects import NER_CONFIG, conll_tasks

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def weighed():
    spec = parse_label_config(NER_CONFIG)
    tasks = conll_tasks(np.random.default_rng(3), training.CANDIDATE_CHUNK + 10)
    for i, task in enumerate(tasks):
        task["id"] = i + 1
    items = [item for item in read_tasks(tasks, spec).tasks if item]
    examples = annotated_examples(items)
    srw = SubRegWeigh(Scout(epochs=1, progress=False), n_scouts=1, k=2, n_samples=4)
    return spec, items, srw.fit(examples[:40])


def test_every_task_is_weighed_while_no_retrain_is_due(weighed, tmp_path):
    spec, items, srw = weighed
    store = ProjectStore(tmp_path, 1)
    store.update_status(events_since_training=9)
    settings = Settings(model_dir=str(tmp_path), retrain_after=10)
    full = training._weigh_candidates(store, settings, srw, spec, items, None)
    assert sorted(full) == sorted(item.id for item in items)
    assert all(entry["reliability"] for entry in full.values())  # c/K of every annotation


def test_a_due_retrain_takes_the_slot_of_the_rest(weighed, tmp_path):
    spec, items, srw = weighed
    store = ProjectStore(tmp_path, 1)
    store.update_status(events_since_training=10)
    settings = Settings(model_dir=str(tmp_path), retrain_after=10)
    assert training._weigh_candidates(store, settings, srw, spec, items, None) == {}
