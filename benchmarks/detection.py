"""Detection benchmark: SubRegWeigh (Random, Cos-Sim, K-means) against CrossWeigh.

On a subset of real data with injected label noise, every method weighs the noisy training set
with the same scout settings; the script reports wall time, speed-up over CrossWeigh, average
precision and AUROC of ``1 - reliability`` against the corrupted flags, and mean reliability of
clean and corrupted examples (the paper's table). Writes JSON and a markdown table.

    python benchmarks/detection.py --dataset conll            # 1,000 sentences, paper defaults
    python benchmarks/detection.py --dataset sst2
    python benchmarks/detection.py --dataset conll --quick    # a few minutes

SubRegWeigh's time for a method = one scout training (shared, timed once) + that method's
sampling, selection and prediction. CrossWeigh's time = all k x T trainings and predictions.
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

from subregweigh.crossweigh import CrossWeigh
from subregweigh.formats import atomic_write_text, read_conll, read_tsv
from subregweigh.metrics import detection_report
from subregweigh.noise import flip_labels, inject_ner_noise
from subregweigh.scout import Scout
from subregweigh.weigh import SubRegWeigh

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
RESULTS = Path(__file__).resolve().parent / "results"
DATASETS = {
    "conll": ("ner", DATA / "conllpp" / "conllpp_train.txt"),
    "sst2": ("classification", DATA / "sst2" / "train.tsv"),
}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", choices=DATASETS, default="conll")
    parser.add_argument("--examples", type=int, default=1000, help="subset size (default: 1000)")
    parser.add_argument("--noise", type=float, default=0.1, help="label noise rate (default: 0.1)")
    parser.add_argument(
        "--epochs", type=int, help="(default: the scout's: 3 for NER, 2 for classification)"
    )
    parser.add_argument("--n-samples", type=int, default=500, help="N (default: 500)")
    parser.add_argument("-k", type=int, default=10, help="K (default: 10)")
    parser.add_argument("-p", type=float, default=0.1)
    parser.add_argument("--folds", type=int, default=10, help="CrossWeigh k (default: 10)")
    parser.add_argument("--iterations", type=int, default=3, help="CrossWeigh T (default: 3)")
    parser.add_argument("--methods", default="random,cossim,kmeans,crossweigh")
    parser.add_argument("--model", help="scout model (default: the offline MiniLM)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's choice)")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="200 examples, 2 epochs, N=100, CrossWeigh 5 folds x 1 iteration",
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--name", help="output file stem (default: detection-DATASET[-quick])")
    args = parser.parse_args(argv)
    if args.quick:
        args.examples, args.epochs, args.n_samples, args.folds, args.iterations = 200, 2, 100, 5, 1
    return args


def load(dataset: str, n: int, seed: int):
    task, path = DATASETS[dataset]
    examples = read_conll(path) if task == "ner" else read_tsv(path)
    # A seeded random subset: the first n sentences would be a handful of documents.
    pick = np.sort(
        np.random.default_rng(seed).choice(len(examples), size=min(n, len(examples)), replace=False)
    )
    return task, [examples[i] for i in pick]


def row(name, seconds, reliability, corrupted):
    report = detection_report(reliability, corrupted)
    return {
        "method": name,
        "seconds": round(seconds, 1),
        "average_precision": round(float(report["average_precision"]), 4),
        "auroc": round(float(report["auroc"]), 4),
        "mean_reliability_clean": round(float(report["mean_reliability_clean"]), 4),
        "mean_reliability_corrupted": round(float(report["mean_reliability_corrupted"]), 4),
    }


def markdown(result) -> str:
    cfg = result["config"]
    lines = [
        f"### {cfg['dataset']}: {cfg['examples']} examples, {cfg['noise']:.0%} noise "
        f"({result['corrupted_examples']} corrupted examples), {cfg['epochs'] or 'default'} "
        f"epochs, "
        f"K={cfg['k']}, N={cfg['n_samples']}, p={cfg['p']}, CrossWeigh "
        f"{cfg['folds']}x{cfg['iterations']}",
        "",
        "| method | wall time (s) | speed-up vs CrossWeigh | AP | AUROC | mean rel. clean | mean "
        "rel. corrupted |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    cross = next((r["seconds"] for r in result["rows"] if r["method"] == "crossweigh"), None)
    for r in result["rows"]:
        speedup = f"{cross / r['seconds']:.1f}x" if cross else "n/a"
        lines.append(
            f"| {r['method']} | {r['seconds']:.1f} | {speedup} | {r['average_precision']:.3f} | "
            f"{r['auroc']:.3f} | {r['mean_reliability_clean']:.3f} | "
            f"{r['mean_reliability_corrupted']:.3f} |"
        )
    lines += [
        "",
        f"Scout training (shared by the SubRegWeigh rows): {result['scout_seconds']:.1f} s. "
        f"Base rate (AP of a random ranking): {result['base_rate']:.3f}.",
        f"Machine: {result['machine']}.",
    ]
    if "kmeans_overhead_vs_random" in result:
        lines.append(
            f"K-means total time over Random's: {result['kmeans_overhead_vs_random']:+.1%}."
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S"
    )
    if args.threads:
        torch.set_num_threads(args.threads)
    methods = args.methods.split(",")
    task, examples = load(args.dataset, args.examples, args.seed)
    inject = inject_ner_noise if task == "ner" else flip_labels
    noisy, corrupted = inject(examples, args.noise, random_state=args.seed)
    scout = Scout(
        model=args.model, task=task, epochs=args.epochs, random_state=args.seed, progress=False
    )
    rows, timings = [], {}

    srw_methods = [m for m in methods if m != "crossweigh"]
    if srw_methods:
        srw = SubRegWeigh(
            scout,
            p=args.p,
            n_samples=args.n_samples,
            k=args.k,
            random_state=args.seed,
            progress=False,
        )
        start = time.perf_counter()
        srw.fit(noisy)
        scout_seconds = time.perf_counter() - start
        for method in srw_methods:
            srw.method = method
            start = time.perf_counter()
            result = srw.weigh(noisy)
            timings[method] = scout_seconds + time.perf_counter() - start
            rows.append(row(method, timings[method], result.reliability, corrupted))
            print(rows[-1], flush=True)
    else:
        scout_seconds = float("nan")
    if "crossweigh" in methods:
        start = time.perf_counter()
        result = CrossWeigh(
            scout,
            n_folds=args.folds,
            n_iterations=args.iterations,
            random_state=args.seed,
            progress=True,
        ).weigh(noisy)
        timings["crossweigh"] = time.perf_counter() - start
        rows.append(row("crossweigh", timings["crossweigh"], result.reliability, corrupted))
        print(rows[-1], flush=True)

    out = {
        "config": {**{k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}},
        "corrupted_examples": int(corrupted.sum()),
        "base_rate": float(corrupted.mean()),
        "scout_seconds": round(scout_seconds, 1),
        "rows": rows,
        "machine": f"{platform.machine()}, {torch.get_num_threads()} torch threads, "
        f"{'CUDA' if torch.cuda.is_available() else 'CPU'}, torch {torch.__version__}",
        "command": "python benchmarks/detection.py "
        + " ".join(sys.argv[1:] if argv is None else argv),
    }
    if "kmeans" in timings and "random" in timings:
        out["kmeans_overhead_vs_random"] = timings["kmeans"] / timings["random"] - 1
    if "crossweigh" in timings:
        out["speedup_vs_crossweigh"] = {
            m: timings["crossweigh"] / t for m, t in timings.items() if m != "crossweigh"
        }
    name = args.name or f"detection-{args.dataset}{'-quick' if args.quick else ''}"
    args.out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.out / f"{name}.json", json.dumps(out, indent=2) + "\n")
    atomic_write_text(args.out / f"{name}.md", markdown(out))
    print(markdown(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
