"""CrossWeigh (Wang et al., 2019), the k-fold baseline SubRegWeigh is measured against
(``python -m benchmarks.detection --crossweigh``, ``benchmarks.final_model``); benchmark-only,
not a benchmark of its own.

T times: split the data into k folds; for each fold train a scout on the other folds and predict
the held-out one. For NER the folds are entity-disjoint: training drops every sentence that
contains an entity surface form of the held-out fold, so a mention's label cannot be memorized.
With ``m`` the number of iterations whose held-out prediction differs from the gold label,

    weight = epsilon ** m,    reliability = 1 - m / T.
"""

from __future__ import annotations

import argparse
import copy
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from tqdm.auto import tqdm

from subregweigh.example import Example, Task
from subregweigh.scout import Scout
from subregweigh.tags import entity_spans

logger = logging.getLogger(__name__)


def entity_surfaces(example: Example) -> set[str]:
    """Surface strings of the example's gold entities."""
    return {" ".join(example.words[start:end]) for _, start, end in entity_spans(example.label)}


def fold_splits(
    examples: Sequence[Example], n_folds: int, rng: np.random.Generator, entity_disjoint: bool
) -> list[tuple[np.ndarray, np.ndarray]]:
    """One iteration's ``(train_index, test_index)`` pairs, shape (n_train,), (n_test,)."""
    fold_of = rng.permutation(len(examples)) % n_folds
    surfaces = [entity_surfaces(ex) for ex in examples] if entity_disjoint else None
    splits = []
    for fold in range(n_folds):
        test = np.flatnonzero(fold_of == fold)
        train_mask = fold_of != fold
        if entity_disjoint:
            held_out = set().union(*(surfaces[i] for i in test))
            train_mask &= np.array([not (s & held_out) for s in surfaces])
        splits.append((np.flatnonzero(train_mask), test))
    return splits


@dataclass
class CrossWeighResult:
    """Per-example results, arrays of shape (n,)."""

    ids: list[str]
    mistakes: np.ndarray
    reliability: np.ndarray
    weight: np.ndarray

    def columns(self) -> dict[str, np.ndarray]:
        return {"reliability": self.reliability, "mistakes": self.mistakes}


class CrossWeigh:
    """k folds x T iterations of scouts on the same trainer as SubRegWeigh's.

    Parameters
    ----------
    scout : Scout or None, default=None
        Unfitted scout settings (copied per fold). ``None``: ``Scout(task=task)``.
    task : {"ner", "classification"}, default="ner"
    n_folds : int, default=10
    n_iterations : int, default=3
    epsilon : float, default=0.7
    random_state : int, default=0
    progress : bool, default=True
    """

    def __init__(
        self,
        scout: Scout | None = None,
        task: Task = "ner",
        n_folds: int = 10,
        n_iterations: int = 3,
        epsilon: float = 0.7,
        random_state: int = 0,
        progress: bool = True,
    ):
        self.scout = scout
        self.task = task
        self.n_folds = n_folds
        self.n_iterations = n_iterations
        self.epsilon = epsilon
        self.random_state = random_state
        self.progress = progress

    def weigh(self, examples: Sequence[Example]) -> CrossWeighResult:
        if self.n_folds < 2 or len(examples) < self.n_folds:
            raise ValueError(f"need 2 <= n_folds <= {len(examples)} examples, got {self.n_folds}")
        template = self.scout if self.scout is not None else Scout(task=self.task)
        entity_disjoint = template.task == "ner"
        rng = np.random.default_rng(self.random_state)
        mistakes = np.zeros(len(examples), dtype=np.int64)
        bar = tqdm(
            total=self.n_folds * self.n_iterations,
            desc="crossweigh folds",
            unit="model",
            disable=not self.progress,
        )
        for iteration in range(self.n_iterations):
            for fold, (train, test) in enumerate(
                fold_splits(examples, self.n_folds, rng, entity_disjoint)
            ):
                if train.size == 0:
                    logger.warning(
                        "iteration %d fold %d: no training sentence left", iteration, fold
                    )
                    bar.update(1)
                    continue
                scout = copy.deepcopy(template)
                scout.progress = False
                scout.random_state = template.random_state + iteration * self.n_folds + fold
                scout.fit([examples[i] for i in train])
                predicted = scout.predict([examples[i] for i in test])
                mistakes[test] += [pred != examples[i].label for pred, i in zip(predicted, test)]
                bar.update(1)
                bar.set_postfix(train=train.size, test=test.size)
        bar.close()
        return CrossWeighResult(
            ids=[ex.id for ex in examples],
            mistakes=mistakes,
            reliability=1.0 - mistakes / self.n_iterations,
            weight=self.epsilon**mistakes,
        )


def add_crossweigh_arguments(parser: argparse.ArgumentParser) -> None:
    """A benchmark's CrossWeigh settings: ``--cw-folds`` (k, default 10) and ``--cw-iterations``
    (T, default 3), which :func:`crossweigh_of` reads."""
    parser.add_argument("--cw-folds", type=int, default=10)
    parser.add_argument("--cw-iterations", type=int, default=3)


def crossweigh_of(scout: Scout, args, seed: int) -> CrossWeigh:
    """CrossWeigh of ``scout`` with a benchmark's :func:`add_crossweigh_arguments`, seeded with
    ``seed``, without progress bars."""
    return CrossWeigh(
        scout,
        n_folds=args.cw_folds,
        n_iterations=args.cw_iterations,
        random_state=seed,
        progress=False,
    )
