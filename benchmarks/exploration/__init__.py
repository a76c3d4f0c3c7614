"""One-off explorations (some on lent GPU machines): kept so that every figure they gave has its
command. Not benchmarks of the harness (no smoke tests); their results are in
benchmarks/results/ with the command that made them."""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
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


def mix_ap_on_draw(examples, scout_gold, crf_gold, flags) -> dict[str, float]:
    """``{"AP whole": AP}``: the real-error AP on a draw's ``examples`` of the served score of a
    CRF's p(gold) (``crf_gold``) mixed with a cached scout's (``scout_gold``), against the
    draw's ``flags`` (shape (n,))."""
    from subregweigh.crf import mix_gold
    from subregweigh.options import SOFTMIN_TEMPERATURE

    quality = harness.served_score(examples, mix_gold(scout_gold, crf_gold), SOFTMIN_TEMPERATURE)
    return half_aps(quality, flags, {"whole": slice(None)})


def crf_cells(row: dict) -> list[str]:
    """:data:`CRF_COLUMNS`' cells of a :func:`crf_quality` row."""
    mix = row["mix"]
    return [
        f"{row['CRF AP whole']:.3f}",
        harness.pm(mix["AP whole"]),
        harness.pm(mix["AP first half"]),
        harness.pm(mix["AP second half"]),
    ]


# The cached scouts a CRF study mixes with: an ensemble of MEMBERS scouts of EPOCHS epochs.
MEMBERS, EPOCHS = 3, 3


def ensemble_golds(args, original) -> list[list]:
    """Per seed, the cached ensemble's p(gold) of every word of the whole set: the mean of
    :data:`MEMBERS` scouts of :data:`EPOCHS` epochs (``args.cache``, ``args.seeds``)."""
    import numpy as np

    from benchmarks.review_loop import scout_outputs, whole_set_settings

    settings = whole_set_settings(args.cache, EPOCHS)
    out = []
    for seed in range(args.seeds):
        members = [scout_outputs(settings, seed, original, j) for j in range(MEMBERS)]
        out.append([np.mean([m[0][i] for m in members], axis=0) for i in range(len(original))])
    return out


def drawn_golds(args, original) -> list[tuple]:
    """Per seed, the indices of ``args.draws`` sentences drawn (the real-error benchmark's
    draws) and one cached scout's p(gold) of every word of them, as the product trains one below
    2,000 annotations."""
    from benchmarks.real_errors import draw
    from benchmarks.review_loop import scout_outputs, whole_set_settings

    settings = whole_set_settings(args.cache, EPOCHS)
    settings.size = str(args.draws)
    out = []
    for seed in range(args.seeds):
        pick = draw(settings.size, seed, len(original))
        gold, _, _ = scout_outputs(settings, seed, [original[i] for i in pick])
        out.append((pick, gold))
    return out


def crf_study_parser(doc: str, name: str) -> argparse.ArgumentParser:
    """:func:`cache_parser` with what a study of the product's CRF against the cached scouts
    takes: ``--draws`` (also this many sentences drawn per seed), ``--threads``, ``--name``
    (the result's stem, default ``name``); the study adds what it varies."""
    parser = cache_parser(doc)
    parser.add_argument("--draws", type=int, help="also this many sentences drawn per seed")
    parser.add_argument("--threads", type=int, help="torch threads")
    parser.add_argument("--name", default=name)
    return parser


@dataclass(frozen=True)
class CrfStudy:
    """What a CRF study scores against (:func:`crf_study`).

    Attributes
    ----------
    original : list of Example
        CoNLL-2003 test as annotated.
    flags : ndarray of bool, shape (n,)
        Which sentences CoNLL++ corrects.
    parts : dict
        The whole set and its halves as slices (:func:`real_error_halves`).
    scouts : list
        Per seed, the cached ensemble's p(gold) of every word (:func:`ensemble_golds`).
    draws : list of (indices, p(gold))
        Per seed, ``--draws`` sentences drawn and one cached scout's p(gold) of them
        (:func:`drawn_golds`); [] without ``--draws``.
    draw_size : int
        ``--draws``: the sentences of a draw (0: none drawn).
    """

    original: list
    flags: object
    parts: dict
    scouts: list
    draws: list
    draw_size: int = 0

    @property
    def draws_name(self) -> str:
        """The draws in words, ``"1000-sentence draws"``; "" without them."""
        return f"{self.draw_size}-sentence draws" if self.draw_size else ""

    def quality(self, crf_gold) -> dict:
        """:func:`crf_quality` of a CRF's p(gold) of every word of the whole set."""
        return crf_quality(self.original, crf_gold, self.scouts, self.flags, self.parts)

    def drawn(self):
        """Per draw: ``(examples, pick, scout_gold)``, the drawn sentences, their indices and
        the cached scout's p(gold) of them."""
        return [([self.original[i] for i in pick], pick, gold) for pick, gold in self.draws]

    def intro(self, varied: str, seeds: int, on_draws: str = "") -> str:
        """The first sentences of the study's table: the set, its base rate, and what the rows
        give (``varied``: what the CRF is trained with in each row; ``seeds``: the scouts'),
        then, with draws, the CRF's mix on them with one scout, and ``on_draws``."""
        from benchmarks.real_errors import halves_base_rate

        drawn = (
            f"; on {self.draws_name}, its mix with one cached scout per seed{on_draws}"
            if self.draw_size
            else ""
        )
        return (
            f"CoNLL-2003 test against CoNLL++. {halves_base_rate(self.flags)} The product's CRF "
            f"trained on the whole set as annotated with {varied}: its own AP, and its mix with "
            f"the cached scouts ({MEMBERS} scouts of {EPOCHS} epochs, mean ± sd over {seeds} "
            f"seeds){drawn}"
        )

    def mix_on_draw(self, pick, scout_gold, crf_gold) -> dict[str, float]:
        """:func:`mix_ap_on_draw` of a CRF's p(gold) of the draw ``pick``."""
        examples = [self.original[i] for i in pick]
        return mix_ap_on_draw(examples, scout_gold, crf_gold, self.flags[pick])


def crf_study(args) -> CrfStudy:
    """Start a CRF study (:func:`benchmarks.harness.start` with ``args.threads``) and read what
    it scores against: the real-error set, the cached scouts, the draws."""
    harness.start(args.threads)
    original, flags, parts = real_error_halves()
    draws = drawn_golds(args, original) if args.draws else []
    return CrfStudy(original, flags, parts, ensemble_golds(args, original), draws, args.draws or 0)


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
