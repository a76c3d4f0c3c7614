"""Ablations the paper leaves open: how the K candidates are chosen, and the dropout rate p.

Per seed, ONE scout is fitted on a noisy subset (as in ``benchmarks.detection``); then every
variant weighs the same data with that scout, so the rows differ only in the candidates:

* selection (``--methods``): ``random`` (K draws), ``cossim`` (greedy max-min, ours),
  ``cossim-sum`` (the authors' code: lowest summed similarity), ``kmeans`` (ours: K-means over
  the N draws weighted by their counts, the real candidate nearest each centroid vector),
  ``kmeans-distinct`` (K-means over the distinct candidates, as the authors' code clusters);
* ``p`` (``--ps``): the subword dropout rate.

Per variant: AP of c/K and of the probability score (mean ± sd over seeds), the weighing pass's
wall time (sampling, selection and the forward passes, without the scout's training), the
distinct candidates predicted per example, and the share of the K slots held by the
deterministic segmentation (a variant that keeps choosing it adds little to one pass).

    python -m benchmarks.ablation --dataset conll --noise sentence
    python -m benchmarks.ablation --dataset sst2 --noise flip

Writes ``benchmarks/results/ablation-DATASET-NOISE.{json,md}`` after every seed. At one thread
on a shared 2-core machine a CoNLL seed takes about 2 min for the scout plus about 1 min per
variant.
"""

from __future__ import annotations

import logging
import sys

from benchmarks.harness import (
    DATASETS,
    NOISE,
    SEEDS,
    arguments,
    document,
    mean_base_rate,
    noisy_sample,
    pm,
    ranking,
    seeded_main,
    summarize_rows,
    table,
    timed,
)
from subregweigh.options import METHODS
from subregweigh.scout import Scout
from subregweigh.weigh import SubRegWeigh

logger = logging.getLogger("ablation")
# per variant, mean ± sd over the seeds
SUMMARY = (
    "agreement_ap",
    "probability_ap",
    "weigh_seconds",
    "distinct_per_example",
    "deterministic_share",
)


def parse_args(argv=None):
    parser = arguments(__doc__)
    parser.add_argument("--dataset", choices=DATASETS, default="conll")
    parser.add_argument("--noise", choices=NOISE, default=None, help="(default: as detection)")
    parser.add_argument("--rate", type=float, help="noise rate (default: as detection)")
    parser.add_argument("--examples", type=int, default=500)
    parser.add_argument("--seeds", type=int, default=SEEDS)
    parser.add_argument("--epochs", type=int, help="(default: the scout's)")
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument("--ps", type=float, nargs="+", default=[0.1, 0.3])
    parser.add_argument("--n-samples", type=int, default=500)
    parser.add_argument("-k", type=int, default=10)
    args = parser.parse_args(argv)
    args.noise = args.noise or ("sentence" if args.dataset == "conll" else "flip")
    args.rate = NOISE[args.noise][1] if args.rate is None else args.rate
    args.name = args.name or f"ablation-{args.dataset}-{args.noise}"
    return args


def weigh_variant(scout, noisy, corrupted, method, p, args, seed) -> dict:
    srw = SubRegWeigh.from_parts(
        [scout],
        p=p,
        n_samples=args.n_samples,
        k=args.k,
        method=method,
        random_state=seed,
        progress=False,
        deterministic=False,
    )
    (segmentations, owner, multiplicity), select_s = timed(srw.candidates, noisy)
    result, predict_s = timed(srw.weigh_candidates, noisy, segmentations, owner, multiplicity)
    seconds = select_s + predict_s
    ordinary = [scout.segment(noisy[i].words) for i in owner]
    held = sum(m for seg, ref, m in zip(segmentations, ordinary, multiplicity) if seg == ref)
    return {
        "agreement": ranking(result.reliability, corrupted),
        "probability": ranking(result.probability, corrupted),
        "weigh_seconds": round(seconds, 2),
        "distinct_per_example": len(segmentations) / len(noisy),
        "deterministic_share": held / float(multiplicity.sum()),
    }


def run_seed(args, seed) -> dict:
    task, noisy, corrupted = noisy_sample(args.dataset, args.examples, args.noise, args.rate, seed)
    scout, scout_s = timed(
        Scout(task=task, epochs=args.epochs, random_state=seed, progress=False).fit, noisy
    )
    variants = {}
    for p in args.ps:
        for method in args.methods:
            variants[f"{method} p={p}"] = weigh_variant(
                scout, noisy, corrupted, method, p, args, seed
            )
            logger.info("seed %d %s p=%g: %s", seed, method, p, variants[f"{method} p={p}"])
    return {
        "seed": seed,
        "base_rate": float(corrupted.mean()),
        "scout_seconds": round(scout_s, 2),
        "variants": variants,
    }


def summarize(runs) -> dict:
    out = {}
    for name in runs[0]["variants"]:
        rows = [r["variants"][name] for r in runs]
        flat = [
            {**r, "agreement_ap": r["agreement"]["ap"], "probability_ap": r["probability"]["ap"]}
            for r in rows
        ]
        out[name] = summarize_rows(flat, SUMMARY)
    return out


def markdown(result) -> str:
    cfg = result["config"]
    summary = result["summary"]
    base = mean_base_rate(result["runs"])
    lines = [
        f"## Ablation: {cfg['dataset']}, {cfg['noise']} noise {cfg['rate']:.0%}, "
        f"{cfg['examples']} examples, K={cfg['k']}, N={cfg['n_samples']}",
        "",
        f"One scout per seed shared by every row; mean ± sd over {len(result['runs'])} seeds. "
        f"Base rate {pm(base)}. Weighing time: sampling, selection and forward passes only.",
        "",
    ]
    lines += table(
        [
            "selection, p",
            "AP c/K",
            "AP probability",
            "weighing (s)",
            "distinct / example",
            "deterministic share of K",
        ],
        [
            [
                name,
                pm(s["agreement_ap"]),
                pm(s["probability_ap"]),
                pm(s["weigh_seconds"], 1),
                pm(s["distinct_per_example"], 1),
                pm(s["deterministic_share"], 2),
            ]
            for name, s in summary.items()
        ],
    )
    return document(lines, result)


def main(argv=None) -> int:
    return seeded_main("ablation", argv, parse_args, run_seed, summarize, markdown)


if __name__ == "__main__":
    sys.exit(main())
