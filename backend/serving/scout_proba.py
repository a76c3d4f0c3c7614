"""A version's scouts' tag distributions of every annotated task (NER), kept in its
:data:`SCOUT_PROBA` file: what a training writes when it publishes a version, and what a
refresh (:mod:`backend.jobs.refresh`) mixes its refitted CRF with instead of running the scouts
again. One format, written and read here."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import numpy as np

from subregweigh.io.atomic import atomic_open

# A version's file of its scouts' tag distributions per annotated task (NER).
SCOUT_PROBA = "scout_proba.npz"


def text_key(words) -> str:
    """A short fingerprint of a text's words: a kept distribution serves only the same text."""
    return hashlib.sha1(json.dumps(list(words)).encode()).hexdigest()[:16]


def save_scout_proba(folder: Path, examples, result) -> bool:
    """Keep ``result.scout_proba`` (a NER :meth:`SubRegWeigh.weigh_deterministic` of
    ``examples``) in ``folder``/:data:`SCOUT_PROBA`, atomically: per example its id, its text's
    :func:`text_key` and its (n_words, n_labels) distribution. False (nothing written) where
    the result holds none (classification)."""
    if not result.scout_proba:
        return False
    buffer = io.BytesIO()
    np.savez(
        buffer,
        ids=np.array([ex.id for ex in examples], dtype=str),
        texts=np.array([text_key(ex.words) for ex in examples], dtype=str),
        lengths=np.array([len(p) for p in result.scout_proba], dtype=np.int64),
        proba=np.concatenate(result.scout_proba).astype(np.float32),
    )
    with atomic_open(folder / SCOUT_PROBA, "wb") as f:
        f.write(buffer.getvalue())
    return True


def load_scout_proba(folder: Path) -> dict[str, tuple[str, np.ndarray]]:
    """Example id -> (its text's :func:`text_key`, its scouts' tag distribution), as
    :func:`save_scout_proba` kept them; {} where the version kept none."""
    path = folder / SCOUT_PROBA
    if not path.is_file():
        return {}
    with np.load(path, allow_pickle=False) as saved:
        parts = np.split(saved["proba"], np.cumsum(saved["lengths"])[:-1])
        return {
            str(i): (str(t), p) for i, t, p in zip(saved["ids"], saved["texts"], parts, strict=True)
        }
