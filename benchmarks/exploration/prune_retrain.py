"""Prune and retrain, on real errors: does a second scout, trained without the first scout's most
doubtful sentences, rank CoNLL-2003 test's errors (against CoNLL++) better?

A scout memorizes some of the errors it trains on, and then believes them. Scout A (the cached
first scout of each seed, as ``benchmarks.review_loop --cache`` keeps it) ranks every sentence;
the ``--drop`` share it doubts most is left out of scout B's training (same seed and settings);
B scores every sentence, the left-out ones out of sample. Reported, AP with the default score
(the soft minimum at SubRegWeigh's default temperature): A, B, A's score with B's for the
left-out sentences, and the mean of A and B::

    python -m benchmarks.review_loop --size all --cache /tmp/review-loop
    python -m benchmarks.exploration.prune_retrain --cache /tmp/review-loop --drop 0.1
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from sklearn.metrics import average_precision_score

from benchmarks import harness
from benchmarks.exploration import cache_parser
from benchmarks.exploration.softmin_temperature import cached_gold
from benchmarks.real_errors import load_pair, scout
from subregweigh.options import SOFTMIN_TEMPERATURE
from subregweigh.scores import soft_minimum


def main(argv=None) -> int:
    parser = cache_parser(__doc__)
    parser.add_argument("--drop", type=float, default=0.1, help="share left out of B's training")
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's choice)")
    args = parser.parse_args(argv)
    harness.start(args.threads)
    original, _, flags = load_pair()
    settings = argparse.Namespace(
        model=None, epochs=None, max_steps=None, learning_rate=None, precision="auto", device=None
    )
    names = ("A (all sentences)", "B (without A's most doubtful)", "A, B on the left-out", "A + B")
    values: dict[str, list[float]] = {name: [] for name in names}
    seconds = []
    for seed in range(args.seeds):
        a = np.array([soft_minimum(g) for g in cached_gold(args.cache, seed, 0, original)])
        drop = np.argsort(a, kind="stable")[: int(args.drop * len(a))]
        keep = np.setdiff1d(np.arange(len(a)), drop)
        began = time.perf_counter()
        b_scout = scout(settings, seed).fit([original[i] for i in keep])
        b = harness.soft_min_gold(
            original, b_scout.labels_, b_scout.predict_proba(original), SOFTMIN_TEMPERATURE
        )
        seconds.append(time.perf_counter() - began)
        mixed = a.copy()
        mixed[drop] = b[drop]
        for name, quality in zip(names, (a, b, mixed, a + b)):
            values[name].append(float(average_precision_score(flags, -quality)))
    summary = {name: harness.mean_sd(v) for name, v in values.items()}
    result = {
        **harness.stamp(harness.command("exploration.prune_retrain", argv)),
        "source": str(args.cache),
        "drop": args.drop,
        "b_seconds": seconds,
        "summary": summary,
        "values": values,
    }
    lines = [
        "## Prune and retrain: real errors, CoNLL-2003 test against CoNLL++, AP",
        "",
        f"Base rate {flags.mean():.3f}. Scout A: each seed's cached scout on every sentence; "
        f"scout B: the same seed and settings without the {args.drop:.0%} of the sentences A "
        f"doubts most. The default score (soft minimum at {SOFTMIN_TEMPERATURE:g}). Mean ± sd "
        f"over {args.seeds} seeds; B trained in {np.mean(seconds):.0f} s on average.",
        "",
        *harness.table(["score", "AP"], [[n, harness.pm(s)] for n, s in summary.items()]),
        "",
        *harness.footer(result),
    ]
    harness.save(harness.RESULTS, f"prune-retrain-{args.drop:g}", result, "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
