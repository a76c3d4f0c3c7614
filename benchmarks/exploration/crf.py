"""A CRF over cased word features beside the uncased scout: does its p(gold) rank real errors
better, at which penalty and share, and is it the case that helps?

For every scout that ``benchmarks.exploration.scout_schedule`` cached (15: 3 seeds x 5
schedules, trained on CoNLL-2003 test as annotated), and for each schedule's 3-seed ensemble,
the real-error AP (against CoNLL++) of the served score (soft minimum over entity parts) on the
scout's p(gold) alone against its mix ``(1 - share) * scout + share * CRF`` with CRFs
(``subregweigh.crf.FeatureTagger``) trained on the same sentences: at the L2 penalties c2 0.1,
0.3, 1 and 3; at 0.3 on lowercased words (no case: what the uncased scout sees), and out of
fold (5 folds, each CRF predicting the fifth it did not train on). On the whole set and each
half (a choice read on the other half), with the paired difference from the scout alone. The
CRFs are deterministic; the scouts are not retrained::

    python -m benchmarks.exploration.scout_schedule --cache /tmp/review-loop 3 5 3:1.5e-4 \\
        3:6e-4 5:1.5e-4
    python -m benchmarks.exploration.crf --cache /tmp/review-loop
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from benchmarks import harness
from benchmarks.exploration import cache_parser, finish, real_error_halves, schedule_scouts
from benchmarks.real_errors import halves_base_rate
from benchmarks.review_loop import cached_outputs
from subregweigh.crf import FeatureTagger, mix_gold
from subregweigh.options import SOFTMIN_TEMPERATURE

NAME = "crf"
PENALTIES = (0.1, 0.3, 1.0, 3.0)
SHARES = (0.25, 0.5, 0.75)
FOLDS = 5


def out_of_fold(examples, c2: float, seed: int = 0) -> list[np.ndarray]:
    """Each example's CRF p(gold) from a CRF trained on the other ``FOLDS - 1`` folds."""
    fold = np.random.default_rng(seed).integers(0, FOLDS, len(examples))
    gold: list = [None] * len(examples)
    for k in range(FOLDS):
        held = np.flatnonzero(fold == k)
        tagger = FeatureTagger(c2=c2).fit([ex for ex, f in zip(examples, fold) if f != k])
        for i, g in zip(held, tagger.gold_proba([examples[i] for i in held])):
            gold[i] = g
    return gold


def crf_variants(examples) -> dict[str, tuple[list, float]]:
    """Name -> (each example's CRF p(gold), training seconds)."""
    out = {}
    for c2 in PENALTIES:
        began = time.perf_counter()
        tagger = FeatureTagger(c2=c2).fit(examples)
        out[f"c2 {c2:g}"] = (tagger.gold_proba(examples), time.perf_counter() - began)
    for name, params in {
        "c2 0.3, word features only (the CRF before 2026-11-28)": {"context_dims": 0},
        "c2 0.3, context from the last layer": {"context_layer": 6},  # the MiniLM's 6th
        "c2 0.3, context from the embeddings": {"context_layer": 0},
    }.items():
        began = time.perf_counter()
        tagger = FeatureTagger(**params).fit(examples)
        out[name] = (tagger.gold_proba(examples), time.perf_counter() - began)
    lowered = [dataclasses.replace(ex, words=tuple(w.lower() for w in ex.words)) for ex in examples]
    began = time.perf_counter()
    tagger = FeatureTagger().fit(lowered)
    out["c2 0.3, lowercased words"] = (tagger.gold_proba(lowered), time.perf_counter() - began)
    began = time.perf_counter()
    out[f"c2 0.3, out of fold ({FOLDS} folds)"] = (
        out_of_fold(examples, 0.3),
        time.perf_counter() - began,
    )
    return out


def main(argv=None) -> int:
    parser = cache_parser(__doc__, seeds=False)
    parser.add_argument("--name", default=NAME, help=f"the results' name (default: {NAME})")
    args = parser.parse_args(argv)
    original, flags, cuts = real_error_halves()
    files = schedule_scouts(args.cache)
    scouts = {p.stem.removeprefix("scout-all-"): cached_outputs(p, original)[0] for p in files}
    schedules = sorted({name.split("-", 1)[1] for name in scouts})
    ensembles = {
        schedule: [
            np.mean(words, axis=0)
            for words in zip(
                *(g for name, g in scouts.items() if name.split("-", 1)[1] == schedule)
            )
        ]
        for schedule in schedules
    }

    def ap(gold) -> dict[str, float]:
        quality = harness.served_score(original, gold, SOFTMIN_TEMPERATURE)
        return {half: harness.ranking(quality[cut], flags[cut])["ap"] for half, cut in cuts.items()}

    alone = {name: ap(g) for name, g in scouts.items()}
    alone_ensembles = {name: ap(g) for name, g in ensembles.items()}
    rows = [
        [
            "the scout alone",
            "",
            *(harness.pm(harness.mean_sd([a[h] for a in alone.values()])) for h in cuts),
            "",
            harness.pm(harness.mean_sd([a["whole"] for a in alone_ensembles.values()])),
            "",
        ]
    ]
    summary = {"scout alone": alone, "ensembles alone": alone_ensembles, "variants": {}}
    for variant, (crf, seconds) in crf_variants(original).items():
        crf_ap = ap(crf)
        rows.append(
            [
                f"CRF alone, {variant}",
                "",
                *(f"{crf_ap[h]:.3f}" for h in cuts),
                "",
                "",
                f"{seconds:.1f}",
            ]
        )
        summary["variants"][variant] = {"crf alone": crf_ap, "seconds": seconds, "shares": {}}
        for share in SHARES:
            got = {name: ap(mix_gold(g, crf, share)) for name, g in scouts.items()}
            got_ensembles = {name: ap(mix_gold(g, crf, share)) for name, g in ensembles.items()}
            diff = np.array([got[n]["whole"] - alone[n]["whole"] for n in scouts])
            halves_higher = [int(sum(got[n][h] > alone[n][h] for n in scouts)) for h in cuts]
            rows.append(
                [
                    f"scout + CRF, {variant}",
                    f"{share:g}",
                    *(harness.pm(harness.mean_sd([g[h] for g in got.values()])) for h in cuts),
                    f"{diff.mean():+.3f} ({'/'.join(map(str, halves_higher))})",
                    harness.pm(harness.mean_sd([g["whole"] for g in got_ensembles.values()])),
                    "",
                ]
            )
            summary["variants"][variant]["shares"][str(share)] = {
                "scouts": got,
                "ensembles": got_ensembles,
            }
    header = [
        "p(gold)",
        "CRF share",
        *(f"{half} AP" for half in cuts),
        "whole: vs the scout alone (scouts higher: whole/first/second)",
        f"{len(ensembles)} three-scout ensembles, whole AP",
        "CRF s",
    ]
    lines = [
        "## A CRF over cased word features beside the scout: real errors, CoNLL-2003 test "
        "against CoNLL++",
        "",
        f"{halves_base_rate(flags)} AP of the served score (soft minimum at "
        f"{SOFTMIN_TEMPERATURE} over entity parts) mean ± sd over {len(scouts)} cached scouts "
        f"({', '.join(scouts)}) and over the {len(ensembles)} schedules' three-seed ensembles; "
        "the p(gold) of each word is the scout's, or `(1 - share) * scout + share * CRF`. "
        "*vs the scout alone*: the mean paired difference on the whole set, and how many of "
        f"the {len(scouts)} scouts rank higher on the whole set and on each half. CRF s: "
        "training and predicting, one core.",
        "",
        *harness.table(header, rows),
        "",
    ]
    return finish(
        "crf", args.name, argv, args, lines, scouts=[p.name for p in files], summary=summary
    )


if __name__ == "__main__":
    raise SystemExit(main())
