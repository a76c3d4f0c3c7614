"""What the scouts' training time buys on real errors: AP against seconds, by epochs and scouts.

For each ``EPOCHS`` given, scouts of 3 seeds and ``--members`` members each (seeds
``s + 100 j``, as ``benchmarks.review_loop`` draws an ensemble's) are trained on CoNLL-2003 test
as annotated (the real-error benchmark's condition, ``benchmarks/real_errors.py``) with the
scout's default learning rate; the first 1, 2, ... members' p(gold) are averaged and mixed half
and half with the CRF's (the product's ``SubRegWeigh(crf=True)``), and the served score (the soft
minimum at the default temperature) ranks the sentences against CoNLL++. Reported per
configuration: AP on the whole set and on each half, P@50, the scouts' passes over the texts
(scouts x epochs, what the time grows with) and the seconds it took (the members' training plus
the CRF's, this machine). A curve of AP against passes is drawn.

The scouts' outputs go to the review loop's ``--cache`` (``benchmarks.review_loop.cache_file``),
so that a rerun trains nothing it has seen, and the review loop reads the same scouts::

    python -m benchmarks.exploration.scout_budget --cache /tmp/review-loop 1 2
"""

from __future__ import annotations

import time

import numpy as np

from benchmarks import harness
from benchmarks.exploration import cache_parser, half_aps, real_error_halves, save
from benchmarks.real_errors import halves_base_rate
from benchmarks.review_loop import scout_outputs, whole_set_settings
from subregweigh.crf import FeatureTagger, mix_gold
from subregweigh.options import SOFTMIN_TEMPERATURE

NAME = "scout-budget"


def crf_outputs(cache, examples) -> tuple[list, float]:
    """The product's CRF's p(gold) of every word of ``examples`` and its training seconds; kept
    in ``cache`` (the CRF's training is deterministic: one fit serves every seed)."""
    path = cache / "crf-all.npz"
    cuts = np.cumsum([len(ex.words) for ex in examples])[:-1]
    if path.exists():
        saved = np.load(path)
        return np.split(saved["gold"], cuts), float(saved["seconds"])
    began = time.perf_counter()
    gold = FeatureTagger().fit(examples).gold_proba(examples)
    seconds = time.perf_counter() - began
    cache.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, gold=np.concatenate(gold), seconds=seconds)
    return gold, seconds


def main(argv=None) -> int:
    parser = cache_parser(__doc__)
    parser.add_argument("epochs", nargs="+", type=int, help="the scouts' epochs to compare")
    parser.add_argument("--members", type=int, default=3, help="scouts per ensemble (default 3)")
    parser.add_argument("--threads", type=int, help="torch threads")
    parser.add_argument("--name", default=NAME)
    args = parser.parse_args(argv)
    harness.start(args.threads)
    original, flags, parts = real_error_halves()
    crf_gold, crf_seconds = crf_outputs(args.cache, original)
    summary, values = {}, {}
    for epochs in args.epochs:
        settings = whole_set_settings(args.cache, epochs)
        rows: dict[int, list] = {n: [] for n in range(1, args.members + 1)}
        for seed in range(args.seeds):
            members = [scout_outputs(settings, seed, original, j) for j in range(args.members)]
            for n in rows:
                gold = [
                    np.mean([m[0][i] for m in members[:n]], axis=0) for i in range(len(original))
                ]
                quality = harness.served_score(
                    original, mix_gold(gold, crf_gold), SOFTMIN_TEMPERATURE
                )
                row = half_aps(quality, flags, parts)
                row["P@50"] = harness.precision_at(quality, flags, 50)
                row["seconds"] = sum(m[2] for m in members[:n]) + crf_seconds
                row["passes"] = n * epochs
                rows[n].append(row)
        for n, runs in rows.items():
            key = f"{n} scout{'s' if n > 1 else ''} x {epochs} epoch{'s' if epochs > 1 else ''}"
            values[key] = runs
            summary[key] = harness.summarize_rows(runs, list(runs[0]))
        text = save(
            "scout_budget",
            args.name,
            argv,
            markdown(summary, flags, args.seeds, crf_seconds),
            source=str(args.cache),
            summary=summary,
            values=values,
            crf_seconds=crf_seconds,
        )
    plot(summary, harness.RESULTS / f"{args.name}.png")
    print(text)
    return 0


def markdown(summary, flags, seeds: int, crf_seconds: float) -> list[str]:
    columns = ["AP whole", "AP first half", "AP second half", "P@50"]
    return [
        "## What the scouts' training time buys: real errors, AP against seconds",
        "",
        f"CoNLL-2003 test against CoNLL++. {halves_base_rate(flags)} Mean ± sd over {seeds} "
        "seeds of the offline MiniLM at its default learning rate, trained on the whole set as "
        "annotated; each configuration's members' p(gold) averaged and mixed half and half with "
        f"the CRF's (the product's score: soft minimum at {SOFTMIN_TEMPERATURE}). Passes: the "
        "scouts' passes over the training texts (scouts x epochs), what the training's time "
        "grows with; seconds: the members' training plus the CRF's "
        f"({crf_seconds:.0f} s), on this machine while other work shared it at times (the "
        "scaling benchmark times the product on a quiet one); the deterministic passes, the "
        "same for every configuration, are not included.",
        "",
        *harness.table(
            ["configuration", *columns, "passes", "s"],
            [
                [key]
                + [harness.pm(stats[c]) for c in columns]
                + [f"{stats['passes']['mean']:.0f}", f"{stats['seconds']['mean']:.0f}"]
                for key, stats in summary.items()
            ],
        ),
        "",
        f"![AP against seconds]({NAME}.png)",
        "",
    ]


def plot(summary, path) -> None:
    with harness.figure(path) as ax:
        for key, stats in summary.items():
            x, y = stats["passes"]["mean"], stats["AP whole"]["mean"]
            ax.errorbar(x, y, yerr=stats["AP whole"].get("sd") or 0, fmt="o", capsize=3)
            ax.annotate(key, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
        ax.set_xlabel("scout passes over the 3,453 sentences (scouts x epochs)")
        ax.set_ylabel("AP on real errors (whole set)")


if __name__ == "__main__":
    raise SystemExit(main())
