"""One-off explorations (some on lent GPU machines): kept so that every figure they gave has its
command. Not benchmarks of the harness (no smoke tests); their results are in
benchmarks/results/ with the command that made them."""

from __future__ import annotations

import argparse
from pathlib import Path

from benchmarks import harness


def cache_arguments(doc: str, argv, seeds: bool = True) -> argparse.Namespace:
    """The arguments of an exploration of the scouts that ``scout_schedule`` cached:
    ``--cache`` and, with ``seeds``, ``--seeds``."""
    parser = argparse.ArgumentParser(description=doc)
    parser.add_argument("--cache", type=Path, required=True, help="scout_schedule's --cache")
    if seeds:
        parser.add_argument("--seeds", type=int, default=harness.SEEDS)
    return parser.parse_args(argv)


def save(module: str, stem: str, argv, lines: list[str], **fields) -> str:
    """What an exploration does with its table: ``lines`` (markdown) and ``fields`` (JSON),
    stamped with ``python -m benchmarks.exploration.MODULE ARGV``, the footer appended, saved
    as ``benchmarks/results/STEM.{json,md}``; the markdown, footer included."""
    result = {**harness.stamp(harness.command(f"exploration.{module}", argv)), **fields}
    text = "\n".join([*lines, *harness.footer(result)])
    harness.save(harness.RESULTS, stem, result, text + "\n")
    return text
