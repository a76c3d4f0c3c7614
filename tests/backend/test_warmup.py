"""The server's and the worker's start-up import of the engine (backend.queue.warmup), each case in
a fresh interpreter: in the test process the modules are imported already."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.paths import REPO

pytestmark = pytest.mark.slow  # a fresh interpreter imports the engine: 6 to 12 s each

PROBE = """
import json, logging, sys
logging.basicConfig(level=logging.INFO)
import backend.web.server  # what the server has imported before it serves
from backend.config.settings import Settings
from backend.queue.warmup import import_engine
settings = Settings.from_env()
lazy = ["transformers.models.bert.modeling_bert", "pycrfsuite", "sklearn.cluster"]
before = {m: m in sys.modules for m in lazy}
done = import_engine(settings)
print(json.dumps({"done": done, "before": before, "after": {m: m in sys.modules for m in lazy}}))
"""


def probe(env: dict | None = None) -> tuple[dict, str]:
    run = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**_base_env(), **(env or {})},
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1]), run.stderr


def _base_env() -> dict:
    return {k: v for k, v in os.environ.items() if not k.startswith("SRW_")}


def test_the_engine_and_the_model_code_are_imported_before_the_first_training():
    result, log = probe()
    assert result["done"] is True
    assert not any(result["before"].values()), result["before"]  # else this test proves nothing
    assert all(result["after"].values()), result["after"]
    assert "imported the engine's code in" in log


def test_a_model_not_found_locally_leaves_the_import_to_the_training(tmp_path):
    result, log = probe({"SRW_MODEL": str(tmp_path / "no-model-here")})
    assert result["done"] is False
    assert "left to the first training to import" in log
    assert "Traceback" not in log
