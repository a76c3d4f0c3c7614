"""CPU inference for the weighing pass: what makes the scout's forward passes cheaper, and what
it costs in scores.

One scout (the default MiniLM, default epochs and precision) is fitted on ``--examples``
CoNLL-2003 sentences, 15% of them given one error (as ``benchmarks.detection``); its K-means
candidates are drawn once. Then the same candidates are weighed under each variant:

* ``float32``: the scout with ``precision="float32"``, at ``--threads`` torch threads (each
  value one row);
* ``int8``: the scout with ``quantize=True``: PyTorch's dynamic int8 quantization of the linear
  layers (``torch.ao.quantization.quantize_dynamic``), which hold almost all of the compute;
* ``bfloat16``: the scout with ``precision="bfloat16"``: its forward passes under
  ``torch.autocast`` (the same float32 weights, matrix products in bfloat16);
* ``batch B``: float32 with another batch size (inputs are sorted by length either way).

Per variant: candidates per second (the K candidates plus each text's ordinary segmentation),
wall and CPU seconds, and how far its scores move from float32 at batch 64: the largest and the
mean absolute difference of the probability score, Spearman's rank correlation, the number of
c/K values that change, and the detection AP of the probability score against the corrupted
flags (float32's AP beside it). CPU seconds count all threads.

    python -m benchmarks.inference

Writes ``benchmarks/results/inference-cpu.{json,md}``.
"""

from __future__ import annotations

import copy
import logging
import sys

import numpy as np
import torch
from scipy.stats import spearmanr

from benchmarks.harness import (
    arguments,
    command,
    config,
    document,
    noisy_sample,
    ranking,
    report,
    stamp,
    start,
    table,
    timed_cpu,
)
from subregweigh.scout import Scout
from subregweigh.weigh import SubRegWeigh

logger = logging.getLogger("inference")
COLUMNS = (
    "variant",
    "threads",
    "batch",
    "candidates/s",
    "wall (s)",
    "CPU (s)",
    "max abs diff",
    "mean abs diff",
    "Spearman",
    "c/K changed",
    "AP",
)


def parse_args(argv=None):
    parser = arguments(__doc__, name="inference-cpu", threads=False)
    parser.add_argument("--examples", type=int, default=300)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[16, 128])
    parser.add_argument("--n-samples", type=int, default=500)
    parser.add_argument("-k", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def variant(scout: Scout, **params) -> Scout:
    """A copy of the fitted ``scout`` that predicts with other ``params``."""
    copied = copy.deepcopy(scout)
    for name, value in params.items():
        setattr(copied, name, value)
    return copied


def weigh(params: dict, scout: Scout, noisy, candidates, threads: int, batch_size: int):
    """Weigh ``noisy`` on ``candidates`` with ``scout`` (a variant) alone: its K candidates and
    each text's ordinary segmentation."""
    srw = SubRegWeigh.from_parts([scout], batch_size=batch_size, **params)
    torch.set_num_threads(threads)
    return timed_cpu(srw.weigh_candidates, noisy, *candidates)


def compare(result, reference, corrupted) -> dict:
    p, q = result.probability, reference.probability
    return {
        "max_abs_diff": float(np.abs(p - q).max()),
        "mean_abs_diff": float(np.abs(p - q).mean()),
        "spearman": float(spearmanr(p, q)[0]),
        "agreement_changed": int((result.agreement != reference.agreement).sum()),
        "ap": ranking(p, corrupted)["ap"],
    }


def markdown(result) -> str:
    cfg = result["config"]
    lines = [
        f"## CPU inference: the weighing pass, {cfg['examples']} CoNLL-2003 sentences, "
        f"K={cfg['k']}, N={cfg['n_samples']}",
        "",
        f"{result['passes']} forward passes (K-means candidates + ordinary segmentations) per "
        f"row. Differences and AP of the probability score against float32, batch 64, "
        f"{cfg['threads'][0]} thread(s); AP of float32: {result['reference_ap']:.3f} (base rate "
        f"{result['base_rate']:.3f}).",
        "",
    ]
    rows = [
        [
            row["variant"],
            row["threads"],
            row["batch_size"],
            f"{row['candidates_per_second']:.1f}",
            f"{row['wall_seconds']:.1f}",
            f"{row['cpu_seconds']:.1f}",
            f"{row['max_abs_diff']:.4f}",
            f"{row['mean_abs_diff']:.4f}",
            f"{row['spearman']:.4f}",
            row["agreement_changed"],
            f"{row['ap']:.3f}",
        ]
        for row in result["rows"]
    ]
    lines += table(COLUMNS, rows)
    return document(lines, result)


def main(argv=None) -> int:
    args = parse_args(argv)
    start(None)  # --threads here is a list: each weighing sets its own
    command_line = command("inference", argv)
    torch.set_num_threads(args.threads[0])
    _, noisy, corrupted = noisy_sample("conll", args.examples, "sentence", 0.15, args.seed)
    scout = Scout(random_state=args.seed, progress=False).fit(noisy)
    params = dict(n_samples=args.n_samples, k=args.k, random_state=args.seed, progress=False)
    candidates = SubRegWeigh.from_parts([scout], **params).candidates(noisy)
    passes = len(candidates[0]) + len(noisy)
    float32 = variant(scout, precision="float32")
    variants = [("float32", float32, t, 64) for t in args.threads]
    variants += [("int8", variant(scout, quantize=True), t, 64) for t in args.threads]
    variants += [("bfloat16", variant(scout, precision="bfloat16"), t, 64) for t in args.threads]
    variants += [("float32", float32, args.threads[0], b) for b in args.batch_sizes]
    rows, reference = [], None
    for name, model, threads, batch_size in variants:
        result, wall, cpu = weigh(params, model, noisy, candidates, threads, batch_size)
        reference = reference or result
        rows.append(
            {
                "variant": name,
                "threads": threads,
                "batch_size": batch_size,
                "candidates_per_second": passes / wall,
                "wall_seconds": wall,
                "cpu_seconds": cpu,
                **compare(result, reference, corrupted),
            }
        )
        logger.info("%s", rows[-1])
    out = {
        **stamp(command_line),
        "config": config(args),
        "passes": passes,
        "base_rate": float(corrupted.mean()),
        "reference_ap": rows[0]["ap"],
        "rows": rows,
    }
    report(args, out, markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
