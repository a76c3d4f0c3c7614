"""Shared fixtures: real data and one tiny trained NER scout per session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
CONLLPP_TRAIN = DATA / "conllpp" / "conllpp_train.txt"
SST2_TRAIN = DATA / "sst2" / "train.tsv"


@pytest.fixture(scope="session")
def conll_train():
    """All CoNLL++ training sentences (IOB2)."""
    from subregweigh.io import read_conll

    return read_conll(CONLLPP_TRAIN)


@pytest.fixture(scope="session")
def sst2_train():
    """The first 2,000 SST-2 training rows."""
    from subregweigh.io import read_tsv

    return read_tsv(SST2_TRAIN)[:2000]


@pytest.fixture(scope="session")
def tiny_ner_data(conll_train):
    """60 real CoNLL sentences that use every entity type."""
    return conll_train[:60]


@pytest.fixture(scope="session")
def tiny_scout(tiny_ner_data):
    """A MiniLM NER scout trained 1 epoch on ``tiny_ner_data`` (do not modify it)."""
    from subregweigh.scout import Scout

    return Scout(epochs=1, progress=False).fit(tiny_ner_data)


@pytest.fixture(scope="module")
def label_studio():
    """A real Label Studio 1.23, one per test module that asks for it (skipped where it is not
    installed; in CI, a failure)."""
    from testbed.servers import LabelStudioServer, require_label_studio

    require_label_studio()
    with LabelStudioServer() as server:
        yield server


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread():
    """Train and predict on one thread, here and in every process a test starts (backends, rq
    workers: they read OMP_NUM_THREADS). On this 2-core machine, two torch threads run up to 10x
    slower as soon as another process keeps a core busy (the threads wait on each other), and
    CI's two pytest workers keep both cores busy."""
    import torch

    before, before_env = torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS")
    torch.set_num_threads(1)
    os.environ["OMP_NUM_THREADS"] = "1"
    yield
    torch.set_num_threads(before)
    if before_env is None:
        os.environ.pop("OMP_NUM_THREADS", None)
    else:
        os.environ["OMP_NUM_THREADS"] = before_env


# The two tiers: `pytest -m "not slow"` is the edit loop's (docs/design.md, "The tests").
# Every test in these folders starts Label Studio, gunicorn, redis-server or a container, or trains.
SLOW_FOLDERS = {"labelstudio", "operations", "containers"}
SLOW_SECONDS = 5.0  # an unmarked test that runs longer is listed at the end of the run
_unmarked_slow: list[tuple[float, str]] = []


def pytest_collection_modifyitems(items):
    for item in items:
        if item.path.parent.name in SLOW_FOLDERS:
            item.add_marker(pytest.mark.slow)


def pytest_runtest_logreport(report):
    if report.when == "call" and report.duration > SLOW_SECONDS and "slow" not in report.keywords:
        _unmarked_slow.append((report.duration, report.nodeid))


def pytest_terminal_summary(terminalreporter):
    if _unmarked_slow:
        terminalreporter.section("unmarked slow tests")
        terminalreporter.write_line(
            f"these ran longer than {SLOW_SECONDS:.0f} s without @pytest.mark.slow; mark them, or "
            "the fast tier (-m 'not slow') slows down:"
        )
        for seconds, nodeid in sorted(_unmarked_slow, reverse=True):
            terminalreporter.write_line(f"  {seconds:6.1f} s  {nodeid}")
