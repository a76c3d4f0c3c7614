"""Engine scaling: the scout's training and the weighing pass by project size, without Label Studio.

What the backend's worker does between fetching the tasks and writing the predictions (issue 12's
*train* and *weigh* phases, about 95% of "Start Training" to scores in ``scaling.py``), timed on
the machine at hand, so CPU and GPU machines can be compared on the same rows. For each size, a
seeded random subset of CoNLL-2003 (CoNLL++) training sentences with their gold tags; a default
scout (the offline MiniLM, 3 NER epochs) and the library's defaults (K=10, N=500, p=0.1,
K-means), as the backend uses them. Phases:

* *train*: ``SubRegWeigh.fit`` (the scout's training);
* *select*: ``SubRegWeigh.candidates`` (N samples per sentence, TF-IDF, K-means; CPU only,
  spread over ``--n-jobs`` processes);
* *predict*: ``SubRegWeigh.weigh_candidates`` (the forward passes over the chosen candidates
  and the ordinary segmentations, and the scores).

Also: candidates predicted per second, the peak resident memory of the process (cumulative:
the largest so far) and, on CUDA, the peak GPU memory of each size.

    python -m benchmarks.engine_scaling --sizes 300 1000 3000 14000
    python -m benchmarks.engine_scaling --sizes 300 1000 --batching random   # the old batches
    python -m benchmarks.engine_scaling --sizes 1000 --precision float32     # before bfloat16
    python -m benchmarks.engine_scaling --sizes 60 --epochs 1 -k 3 --n-samples 6 \\
        --out /tmp/engine-smoke                             # smoke test, under a minute

Writes ``benchmarks/results/NAME.{json,md}`` (NAME: ``engine-scaling-cpu`` or
``engine-scaling-gpu``) after every size; ``--resume`` keeps the sizes already measured with the
same settings.
"""

from __future__ import annotations

import inspect
import logging
import resource
import sys

import numpy as np
import torch
from tqdm.auto import tqdm

from benchmarks.harness import (
    add_precision_argument,
    arguments,
    command,
    document,
    earlier_result,
    read_dataset,
    sample,
    save,
    stamp,
    start,
    table,
    timed,
)
from subregweigh.scout import Scout
from subregweigh.weigh import SubRegWeigh

logger = logging.getLogger("engine_scaling")

SIZES = [300, 1000, 3000, 14000]
PHASES = ("train", "select", "predict")
COLUMNS = (
    "sentences",
    "train (s)",
    "select (s)",
    "predict (s)",
    "total (s)",
    "candidates/s",
    "peak RSS (MiB)",
    "peak GPU (MiB)",
)


def parse_args(argv=None):
    parser = arguments(__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=SIZES, help="sentences")
    parser.add_argument("--seed", type=int, default=0, help="subset and scout seed (default: 0)")
    parser.add_argument("--epochs", type=int, help="(default: the scout's, 3 for NER)")
    parser.add_argument("-k", type=int, default=10, help="K (default: 10)")
    parser.add_argument("--n-samples", type=int, default=500, help="N (default: 500)")
    parser.add_argument(
        "--n-jobs", type=int, default=None, help="processes for selection (default: 1)"
    )
    parser.add_argument(
        "--batching",
        choices=["length", "random"],
        default="length",
        help="the scout's training batches (default: length, grouped by length, the scout's)",
    )
    parser.add_argument(
        "--freeze-layers",
        type=int,
        default=0,
        metavar="N",
        help="the scout's lowest N transformer layers frozen (default: 0, the scout's)",
    )
    add_precision_argument(parser)
    parser.add_argument("--resume", action="store_true", help="keep sizes already measured")
    args = parser.parse_args(argv)
    if args.name is None:
        args.name = "engine-scaling-" + ("gpu" if torch.cuda.is_available() else "cpu")
        args.name += "-random-batches" if args.batching == "random" else ""
        args.name += f"-{args.freeze_layers}-frozen-layers" if args.freeze_layers else ""
        args.name += f"-{args.precision}" if args.precision != "auto" else ""
    return args


def settings(args) -> dict:
    return {
        "seed": args.seed,
        "epochs": args.epochs,
        "k": args.k,
        "n_samples": args.n_samples,
        "n_jobs": args.n_jobs,
        "batching": args.batching,
        # absent from results made before the option: a resume of those still matches
        **({"freeze_layers": args.freeze_layers} if args.freeze_layers else {}),
        "precision": args.precision,  # see add_precision_argument
    }


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(sentences, size: int, args) -> dict:
    examples = sample(sentences, size, args.seed)
    params = dict(k=args.k, n_samples=args.n_samples, random_state=args.seed, progress=False)
    if args.n_jobs is not None:
        if "n_jobs" not in inspect.signature(SubRegWeigh).parameters:
            raise SystemExit("--n-jobs: this SubRegWeigh has no n_jobs parameter")
        params["n_jobs"] = args.n_jobs
    srw = SubRegWeigh(
        Scout(
            task="ner",
            epochs=args.epochs,
            group_by_length=args.batching == "length",
            freeze_layers=args.freeze_layers,
            precision=args.precision,
            random_state=args.seed,
            progress=False,
        ),
        **params,
    )
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    seconds = {}
    _, seconds["train"] = timed(srw.fit, examples)
    (segmentations, owner, multiplicity), seconds["select"] = timed(srw.candidates, examples)
    result, seconds["predict"] = timed(
        srw.weigh_candidates, examples, segmentations, owner, multiplicity
    )
    total = sum(seconds.values())
    logger.info(
        "%d sentences: %s, total %.1f s",
        size,
        ", ".join(f"{k} {v:.1f} s" for k, v in seconds.items()),
        total,
    )
    return {
        "size": size,
        "seconds": {k: round(v, 2) for k, v in seconds.items()},
        "total_seconds": round(total, 2),
        "candidates": len(segmentations),
        "candidates_per_second": round(len(segmentations) / seconds["predict"], 1),
        "mean_reliability": round(float(np.mean(result.reliability)), 4),
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "peak_gpu_mb": round(torch.cuda.max_memory_allocated() / 2**20, 1) if cuda else None,
    }


def markdown(result: dict) -> str:
    s = result["settings"]
    lines = [
        "## Engine scaling: scout training and weighing by project size",
        "",
        f"CoNLL-2003 (CoNLL++) training sentences, seed {s['seed']}; default MiniLM scout, "
        f"epochs {s['epochs'] or 'default'}, K={s['k']}, N={s['n_samples']}, K-means, "
        f"selection in {s['n_jobs'] or 1} process(es), training batches "
        f"{'grouped by length' if s.get('batching', 'length') == 'length' else 'random'}"
        f"{f', lowest {n} layers frozen' if (n := s.get('freeze_layers')) else ''}. "
        "No Label Studio: fetch and write are not "
        "included (see scaling.md). Peak RSS is the largest so far in the process.",
        "",
    ]
    rows = []
    for r in result["runs"]:
        sec = r["seconds"]
        gpu = "-" if r["peak_gpu_mb"] is None else f"{r['peak_gpu_mb']:,.0f}"
        rows.append(
            [
                f"{r['size']:,}",
                f"{sec['train']:.1f}",
                f"{sec['select']:.1f}",
                f"{sec['predict']:.1f}",
                f"{r['total_seconds']:.1f}",
                f"{r['candidates_per_second']:,.0f}",
                f"{r['peak_rss_mb']:,.0f}",
                gpu,
            ]
        )
    lines += table(COLUMNS, rows, align="r" * len(COLUMNS))
    return document(lines, result)


def main(argv=None) -> int:
    args = parse_args(argv)
    start(args.threads)
    command_line = command("engine_scaling", argv)
    earlier = earlier_result(args.out, args.name, args.resume)
    if earlier is not None and earlier["settings"] != settings(args):
        raise SystemExit(f"{args.name}.json was made with other settings: {earlier['settings']}")
    runs = earlier["runs"] if earlier else []
    _, sentences = read_dataset("conll")
    for size in tqdm([s for s in args.sizes if s not in {r["size"] for r in runs}], unit="size"):
        if size > len(sentences):
            raise SystemExit(f"--sizes: {size} is more than the {len(sentences)} sentences")
        runs = sorted(runs + [measure(sentences, size, args)], key=lambda r: r["size"])
        result = {**stamp(command_line), "settings": settings(args), "runs": runs}
        save(args.out, args.name, result, markdown(result))
    print(markdown({**stamp(command_line), "settings": settings(args), "runs": runs}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
