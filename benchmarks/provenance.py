"""What every benchmark result carries, and how it is written.

Each result file says which command made it, on what machine and when; JSON and markdown are
written atomically, so an interrupted run never leaves a half-written table.
"""

from __future__ import annotations

import datetime
import functools
import json
import logging
import os
import platform
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from subregweigh.scout import bfloat16_native


def start(threads: int | None) -> None:
    """What every benchmark does first: INFO logs with the time, the engine's own logs at
    WARNING (one line per run is enough), and ``threads`` torch threads if given."""
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S"
    )
    logging.getLogger("subregweigh").setLevel(logging.WARNING)
    if threads:
        torch.set_num_threads(threads)


def machine() -> str:
    """The machine in words; "bfloat16 native" says what a scout's ``precision="auto"`` ran."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return (
        f"{platform.machine()}, {os.cpu_count()} CPUs, {torch.get_num_threads()} torch threads, "
        f"{'CUDA ' + torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU'}"
        f"{', bfloat16 native' if bfloat16_native(device) else ''}, "
        f"torch {torch.__version__}, Python {platform.python_version()}"
    )


def matmul_gflops(windows: int = 8, window: float = 0.25, n: int = 1024) -> float:
    """This machine's speed now: float32 GFLOP/s of ``n`` x ``n`` matrix products on torch's
    threads, the median of ``windows`` windows of ``window`` seconds (on a shared machine a
    single window can be far off from the next). A scout's training is mostly such products
    (69% of its CPU time, ``training_step.py``), so results measured at different speeds are
    not compared."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    for _ in range(3):  # warm up the BLAS threads
        torch.mm(a, b)
    rates = []
    for _ in range(windows):
        products, began = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - began) < window:
            torch.mm(a, b)
            products += 1
        rates.append(2 * n**3 * products / elapsed / 1e9)
    return round(statistics.median(rates), 1)


_speed_at_first_stamp = functools.cache(matmul_gflops)


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def command(script: str, argv=None) -> str:
    """The command line that ran ``script`` (``argv``: main()'s arguments, else sys.argv)."""
    args = sys.argv[1:] if argv is None else argv
    return " ".join(["python", f"benchmarks/{script}", *map(shlex.quote, args)])


def stamp(command_line: str) -> dict:
    """The provenance fields a result starts with."""
    return {
        "command": command_line,
        "machine": machine(),
        "date": now(),
        "matmul_gflops": _speed_at_first_stamp(),
    }


def config(args) -> dict:
    """A benchmark's parsed arguments as JSON values (paths as strings)."""
    return {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}


def footer(result: dict) -> list[str]:
    """Markdown lines naming the command, machine and date of ``result``."""
    return [
        f"Command: `{result['command']}`",
        f"Machine: {result['machine']}."
        + (
            f" Speed check: {result['matmul_gflops']} GFLOP/s (float32 matrix products)."
            if "matmul_gflops" in result
            else ""
        ),
        f"Date: {result['date']}.",
    ]


def atomic_write(path: Path, data: bytes | str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)
    os.chmod(tmp, 0o644)  # mkstemp's 0600 would make results unreadable to others
    os.replace(tmp, path)


def earlier_result(out: Path, name: str, resume: bool) -> dict | None:
    """What an earlier run wrote to ``out/name.json``, for ``--resume`` to continue; None without
    ``resume`` or without that file."""
    path = out / f"{name}.json"
    if not resume or not path.exists():
        return None
    return json.loads(path.read_text())


def save(out: Path, name: str, result: dict, markdown: str) -> None:
    """Write ``out/name.json`` and ``out/name.md``."""
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / f"{name}.json", json.dumps(result, indent=2) + "\n")
    atomic_write(out / f"{name}.md", markdown)


def run_seeds(args, script: str, argv, run_seed, summarize, markdown) -> dict:
    """Run ``run_seed(args, seed)`` for seeds 0..args.seeds-1, saving ``args.out/args.name``
    after each (a stopped run keeps its finished seeds); prints and returns the result."""
    command_line = command(script, argv)
    runs: list[dict] = []
    for seed in range(args.seeds):
        runs.append(run_seed(args, seed))
        result = {
            **stamp(command_line),
            "config": config(args),
            "complete": len(runs) == args.seeds,
            "summary": summarize(runs),
            "runs": runs,
        }
        save(args.out, args.name, result, markdown(result))
    print(markdown(result))
    return result
