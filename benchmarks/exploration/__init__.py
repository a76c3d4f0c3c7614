"""One-off explorations (some on lent GPU machines): kept so that every figure they gave has its
command. Not benchmarks of the harness (no smoke tests); their results are in
benchmarks/results/ with the command that made them."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from benchmarks import harness


def cache_parser(doc: str, seeds: bool = True) -> argparse.ArgumentParser:
    """The parser of an exploration of cached scout outputs (the review loop's ``--cache``, where
    ``scout_schedule`` and ``real_errors --cache`` leave them too): ``--cache`` and, with
    ``seeds``, ``--seeds``; an exploration adds its own arguments."""
    parser = argparse.ArgumentParser(description=doc)
    parser.add_argument(
        "--cache", type=Path, required=True, help="the folder of cached scout outputs"
    )
    if seeds:
        parser.add_argument("--seeds", type=int, default=harness.SEEDS)
    return parser


def real_error_halves():
    """``(original, flags, cuts)``: CoNLL-2003 test as annotated, which of its sentences CoNLL++
    corrects (bool, shape (n,)), and the whole set and its halves as slices
    (:func:`benchmarks.real_errors.halves`)."""
    from benchmarks.real_errors import halves, load_pair

    original, _, flags = load_pair()
    return original, flags, halves(len(original))


def half_aps(quality, flags, parts: dict, prefix: str = "AP") -> dict[str, float]:
    """``{"PREFIX PART": AP}``: the real-error AP of a ranking on each of ``parts``
    (:func:`real_error_halves`' slices) with ``quality`` (shape (n,); low: doubtful) against
    ``flags`` (shape (n,))."""
    from sklearn.metrics import average_precision_score

    return {
        f"{prefix} {part}": float(average_precision_score(flags[cut], -quality[cut]))
        for part, cut in parts.items()
    }


# The columns of :func:`crf_cells`.
CRF_COLUMNS = ["CRF AP", "mix AP whole", "first half", "second half"]


def crf_quality(original, crf_gold, scout_golds, flags, parts) -> dict:
    """A CRF's real-error rows on the whole set as annotated (``original``; ``crf_gold``: its
    p(gold) of every word): ``"CRF AP whole"``, its own AP, and ``"mix"``, the served score's
    AP on each of ``parts`` of its mix with each of ``scout_golds`` (the cached scouts' p(gold),
    one per seed), mean ± sd."""
    from subregweigh.crf import mix_gold
    from subregweigh.options import SOFTMIN_TEMPERATURE

    alone = harness.served_score(original, crf_gold, SOFTMIN_TEMPERATURE)
    mixes = [
        half_aps(
            harness.served_score(original, mix_gold(g, crf_gold), SOFTMIN_TEMPERATURE),
            flags,
            parts,
        )
        for g in scout_golds
    ]
    return {
        "CRF AP whole": half_aps(alone, flags, parts)["AP whole"],
        "mix": harness.summarize_rows(mixes, list(mixes[0])),
    }


def crf_cells(row: dict) -> list[str]:
    """:data:`CRF_COLUMNS`' cells of a :func:`crf_quality` row."""
    mix = row["mix"]
    return [
        f"{row['CRF AP whole']:.3f}",
        harness.pm(mix["AP whole"]),
        harness.pm(mix["AP first half"]),
        harness.pm(mix["AP second half"]),
    ]


def save(module: str, stem: str, argv, lines: list[str], **fields) -> str:
    """What an exploration does with its table: ``lines`` (markdown) and ``fields`` (JSON),
    stamped with ``python -m benchmarks.exploration.MODULE ARGV``, the footer appended, saved
    as ``benchmarks/results/STEM.{json,md}``; the markdown, footer included."""
    result = {**harness.stamp(harness.command(f"exploration.{module}", argv)), **fields}
    text = "\n".join([*lines, *harness.footer(result)])
    harness.save(harness.RESULTS, stem, result, text + "\n")
    return text


def finish(module: str, stem: str, argv, args, lines: list[str], **fields) -> int:
    """The end of an exploration of cached scout outputs: :func:`save`, with ``args.cache`` as
    the result's ``source``, and the markdown printed; 0, the exit status."""
    print(save(module, stem, argv, lines, source=str(args.cache), **fields))
    return 0


def schedule_scouts(cache: Path) -> list[Path]:
    """The cached outputs of ``scout_schedule``'s scouts in ``cache``: one per seed and
    schedule (``scout-all-SEED-EPOCHS-minilm-auto[-lrRATE].npz``), not an ensemble's other
    members (``-mJ``) nor the scouts of another encoder; SystemExit when there are none."""
    pattern = re.compile(r"scout-all-\d+-\d+-minilm-auto(-lr[0-9.e-]+)?\.npz")
    files = sorted(p for p in cache.glob("scout-all-*.npz") if pattern.fullmatch(p.name))
    if not files:
        raise SystemExit(f"no cached scouts in {cache}: run scout_schedule first")
    return files
