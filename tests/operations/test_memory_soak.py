"""Memory across trainings in one process (issue 26, item 9): 20 trainings in one embedded
backend, and its resident size must plateau.

The backend runs as it does without Redis (``create_app`` with its in-process ThreadRunner: a
new thread per training), Label Studio replaced by a double that serves 40 CoNLL++ sentences,
each retrain a new scout from the base encoder (one scout, no CRF: the shortest training that
loads and frees a model), and after each training a /predict in a new thread, as a server's
request thread, loads the new version. The trainings are tiny (1 epoch, N=4, K=2): the shape
of the memory matters, not the size.

Before the fix the resident size climbed with every training: glibc kept what the scouts'
tensors freed in the arenas of the finished threads (fragmented, never returned), and the
scout cache kept every superseded version of the project until ``cached_models`` loads pushed
it out. ``python -m tests.operations.test_memory_soak DIR 20 --without-fix`` measures that again.

The run is a subprocess, so the measure is of that process alone, not of this test session.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.paths import REPO

N_TRAININGS = 20
N_TASKS = 40
PLATEAU = 1.10  # from the third training on, within 10% of the third


def _rss_mib() -> tuple[int, int]:
    """(resident now, resident peak) of this process, MiB."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return int(fields["VmRSS"].split()[0]) // 1024, int(fields["VmHWM"].split()[0]) // 1024


def soak(model_dir: str, n: int, without_fix: bool = False) -> list[dict]:
    """``n`` trainings of one project in this process; the resident size after each."""
    import numpy as np
    import torch

    from backend.config.settings import Settings
    from backend.jobs import annotations, rescore, training
    from backend.serving import publish
    from backend.web.server import create_app
    from testbed.projects import NER_CONFIG, conll_tasks, ner_task

    torch.set_num_threads(1)
    tasks = conll_tasks(np.random.default_rng(0), N_TASKS)
    for i, task in enumerate(tasks, 1):
        task["id"] = i

    class LabelStudio:  # the double: the calls a training makes
        def __init__(self, *args, **kwargs):
            pass

        def label_config(self, project):
            return NER_CONFIG

        def tasks(self, project):
            return [dict(t) for t in tasks]

        def users(self):
            return {}

        def write_predictions(self, project, predictions):
            return set()  # every task still in the project

        def set_model_version(self, project, version):
            pass

        def model_versions(self, project):
            return {}

    annotations.LabelStudioAPI = rescore.LabelStudioAPI = LabelStudio
    from backend.labelstudio import membership
    from tests.doubles import ProjectsOfLabelStudio

    membership.LabelStudioAPI = ProjectsOfLabelStudio  # project 1 is connected
    if without_fix:  # the code before the fix, to measure what it did
        training.release_memory = lambda: None
        publish.forget_versions = lambda store, keep: None
    settings = Settings(
        model_dir=model_dir,
        epochs=1,
        n_samples=4,
        k=2,
        min_annotations=1,
        n_scouts=1,
        crf=False,
    )
    app = create_app(settings)
    runner = app.extensions["subregweigh"]["runner"]
    client = app.test_client()
    out = []
    for i in range(n):
        reply = client.post("/webhook", json={"action": "START_TRAINING", "project": {"id": 1}})
        assert reply.status_code == 201, reply.get_json()
        assert runner.wait(600)
        status = client.get("/status?project=1").get_json()
        assert status["state"] == "idle" and status["trained"], status
        body = {
            "project": "1",
            "label_config": NER_CONFIG,
            "tasks": [
                ner_task(1000 + j, f"Angela Merkel visited Paris in {i}{j} .") for j in (1, 2)
            ],
        }
        replies = []
        request = threading.Thread(
            target=lambda: replies.append(client.post("/predict", json=body))
        )
        request.start()
        request.join()
        assert replies[0].status_code == 200
        assert replies[0].get_json()["model_version"] == status["current_version"]
        rss, peak = _rss_mib()
        out.append({"rss_mib": rss, "peak_mib": peak})
    return out


@pytest.mark.slow
def test_resident_memory_plateaus_over_20_trainings_in_one_process(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.operations.test_memory_soak",
            str(tmp_path),
            str(N_TRAININGS),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-5000:]
    runs = json.loads(done.stdout.strip().splitlines()[-1])
    rss = [r["rss_mib"] for r in runs]
    shown = ", ".join(
        f"{i}: {r['rss_mib']} MiB (peak {r['peak_mib']})" for i, r in enumerate(runs, 1)
    )
    assert len(rss) == N_TRAININGS
    assert max(rss[2:]) <= PLATEAU * rss[2], (
        f"resident memory grew across trainings, after each: {shown}"
    )


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    runs = soak(args[0], int(args[1]), without_fix="--without-fix" in sys.argv)
    for i, run in enumerate(runs, 1):
        print(f"training {i}: {run}", file=sys.stderr)
    print(json.dumps(runs))
