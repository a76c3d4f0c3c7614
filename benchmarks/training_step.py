"""Where a scout's training step spends its time here, and what the fused optimizer and
bfloat16 save.

Training is most of "Start Training" to scores (``benchmarks.scaling``), so this benchmark looks
inside it. A seeded random subset of CoNLL-2003 (CoNLL++) training sentences; a default NER scout
(the offline MiniLM, frozen word embeddings, batches of 16 grouped by length) trained for
``--epochs`` epochs, timed in each of ``--variants``, alternating (``--repeats`` times each, so
a machine that slows down mid-run slows them all):

* *fused*: the scout as shipped, ``torch.optim.AdamW(fused=True)``: one kernel per step;
* *for-loop*: the same with ``fused=False`` (torch's default on CPU, the scout's optimizer before
  it asked for the fused kernel), forced here by wrapping ``torch.optim.AdamW``;
* *fused-bfloat16*: fused, with ``Scout(precision="bfloat16")``: forward passes under
  ``torch.autocast`` (matrix products in bfloat16, weights and optimizer state float32).

Per row: wall and CPU seconds of ``Scout.fit``, and the seconds inside ``optimizer.step()``.
Then one more fit of each ``--profile`` variant under ``torch.profiler``: the share of CPU time
of each kind of op (matrix products, dropout's random masks, the optimizer, the rest).

    python -m benchmarks.training_step                    # 1,000 sentences, 1 epoch, 2 repeats
    python -m benchmarks.training_step --sentences 40 --repeats 1 --out /tmp/ts  # smoke test

Writes ``benchmarks/results/NAME.{json,md}`` (NAME: ``training-step-cpu`` or
``training-step-gpu``).
"""

from __future__ import annotations

import statistics
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

from benchmarks.harness import (
    arguments,
    command,
    config,
    document,
    load,
    report,
    stamp,
    start,
    table,
    timed_cpu,
)
from subregweigh.scout import Scout

# variant -> (fused optimizer, scout precision)
VARIANTS = {
    "for-loop": (False, "float32"),
    "fused": (True, "float32"),
    "fused-bfloat16": (True, "bfloat16"),
}
# profiler op name -> kind; anything else is "other"
OP_KINDS = {
    "aten::mm": "matrix products",
    "aten::addmm": "matrix products",
    "aten::bmm": "matrix products",
    "aten::bernoulli_": "dropout masks (random numbers)",
    "aten::_fused_adamw_": "optimizer",
}


def parse_args(argv=None):
    parser = arguments(__doc__)
    parser.add_argument("--sentences", type=int, default=1000, help="(default: 1000)")
    parser.add_argument("--epochs", type=int, default=1, help="per timed fit (default: 1)")
    parser.add_argument("--repeats", type=int, default=2, help="fits per variant (default: 2)")
    parser.add_argument(
        "--variants",
        nargs="+",
        choices=list(VARIANTS),
        default=list(VARIANTS),
        help="what to time (default: all)",
    )
    parser.add_argument(
        "--profile",
        nargs="*",
        choices=list(VARIANTS),
        default=["fused"],
        help="variants to profile, one fit each (default: fused)",
    )
    parser.add_argument("--seed", type=int, default=0, help="subset and scout seed (default: 0)")
    args = parser.parse_args(argv)
    if args.name is None:
        args.name = "training-step-" + ("gpu" if torch.cuda.is_available() else "cpu")
    return args


class _StepClock:
    """Wraps ``torch.optim.AdamW`` while active: forces ``fused`` and adds up ``step()`` time."""

    def __init__(self, fused: bool):
        self.fused, self.seconds = fused, 0.0

    def __enter__(self):
        clock, original = self, torch.optim.AdamW
        self._original = original

        class TimedAdamW(original):
            def __init__(self, params, **kwargs):
                super().__init__(params, **{**kwargs, "fused": clock.fused})

            def step(self, *args, **kwargs):
                began = time.perf_counter()
                try:
                    return super().step(*args, **kwargs)
                finally:
                    clock.seconds += time.perf_counter() - began

        torch.optim.AdamW = TimedAdamW
        return self

    def __exit__(self, *exc):
        torch.optim.AdamW = self._original


def scout(args, variant: str) -> Scout:
    precision = VARIANTS[variant][1]
    return Scout(
        task="ner", epochs=args.epochs, precision=precision, random_state=args.seed, progress=False
    )


def timed_fit(examples, args, variant: str) -> dict:
    model = scout(args, variant)
    with _StepClock(fused=VARIANTS[variant][0]) as clock:
        _, wall, cpu = timed_cpu(model.fit, examples)
    steps = args.epochs * -(-len(examples) // model.batch_size)
    return {
        "variant": variant,
        "wall": wall,
        "cpu": cpu,
        "optimizer_step": clock.seconds,
        "ms_per_step": 1000 * wall / steps,
    }


def op_shares(examples, args, variant: str) -> dict[str, float]:
    """Share of self CPU time by kind of op over one profiled fit of ``variant``."""
    with _StepClock(fused=VARIANTS[variant][0]), profile(activities=[ProfilerActivity.CPU]) as prof:
        scout(args, variant).fit(examples)
    totals: dict[str, float] = {}
    for event in prof.key_averages():
        kind = OP_KINDS.get(event.key, "other")
        totals[kind] = totals.get(kind, 0.0) + event.self_cpu_time_total
    whole = sum(totals.values()) or 1.0
    return {kind: t / whole for kind, t in sorted(totals.items(), key=lambda kv: -kv[1])}


def summarize(runs: list[dict]) -> dict:
    out = {}
    for variant in dict.fromkeys(r["variant"] for r in runs):
        mine = [r for r in runs if r["variant"] == variant]
        out[variant] = {
            key: statistics.median(r[key] for r in mine)
            for key in ("wall", "cpu", "optimizer_step", "ms_per_step")
        }
    return out


def markdown(result: dict) -> str:
    c = result["config"]
    lines = [
        "## Training step: where the time goes; the fused optimizer and bfloat16",
        "",
        f"{c['sentences']:,} CoNLL-2003 (CoNLL++) training sentences, seed {c['seed']}; default "
        f"NER scout (MiniLM, frozen word embeddings, batches of 16 grouped by length), "
        f"{c['epochs']} epoch(s) per fit; {c['repeats']} fit(s) per variant, alternating; "
        "median.",
        "",
    ]
    lines += table(
        ["variant", "wall (s)", "CPU (s)", "in optimizer.step (s)", "ms per step"],
        [
            [
                variant,
                f"{row['wall']:.1f}",
                f"{row['cpu']:.1f}",
                f"{row['optimizer_step']:.1f}",
                f"{row['ms_per_step']:.0f}",
            ]
            for variant, row in result["summary"].items()
        ],
    )
    for variant, shares in result["op_shares"].items():
        lines += ["", f"One {variant} fit under torch.profiler, share of self CPU time:", ""]
        lines += table(["op kind", "share"], [[k, f"{v:.1%}"] for k, v in shares.items()])
    return document(lines, result)


def main(argv=None) -> int:
    args = parse_args(argv)
    start(args.threads)
    _, examples = load("conll", args.sentences, args.seed)
    runs = [
        timed_fit(examples, args, variant) for _ in range(args.repeats) for variant in args.variants
    ]
    result = {
        **stamp(command("training_step", argv)),
        "config": config(args),
        "summary": summarize(runs),
        "op_shares": {variant: op_shares(examples, args, variant) for variant in args.profile},
        "runs": runs,
    }
    report(args, result, markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
