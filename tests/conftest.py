"""Shared fixtures: real data and one tiny trained NER scout per session."""

from __future__ import annotations

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


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread():
    """Train and predict on one thread. On this 2-core machine, two torch threads run up to 10x
    slower as soon as another process keeps a core busy (the threads wait on each other)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
