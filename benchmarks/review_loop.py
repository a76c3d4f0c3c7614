"""The review loop as a detector: how many REAL errors a reviewer finds for the sentences read.

A reviewer works through CoNLL-2003 test (as annotated) in rounds of ``--batch`` sentences, the
most doubtful first, and decides each against CoNLL++: an erroneous sentence is fixed, a correct
one confirmed. Reported: the share of the errors found after reviewing as many sentences as there
are errors (x1) and twice as many (x2), the curve of errors found against sentences reviewed, and
each round's cost, for:

* ``static``: the scout's ranking (the served default, deterministic p(gold)), read top down;
* ``propagate``: after each round, every unreviewed sentence that annotates a word form as a
  fixed sentence's original annotation did, in the spans the fix changed (a capitalised word or
  an entity word), has its score multiplied by ``--boost``: the same convention slip elsewhere
  moves up. No retraining: a round costs milliseconds.

One scout per seed (``random_state=s``) on the run's sentences (``--size``: ``all`` or a seeded
subsample), as the real-error benchmark trains it.

    python -m benchmarks.review_loop --size 1000          # 3 seeds
    python -m benchmarks.review_loop --size all

Smoke test: ``python -m benchmarks.review_loop --size 80 --seeds 1 --epochs 1 --batch 5 --out
/tmp/loop``.
"""

from __future__ import annotations

import time

import numpy as np

from benchmarks import harness
from benchmarks.real_errors import draw, load_pair, min_gold, scout
from subregweigh.compare import span_changes

NAME = "review_loop"
POLICIES = ("static", "propagate")


def parse_args(argv=None):
    parser = harness.arguments(__doc__, name=None)
    parser.add_argument("--size", default="1000", help="'all' or a sentence count (default 1000)")
    parser.add_argument("--seeds", type=int, default=harness.SEEDS, help="(default: 3)")
    parser.add_argument("--epochs", type=int, help="(default: the scout's)")
    parser.add_argument("--batch", type=int, default=50, help="sentences a round (default: 50)")
    parser.add_argument("--boost", type=float, default=0.5, help="(default: 0.5)")
    parser.add_argument("--model", help="encoder (default: the offline MiniLM)")
    parser.add_argument("--device", help="(default: the scout's choice)")
    harness.add_precision_argument(parser)
    args = parser.parse_args(argv)
    args.learning_rate = None
    args.name = args.name or f"review-loop-{args.size}"
    return args


def convention_keys(original, corrected) -> set[tuple[str, str]]:
    """The (word, entity type or O) pairs of ``original`` in the spans the correction changed,
    for words that can carry a convention (capitalised, or inside an entity)."""
    keys = set()
    for change in span_changes(original.label, corrected.label):
        _, start, end = change.original or change.corrected
        for j in range(start, end):
            word, kind = original.words[j], original.label[j].split("-", 1)[-1]
            if word[:1].isupper() or kind != "O":
                keys.add((word, kind))
    return keys


def review(quality, flags, original, corrected, batch: int, boost: float | None) -> list[dict]:
    """Rounds of ``batch`` until every sentence is read; per round the sentences read, the errors
    found so far and the seconds the rescoring took. ``boost`` None: static."""
    score = np.asarray(quality, dtype=float).copy()
    n = len(score)
    by_key: dict = {}
    for i, ex in enumerate(original):
        for key in {(w, t.split("-", 1)[-1]) for w, t in zip(ex.words, ex.label)}:
            by_key.setdefault(key, []).append(i)
    reviewed = np.zeros(n, dtype=bool)
    rounds = []
    while not reviewed.all():
        began = time.perf_counter()
        open_ = np.flatnonzero(~reviewed)
        picked = open_[np.argsort(score[open_], kind="stable")[:batch]]
        reviewed[picked] = True
        if boost is not None:
            for i in picked[flags[picked]]:  # fixed: the same slip elsewhere moves up
                for key in convention_keys(original[i], corrected[i]):
                    for j in by_key.get(key, ()):
                        if not reviewed[j]:
                            score[j] *= boost
        rounds.append(
            {
                "reviewed": int(reviewed.sum()),
                "found": int(flags[reviewed].sum()),
                "seconds": time.perf_counter() - began,
            }
        )
    return rounds


def found_after(rounds, n_reviewed: int) -> int:
    """Errors found once at least ``n_reviewed`` sentences were read."""
    return next(r["found"] for r in rounds if r["reviewed"] >= n_reviewed)


def run_seed(args, seed: int, pair) -> dict:
    original, corrected, all_flags = pair
    pick = draw(args.size, seed, len(original))
    examples = [original[i] for i in pick]
    fixed = [corrected[i] for i in pick]
    flags = all_flags[pick]
    fitted, train_s = harness.timed(scout(args, seed).fit, examples)
    quality = min_gold(examples, fitted.labels_, fitted.predict_proba(examples))
    n_errors = int(flags.sum())
    if not n_errors:
        raise ValueError(
            f"the {len(examples)} sentences of seed {seed} hold no error: a larger --size"
        )
    out = {"seed": seed, "n": len(examples), "n_errors": n_errors, "scout_seconds": train_s}
    for policy in POLICIES:
        rounds = review(
            quality, flags, examples, fixed, args.batch, args.boost if policy != "static" else None
        )
        out[policy] = {
            "found_x1": found_after(rounds, n_errors) / n_errors,
            "found_x2": found_after(rounds, 2 * n_errors) / n_errors,
            "round_seconds": float(np.mean([r["seconds"] for r in rounds])),
            "curve": [(r["reviewed"], r["found"]) for r in rounds],
        }
    return out


def summarize(runs) -> dict:
    return {
        policy: harness.summarize_rows(
            [run[policy] for run in runs], ("found_x1", "found_x2", "round_seconds")
        )
        for policy in POLICIES
    }


def markdown(result) -> str:
    cfg, runs = result["config"], result["runs"]
    lines = [
        "## The review loop on real errors: CoNLL-2003 test against CoNLL++",
        "",
        f"{runs[0]['n']} sentences ({cfg['size']}), {runs[0]['n_errors']} erroneous in the first "
        f"draw; rounds of {cfg['batch']}; propagate boost {cfg['boost']}. Share of the errors "
        f"found, mean ± sd over {len(runs)} seeds.",
        "",
        *harness.table(
            ["policy", "found after reading x1 errors", "x2", "rescoring s/round"],
            [
                [
                    p,
                    harness.pm(s["found_x1"]),
                    harness.pm(s["found_x2"]),
                    f"{s['round_seconds']['mean']:.4f}",
                ]
                for p, s in result["summary"].items()
            ],
        ),
        "",
        "![errors found against sentences reviewed](" + f"{cfg['name']}.png)",
        "",
        *harness.footer(result),
    ]
    return "\n".join(lines) + "\n"


def plot(result, path) -> None:
    with harness.figure(path) as ax:
        for policy, style in zip(POLICIES, ("-", "--")):
            for k, run in enumerate(result["runs"]):
                xs, ys = zip(*run[policy]["curve"])
                ax.plot(
                    xs,
                    np.array(ys) / run["n_errors"],
                    style,
                    color=f"C{k}",
                    label=f"{policy}, seed {run['seed']}",
                )
        ax.axvline(2 * result["runs"][0]["n_errors"], color="grey", lw=0.8)
        ax.set_xlabel("sentences reviewed")
        ax.set_ylabel("share of the errors found")
        ax.legend(fontsize=7)


def main(argv=None) -> int:
    args = parse_args(argv)
    harness.start(args.threads)
    pair = load_pair()
    runs = []
    for seed in range(args.seeds):
        runs.append(run_seed(args, seed, pair))
        result = {
            **harness.stamp(harness.command(NAME, argv)),
            "config": harness.config(args),
            "complete": len(runs) == args.seeds,
            "summary": summarize(runs),
            "runs": runs,
        }
        harness.save(args.out, args.name, result, markdown(result))
        plot(result, args.out / f"{args.name}.png")
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
