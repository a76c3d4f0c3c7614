"""Encoders side by side on real errors: the MiniLM, a base-sized encoder (all-mpnet-base-v2),
their mix, each beside the CRF. Which configuration reaches AP 0.40 on CoNLL-2003 test against
CoNLL++, for how much training?

Reads the scouts that earlier runs cached (3 seeds each, trained on the whole test set as
annotated, this 2-core CPU): the default MiniLM (``scout-all-SEED-3-minilm-auto``, from
``scout_schedule``), the other members of its three-scout ensembles (``-m1``, ``-m2``, from
``real_errors --ensemble 3 --cache``), and all-mpnet-base-v2 at learning rate 1e-4 for 5
epochs (``benchmarks.exploration.mpnet``'s run, the defaults a wider encoder now gets). The
p(gold) of each word is averaged over the scouts listed, then half and half with the CRF's
where ``+ CRF`` says (``subregweigh.crf.mix_gold``), and ranked by the served score (soft
minimum over entity parts) and by cleanlab's in-sample quality on the same p(gold) (its lowest
word). Baselines read no model. Nothing is retrained but the CRF (deterministic)::

    python -m benchmarks.exploration.encoders --cache /tmp/review-loop
"""

from __future__ import annotations

import numpy as np

from benchmarks import harness
from benchmarks.baselines import consistency_scores
from benchmarks.exploration import cache_parser, finish, real_error_halves
from benchmarks.real_errors import halves_base_rate
from benchmarks.review_loop import cached_outputs
from subregweigh.crf import FeatureTagger, mix_gold
from subregweigh.options import SOFTMIN_TEMPERATURE

NAME = "encoders"
MPNET = "5-all-mpnet-base-v2-auto-lr0.0001"
# name -> (the cached scouts averaged, with the CRF)
CONFIGURATIONS = {
    "MiniLM": (("3-minilm-auto",), False),
    "MiniLM + CRF (the default)": (("3-minilm-auto",), True),
    "3 MiniLM + CRF (SRW_SCOUTS=3)": (
        ("3-minilm-auto", "m1-3-minilm-auto", "m2-3-minilm-auto"),
        True,
    ),
    "mpnet": ((MPNET,), False),
    "mpnet + CRF (SRW_MODEL=mpnet)": ((MPNET,), True),
    "MiniLM + mpnet": (("3-minilm-auto", MPNET), False),
    "MiniLM + mpnet + CRF": (("3-minilm-auto", MPNET), True),
}


def main(argv=None) -> int:
    args = cache_parser(__doc__).parse_args(argv)
    original, flags, cuts = real_error_halves()
    kinds = {kind for scouts, _ in CONFIGURATIONS.values() for kind in scouts}
    needed = {f"{seed}-{kind}" for seed in range(args.seeds) for kind in kinds}
    files = {key: args.cache / f"scout-all-{key}.npz" for key in sorted(needed)}
    missing = [str(p) for p in files.values() if not p.exists()]
    if missing:
        raise SystemExit(f"cached scouts missing: {', '.join(missing)}")
    outputs = {key: cached_outputs(path, original) for key, path in files.items()}
    crf = FeatureTagger().fit(original).gold_proba(original)

    def measures(quality) -> dict[str, float]:
        got = {half: harness.ranking(quality[cut], flags[cut])["ap"] for half, cut in cuts.items()}
        whole = harness.ranking(quality, flags)
        return got | {"P@50": whole["precision_at_50"], "R-precision": whole["r_precision"]}

    summary, rows = {}, []
    for name, (kinds, with_crf) in CONFIGURATIONS.items():
        per_seed = []
        for seed in range(args.seeds):
            members = [outputs[f"{seed}-{kind}"] for kind in kinds]
            gold = [np.mean(words, axis=0) for words in zip(*(m[0] for m in members))]
            if with_crf:
                gold = mix_gold(gold, crf)
            served = measures(harness.served_score(original, gold, SOFTMIN_TEMPERATURE))
            lowest = harness.ranking(np.array([g.min() for g in gold]), flags)["ap"]
            per_seed.append(served | {"cleanlab": lowest, "seconds": sum(m[2] for m in members)})
        summary[name] = harness.summarize_rows(per_seed, list(per_seed[0]))
        stats = summary[name]
        rows.append(
            [name]
            + [harness.pm(stats[c]) for c in (*cuts, "P@50", "R-precision", "cleanlab")]
            + [f"{stats['seconds']['mean']:.0f}"]
        )
    crf_alone = measures(harness.served_score(original, crf, SOFTMIN_TEMPERATURE))
    summary["CRF alone"] = crf_alone
    shown = (*cuts, "P@50", "R-precision")
    rows.append(["CRF alone", *(f"{crf_alone[c]:.3f}" for c in shown), "", ""])
    baselines = {
        f"baseline: {name}": quality
        for name, quality in harness.trivial_baselines(original, "ner", 0).items()
    }
    baselines["baseline: consistency"] = consistency_scores(original, "ner")
    for name, quality in baselines.items():
        got = measures(np.asarray(quality, dtype=float))
        summary[name] = got
        rows.append([name, *(f"{got[c]:.3f}" for c in shown), "", ""])
    lines = [
        "## Encoders side by side on real errors: CoNLL-2003 test against CoNLL++",
        "",
        f"{halves_base_rate(flags)} Mean ± sd over {args.seeds} seeds of each scout, as cached "
        "(trained on the whole set as annotated, this 2-core CPU, bfloat16). The p(gold) of each "
        "word is the mean of the scouts named, half and half with the CRF's where `+ CRF` says; "
        f"AP of the served score (soft minimum at {SOFTMIN_TEMPERATURE} over entity parts) on "
        "the whole set and each half, its P@50 and R-precision on the whole set, and "
        "cleanlab's in-sample quality (the lowest p(gold)) on the same p(gold). *s*: the "
        "scouts' training seconds as cached (the mpnet scouts trained while CI ran beside "
        "them). The CRF and the baselines are deterministic.",
        "",
        *harness.table(
            [
                "p(gold)",
                *(f"{half} AP" for half in cuts),
                "P@50",
                "R-precision",
                "cleanlab AP",
                "s",
            ],
            rows,
        ),
        "",
    ]
    return finish(
        "encoders",
        NAME,
        argv,
        args,
        lines,
        scouts=sorted(p.name for p in files.values()),
        summary=summary,
    )


if __name__ == "__main__":
    raise SystemExit(main())
