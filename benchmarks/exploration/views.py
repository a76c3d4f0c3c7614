"""The SubRegWeigh views on real errors: p, K, N and how the K are chosen.

What it measures: for one scout per seed, trained on CoNLL-2003 test as annotated (the
real-error benchmark's condition, ``benchmarks/real_errors.py``), the AP against CoNLL++ of the
two scores the K views make, ``probability`` (p(gold) averaged over the K views, then the soft
minimum over the words) and ``agreement`` (the paper's c/K), for each view setting
``P:K:N:METHOD``, beside the served ``deterministic`` score of the same scout; on the whole set
and on each half (the first and the last 1,726 sentences). The training weight ``max(w_min,
c/K)`` follows ``agreement``, so these settings decide what the weights catch too.

Each setting reuses the seed's scout: the cost per setting is the sampling and the K forward
passes over every sentence::

    python -m benchmarks.exploration.views 0.1:10:500:kmeans 0.3:10:500:kmeans \\
        0.1:10:500:random 0.1:20:500:kmeans
"""

from __future__ import annotations

import argparse

import numpy as np
from sklearn.metrics import average_precision_score

from benchmarks import harness
from benchmarks.exploration import real_error_halves, save
from benchmarks.real_errors import halves_base_rate, scout
from subregweigh.weigh import SubRegWeigh

NAME = "views-real-errors"


def setting(text: str) -> dict:
    """``"0.3:10:500:kmeans"`` -> SubRegWeigh parameters."""
    p, k, n, method = text.split(":")
    return {"p": float(p), "k": int(k), "n_samples": int(n), "method": method}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("settings", nargs="+", help="P:K:N:METHOD")
    parser.add_argument("--seeds", type=int, default=harness.SEEDS)
    parser.add_argument("--threads", type=int, help="torch threads")
    parser.add_argument("--name", default=NAME)
    args = parser.parse_args(argv)
    harness.start(args.threads)
    original, flags, parts = real_error_halves()
    schedule = argparse.Namespace(
        model=None, epochs=None, max_steps=None, learning_rate=None, precision="auto", device=None
    )
    values: dict[str, list] = {}

    def record(key: str, quality: np.ndarray, seconds: float) -> None:
        row = {"seconds": seconds}
        for part, cut in parts.items():
            row[part] = float(average_precision_score(flags[cut], -quality[cut]))
        values.setdefault(key, []).append(row)

    for seed in range(args.seeds):
        fitted, train_s = harness.timed(scout(schedule, seed).fit, original)
        first = True
        for text in args.settings:
            srw = SubRegWeigh.from_parts(
                [fitted], **setting(text), random_state=seed, progress=False, deterministic=first
            )
            result, seconds = harness.timed(srw.weigh, original)
            if first:
                record("deterministic (served)", result.score("deterministic"), train_s)
                first = False
            record(f"{text} probability", result.score("probability"), seconds)
            record(f"{text} agreement", result.score("agreement"), seconds)
        summary = {key: harness.summarize_rows(rows, list(rows[0])) for key, rows in values.items()}
        lines = markdown(summary, flags, seed + 1)
        text = save("views", args.name, argv, lines, summary=summary, values=values)
    print(text)
    return 0


def markdown(summary, flags, seeds: int) -> list[str]:
    return [
        "## The SubRegWeigh views on real errors: CoNLL-2003 test against CoNLL++, AP",
        "",
        f"{halves_base_rate(flags)} Mean ± sd over {seeds} seeds, one scout per seed (the "
        "offline MiniLM, its defaults, this machine, bfloat16) shared by every setting. "
        "Settings are `p:K:N:selection`; `probability` averages p(gold) over the K views before "
        "the soft minimum over words, `agreement` is c/K. Seconds: the scout's training (served "
        "row), the weighing (others).",
        "",
        *harness.table(
            ["score", "whole", "first half", "second half", "s"],
            [
                [key]
                + [harness.pm(stats[p]) for p in ("whole", "first half", "second half")]
                + [f"{stats['seconds']['mean']:.0f}"]
                for key, stats in summary.items()
            ],
        ),
        "",
    ]


if __name__ == "__main__":
    raise SystemExit(main())
