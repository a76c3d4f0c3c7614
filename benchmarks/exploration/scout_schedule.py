"""The scout's training schedule chosen on real errors: epochs and learning rate.

What it measures: for each schedule ``EPOCHS[:LEARNING_RATE]`` (no rate: the scout's default,
3e-4 for NER), scouts of 3 seeds are trained on CoNLL-2003 test as annotated (the real-error
benchmark's condition, ``benchmarks/real_errors.py``) and their per-word p(gold) rank the
sentences against CoNLL++: AP of the served score (the soft minimum at the default temperature)
and of the minimum (cleanlab's in-sample quality), on the whole set and on each half (the first
and the last 1,726 sentences), so that a schedule chosen on one half can be read on the other;
P@50 and the training seconds beside.

The scouts' outputs go to the review loop's ``--cache`` (``benchmarks.review_loop.cache_file``),
so a rerun trains only the schedules it has not seen, and the review loop reads the same
scouts::

    python -m benchmarks.exploration.scout_schedule --cache /tmp/review-loop 3 5 3:1.5e-4 3:6e-4
"""

from __future__ import annotations

import numpy as np

from benchmarks import harness
from benchmarks.exploration import cache_parser, half_aps, real_error_halves, save
from benchmarks.real_errors import halves_base_rate
from benchmarks.review_loop import scout_outputs, whole_set_settings
from subregweigh.options import SOFTMIN_TEMPERATURE
from subregweigh.scores import soft_minimum

NAME = "scout-schedule"


def schedule(text: str) -> tuple[int, float | None]:
    """``"5"`` -> (5, None); ``"3:1.5e-4"`` -> (3, 0.00015)."""
    epochs, _, rate = text.partition(":")
    return int(epochs), float(rate) if rate else None


def label(epochs: int, rate: float | None) -> str:
    return f"{epochs} epochs, " + (f"lr {rate:g}" if rate is not None else "lr default (3e-4)")


def main(argv=None) -> int:
    parser = cache_parser(__doc__)
    parser.add_argument("schedules", nargs="+", help="EPOCHS or EPOCHS:LEARNING_RATE")
    parser.add_argument("--threads", type=int, help="torch threads")
    parser.add_argument("--name", default=NAME)
    args = parser.parse_args(argv)
    harness.start(args.threads)
    original, flags, parts = real_error_halves()
    temperatures = {"softmin": SOFTMIN_TEMPERATURE, "minimum": 0.0}
    summary, values = {}, {}
    for text in args.schedules:
        epochs, rate = schedule(text)
        settings, rows = whole_set_settings(args.cache, epochs, rate), []
        for seed in range(args.seeds):
            gold, _, seconds = scout_outputs(settings, seed, original)
            row = {"seconds": seconds}
            for score, t in temperatures.items():
                quality = np.array([soft_minimum(g, t) for g in gold])
                row.update(half_aps(quality, flags, parts, score))
                row[f"{score} P@50"] = harness.precision_at(quality, flags, 50)
            rows.append(row)
        key = label(epochs, rate)
        values[key] = rows
        summary[key] = harness.summarize_rows(rows, list(rows[0]))
        text = save(
            "scout_schedule",
            args.name,
            argv,
            markdown(summary, flags, args.seeds),
            source=str(args.cache),
            summary=summary,
            values=values,
        )
    print(text)
    return 0


def markdown(summary, flags, seeds: int) -> list[str]:
    columns = [
        f"{score} {part}"
        for score in ("softmin", "minimum")
        for part in ("whole", "first half", "second half")
    ]
    return [
        "## The scout's schedule on real errors: CoNLL-2003 test against CoNLL++, AP",
        "",
        f"{halves_base_rate(flags)} Mean ± sd over {seeds} seeds of the offline MiniLM, "
        "trained on the whole set as annotated (this machine, bfloat16). `softmin`: the served "
        f"score (soft minimum over the words at {SOFTMIN_TEMPERATURE}); `minimum`: the lowest "
        "p(gold), cleanlab's in-sample quality.",
        "",
        *harness.table(
            ["schedule", *columns, "softmin P@50", "s/scout"],
            [
                [key]
                + [harness.pm(stats[c]) for c in columns]
                + [harness.pm(stats["softmin P@50"]), f"{stats['seconds']['mean']:.0f}"]
                for key, stats in summary.items()
            ],
        ),
        "",
    ]


if __name__ == "__main__":
    raise SystemExit(main())
