"""Warm-start retraining: does a scout refitted from the last version keep the detection quality
of a scout trained from scratch, and how much time does it save?

The backend retrains a project's scout after every ``SRW_RETRAIN_AFTER`` (default 10) annotation
changes. Per seed ``s``, as in ``benchmarks.detection`` (a seeded random subset of
``--examples`` CoNLL-2003 sentences, 15% of them given one error, seed ``s``):

1. ``initial``: a scout trained from the base encoder (the default epochs) on the first
   ``examples - steps * change`` sentences: the project's current version;
2. ``warm``: ``--steps`` times, ``--change`` more sentences arrive and the scout is refitted from
   the previous one's weights (:class:`~subregweigh.scout.Scout` ``warm_start=True``) for
   ``--warm-epochs`` epochs over all sentences so far;
3. ``full``: a scout trained from the base encoder on all ``--examples`` sentences (what the
   backend did before);
4. ``stale``: the initial scout itself, not retrained (the newest sentences unseen).

Each scout weighs all ``--examples`` sentences on the same K-means candidates (the candidates
depend on the tokenizer and the text, not on the scout, so they are drawn once per seed).
Reported, mean ± sd over the seeds: AP and AUROC of the probability score and of c/K against
the corrupted flags, the AP difference to ``full`` on the same seed, and the training time of
one retrain (wall and CPU seconds; CPU seconds are less disturbed by other jobs on a shared
machine). The weighing pass costs the same for every scout.

    python -m benchmarks.warm_start --threads 1

Writes ``benchmarks/results/warm-start-conll.{json,md}`` after every seed.
"""

from __future__ import annotations

import copy
import logging
import sys

import numpy as np

from benchmarks.harness import (
    SEEDS,
    arguments,
    document,
    mean_base_rate,
    mean_sd,
    noisy_sample,
    pm,
    ranking,
    seeded_main,
    table,
    timed,
    timed_cpu,
)
from subregweigh.scout import Scout
from subregweigh.weigh import SubRegWeigh

logger = logging.getLogger("warm_start")

SCOUTS = ("full", "warm", "stale")
COLUMNS = (
    "scout",
    "AP probability",
    "Δ AP vs full (same seed)",
    "AUROC probability",
    "AP c/K",
    "training wall (s)",
    "training CPU (s)",
)


def parse_args(argv=None):
    parser = arguments(__doc__, name="warm-start-conll")
    parser.add_argument("--examples", type=int, default=500)
    parser.add_argument("--steps", type=int, default=3, help="warm retrains in a row")
    parser.add_argument("--change", type=int, default=10, help="sentences added per retrain")
    parser.add_argument("--warm-epochs", type=int, default=1)
    parser.add_argument(
        "--warm-learning-rate",
        type=float,
        help="the warm retrains' peak learning rate (default: the scout's, 3e-4 for NER)",
    )
    parser.add_argument("--epochs", type=int, help="full training (default: the scout's)")
    parser.add_argument("--seeds", type=int, default=SEEDS)
    parser.add_argument("--n-samples", type=int, default=500)
    parser.add_argument("-k", type=int, default=10)
    args = parser.parse_args(argv)
    if args.steps * args.change >= args.examples:
        parser.error("--steps x --change must be fewer than --examples")
    return args


def timed_fit(scout: Scout, examples) -> tuple[Scout, dict]:
    _, wall, cpu = timed_cpu(scout.fit, examples)
    return scout, {"wall_seconds": round(wall, 2), "cpu_seconds": round(cpu, 2)}


def run_seed(args, seed: int) -> dict:
    _, noisy, corrupted = noisy_sample("conll", args.examples, "sentence", 0.15, seed)
    first = args.examples - args.steps * args.change

    def scout(**params) -> Scout:
        return Scout(epochs=args.epochs, random_state=seed, progress=False, **params)

    initial, initial_time = timed_fit(scout(), noisy[:first])
    warm = copy.deepcopy(initial)  # the initial scout stays as it is: the "stale" row
    warm.warm_start, warm.epochs = True, args.warm_epochs
    if args.warm_learning_rate is not None:
        warm.learning_rate = args.warm_learning_rate
    warm_times = []
    for step in range(1, args.steps + 1):
        warm, seconds = timed_fit(warm, noisy[: first + step * args.change])
        warm_times.append(seconds)
    full, full_time = timed_fit(scout(), noisy)

    params = dict(n_samples=args.n_samples, k=args.k, random_state=seed, progress=False)
    candidates, candidate_seconds = timed(
        SubRegWeigh.from_parts([full], **params).candidates, noisy
    )
    scores = {}
    for name, fitted in (("full", full), ("warm", warm), ("stale", initial)):
        weigher = SubRegWeigh.from_parts([fitted], **params)
        result, seconds = timed(weigher.weigh_candidates, noisy, *candidates)
        scores[name] = {
            "probability": ranking(result.probability, corrupted),
            "agreement": ranking(result.reliability, corrupted),
            "weigh_seconds": round(seconds, 2),
        }
        logger.info("seed %d %s: %s", seed, name, scores[name])
    return {
        "seed": seed,
        "base_rate": float(corrupted.mean()),
        "candidate_seconds": round(candidate_seconds, 2),
        "train": {
            "initial": initial_time,
            "full": full_time,
            "warm": {key: float(np.mean([t[key] for t in warm_times])) for key in warm_times[0]},
        },
        "scores": scores,
    }


def summarize(runs) -> dict:
    out = {}
    for name in SCOUTS:
        rows = [r["scores"][name] for r in runs]
        out[name] = {
            f"{score}_{stat}": mean_sd([row[score][stat] for row in rows])
            for score in ("probability", "agreement")
            for stat in ("ap", "auroc")
        }
        out[name]["probability_ap_vs_full"] = mean_sd(
            [
                r["scores"][name]["probability"]["ap"] - r["scores"]["full"]["probability"]["ap"]
                for r in runs
            ]
        )
        out[name]["weigh_seconds"] = mean_sd([row["weigh_seconds"] for row in rows])
    for name in ("full", "warm"):
        for key in ("wall_seconds", "cpu_seconds"):
            out[name][f"train_{key}"] = mean_sd([r["train"][name][key] for r in runs])
    return out


def markdown(result) -> str:
    cfg, summary = result["config"], result["summary"]
    base = mean_base_rate(result["runs"])
    first = cfg["examples"] - cfg["steps"] * cfg["change"]
    lines = [
        f"## Warm-start retraining: CoNLL-2003, {cfg['examples']} sentences, 15% with one error",
        "",
        f"Initial scout on {first} sentences; then {cfg['steps']} retrains, {cfg['change']} "
        f"sentences more each, warm-started for {cfg['warm_epochs']} epoch(s)"
        + (
            f" at peak learning rate {cfg['warm_learning_rate']:g}"
            if cfg.get("warm_learning_rate") is not None
            else ""
        )
        + " (`warm`), against "
        f"one scout from scratch on all {cfg['examples']} (`full`) and the initial scout not "
        f"retrained (`stale`). Every scout weighs all {cfg['examples']} sentences on the same "
        f"K-means candidates (K={cfg['k']}, N={cfg['n_samples']}). Mean ± sd over "
        f"{len(result['runs'])} seeds; base rate {pm(base)}. Training time: one retrain.",
        "",
    ]
    rows = []
    for name in SCOUTS:
        s = summary[name]
        wall = pm(s["train_wall_seconds"], 1) if "train_wall_seconds" in s else "0 (none)"
        cpu = pm(s["train_cpu_seconds"], 1) if "train_cpu_seconds" in s else "0 (none)"
        rows.append(
            [
                name,
                pm(s["probability_ap"]),
                pm(s["probability_ap_vs_full"]),
                pm(s["probability_auroc"]),
                pm(s["agreement_ap"]),
                wall,
                cpu,
            ]
        )
    lines += table(COLUMNS, rows)
    return document(lines, result)


def main(argv=None) -> int:
    return seeded_main("warm_start", argv, parse_args, run_seed, summarize, markdown)


if __name__ == "__main__":
    sys.exit(main())
