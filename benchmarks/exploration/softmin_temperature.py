"""How a sentence's words' p(gold) become its score: the soft minimum's temperature, on real errors.

What it measures: the AP on CoNLL-2003 test against CoNLL++ (benchmarks/real_errors.py's pair)
of the soft minimum over words (``subregweigh.weigh.soft_minimum``; temperature 0 is the
minimum, the default score before 2026-11-25) at several temperatures, for single scouts and for
ensembles of 3 (p(gold) averaged before the soft minimum, as ``SubRegWeigh(n_scouts=3)``), on the
whole set and on each half of it (the first and the last 1,726 sentences, whole documents apart
from the one cut), so that a temperature chosen on one half can be read on the other.

It trains nothing: it reads the per-word p(gold) that the review-loop benchmark caches for each
scout (3 seeds x 3 members, the scouts of ``benchmarks.real_errors --ensemble 3``)::

    python -m benchmarks.review_loop --size all --ensemble 3 --cache /tmp/review-loop
    python -m benchmarks.exploration.softmin_temperature --cache /tmp/review-loop
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from sklearn.metrics import average_precision_score

from benchmarks import harness
from benchmarks.exploration import cache_parser, finish
from benchmarks.real_errors import halves_base_rate, load_pair
from benchmarks.review_loop import cache_file, cached_outputs, whole_set_settings
from subregweigh.scores import soft_minimum

NAME = "softmin-temperature"
TEMPERATURES = (0.0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5)


def cached_gold(cache: Path, seed: int, member: int, examples) -> list[np.ndarray]:
    """One scout's per-word p(gold), as benchmarks.review_loop cached it (``--size all`` and
    the default scout)."""
    return cached_outputs(cache_file(whole_set_settings(cache), seed, member), examples)[0]


def ap(flags, per_word, temperature: float) -> float:
    quality = np.array([soft_minimum(g, temperature) for g in per_word])
    return float(average_precision_score(flags, -quality))


def main(argv=None) -> int:
    parser = cache_parser(__doc__)
    parser.add_argument("--members", type=int, default=3, help="scouts per ensemble")
    args = parser.parse_args(argv)
    original, _, flags = load_pair()
    n = len(original)
    parts = {
        "whole set": slice(0, n),
        "first half": slice(0, n // 2),
        "second half": slice(n // 2, n),
    }
    scouts = {
        (s, j): cached_gold(args.cache, s, j, original)
        for s in range(args.seeds)
        for j in range(args.members)
    }
    ensembles = [
        [np.mean(words, axis=0) for words in zip(*(scouts[s, j] for j in range(args.members)))]
        for s in range(args.seeds)
    ]
    rows, summary = {}, {}
    for t in TEMPERATURES:
        for part, cut in parts.items():
            single = [ap(flags[cut], g[cut], t) for g in scouts.values()]
            together = [ap(flags[cut], g[cut], t) for g in ensembles]
            rows[f"{t:g}|{part}"] = {"single": single, "ensemble": together}
            summary[f"{t:g}|{part}"] = {
                "single": harness.mean_sd(single),
                "ensemble": harness.mean_sd(together),
            }
    header = ["temperature"] + [
        f"{who}, {part}" for who in ("one scout", "3 scouts") for part in parts
    ]
    table = [
        [f"{t:g}" + (" (the minimum)" if t == 0 else "")]
        + [
            harness.pm(summary[f"{t:g}|{part}"][who])
            for who in ("single", "ensemble")
            for part in parts
        ]
        for t in TEMPERATURES
    ]
    lines = [
        "## The soft minimum's temperature: real errors, CoNLL-2003 test against CoNLL++, AP",
        "",
        f"{halves_base_rate(flags)} One scout: mean ± sd over {len(scouts)} scouts "
        f"({args.seeds} seeds x {args.members} members); 3 scouts: over {args.seeds} "
        "ensembles. The scouts of "
        "`python -m benchmarks.review_loop --size all --ensemble 3 --cache /tmp/review-loop` "
        "(the offline MiniLM, 3 epochs, this 2-core CPU, bfloat16); nothing is trained here.",
        "",
        *harness.table(header, table),
        "",
    ]
    return finish("softmin_temperature", NAME, argv, args, lines, summary=summary, values=rows)


if __name__ == "__main__":
    raise SystemExit(main())
