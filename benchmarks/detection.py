"""Detection benchmark: how well each score ranks the examples whose labels were corrupted.

For every project size and seed ``s`` (0, 1, ...), a random subset of ``size`` examples is drawn
with seed ``s``, label noise is injected with seed ``s`` and a scout (``random_state=s``) is fitted
on the noisy subset. Every score is a quality score (lower = more doubtful) ranked against the
corrupted flags (``harness.ranking``: AP, AUROC, the share of errors among the 50 most doubtful,
R-precision), reported as mean ± sd over the seeds:

* ``agreement c/K``: SubRegWeigh's reliability (the paper's agreement ratio);
* ``p(gold), K candidates``: mean over the K candidates of the soft minimum of p(gold) over the
  parts (NER: words; classification: the gold class), ``WeighResult.probability``;
* ``p(gold), deterministic``: the same on the ordinary segmentation only;
* ``random``, ``length`` (longest first), ``entity count`` (NER; most entities first);
* ``cleanlab in-sample``: cleanlab's label quality score on the fitted scout's probabilities
  (cleanlab's defaults: p(gold) on the ordinary segmentation, for NER its minimum over words,
  where the product takes a soft minimum; the JSON records its largest difference from the
  deterministic p(gold) at temperature 0, as a check);
* ``cleanlab 5-fold OOF``: the same on out-of-fold probabilities (one scout per fold);
* ``CrossWeigh`` (``--crossweigh``; 10 folds x 3 iterations, expensive).

Noise (``--noise``): ``sentence``, 15% of the sentences get one corruption each (retype, drop, add
or shift one entity; SST-2: flipped label); ``paper``, 10% of all CoNLL word labels replaced as in
the paper's appendix (most sentences end up corrupted); ``flip``, 10% of SST-2 labels flipped.

Wall times: SubRegWeigh rows = scout training + weighing (sampling, selection, the K candidates'
and the ordinary segmentation's forward passes); deterministic p(gold) and cleanlab in-sample =
scout training + one pass over the ordinary segmentations; OOF = its fold trainings and passes.

Each command writes ``benchmarks/results/NAME.json`` and ``NAME.md`` (after every run, so an
interrupted run leaves the finished ones, marked incomplete) and, with several sizes, ``NAME.png``
(AP against project size). NAME: ``detection-DATASET-NOISE``, ``-curve`` with several sizes,
``-cw`` with ``--crossweigh``. ``--resume`` keeps the finished runs of an earlier NAME.json made
with the same settings, so a long curve can be finished over several sessions. The full results:

    python -m benchmarks.detection --dataset conll --noise sentence
    python -m benchmarks.detection --dataset conll --noise paper
    python -m benchmarks.detection --dataset sst2 --noise flip
    python -m benchmarks.detection --dataset conll --noise sentence --sizes 100 300 1000 3000
    python -m benchmarks.detection --dataset sst2 --noise flip --sizes 100 300 1000 3000
    python -m benchmarks.detection --dataset conll --noise sentence --crossweigh

(defaults: 500 examples, 3 seeds, K=10, N=500, p=0.1, K-means, the scout's default epochs,
5 OOF folds). On a shared 2-core CPU add ``--threads 1`` (two torch threads slow down badly when
another process holds a core); estimated times at one thread: CoNLL 500 about 11 min per seed
(scout 2 min, weighing 1 min, 5 OOF scouts 8 min), so 30-35 min per CoNLL command; SST-2 500
about 6 min per seed; each ``--sizes 100 300 1000 3000`` curve about 9x its 500 command (CoNLL
about 5 h, SST-2 about 2.5 h); ``--crossweigh`` adds 15-35 min per CoNLL seed. Smoke test (about
a minute):

    python -m benchmarks.detection --sizes 60 --seeds 1 --epochs 1 --n-samples 20 -k 5 \\
        --folds 2 --out /tmp/detection-smoke
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from benchmarks.crossweigh import add_crossweigh_arguments, crossweigh_of
from benchmarks.harness import (
    DATASETS,
    NOISE,
    SEEDS,
    TOP,
    add_crf_argument,
    add_precision_argument,
    add_view_arguments,
    arguments,
    cleanlab_in_sample,
    cleanlab_out_of_fold,
    command,
    config,
    earlier_result,
    figure,
    footer,
    lowest_gold,
    machine,
    noisy_sample,
    pm,
    ranking,
    save,
    stamp,
    start,
    summarize_rows,
    table,
    timed,
    trivial_baselines,
    view_params,
)
from subregweigh.options import SOFTMIN_TEMPERATURE
from subregweigh.scout import Scout
from subregweigh.weigh import SubRegWeigh

logger = logging.getLogger("detection")

METHODS = [
    "agreement c/K",
    "p(gold), K candidates",
    "p(gold), deterministic",
    "random",
    "length",
    "entity count",
    "cleanlab in-sample",
    "cleanlab OOF",
    "CrossWeigh",
]
# what each run reports per method, summarized over the seeds (the rank metrics beyond AP and
# AUROC are absent from results made before the harness computed them)
STATS = ("ap", "auroc", f"precision_at_{TOP}", "r_precision", "seconds")


def parse_args(argv=None):
    parser = arguments(__doc__)
    parser.add_argument("--dataset", choices=DATASETS, default="conll")
    parser.add_argument("--noise", choices=NOISE, default=None, help="(default: sentence)")
    parser.add_argument("--rate", type=float, help="noise rate (default: 0.15 sentence, else 0.1)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[500], help="(default: 500)")
    parser.add_argument("--seeds", type=int, default=SEEDS, help="seeds 0..SEEDS-1 (default: 3)")
    parser.add_argument("--epochs", type=int, help="(default: the scout's, 3 NER / 2 cls.)")
    add_view_arguments(parser)
    parser.add_argument("--folds", type=int, default=5, help="cleanlab OOF folds, 0: none")
    parser.add_argument("--crossweigh", action="store_true", help="add CrossWeigh (10x3)")
    add_crossweigh_arguments(parser)
    parser.add_argument(
        "--costly-up-to",
        type=int,
        metavar="SIZE",
        help="run cleanlab OOF and CrossWeigh only at sizes <= SIZE (default: every size)",
    )
    parser.add_argument("--model", help="scout model (default: the offline MiniLM)")
    parser.add_argument(
        "--batching",
        choices=["random"],
        help="the scout's training batches: random (default: grouped by length, the scout's)",
    )
    embeddings = parser.add_mutually_exclusive_group()  # default: the scout's, by task
    embeddings.add_argument(
        "--freeze-embeddings",
        action="store_true",
        default=None,  # absent from earlier results' settings: None, as they read
        help="the scout's word embeddings frozen (the NER default since 2026-11-23)",
    )
    embeddings.add_argument(
        "--train-embeddings",
        action="store_true",
        default=None,
        help="the scout's word embeddings trained (NER results before 2026-11-23)",
    )
    parser.add_argument(
        "--freeze-layers",
        type=int,
        metavar="N",
        help="the scout's lowest N transformer layers frozen (default: the scout's, 0)",
    )
    parser.add_argument(
        "--scouts",
        type=int,
        help="scouts averaged for the deterministic p(gold) (SubRegWeigh(n_scouts=); default: the "
        "product's, 3 for NER, 1 for classification; 1 before 2026-11-28)",
    )
    parser.add_argument(
        "--softmin-temperature",
        type=float,
        help="of the scores' soft minimum over parts (default: SubRegWeigh's; 0: the minimum)",
    )
    add_crf_argument(parser)
    add_precision_argument(parser)
    parser.add_argument(
        "--resume",
        action="store_true",
        help="keep the finished runs of NAME.json (same settings) and do only the rest",
    )
    args = parser.parse_args(argv)
    args.noise = args.noise or ("sentence" if args.dataset == "conll" else "flip")
    datasets, default_rate = NOISE[args.noise]
    if args.dataset not in datasets:
        parser.error(f"--noise {args.noise} applies to {', '.join(datasets)} only")
    args.rate = default_rate if args.rate is None else args.rate
    if args.name is None:
        args.name = f"detection-{args.dataset}-{args.noise}"
        args.name += "-curve" if len(args.sizes) > 1 else ""
        args.name += "-cw" if args.crossweigh else ""
        args.name += "-random-batches" if args.batching else ""
        args.name += "-frozen-embeddings" if args.freeze_embeddings else ""
        args.name += "-trained-embeddings" if args.train_embeddings else ""
        args.name += f"-{args.freeze_layers}-frozen-layers" if args.freeze_layers else ""
        args.name += f"-{args.precision}" if args.precision != "auto" else ""
        args.name += f"-scouts{args.scouts}" if args.scouts else ""
        args.name += (
            f"-softmin-{args.softmin_temperature:g}" if args.softmin_temperature is not None else ""
        )
    return args


def frozen_embeddings(args) -> bool | None:
    """The scout's ``freeze_embeddings``: as asked, else None (its default for the task)."""
    if args.freeze_embeddings or args.train_embeddings:
        return bool(args.freeze_embeddings)
    return None


def run_one(args, size: int, seed: int) -> dict:
    """One (size, seed) run: every method's ranking metrics and wall time."""
    task, noisy, corrupted = noisy_sample(args.dataset, size, args.noise, args.rate, seed)
    scout = Scout(
        model=args.model,
        task=task,
        epochs=args.epochs,
        group_by_length=args.batching != "random",
        freeze_embeddings=frozen_embeddings(args),
        freeze_layers=args.freeze_layers or 0,
        precision=args.precision,
        random_state=seed,
        progress=False,
    )
    srw = SubRegWeigh(
        scout,
        **view_params(args),
        random_state=seed,
        progress=False,
        n_scouts=args.scouts,
        softmin_temperature=(
            SOFTMIN_TEMPERATURE if args.softmin_temperature is None else args.softmin_temperature
        ),
        crf=args.crf,
    )
    _, train_s = timed(srw.fit, noisy)
    result, weigh_s = timed(srw.weigh, noisy)
    proba, proba_s = timed(srw.scout_.predict_proba, noisy)
    in_sample, cleanlab_s = timed(cleanlab_in_sample, srw.scout_, noisy, task, proba)
    lowest = result.deterministic_probability  # one part: its soft minimum is itself
    if task == "ner":
        lowest = lowest_gold(noisy, srw.scout_.labels_, proba)

    scores = {
        "agreement c/K": (result.reliability, train_s + weigh_s),
        "p(gold), K candidates": (result.probability, train_s + weigh_s),
        "p(gold), deterministic": (result.deterministic_probability, train_s + proba_s),
        **{name: (quality, 0.0) for name, quality in trivial_baselines(noisy, task, seed).items()},
        "cleanlab in-sample": (in_sample, train_s + proba_s + cleanlab_s),
    }
    costly = args.costly_up_to is None or size <= args.costly_up_to
    if args.folds and costly:
        scores["cleanlab OOF"] = timed(
            cleanlab_out_of_fold, scout, srw.scout_.labels_, noisy, task, args.folds, seed
        )
    if args.crossweigh and costly:
        weighed, seconds = timed(crossweigh_of(scout, args, seed).weigh, noisy)
        scores["CrossWeigh"] = (weighed.reliability, seconds)

    methods = {}
    for name in METHODS:
        if name in scores:
            quality, seconds = scores[name]
            methods[name] = {**ranking(quality, corrupted), "seconds": round(seconds, 2)}
    return {
        "size": size,
        "seed": seed,
        "machine": machine(),  # a resumed file may hold runs from several machines
        "n_corrupted": int(corrupted.sum()),
        "base_rate": float(corrupted.mean()),
        "scout_seconds": round(train_s, 2),
        "weigh_seconds": round(weigh_s, 2),
        # cleanlab's defaults are the lowest p(gold) on the ordinary segmentation: the same
        "cleanlab_vs_min_gold_max_diff": float(np.max(np.abs(in_sample - lowest))),
        "methods": methods,
    }


def summarize(runs) -> dict:
    """Per size: base rate and, per method, each of STATS as mean/sd over the seeds."""
    out = {}
    for size in sorted({r["size"] for r in runs}):
        these = [r for r in runs if r["size"] == size]
        methods = {}
        for name in METHODS:
            rows = [r["methods"][name] for r in these if name in r["methods"]]
            if rows:
                methods[name] = summarize_rows(rows, STATS)
        out[str(size)] = {
            **summarize_rows(these, ("base_rate", "n_corrupted")),
            "methods": methods,
        }
    return out


# the columns of a size's table: (title, key in a method's summary); absent keys are left out
COLUMNS = (
    ("AP", "ap"),
    ("AUROC", "auroc"),
    (f"precision top {TOP}", f"precision_at_{TOP}"),
    ("R-precision", "r_precision"),
)


def markdown(result) -> str:
    cfg = result["config"]
    noise = {
        "sentence": f"{cfg['rate']:.0%} of the examples with one error each",
        "paper": f"{cfg['rate']:.0%} of the word labels replaced (paper)",
        "flip": f"{cfg['rate']:.0%} of the labels flipped",
    }[cfg["noise"]]
    lines = [
        f"## Detection: {cfg['dataset']}, {noise}",
        "",
        f"K={cfg['k']} ({cfg['method']}), N={cfg['n_samples']}, p={cfg['p']}, scout epochs "
        f"{cfg['epochs'] or 'default'}, cleanlab OOF {cfg['folds']} folds"
        + (f", CrossWeigh {cfg['cw_folds']}x{cfg['cw_iterations']}" if cfg["crossweigh"] else "")
        + (f", {cfg['scouts']} scouts averaged" if cfg.get("scouts") else "")
        + (
            ", the scout's p(gold) averaged with a CRF's"
            if cfg.get("crf") and cfg.get("dataset") == "conll"
            else ""
        )
        + (
            f", soft minimum at temperature {cfg['softmin_temperature']:g}"
            if cfg.get("softmin_temperature") is not None
            else ""
        )
        + (
            f" (OOF and CrossWeigh at sizes up to {cfg['costly_up_to']} only)"
            if cfg.get("costly_up_to")
            else ""
        )
        + (", the scout trained on random batches" if cfg.get("batching") else "")
        + (", the scout's word embeddings frozen" if cfg.get("freeze_embeddings") else "")
        + (
            f", the scout's lowest {cfg['freeze_layers']} layers frozen"
            if cfg.get("freeze_layers")
            else ""
        )
        + (", the scout's word embeddings trained" if cfg.get("train_embeddings") else "")
        + (f", the scout's precision {cfg['precision']}" if cfg.get("precision") else "")
        + f". Mean ± sd over seeds {', '.join(map(str, range(cfg['seeds'])))} (seed = subset, "
        "noise and scout). Scores rank lower quality first.",
        "",
    ]
    if not result["complete"]:
        lines += [f"**Incomplete**: {len(result['runs'])} of {result['planned_runs']} runs.", ""]
    for size, summary in result["summary"].items():
        lines += [
            f"### {size} examples: base rate {pm(summary['base_rate'])} "
            f"({pm(summary['n_corrupted'], 1)} corrupted)",
            "",
        ]
        stats = summary["methods"].values()
        columns = [(title, key) for title, key in COLUMNS if all(key in s for s in stats)]
        rows = [
            [name]
            + [pm(stat[key]) for _, key in columns]
            + [pm(stat["seconds"], 1) if stat["seconds"]["mean"] else "-"]
            for name, stat in summary["methods"].items()
        ]
        lines += table(["score", *(title for title, _ in columns), "wall time (s)"], rows)
        lines.append("")
    if "plot" in result:
        lines += [f"![AP against project size]({result['plot']})", ""]
    return "\n".join(lines + machines(result) + footer(result)) + "\n"


def machines(result) -> list[str]:
    """Markdown lines saying which runs ran where, when a resumed file mixes machines."""
    where: dict[str, list[str]] = {}
    for run in result["runs"]:
        where.setdefault(run["machine"], []).append(f"{run['size']}/{run['seed']}")
    if len(where) < 2:
        return []
    lines = ["Runs (size/seed) by machine; the last one is named below:", ""]
    lines += [f"- {m}: {', '.join(runs)}" for m, runs in where.items()]
    return lines + [""]


def plot(result, path: Path) -> None:
    """AP (mean ± sd over seeds) against project size, one line per score, log x axis."""
    import matplotlib.ticker

    summary, cfg = result["summary"], result["config"]
    sizes = [int(s) for s in summary]
    with figure(path) as ax:
        for name in METHODS:
            # OOF and CrossWeigh may stop at --costly-up-to: draw the sizes they have
            have = [(s, summary[str(s)]["methods"].get(name)) for s in sizes]
            have = [(s, stat) for s, stat in have if stat is not None]
            if not have:
                continue
            xs, stats = zip(*have)
            mean = [s["ap"]["mean"] for s in stats]
            sd = [0.0 if np.isnan(s["ap"]["sd"]) else s["ap"]["sd"] for s in stats]
            # SubRegWeigh's scores solid, trivial baselines dotted, the rest dash-dotted
            style = "-" if name in METHODS[:3] else ":" if name in METHODS[3:6] else "-."
            ax.errorbar(xs, mean, yerr=sd, marker="o", capsize=3, linestyle=style, label=name)
        base = [summary[str(s)]["base_rate"]["mean"] for s in sizes]
        ax.plot(sizes, base, "k--", label="base rate")
        ax.set_xscale("log")
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ax.set_xticks(sizes, [str(s) for s in sizes])
        ax.set_xlabel("project size (examples)")
        ax.set_ylabel("average precision")
        ax.set_title(f"{cfg['dataset']}, {cfg['noise']} noise {cfg['rate']:.0%}")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)


def write(args, runs, command, planned) -> dict:
    result = {
        **stamp(command),
        "config": config(args),
        "complete": len(runs) == planned,
        "planned_runs": planned,
        "summary": summarize(runs),
        "runs": runs,
    }
    args.out.mkdir(parents=True, exist_ok=True)  # for the plot, before save()
    if len(args.sizes) > 1 and len(result["summary"]) > 1:
        png = args.out / f"{args.name}.png"
        plot(result, png)
        result["plot"] = png.name
    save(args.out, args.name, result, markdown(result))
    return result


# Settings that change results: a resumed run must match them; sizes, seeds, threads may differ.
RESULT_SETTINGS = (
    "dataset", "noise", "rate", "epochs", "n_samples", "k", "p", "method", "folds",
    "crossweigh", "cw_folds", "cw_iterations", "model", "costly_up_to", "batching",
    "freeze_embeddings", "train_embeddings", "freeze_layers", "precision",
)  # fmt: skip


def finished_runs(args) -> list[dict]:
    """The runs of an earlier ``NAME.json`` to keep with ``--resume`` (none without it).

    Raises ValueError if that file was made with other settings.
    """
    earlier = earlier_result(args.out, args.name, args.resume)
    if earlier is None:
        return []
    # a setting added after the file was written reads as its default (None)
    differ = [k for k in RESULT_SETTINGS if earlier["config"].get(k) != getattr(args, k)]
    if differ:
        raise ValueError(f"{args.name}.json was made with other settings ({', '.join(differ)})")
    runs = [r for r in earlier["runs"] if r["size"] in args.sizes and r["seed"] < args.seeds]
    for run in runs:  # runs written before runs named their machine ran on the file's
        run.setdefault("machine", earlier["machine"])
    return runs


def main(argv=None) -> int:
    args = parse_args(argv)
    start(args.threads)
    command_line = command("detection", argv)
    plan = [(size, seed) for size in args.sizes for seed in range(args.seeds)]
    runs = finished_runs(args)
    done = {(r["size"], r["seed"]) for r in runs}
    if done:
        logger.info("resuming: %d of %d runs already finished", len(done), len(plan))
    result = write(args, runs, command_line, len(plan))
    for size, seed in tqdm([x for x in plan if x not in done], desc="detection runs", unit="run"):
        runs.append(run_one(args, size, seed))
        logger.info(
            "size %d seed %d (base rate %.3f): %s",
            size,
            seed,
            runs[-1]["base_rate"],
            ", ".join(f"{m} AP {v['ap']:.3f}" for m, v in runs[-1]["methods"].items()),
        )
        result = write(args, runs, command_line, len(plan))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
