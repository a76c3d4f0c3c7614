"""Final-model benchmark: does weighting the loss help a model trained on noisy CoNLL-2003?

The paper's main claim (Tsuji et al. 2025, Table 2): a NER model trained with the loss ``w * L``,
``w`` from SubRegWeigh, scores higher on the corrected CoNLL++ test set than one trained on the
noisy data as it is. Per seed ``s`` (0, 1, ...): a random subset of ``--examples`` CoNLL-2003
training sentences (seed ``s``), the paper's noise (``--rate`` of all word labels replaced, seed
``s``), then one final :class:`~subregweigh.scout.Scout` (the scout's default settings,
``random_state=s``) per weighting:

* ``vanilla``: every weight 1. This is the SubRegWeigh scout itself (the same training: same
  data, settings, seed and unit weights), so it costs no extra training;
* ``agreement``: ``max(w_min, c/K)``, the paper's weight, from that scout's weighing (K-means);
* ``probability``: ``max(w_min, probability)``, the probability score of the same weighing
  (mean over the K candidates of the lowest p(gold tag) over the words);
* ``agreement-normalized``, ``probability-normalized``: the same weights divided by their mean
  over the training sentences (mean 1). The loss is ``mean(w * L)`` over a batch, so weights
  below 1 also shrink every step (with the paper's noise most sentences are corrupted and the
  mean weight is far below 1); these keep the relative weights at vanilla's step size, to tell
  "learns less from doubtful sentences" from "learns less";
* ``crossweigh``: CrossWeigh's ``0.7 ** mistakes`` (10 folds x 3 iterations of the same scout;
  30 trainings, so only for ``--crossweigh-seeds``, default seed 0);
* ``clean``: the same sentences without noise, weights 1 (the noise-free reference).

Reported, mean ± sd over the seeds: entity F1 (seqeval, IOB2 strict) of each final model on the
CoNLL++ test set (``conllpp_test.txt``, 3,453 sentences, the corrected test set) and the clean
CoNLL-2003 dev set (``conllpp_dev.txt``, 3,250); the F1 difference to vanilla on the same seed;
the detection AP of the weights against the noise flags (how much of the noise the weights
see); wall times (scout + weighing, CrossWeigh, each final training, evaluation).

Results: ``benchmarks/results/NAME.json`` and ``NAME.md`` (default NAME ``final-model-conll``),
rewritten after every finished (seed, weighting), and ``NAME.weights.json``, the weights of each
seed (so a resumed run does not weigh again). ``--resume`` keeps what the JSON holds, skips the
(seed, weighting) pairs already there and runs the rest; without it an existing result is not
overwritten (``--force`` starts over). ``--weightings`` chooses what one command runs; the
results count as complete when every seed has every weighting (CrossWeigh: its seeds).

The full result, in three commands (each continues the one before; the first is the paper's
question, the second its baseline, the third the diagnostics):

    python -m benchmarks.final_model --threads 1 --weightings vanilla agreement probability
    python -m benchmarks.final_model --threads 1 --resume --weightings crossweigh
    python -m benchmarks.final_model --threads 1 --resume

Times measured on this project's shared 2-core CPU at one thread while other jobs kept it busy
(load 5 to 7): 300 sentences, 1 seed: scout 153 s, weighing 51 s, a further final training 85 s,
evaluation 45 s per model and set; 1,000 sentences: scout 443 s. Estimates at 1,000 sentences:
about 25 min per seed for vanilla/agreement/probability (75 min for 3 seeds), 8 min per seed for
each normalized weighting and for clean (50 min in all), and 2 to 2.5 h for CrossWeigh's 30
trainings on about 600 sentences each, plus its final model: about 5 h in all.
Smoke run (about a minute):

    python -m benchmarks.final_model --examples 40 --epochs 1 --n-samples 20 -k 5 --seeds 1 \\
        --cw-folds 2 --cw-iterations 1 --test-limit 50 --out /tmp/final-smoke
"""

from __future__ import annotations

import json
import logging
import sys

import numpy as np
from tqdm.auto import tqdm

from benchmarks.crossweigh import add_crossweigh_arguments, crossweigh_of
from benchmarks.harness import (
    SEEDS,
    add_view_arguments,
    arguments,
    atomic_write,
    command,
    config,
    corrupt,
    document,
    load,
    mean_base_rate,
    mean_sd,
    now,
    pm,
    ranking,
    read_dataset,
    stamp,
    start,
    table,
    timed,
    view_params,
)
from subregweigh.metrics import entity_f1
from subregweigh.scores import sample_weights
from subregweigh.scout import Scout
from subregweigh.weigh import SubRegWeigh

logger = logging.getLogger("final_model")

EVAL_SETS = {  # name -> harness data set
    "test": "conllpp-test",  # CoNLL++: the corrected test set
    "dev": "conllpp-dev",  # the original (clean) CoNLL-2003 dev set
}
WEIGHTINGS = (
    "vanilla",
    "agreement",
    "probability",
    "agreement-normalized",
    "probability-normalized",
    "crossweigh",
    "clean",
)
# the SubRegWeigh weightings and the score each one comes from
FROM_SRW = {
    w: w.split("-")[0] for w in WEIGHTINGS if w.split("-")[0] in ("agreement", "probability")
}
LABELS = {
    "vanilla": "vanilla (w = 1)",
    "agreement": "c/K: max(w_min, c/K)",
    "probability": "probability: max(w_min, p)",
    "agreement-normalized": "c/K, divided by its mean",
    "probability-normalized": "probability, divided by its mean",
    "crossweigh": "CrossWeigh: 0.7^mistakes",
    "clean": "clean data (no noise), w = 1",
}
# Settings that must agree for --resume to continue a result (the rest may change).
SAME_ON_RESUME = (
    "examples",
    "rate",
    "epochs",
    "n_samples",
    "k",
    "p",
    "method",
    "w_min",
    "cw_folds",
    "cw_iterations",
    "model",
    "test_limit",
    "dev",
)
DIGITS = 6  # weights are rounded to this before training, so a resumed run trains on the same


def parse_args(argv=None):
    parser = arguments(__doc__, name="final-model-conll")
    parser.add_argument("--examples", type=int, default=1000, help="sentences (default: 1000)")
    parser.add_argument("--rate", type=float, default=0.1, help="paper noise rate (default: 0.1)")
    parser.add_argument("--seeds", type=int, default=SEEDS, help="seeds 0..SEEDS-1 (default: 3)")
    parser.add_argument(
        "--weightings",
        nargs="+",
        choices=WEIGHTINGS,
        default=list(WEIGHTINGS),
        help="what this command runs (default: all)",
    )
    parser.add_argument("--crossweigh-seeds", type=int, nargs="*", default=[0], help="(default: 0)")
    parser.add_argument("--epochs", type=int, help="scout and final model (default: 3)")
    add_view_arguments(parser)
    parser.add_argument("--w-min", type=float, default=1 / 3, help="weight floor (default: 1/3)")
    add_crossweigh_arguments(parser)
    parser.add_argument("--model", help="scout model (default: the offline MiniLM)")
    parser.add_argument("--test-limit", type=int, help="evaluate on the first N sentences only")
    parser.add_argument("--no-dev", dest="dev", action="store_false", help="skip the dev set")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--resume", action="store_true", help="continue an existing result")
    group.add_argument("--force", action="store_true", help="replace an existing result")
    args = parser.parse_args(argv)
    bad = [s for s in args.crossweigh_seeds if not 0 <= s < args.seeds]
    if bad:
        parser.error(f"--crossweigh-seeds {bad} outside 0..{args.seeds - 1}")
    return args


def planned(args) -> list[tuple[int, str]]:
    """Every (seed, weighting) of the full result, in the order they run: per seed everything
    but CrossWeigh (they share the scout), then CrossWeigh (the expensive part) last."""
    plan = [(s, w) for s in range(args.seeds) for w in WEIGHTINGS if w != "crossweigh"]
    return plan + [(s, "crossweigh") for s in args.crossweigh_seeds]


def evaluate(model: Scout, sets: dict) -> dict:
    """Entity precision, recall and F1 of ``model`` on each evaluation set, and the time."""
    out = {}
    for name, examples in sets.items():
        predicted, seconds = timed(model.predict, examples)
        scores = entity_f1([ex.label for ex in examples], predicted)
        out[name] = {**scores, "seconds": round(seconds, 2)}
    return out


def weight_detection(weights, corrupted) -> dict:
    """How the weights separate the corrupted sentences (lower weight = more doubtful)."""
    w = np.asarray(weights, dtype=float)
    return {
        **ranking(w, corrupted),
        "mean_weight_clean": float(w[~corrupted].mean()),
        "mean_weight_corrupted": float(w[corrupted].mean()) if corrupted.any() else float("nan"),
    }


class Benchmark:
    """The result being built: finished runs, each seed's weights, and the files they go to."""

    def __init__(self, args, command: str):
        self.args = args
        self.json_path = args.out / f"{args.name}.json"
        self.weights_path = args.out / f"{args.name}.weights.json"
        self.config = {
            k: v
            for k, v in config(args).items()
            if k not in ("resume", "force", "out", "name", "weightings")
        }
        self.commands = [command]
        self.runs: list[dict] = []
        self.weighings: dict[str, dict] = {}  # seed -> {"srw": {...}, "crossweigh": {...}}
        self.weights: dict[str, dict] = {}  # seed -> weighting -> list of float
        if self.json_path.exists():
            if not (args.resume or args.force):
                raise SystemExit(
                    f"{self.json_path} exists: --resume continues it, --force starts over"
                )
            if args.resume:
                self._load()

    def _load(self) -> None:
        old = json.loads(self.json_path.read_text())
        differ = {
            k: (old["config"].get(k), self.config.get(k))
            for k in SAME_ON_RESUME
            if old["config"].get(k) != self.config.get(k)
        }
        if differ:
            raise SystemExit(
                f"--resume: settings differ from {self.json_path} (old, new): {differ}"
            )
        self.commands = old["commands"] + self.commands
        self.runs = old["runs"]
        self.weighings = old["weighings"]
        if self.weights_path.exists():
            self.weights = json.loads(self.weights_path.read_text())

    def done(self, seed: int, weighting: str) -> bool:
        return any(r["seed"] == seed and r["weighting"] == weighting for r in self.runs)

    def cached_weights(self, seed: int, weighting: str):
        return self.weights.get(str(seed), {}).get(weighting)

    def add_weights(self, seed: int, kind: str, info: dict, weights: dict) -> None:
        self.weighings.setdefault(str(seed), {})[kind] = info
        self.weights.setdefault(str(seed), {}).update(
            {k: [round(float(x), DIGITS) for x in v] for k, v in weights.items()}
        )
        self.write()

    def add_run(self, run: dict) -> None:
        self.runs.append(run)
        self.write()

    def result(self) -> dict:
        plan = planned(self.args)
        missing = [(s, w) for s, w in plan if not self.done(s, w)]
        return {
            "benchmark": "final model trained on noisy CoNLL-2003, entity F1",
            "commands": self.commands,
            **stamp(),
            "config": self.config,
            "complete": not missing,
            "planned_runs": len(plan),
            "finished_runs": len(plan) - len(missing),
            "missing": [{"seed": s, "weighting": w} for s, w in missing],
            "summary": summarize(self.runs),
            "weighings": self.weighings,
            "runs": self.runs,
        }

    def write(self) -> dict:
        result = self.result()
        self.args.out.mkdir(parents=True, exist_ok=True)
        atomic_write(self.weights_path, json.dumps(self.weights) + "\n")
        atomic_write(self.json_path, json.dumps(result, indent=2) + "\n")
        atomic_write(self.args.out / f"{self.args.name}.md", markdown(result))
        return result


def run_seed(args, bench: Benchmark, seed: int, todo: list[str], eval_sets: dict) -> None:
    """Run the (seed, weighting) pairs of ``todo`` for one seed; each is saved when finished."""
    _, clean = load("conll", args.examples, seed)
    noisy, corrupted = corrupt(clean, "ner", "paper", args.rate, seed)
    settings = Scout(model=args.model, epochs=args.epochs, random_state=seed, progress=False)

    def finish(weighting, model, train_seconds, weights=None, weighing_seconds=0.0):
        run = {
            "seed": seed,
            "weighting": weighting,
            "n_corrupted": int(corrupted.sum()),
            "base_rate": float(corrupted.mean()),
            "eval": evaluate(model, eval_sets),
            "train_seconds": round(train_seconds, 2),
            "weighing_seconds": round(weighing_seconds, 2),
            "weights": weight_detection(weights, corrupted) if weights is not None else None,
            "date": now(),
        }
        bench.add_run(run)
        logger.info(
            "seed %d %s: test F1 %.4f%s (training %.0f s, weighing %.0f s)",
            seed,
            weighting,
            run["eval"]["test"]["f1"],
            f", dev F1 {run['eval']['dev']['f1']:.4f}" if "dev" in run["eval"] else "",
            train_seconds,
            weighing_seconds,
        )

    def train(weights):
        final = Scout(**settings.get_params())
        return timed(final.fit, noisy, sample_weight=np.asarray(weights, dtype=float))

    need_srw = any(bench.cached_weights(seed, FROM_SRW[w]) is None for w in todo if w in FROM_SRW)
    if "vanilla" in todo or need_srw:
        srw = SubRegWeigh(
            settings,
            **view_params(args),
            w_min=args.w_min,
            random_state=seed,
            progress=False,
            n_scouts=1,  # the weights are c/K, the first scout's: more would only cost time
        )
        _, scout_s = timed(srw.fit, noisy)  # unit weights: also the vanilla final model
        if "vanilla" in todo:
            finish("vanilla", srw.scout_, scout_s, np.ones(len(noisy)))
        if need_srw:
            weighed, weigh_s = timed(srw.weigh, noisy)
            scores = {"agreement": weighed.reliability, "probability": weighed.probability}
            info = {
                "scout_seconds": round(scout_s, 2),
                "weigh_seconds": round(weigh_s, 2),
                "seconds": round(scout_s + weigh_s, 2),
                "score_detection": {k: ranking(v, corrupted) for k, v in scores.items()},
            }
            bench.add_weights(
                seed, "srw", info, {k: sample_weights(v, args.w_min) for k, v in scores.items()}
            )
    for weighting in FROM_SRW:
        if weighting in todo:
            weights = np.asarray(bench.cached_weights(seed, FROM_SRW[weighting]))
            if weighting.endswith("-normalized"):
                weights = weights / weights.mean()
            final, seconds = train(weights)
            finish(weighting, final, seconds, weights, bench.weighings[str(seed)]["srw"]["seconds"])
    if "clean" in todo:
        final, seconds = timed(Scout(**settings.get_params()).fit, clean)
        finish("clean", final, seconds)
    if "crossweigh" in todo:
        if bench.cached_weights(seed, "crossweigh") is None:
            cw, seconds = timed(crossweigh_of(settings, args, seed).weigh, noisy)
            info = {
                "seconds": round(seconds, 2),
                "score_detection": {"crossweigh": ranking(cw.reliability, corrupted)},
            }
            bench.add_weights(seed, "crossweigh", info, {"crossweigh": cw.weight})
        weights = bench.cached_weights(seed, "crossweigh")
        final, seconds = train(weights)
        finish(
            "crossweigh",
            final,
            seconds,
            weights,
            bench.weighings[str(seed)]["crossweigh"]["seconds"],
        )


def summarize(runs) -> dict:
    """Per weighting, mean/sd over seeds; ``delta_test_f1``: F1 minus vanilla's on each seed."""
    vanilla = {r["seed"]: r for r in runs if r["weighting"] == "vanilla"}
    out = {}
    for weighting in WEIGHTINGS:
        rows = sorted((r for r in runs if r["weighting"] == weighting), key=lambda r: r["seed"])
        if not rows:
            continue
        stats = {
            "seeds": [r["seed"] for r in rows],
            **{
                f"{name}_{metric}": mean_sd([r["eval"][name][metric] for r in rows])
                for name in rows[0]["eval"]
                for metric in ("f1", "precision", "recall")
            },
            "train_seconds": mean_sd([r["train_seconds"] for r in rows]),
            "weighing_seconds": mean_sd([r["weighing_seconds"] for r in rows]),
        }
        paired = [r for r in rows if r["seed"] in vanilla]
        if weighting != "vanilla" and paired:
            stats["delta_test_f1"] = mean_sd(
                [r["eval"]["test"]["f1"] - vanilla[r["seed"]]["eval"]["test"]["f1"] for r in paired]
            )
        if rows[0]["weights"] is not None:
            for key in ("ap", "mean_weight_clean", "mean_weight_corrupted"):
                stats[f"weight_{key}"] = mean_sd([r["weights"][key] for r in rows])
        out[weighting] = stats
    return out


def cell(stats: dict, key: str, digits: int = 3, scale: float = 1.0) -> str:
    stat = stats.get(key)
    if stat is None:
        return "-"
    stat = {**stat, "mean": stat["mean"] * scale, "sd": stat["sd"] * scale}
    return pm(stat, digits)


def markdown(result) -> str:
    cfg = result["config"]
    summary = result["summary"]
    runs = result["runs"]
    limit = f", first {cfg['test_limit']} sentences" if cfg["test_limit"] else ""
    lines = [
        f"## Final model on noisy CoNLL-2003: {cfg['examples']} sentences, "
        f"{cfg['rate']:.0%} of the word labels replaced (paper noise)",
        "",
        f"Scout and final models: {cfg['model'] or 'the offline MiniLM'}, "
        f"{cfg['epochs'] or 'default (3)'} epochs; SubRegWeigh K={cfg['k']} ({cfg['method']}), "
        f"N={cfg['n_samples']}, p={cfg['p']}, w_min={cfg['w_min']:.3g}; CrossWeigh "
        f"{cfg['cw_folds']}x{cfg['cw_iterations']}. Seed = subset, noise, scout and final model; "
        "vanilla is the scout itself. Entity F1 (seqeval, IOB2 strict, x100) on the CoNLL++ test "
        f"set{limit}" + (" and the CoNLL-2003 dev set" if cfg["dev"] else "") + "; mean ± sd "
        "over the seeds listed; Δ = test F1 minus vanilla's on the same seed. Weight AP: the "
        "weights as a detector of the corrupted sentences (lower = more doubtful).",
        "",
    ]
    if not result["complete"]:
        missing = ", ".join(f"{m['weighting']} seed {m['seed']}" for m in result["missing"])
        lines += [
            f"**Incomplete**: {result['finished_runs']} of {result['planned_runs']} "
            f"(seed, weighting) runs; missing: {missing}.",
            "",
        ]
    header = ["weighting", "seeds", "test F1", "Δ test F1 vs vanilla"]
    header += ["dev F1"] if cfg["dev"] else []
    header += ["weight AP", "mean weight clean / corrupted", "weighing (s)", "final training (s)"]
    rows = []
    for weighting, stats in summary.items():
        means = "-"
        if "weight_mean_weight_clean" in stats:
            means = (
                f"{cell(stats, 'weight_mean_weight_clean')} / "
                f"{cell(stats, 'weight_mean_weight_corrupted')}"
            )
        rows.append(
            [
                LABELS[weighting],
                ", ".join(map(str, stats["seeds"])),
                cell(stats, "test_f1", 2, 100),
                cell(stats, "delta_test_f1", 2, 100),
                *([cell(stats, "dev_f1", 2, 100)] if cfg["dev"] else []),
                cell(stats, "weight_ap"),
                means,
                "-" if weighting in ("vanilla", "clean") else cell(stats, "weighing_seconds", 0),
                cell(stats, "train_seconds", 0),
            ]
        )
    lines += table(header, rows, align="ll" + "r" * (len(header) - 2))
    if runs:
        per_seed = {r["seed"]: r for r in runs}  # the same subset and noise in every run
        base = mean_base_rate(list(per_seed.values()))
        corrupted = mean_sd([r["n_corrupted"] for r in per_seed.values()])
        lines += [
            "",
            f"Corrupted sentences: {pm(corrupted, 1)} of {cfg['examples']} (base rate, the AP of "
            f"a random ranking: {pm(base)}).",
        ]
        raw = {}  # score -> AP of the score itself, before the floor w_min
        for weighing in result["weighings"].values():
            for info in weighing.values():
                for score, detection in info["score_detection"].items():
                    raw.setdefault(score, []).append(detection["ap"])
        if raw:
            lines.append(
                "AP of the scores themselves (before the floor w_min): "
                + ", ".join(f"{k} {pm(mean_sd(v))} (n={len(v)})" for k, v in raw.items())
                + "."
            )
        seeds = sorted({r["seed"] for r in runs})
        lines += ["", "Test F1 per seed:", ""]
        rows = []
        for weighting in summary:
            f1 = {r["seed"]: r["eval"]["test"]["f1"] for r in runs if r["weighting"] == weighting}
            rows.append(
                [LABELS[weighting]] + [f"{100 * f1[s]:.2f}" if s in f1 else "-" for s in seeds]
            )
        lines += table(["weighting", *(f"seed {s}" for s in seeds)], rows)
        evals = [e["seconds"] for r in runs for e in r["eval"].values()]
        lines += ["", f"Evaluation: {np.mean(evals):.0f} s per model and set on average."]
    return document(lines, result)


def main(argv=None) -> int:
    args = parse_args(argv)
    start(args.threads)
    bench = Benchmark(args, command("final_model", argv))
    eval_sets = {name: read_dataset(data)[1][: args.test_limit] for name, data in EVAL_SETS.items()}
    if not args.dev:
        del eval_sets["dev"]
    todo = [(s, w) for s, w in planned(args) if w in args.weightings and not bench.done(s, w)]
    logger.info("%d (seed, weighting) runs to do: %s", len(todo), todo)
    # per seed everything but CrossWeigh first (they share the scout), then CrossWeigh
    for seed in tqdm(sorted({s for s, w in todo if w != "crossweigh"}), desc="seeds", unit="seed"):
        first = [w for s, w in todo if s == seed and w != "crossweigh"]
        run_seed(args, bench, seed, first, eval_sets)
    for seed in sorted(s for s, w in todo if w == "crossweigh"):
        run_seed(args, bench, seed, ["crossweigh"], eval_sets)
    result = bench.write()
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
