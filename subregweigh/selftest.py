"""How far a project can trust its flags: inject known errors into a copy, weigh, count.

:func:`self_test` corrupts a copy of the examples with known noise, weighs the copy with a
fresh SubRegWeigh built exactly as the project's (same scout, K, N, p, score), and measures how
well the ranking finds the injected errors: average precision against the base rate (the AP of
a random ranking), and how many injected errors are among the most doubtful. The project's own
errors, unknown, count as clean here, so the numbers are a floor.

Noise kinds (:data:`~subregweigh.options.NOISES`):

* ``"paper"``: the paper's pseudo-incorrect labels (:func:`~subregweigh.noise.inject_ner_noise`:
  a share of all *word labels* changed, IOB2-consistent; most CoNLL sentences end up with an
  error at 10%); classification: flipped labels (:func:`~subregweigh.noise.flip_labels`);
* ``"sentence"``: a share of the *examples* with exactly one error each
  (:func:`~subregweigh.noise.inject_sentence_noise`, every kind as likely; for classification
  the same as ``paper``, so it runs once);
* ``"annotators"``: the same, each kind of error as often as real annotators make it
  (:func:`~subregweigh.noise.inject_annotator_noise`: mostly missed entities and boundaries).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

import numpy as np

from subregweigh.example import Example, Task
from subregweigh.options import DEFAULT_NOISES, DEFAULT_SCORE, NOISES

logger = logging.getLogger(__name__)

TOP = 10  # "k of the 10 most doubtful annotations are injected errors"

# What the default NER ranking reached on real annotation errors (CoNLL-2003 test against
# CoNLL++) at project sizes: (annotations, AP, base rate), from the current results
# real-errors-300-1000-context-ensemble3 (5 draws) and real-errors-three-scouts (3 seeds;
# tests/repository checks that each number is there). Injected errors are easier to find than
# real ones: a lead reads the self-test beside these.
REAL_ERROR_AP = ((300, 0.232, 0.051), (1000, 0.262, 0.049), (3453, 0.409, 0.054))


def real_error_expectation(n: int) -> dict:
    """NER: the measured size nearest ``n`` annotations (on a log scale) and what the default
    ranking reached on real errors there: ``{"annotations", "average_precision", "base_rate",
    "message"}``."""
    size, ap, base = min(REAL_ERROR_AP, key=lambda row: abs(np.log(row[0] / max(n, 1))))
    return {
        "annotations": size,
        "average_precision": ap,
        "base_rate": base,
        "message": (
            f"on real annotation errors (CoNLL-2003 against CoNLL++, {size:,} annotations) the "
            f"default ranking reached AP {ap:.3f} against a base rate of {base:.3f}; real "
            "errors are harder to find than injected ones, and most in a small project"
        ),
    }


def inject(
    examples: Sequence[Example], task: Task, noise: str, rate: float, random_state: int
) -> tuple[list[Example], np.ndarray]:
    """``(corrupted copy, mask of corrupted examples)`` for noise kind ``noise``."""
    from subregweigh.noise import (
        flip_labels,
        inject_annotator_noise,
        inject_ner_noise,
        inject_sentence_noise,
    )

    if noise not in NOISES:
        raise ValueError(f"unknown noise {noise!r}; choose among {', '.join(NOISES)}")
    if task == "classification":
        return flip_labels(examples, rate, random_state=random_state)
    if noise == "paper":
        return inject_ner_noise(examples, rate, random_state=random_state)
    if noise == "annotators":
        return inject_annotator_noise(examples, rate, random_state=random_state)
    return inject_sentence_noise(examples, rate, task="ner", random_state=random_state)


def noises_for(task: Task, noises: Sequence[str] = DEFAULT_NOISES) -> list[str]:
    """The kinds worth running: classification has one (both kinds flip labels)."""
    unknown = [n for n in noises if n not in NOISES]
    if unknown or not noises:
        raise ValueError(f"noise must be among {', '.join(NOISES)}, got {list(noises)}")
    return list(noises) if task == "ner" else list(noises)[:1]


def self_test(
    examples: Sequence[Example],
    task: Task,
    make_weigher: Callable[[], object],
    *,
    noises: Sequence[str] = DEFAULT_NOISES,
    rate: float = 0.1,
    score: str = DEFAULT_SCORE,
    random_state: int = 0,
) -> dict:
    """Inject errors into a copy of ``examples``, weigh it, and measure the ranking.

    Parameters
    ----------
    examples : sequence of Example, length n
        The project's annotations (not modified).
    task : {"ner", "classification"}
    make_weigher : callable
        Returns an unfitted :class:`~subregweigh.weigh.SubRegWeigh` set up as the project's
        (one per noise kind: each trains its own scout on its corrupted copy).
    noises : sequence of {"paper", "sentence", "annotators"}, default DEFAULT_NOISES
        See the module docstring (:data:`~subregweigh.options.DEFAULT_NOISES`:
        "annotators"); classification runs the first only.
    rate : float, default 0.1
        Share of word labels (``paper``, NER) or of examples (otherwise) to corrupt.
    score : str, default :data:`~subregweigh.options.DEFAULT_SCORE` ("deterministic")
        The ranking measured (:meth:`~subregweigh.weigh.WeighResult.score`).
    random_state : int, default 0

    Returns
    -------
    dict
        ``task``, ``n``, ``rate``, ``score``, and ``results``: per noise kind ``noise``
        (``"paper"``, ``"sentence"``, ``"annotators"``; classification: ``"flip"``),
        ``n_injected`` (corrupted examples), ``base_rate`` (``n_injected / n``, the AP of a
        random ranking), ``average_precision``, ``auroc``, ``precision_at_injected`` (the
        share of injected errors among the ``n_injected`` most doubtful), ``found`` (that
        many, rounded), ``top``, ``found_in_top`` (injected errors among the ``top`` (10) most
        doubtful), ``mean_score_injected`` and ``mean_score_clean``, ``seconds``; NER also
        ``real_errors`` (:func:`real_error_expectation`): what real errors gave near this size.
    """
    from subregweigh.metrics import detection_report  # scikit-learn: loaded when needed

    if len(examples) < 2:
        raise ValueError(f"a self-test needs at least 2 annotations, got {len(examples)}")
    results = []
    for noise in noises_for(task, noises):
        start = time.perf_counter()
        noisy, mask = inject(examples, task, noise, rate, random_state)
        if not mask.any():
            raise ValueError(f"{noise} noise at rate {rate} corrupted none of {len(examples)}")
        srw = make_weigher()
        values = srw.fit(noisy).weigh(noisy).score(score)
        n_injected = int(mask.sum())
        top = min(TOP, len(noisy))
        report = detection_report(values, mask, ks=sorted({n_injected, top}))
        results.append(
            {
                "noise": noise if task == "ner" else "flip",
                "n_injected": n_injected,
                "base_rate": n_injected / len(noisy),
                "average_precision": report["average_precision"],
                "auroc": report["auroc"],
                "precision_at_injected": report["precision_at_k"][n_injected],
                "found": int(round(report["precision_at_k"][n_injected] * n_injected)),
                "top": top,
                "found_in_top": int(round(report["precision_at_k"][top] * top)),
                "mean_score_injected": report["mean_reliability_corrupted"],
                "mean_score_clean": report["mean_reliability_clean"],
                "seconds": round(time.perf_counter() - start, 1),
            }
        )
        logger.info("self-test, %s noise: %s", noise, describe(results[-1]))
    out = {"task": task, "n": len(examples), "rate": rate, "score": score, "results": results}
    if task == "ner":
        out["real_errors"] = real_error_expectation(len(examples))
    return out


def describe(result: dict) -> str:
    """One line a lead reads: what was found, against chance."""
    return (
        f"{result['found_in_top']} of the {result['top']} most doubtful annotations are injected "
        f"errors; {result['found']} of the {result['n_injected']} injected errors are among the "
        f"{result['n_injected']} most doubtful (precision {result['precision_at_injected']:.2f}); "
        f"AP {result['average_precision']:.3f} against a base rate of {result['base_rate']:.3f}"
    )
