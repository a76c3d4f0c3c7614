"""Scores of successive versions on one scale (issue 61, item 3): does a filter such as
``score < 0.5`` keep its meaning across a retrain, and how stable is the flagged set?

For each data set of real errors (``--data``: CoNLL-2003 test against CoNLL++, the crowd's
tweets of slot 0 and 1, :func:`benchmarks.real_errors.load_pair`) and seed ``s``, a project of
``--size`` sentences is drawn with ``s`` and the product's scorer trained on it three times, each
a *version* (``SubRegWeigh.fit``, then its deterministic score, ``weigh_deterministic``: what a
training's stored scores are; the product's CRF and scouts for this size, no K views):

* ``A``, the version before: seed ``s``;
* ``retrain``: the same annotations, another seed (``s + RETRAIN_SEED``): how much of a version's
  flagged set is the seed's alone (the backend trains every version from one seed,
  ``backend.serving.weighers.SEED``, so there it is the floor of what a retrain changes);
* ``grown``: ``--grow`` (10%) more annotations drawn from the rest of the data set, seed ``s``
  (the backend's fixed seed): a retrain after the annotators went on.

Each version's scores are mapped by each calibration (:data:`CALIBRATIONS`), fitted on that
version's own tasks (the grown version's included), and read on the ``--size`` sentences the
versions share:

* ``none``: the raw scores;
* ``estimate``: the monotone piecewise-linear map through (0, 0), (t, 0.5) and (1, 1), t the
  version's q-quantile, q its estimated error rate ``mean(1 - score)``
  (:func:`subregweigh.report.score_summary`'s estimate): the share under 0.5 becomes q;
* ``crf``: the same with q the share of tasks the CRF's own tagging (Viterbi) labels otherwise
  than their annotation: the CRF's estimate of the error rate;
* ``scouts``: the same with q the share of tasks the scouts' own tagging (the argmax of their
  mean distribution) labels otherwise;
* ``served``: the same with q the share of tasks the version's served tagging labels otherwise,
  what the product serves (:func:`subregweigh.scale.fit_scale`; ``WeighResult.majority``: the
  most probable tags of the mixture p(gold) is read from, the scouts' with the CRF's, or the
  CRF's with the memory where the product rests on it; what it suggests instead).

Reported per calibration, mean ± sd over the seeds: each version's q and its share under 0.5
against the true base rate (the share of erroneous sentences), the Jaccard of two versions'
under-0.5 sets (beside a chance level: two random sets of the same sizes) and the overlap of
their 20 lowest (A against the retrain, A against the grown),
the spread of the 20 lowest scores (the highest less the lowest), and the AP, which a monotone
map leaves as it is (asserted).

    python -m benchmarks.version_scale --threads 2        # 300 sentences, 3 seeds, 3 data sets

Smoke test (a minute): ``python -m benchmarks.version_scale --data conllpp --size 60 --seeds 1
--epochs 1 --out /tmp/version-scale-smoke``.
"""

from __future__ import annotations

import time

import numpy as np

from benchmarks import harness
from benchmarks.real_errors import DATA_SETS, add_scout_arguments, load_pair, scout_options
from subregweigh.build import build_weigher
from subregweigh.scale import THRESHOLD, disagreements, scale_at
from subregweigh.weigh import SubRegWeigh

NAME = "version_scale"
LOWEST = 20  # the lowest scores compared: the issue's "top 20"
RETRAIN_SEED = 500  # a retrain's seed is s + RETRAIN_SEED
VERSIONS = ("A", "retrain", "grown")
PAIRS = (("A", "retrain"), ("A", "grown"))
CALIBRATIONS = ("none", "estimate", "crf", "scouts", "served")


def parse_args(argv=None):
    parser = harness.arguments(__doc__, name="version-scale")
    parser.add_argument(
        "--data",
        nargs="+",
        choices=DATA_SETS,
        default=list(DATA_SETS),
        help="the data sets of real errors (default: all three)",
    )
    parser.add_argument("--size", type=int, default=300, help="a project's sentences (300)")
    parser.add_argument(
        "--grow", type=float, default=0.1, help="the grown version's share more (default: 0.1)"
    )
    parser.add_argument("--seeds", type=int, default=harness.SEEDS, help="(default: 3)")
    add_scout_arguments(parser)
    args = parser.parse_args(argv)
    args.max_steps = None  # scout_options reads it: the product's training budget
    return args


# ----------------------------------------------------------------------------- calibration


def quantile_map(score, q: float) -> np.ndarray:
    """``score`` (shape (n,), in [0, 1]) through the product's map whose knot is its
    ``q``-quantile (:func:`subregweigh.scale.scale_at`): strictly increasing, so the order and
    its ties stay; the share under 0.5 becomes that under the knot, about q."""
    return scale_at(score, q)(np.asarray(score, dtype=float))


def disagreement(examples, tagging) -> float:
    """The share of ``examples`` whose ``tagging`` (one tag sequence each) differs from their
    annotation (:func:`subregweigh.scale.disagreements`)."""
    return float(disagreements([ex.label for ex in examples], tagging).mean())


# ----------------------------------------------------------------------------- one version


def train_version(args, examples, seed: int) -> dict:
    """The product's version trained on ``examples`` with ``seed``: its deterministic scores
    (shape (n,)), each calibration's q, and its seconds (wall and CPU)."""

    def fit_and_score():
        options = {**scout_options(args, seed), "crf": args.crf}
        srw: SubRegWeigh = build_weigher(options, "ner", progress=False).fit(examples)
        served = srw.weigh_deterministic(examples)
        return srw, served

    (srw, served), wall, cpu = harness.timed_cpu(fit_and_score)
    score = served.score("deterministic")
    labels = list(srw.scout_.labels_)
    scouts_tagging = [[labels[j] for j in p.argmax(axis=1)] for p in served.scout_proba]
    q = {
        "none": None,
        "estimate": float(np.mean(1.0 - score)),
        "crf": disagreement(examples, srw.crf_.predict(examples)) if srw.crf_ else None,
        "scouts": disagreement(examples, scouts_tagging),
        "served": disagreement(examples, served.majority),
    }
    calibrated = {
        name: score if name == "none" else quantile_map(score, q[name])
        for name in CALIBRATIONS
        if name == "none" or q[name] is not None
    }
    return {
        "q": q,
        "calibrated": calibrated,
        "rests_on_crf": bool(srw.rests_on_crf_),
        "seconds": wall,
        "cpu_seconds": cpu,
    }


# ----------------------------------------------------------------------------- one run


def lowest(score, k: int = LOWEST) -> np.ndarray:
    """The indices of the ``k`` lowest of ``score`` (ties by index)."""
    return np.argsort(np.asarray(score), kind="stable")[:k]


def jaccard(a: set, b: set) -> float:
    """|a & b| / |a | b|; 1 when both are empty."""
    return len(a & b) / len(a | b) if a | b else 1.0


def chance_jaccard(a: int, b: int, n: int) -> float:
    """About the Jaccard of two independent random subsets of sizes ``a`` and ``b`` of ``n``
    (their expected intersection ``a b / n`` over the expected union); 1 when both are empty:
    a larger flagged set overlaps more by chance alone."""
    shared = a * b / n
    return shared / (a + b - shared) if a + b else 1.0


def run_one(args, data: str, seed: int, pair) -> dict:
    """One project of ``data`` drawn with ``seed``: its three versions, and each calibration's
    measures on the sentences they share."""
    original, _, flags = pair
    n = len(original)
    pick = harness.sample_indices(n, args.size, seed)
    rest = np.setdiff1d(np.arange(n), pick)
    extra = np.random.default_rng(seed).choice(rest, int(round(args.grow * args.size)), False)
    grown = np.sort(np.concatenate([pick, extra]))
    shared_in_grown = np.searchsorted(grown, pick)  # where the shared sentences sit there
    started = time.perf_counter()
    versions = {
        "A": train_version(args, [original[i] for i in pick], seed),
        "retrain": train_version(args, [original[i] for i in pick], seed + RETRAIN_SEED),
        "grown": train_version(args, [original[i] for i in grown], seed),
    }
    shared = {"A": slice(None), "retrain": slice(None), "grown": shared_in_grown}
    truth = flags[pick]
    out = {}
    for name in CALIBRATIONS:
        if any(name not in v["calibrated"] for v in versions.values()):
            continue
        scores = {v: versions[v]["calibrated"][name][shared[v]] for v in VERSIONS}
        raw = {v: versions[v]["calibrated"]["none"][shared[v]] for v in VERSIONS}
        ap = {v: harness.ranking(scores[v], truth)["ap"] for v in VERSIONS}
        for v in VERSIONS:  # a monotone map leaves the ranking as it is
            raw_ap = harness.ranking(raw[v], truth)["ap"]
            assert abs(ap[v] - raw_ap) < 1e-12, (name, v, ap[v], raw_ap)
        under = {v: set(np.flatnonzero(scores[v] < THRESHOLD).tolist()) for v in VERSIONS}
        low = {v: set(lowest(scores[v]).tolist()) for v in VERSIONS}
        share = {v: float(np.mean(scores[v] < THRESHOLD)) for v in VERSIONS}
        spread = {v: float(np.ptp(np.sort(scores[v])[:LOWEST])) for v in VERSIONS}
        base = float(truth.mean())
        out[name] = {
            **{f"q_{v}": versions[v]["q"][name] for v in VERSIONS if name != "none"},
            **{f"share_{v}": share[v] for v in VERSIONS},
            "share_error": float(np.mean([abs(share[v] - base) for v in VERSIONS])),
            **{f"jaccard_{b}": jaccard(under[a], under[b]) for a, b in PAIRS},
            **{
                f"chance_{b}": chance_jaccard(len(under[a]), len(under[b]), len(truth))
                for a, b in PAIRS
            },
            **{f"overlap_{b}": len(low[a] & low[b]) / LOWEST for a, b in PAIRS},
            "spread": float(np.mean([spread[v] for v in VERSIONS])),
            "lowest_max": float(np.mean([np.sort(scores[v])[LOWEST - 1] for v in VERSIONS])),
            "ap": float(np.mean([ap[v] for v in VERSIONS])),
        }
    return {
        "data": data,
        "seed": seed,
        "n": int(args.size),
        "n_grown": int(len(grown)),
        "base_rate": float(truth.mean()),
        "rests_on_crf": {v: versions[v]["rests_on_crf"] for v in VERSIONS},
        "seconds": {v: round(versions[v]["seconds"], 2) for v in VERSIONS},
        "cpu_seconds": {v: round(versions[v]["cpu_seconds"], 2) for v in VERSIONS},
        "wall_seconds": round(time.perf_counter() - started, 2),
        "calibrations": out,
    }


# ----------------------------------------------------------------------------- summary, page

KEYS = (
    "q_A",
    "share_A",
    "share_retrain",
    "share_grown",
    "share_error",
    "jaccard_retrain",
    "jaccard_grown",
    "chance_retrain",
    "chance_grown",
    "overlap_retrain",
    "overlap_grown",
    "spread",
    "lowest_max",
    "ap",
)


def summarize(runs) -> dict:
    out = {}
    for data in dict.fromkeys(r["data"] for r in runs):
        these = [r for r in runs if r["data"] == data]
        names = [c for c in CALIBRATIONS if all(c in r["calibrations"] for r in these)]
        out[data] = {
            "n": these[0]["n"],
            "base_rate": harness.mean_sd([r["base_rate"] for r in these]),
            "rests_on_crf": sum(r["rests_on_crf"]["A"] for r in these),
            "n_runs": len(these),
            "cpu_seconds": round(sum(sum(r["cpu_seconds"].values()) for r in these), 1),
            "calibrations": {
                c: harness.summarize_rows([r["calibrations"][c] for r in these], KEYS)
                for c in names
            },
        }
    return out


HEADER = (
    "calibration",
    "q (A)",
    "share < 0.5: A / retrain / grown",
    "mean abs(share - base rate)",
    "Jaccard under 0.5: retrain / grown",
    "by chance: retrain / grown",
    "20 lowest shared: retrain / grown",
    "spread of the 20 lowest",
    "20th lowest",
    "AP",
)


def markdown(result) -> str:
    cfg = result["config"]
    lines = [
        "## Scores of successive versions on one scale (issue 61)",
        "",
        f"Projects of {cfg['size']} sentences; three versions each of the product's "
        "deterministic score (the CRF and scouts for this size): A (seed s), a retrain on the "
        f"same annotations with another seed, and a version with {cfg['grow']:.0%} more "
        "annotations (seed s). Each calibration is fitted on each version's own tasks and read "
        f"on the {cfg['size']} the versions share. Mean ± sd over {cfg['seeds']} seeds. A "
        "share under 0.5 and a Jaccard are of the tasks under 0.5; the 20 lowest shared: the "
        "share of A's 20 lowest among the other version's 20 lowest.",
    ]
    for data, s in result["summary"].items():
        lines += [
            "",
            f"### {DATA_SETS[data]}",
            "",
            f"Base rate {harness.pm(s['base_rate'])}; the product rested on the CRF in "
            f"{s['rests_on_crf']} of {s['n_runs']} versions A; {s['cpu_seconds']:.0f} CPU "
            "seconds for its versions.",
            "",
        ]
        rows = []
        for name, m in s["calibrations"].items():
            rows.append(
                [
                    name,
                    harness.pm(m["q_A"]) if "q_A" in m else "",
                    " / ".join(f"{m[f'share_{v}']['mean']:.3f}" for v in VERSIONS),
                    harness.pm(m["share_error"]),
                    " / ".join(harness.pm(m[f"jaccard_{v}"], 2) for v in VERSIONS[1:]),
                    " / ".join(f"{m[f'chance_{v}']['mean']:.2f}" for v in VERSIONS[1:]),
                    " / ".join(harness.pm(m[f"overlap_{v}"], 2) for v in VERSIONS[1:]),
                    harness.pm(m["spread"]),
                    harness.pm(m["lowest_max"]),
                    harness.pm(m["ap"]),
                ]
            )
        lines += harness.table(HEADER, rows)
    return harness.document(lines, result)


def main(argv=None) -> int:
    args = parse_args(argv)
    harness.start(args.threads)
    pairs: dict = {}

    def run(data: str, seed: int) -> dict:
        return run_one(args, data, seed, pairs.setdefault(data, load_pair(data)))

    planned = [(data, seed) for data in args.data for seed in range(args.seeds)]
    harness.run_planned(args, NAME, argv, planned, run, summarize, markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
