"""The resting score's CRF penalty: where the scouts learned too little, the deterministic score is
the CRF's with the project's memory (``rest_on_crf``); which L2 penalty should that CRF train at?

For each data set and project size, 3 seeds (the whole set: one, the CRF being deterministic),
a CRF (``subregweigh.crf.FeatureTagger(c2=)``) trained on the annotations as given, at each
penalty, scored as the product scores a resting weigher (``SubRegWeigh.from_parts([], crf,
memory)`` at ``RESTING_MEMORY_STRENGTH``): the real-error AP, P@20 and the missed entities'
median rank (``benchmarks.real_errors.missing_rank``). No scout is trained; the CRF's context
vectors come from the offline MiniLM. CoNLL++ is listed for what a CRF alone does on news;
the scouts there learn enough, and its deterministic score does not rest on the CRF::

    python -m benchmarks.exploration.resting_crf --threads 1
"""

from __future__ import annotations

import argparse

from benchmarks import harness
from benchmarks.exploration import save
from benchmarks.real_errors import draw, load_pair, missing_rank
from subregweigh.compare import span_changes
from subregweigh.crf import FeatureTagger
from subregweigh.memory import WordMemory
from subregweigh.options import RESTING_MEMORY_STRENGTH
from subregweigh.weigh import SubRegWeigh

NAME = "resting-crf"
PENALTIES = (0.01, 0.03, 0.1, 0.3, 1.0)
PROJECTS = (("tweets-0", "300"), ("tweets-0", "all"), ("tweets-1", "300"), ("tweets-1", "all"))
PROJECTS += (("conllpp", "300"),)
METRICS = ("ap", "p20", "missing_rank")


def run(data: str, size: str, seed: int, penalties) -> dict[float, dict]:
    """Per penalty, the resting score's metrics on one draw."""
    original, corrected, all_flags = load_pair(data)
    pick = draw(size, seed, len(original))
    examples, flags = [original[i] for i in pick], all_flags[pick]
    kinds = [{c.kind for c in span_changes(original[i].label, corrected[i].label)} for i in pick]
    memory = WordMemory.of(examples)
    base = FeatureTagger(max_iterations=1).fit(examples)  # the context projection, once
    out = {}
    for c2 in penalties:
        weigher = SubRegWeigh.from_parts(
            [],
            base.refit(examples, max_iterations=FeatureTagger().max_iterations, c2=c2),
            memory,
            memory_strength=RESTING_MEMORY_STRENGTH,
            progress=False,
        )
        quality = weigher.weigh_deterministic(examples).score("deterministic")
        out[c2] = {
            "ap": harness.ranking(quality, flags)["ap"],
            "p20": harness.precision_at(quality, flags, 20),
            "missing_rank": missing_rank(quality, kinds),
            "base_rate": float(flags.mean()),
        }
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=harness.SEEDS)
    parser.add_argument("--penalties", type=float, nargs="+", default=list(PENALTIES))
    parser.add_argument("--threads", type=int, help="torch threads")
    parser.add_argument("--name", default=NAME)
    args = parser.parse_args(argv)
    harness.start(args.threads)
    rows = {}
    for data, size in PROJECTS:
        seeds = 1 if size == "all" else args.seeds
        runs = [run(data, size, seed, args.penalties) for seed in range(seeds)]
        rows[f"{data} {size}"] = {
            "base_rate": harness.mean_sd([r[args.penalties[0]]["base_rate"] for r in runs]),
            "runs": seeds,
            "penalties": {
                f"{c2:g}": harness.summarize_rows([r[c2] for r in runs], METRICS)
                for c2 in args.penalties
            },
        }
        print(data, size, rows[f"{data} {size}"], flush=True)
    lines = [
        "## The resting score's CRF penalty (the CRF with the project's memory)",
        "",
        f"Each cell: real-error AP / P@20 / missed entities' median rank (lower: found "
        f"sooner), mean ± sd over the runs; memory strength {RESTING_MEMORY_STRENGTH:g}. "
        "tweets-0 and tweets-1: one crowd worker's labels of the Broad Twitter Corpus "
        "against the experts' (judgment slot 0 and 1); conllpp: CoNLL-2003 test against "
        "CoNLL++.",
        "",
    ]
    lines += harness.table(
        ["project", "runs", "base rate", *(f"c2 {c2:g}" for c2 in args.penalties)],
        [
            [
                name,
                row["runs"],
                harness.pm(row["base_rate"]),
                *(
                    " / ".join(harness.pm(row["penalties"][f"{c2:g}"][m]) for m in METRICS)
                    for c2 in args.penalties
                ),
            ]
            for name, row in rows.items()
        ],
    )
    lines.append("")
    print(save("resting_crf", args.name, argv, lines, config=vars(args), rows=rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
