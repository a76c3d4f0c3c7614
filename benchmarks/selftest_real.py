"""Does the self-test tell the truth? Its figure beside the real errors' on the same projects.

A lead who runs the self-test (``subregweigh selftest``, ``POST /selftest``) reads its AP as how
far the flags can be trusted. Here each project is one of the real-error benchmark's
(:mod:`benchmarks.real_errors`: CoNLL-2003 test against CoNLL++, or the crowd's tweets
against the experts', drawn at each size with the run's seed), annotated as its annotators left
it. For each run:

* **real**: the product (its default options, ``rest_on_crf`` as given) trained on the
  annotations ranks them; AP against the real errors, beside the base rate;
* **self-test, NOISE**: :func:`subregweigh.selftest.self_test` of the same annotations with
  each noise kind at the product's rate (10%): the AP it reports against its base rate. The
  project's own errors count as clean there, as in the product.

The closer a noise's AP (over its base rate) comes to the real one's, the more truthfully the
self-test speaks. It also writes the mix of real error kinds of each data set (the entity
changes of :func:`subregweigh.compare.change_counts`), which
:data:`subregweigh.noise.ANNOTATOR_MIX` averages.

    python -m benchmarks.selftest_real                       # CoNLL++ and both tweet slots
    python -m benchmarks.selftest_real --data tweets-0 --sizes 300 --seeds 1

Smoke test: ``python -m benchmarks.selftest_real --data tweets-0 --sizes 40 --seeds 1
--epochs 1 --noises annotators --out /tmp/selftest-real-smoke``.
"""

from __future__ import annotations

import argparse

from benchmarks import harness
from benchmarks.real_errors import DATA_SETS, draw, load_pair
from subregweigh.build import build_weigher
from subregweigh.compare import CHANGE_KINDS, change_counts
from subregweigh.options import BY_NAME, NOISES
from subregweigh.selftest import self_test

NAME = "selftest_real"


def parse_args(argv=None):
    parser = harness.arguments(__doc__, name="selftest-real")
    parser.add_argument(
        "--data", nargs="+", choices=DATA_SETS, default=list(DATA_SETS), help="(default: all)"
    )
    parser.add_argument(
        "--sizes",
        nargs="+",
        type=int,
        default=[300, 1000],
        help="annotations per project; a size over a data set's takes all of it "
        "(default: 300 1000)",
    )
    parser.add_argument("--seeds", type=int, default=harness.SEEDS, help="(default: 3)")
    parser.add_argument(
        "--noises", nargs="+", choices=NOISES, default=list(NOISES), help="(default: all)"
    )
    parser.add_argument("--rate", type=float, default=0.1, help="the self-test's (default: 0.1)")
    parser.add_argument("--epochs", type=int, help="(default: the scout's)")
    parser.add_argument(
        "--rest-on-crf",
        action=argparse.BooleanOptionalAction,
        default=BY_NAME["rest_on_crf"].default,
        help="the product's policy (SubRegWeigh(rest_on_crf=); default: the product's)",
    )
    return parser.parse_args(argv)


def error_mix(data: str) -> dict:
    """The real errors' entity changes of ``data`` by kind: counts and shares."""
    original, corrected, flags = load_pair(data)
    counts = change_counts(original, corrected)
    total = sum(counts.values())
    return {
        "sentences": len(original),
        "erroneous": int(flags.sum()),
        "counts": {kind: counts[kind] for kind in CHANGE_KINDS},
        "shares": {kind: counts[kind] / total for kind in CHANGE_KINDS},
    }


def run_one(args, data: str, size: int, seed: int, pair) -> dict:
    original, _, all_flags = pair
    size = min(size, len(original))
    pick = draw("all" if size == len(original) else str(size), seed, len(original))
    examples, flags = [original[i] for i in pick], all_flags[pick]
    options = {"seed": seed, "epochs": args.epochs, "rest_on_crf": args.rest_on_crf}

    def product():
        return build_weigher(options, "ner", progress=False)

    def real():
        srw = product().fit(examples)
        return srw.weigh_deterministic(examples).score("deterministic"), srw

    (quality, srw), seconds = harness.timed(real)
    rows = {
        "real": {
            **harness.ranking(quality, flags),
            "base_rate": float(flags.mean()),
            "seconds": round(seconds, 1),
        }
    }

    def candidates_free():  # the deterministic score needs no K candidates: K=1 of 1
        return build_weigher(
            {**options, "k": 1, "n_samples": 1, "method": "random"}, "ner", progress=False
        )

    for noise in args.noises:
        tested, seconds = harness.timed(
            self_test,
            examples,
            "ner",
            candidates_free,
            noises=[noise],
            rate=args.rate,
            random_state=seed,
        )
        (got,) = tested["results"]
        rows[f"self-test, {noise}"] = {
            "ap": got["average_precision"],
            "auroc": got["auroc"],
            "base_rate": got["base_rate"],
            "seconds": round(seconds, 1),
        }
    return {
        "data": data,
        "size": size,
        "seed": seed,
        "machine": harness.machine(),
        "rests_on_crf": srw.rests_on_crf_,
        "methods": rows,
    }


def summarize(runs) -> dict:
    out = {}
    for key in dict.fromkeys((r["data"], r["size"]) for r in runs):
        these = [r for r in runs if (r["data"], r["size"]) == key]
        names = list(dict.fromkeys(m for r in these for m in r["methods"]))
        out[f"{key[0]}/{key[1]}"] = {
            "data": key[0],
            "size": key[1],
            "runs": len(these),
            "methods": {
                name: harness.summarize_rows(
                    [r["methods"][name] for r in these], ("ap", "base_rate", "seconds")
                )
                for name in names
            },
        }
    return out


def markdown(result) -> str:
    cfg = result["config"]
    lines = [
        "## The self-test beside the real errors, on the same projects",
        "",
        f"Each project is {cfg['seeds']} draws of the real-error benchmark's annotations "
        "(benchmarks.real_errors). *real*: the product's AP on its real errors; *self-test*: "
        f"the AP the self-test reports with each noise at rate {cfg['rate']:g}, the real errors "
        "counted as clean. AP over base rate (lift) compares the two. Mean ± sd over the draws.",
        "",
    ]
    rows = []
    for s in result["summary"].values():
        for name, m in s["methods"].items():
            lift = m["ap"]["mean"] / m["base_rate"]["mean"] if m["base_rate"]["mean"] else None
            rows.append(
                [
                    s["data"],
                    s["size"],
                    name,
                    harness.pm(m["ap"]),
                    harness.pm(m["base_rate"]),
                    f"{lift:.2f}" if lift is not None else "",
                    f"{m['seconds']['mean']:.0f}",
                ]
            )
    lines += harness.table(
        ["data", "annotations", "ranking", "AP", "base rate", "AP / base rate", "s"],
        rows,
        align="lrlrrrr",
    )
    lines += ["", "### The mix of real errors (entity changes by kind)", ""]
    mix_rows = [
        [data, m["sentences"], m["erroneous"]]
        + [f"{m['counts'][k]} ({m['shares'][k]:.3f})" for k in CHANGE_KINDS]
        for data, m in result["error_mix"].items()
    ]
    lines += harness.table(
        ["data", "sentences", "erroneous", *CHANGE_KINDS], mix_rows, align="lrr" + "r" * 4
    )
    return harness.document(lines, result)


def main(argv=None) -> int:
    args = parse_args(argv)
    harness.start(args.threads)
    pairs = {data: load_pair(data) for data in args.data}
    mix = {data: error_mix(data) for data in args.data}
    planned = []
    for data in args.data:  # a size over the data set's is the whole set, once
        sizes = sorted({min(size, len(pairs[data][0])) for size in args.sizes})
        planned += [(data, size, seed) for size in sizes for seed in range(args.seeds)]

    def run(data: str, size: int, seed: int) -> dict:
        return run_one(args, data, size, seed, pairs[data])

    extra = {"error_mix": mix}
    harness.run_planned(args, NAME, argv, planned, run, summarize, markdown, extra)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
