"""Where a scout's training step spends its time here, and what the fused optimizer saves.

Training is most of "Start Training" to scores (``scaling.py``), so this benchmark looks inside
it. A seeded random subset of CoNLL-2003 (CoNLL++) training sentences; a default NER scout
(the offline MiniLM, frozen word embeddings, batches of 16 grouped by length) trained for
``--epochs`` epochs, timed two ways, alternating (``--repeats`` times each, so a machine that
slows down mid-run slows both):

* *fused*: the scout as shipped, ``torch.optim.AdamW(fused=True)``: one kernel per step;
* *for-loop*: the same with ``fused=False`` (torch's default on CPU, the scout's optimizer before
  it asked for the fused kernel), forced here by wrapping ``torch.optim.AdamW``.

Per row: wall and CPU seconds of ``Scout.fit``, and the seconds inside ``optimizer.step()``.
Then one more fused epoch under ``torch.profiler``: the share of CPU time of each kind of op
(matrix products, dropout's random masks, the optimizer, the rest).

    python benchmarks/training_step.py                      # 1,000 sentences, 1 epoch, 2 repeats
    python benchmarks/training_step.py --sentences 40 --repeats 1 --out /tmp/ts   # smoke test

Writes ``benchmarks/results/NAME.{json,md}`` (NAME: ``training-step-cpu`` or
``training-step-gpu``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from detection import RESULTS, load  # noqa: E402
from provenance import command, config, footer, save, stamp, start  # noqa: E402

from subregweigh.scout import Scout  # noqa: E402

OPTIMIZERS = ("for-loop", "fused")
# profiler op name -> kind; anything else is "other"
OP_KINDS = {
    "aten::mm": "matrix products",
    "aten::addmm": "matrix products",
    "aten::bmm": "matrix products",
    "aten::bernoulli_": "dropout masks (random numbers)",
    "aten::_fused_adamw_": "optimizer",
}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sentences", type=int, default=1000, help="(default: 1000)")
    parser.add_argument("--epochs", type=int, default=1, help="per timed fit (default: 1)")
    parser.add_argument("--repeats", type=int, default=2, help="fits per optimizer (default: 2)")
    parser.add_argument("--seed", type=int, default=0, help="subset and scout seed (default: 0)")
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's choice)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--name", help="output file stem (default: training-step-cpu|gpu)")
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


def scout(args) -> Scout:
    return Scout(task="ner", epochs=args.epochs, random_state=args.seed, progress=False)


def timed_fit(examples, args, optimizer: str) -> dict:
    model = scout(args)
    with _StepClock(fused=optimizer == "fused") as clock:
        wall, cpu = time.perf_counter(), time.process_time()
        model.fit(examples)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    steps = args.epochs * -(-len(examples) // model.batch_size)
    return {
        "optimizer": optimizer,
        "wall": wall,
        "cpu": cpu,
        "optimizer_step": clock.seconds,
        "ms_per_step": 1000 * wall / steps,
    }


def op_shares(examples, args) -> dict[str, float]:
    """Share of self CPU time by kind of op over one profiled fused fit."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        scout(args).fit(examples)
    totals: dict[str, float] = {}
    for event in prof.key_averages():
        kind = OP_KINDS.get(event.key, "other")
        totals[kind] = totals.get(kind, 0.0) + event.self_cpu_time_total
    whole = sum(totals.values()) or 1.0
    return {kind: t / whole for kind, t in sorted(totals.items(), key=lambda kv: -kv[1])}


def summarize(runs: list[dict]) -> dict:
    out = {}
    for optimizer in OPTIMIZERS:
        mine = [r for r in runs if r["optimizer"] == optimizer]
        out[optimizer] = {
            key: statistics.median(r[key] for r in mine)
            for key in ("wall", "cpu", "optimizer_step", "ms_per_step")
        }
    return out


def markdown(result: dict) -> str:
    c = result["config"]
    lines = [
        "## Training step: where the time goes, and the fused optimizer",
        "",
        f"{c['sentences']:,} CoNLL-2003 (CoNLL++) training sentences, seed {c['seed']}; default "
        f"NER scout (MiniLM, frozen word embeddings, batches of 16 grouped by length), "
        f"{c['epochs']} epoch(s) per fit; {c['repeats']} fit(s) per optimizer, alternating; "
        "median.",
        "",
        "| optimizer | wall (s) | CPU (s) | in optimizer.step (s) | ms per step |",
        "|---|---:|---:|---:|---:|",
    ]
    for optimizer, row in result["summary"].items():
        lines.append(
            f"| {optimizer} | {row['wall']:.1f} | {row['cpu']:.1f} | "
            f"{row['optimizer_step']:.1f} | {row['ms_per_step']:.0f} |"
        )
    lines += ["", "One fused fit under torch.profiler, share of self CPU time:", ""]
    lines += ["| op kind | share |", "|---|---:|"]
    lines += [f"| {kind} | {share:.1%} |" for kind, share in result["op_shares"].items()]
    lines += ["", *footer(result), ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    args = parse_args(argv)
    start(args.threads)
    _, examples = load("conll", args.sentences, args.seed)
    runs = [
        timed_fit(examples, args, optimizer)
        for _ in range(args.repeats)
        for optimizer in OPTIMIZERS
    ]
    result = {
        **stamp(command("training_step.py", argv)),
        "config": config(args),
        "summary": summarize(runs),
        "op_shares": op_shares(examples, args),
        "runs": runs,
    }
    save(args.out, args.name, result, markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
