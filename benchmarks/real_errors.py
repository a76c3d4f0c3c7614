"""Detection of REAL annotation errors: CoNLL-2003 test with its original labels, ranked against
its correction CoNLL++ (Wang et al. 2019): a sentence is erroneous when its tags differ (186 of
3,453, base rate 0.054). The errors are what annotators really do: an entity typed by one
convention here and another there, a missed entity, a span one word too long.

For every size (``all``: the whole set; a number: a project-sized subsample drawn with the run's
seed) and seed ``s``, a scout (``random_state=s``) is trained on the ORIGINAL labels and every
score ranks the sentences (lower = more doubtful; ``harness.ranking``: AP, AUROC, errors among
the 50 most doubtful, R-precision = recall at the number of errors), reported as mean ± sd over
the seeds:

* the engine's scores (``WeighResult.score()``, ``subregweigh weigh --score``): ``deterministic``
  (p(gold) on the deterministic segmentation, averaged half and half with the CRF's
  (``subregweigh.crf``; ``--no-crf``: the scout's alone), its soft minimum over the annotated
  entities and the words outside them: the served default), ``probability`` (the scout's
  p(gold) averaged over the K SubRegWeigh views) and ``agreement`` (the paper's c/K);
  The scouts are the product's: ``--ensemble N`` of them (``SubRegWeigh(n_scouts=N)``,
  ``SRW_SCOUTS``, ``--scouts``; default: the product's, 3 for NER), seeds s, s+1000, ...,
  their p(gold) averaged before the CRF's joins;
* with the CRF, its parts: ``scout alone (no CRF)`` (``N scouts alone``), ``CRF alone`` (the
  CRF trains first, as for Label Studio's early scores: its seconds are its scores'), and
  ``lowest word, scouts + CRF`` (cleanlab's default score, the lowest word, on the same
  averaged p(gold));
* with several scouts, ``one scout (SRW_SCOUTS=1)``: the first scout's p(gold) with the
  CRF's, in Label Studio as soon as that scout is trained (its seconds);
* ``cleanlab in-sample`` (cleanlab's token-classification quality on the same scouts'
  probabilities, averaged; its defaults: the minimum over words), ``cleanlab in-sample,
  softmin`` (cleanlab's soft minimum at its default temperature, 0.05) and ``cleanlab OOF``
  (defaults, on ``--folds`` out-of-fold scouts of the same encoder, plainly fine-tuned);
* the trivial baselines ``random``, ``length``, ``entity count`` and the model-free
  ``consistency`` (a word form labelled against the rest of the data set,
  ``benchmarks.baselines.consistency_scores``).

Recall at the number of errors is also split by what the correction changed
(``subregweigh.compare``: type, boundary, missing, spurious).

    python -m benchmarks.real_errors                        # whole set, 3 seeds
    python -m benchmarks.real_errors --sizes 300 1000       # project-sized draws, 3 seeds each
    python -m benchmarks.real_errors --ensemble 1           # one scout (SRW_SCOUTS=1)

``--data tweets-0`` / ``tweets-1`` rank real crowd errors on tweets instead (the Broad Twitter
Corpus, one worker's labels against the experts', ``benchmarks.tweets``: 788 tweets, 169 / 126
erroneous, sparse: 320 hold an entity); ``--add-train`` stays CoNLL's.

Smoke test (a minute): ``python -m benchmarks.real_errors --sizes 60 --seeds 1 --epochs 1
--n-samples 20 -k 5 --folds 2 --out /tmp/real-errors-smoke``. ``--device cuda`` and ``--model``
run it on a GPU with any encoder.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np

from benchmarks import harness
from benchmarks.baselines import align_proba, consistency_scores
from subregweigh.build import build_scout, build_weigher, weigher_params
from subregweigh.compare import CHANGE_KINDS, differs, span_changes
from subregweigh.crf import FeatureTagger, mix_gold
from subregweigh.memory import WordMemory
from subregweigh.metrics import entity_recall
from subregweigh.options import BY_NAME, SOFTMIN_TEMPERATURE
from subregweigh.scout import Scout
from subregweigh.weigh import SubRegWeigh

NAME = "real_errors"
ORIGINAL, CORRECTED, TRAIN = "conll2003-test", "conllpp-test", "conll"
PRODUCT = ("deterministic", "probability", "agreement")
BASELINES = (
    "cleanlab in-sample",
    "cleanlab in-sample, softmin",
    "cleanlab OOF",
    "random",
    "length",
    "entity count",
    "an entity first",
)
DATA_SETS = {  # --data -> its title
    "conllpp": "CoNLL-2003 test (original) against CoNLL++ (corrected)",
    "tweets-0": "tweets, a crowd worker (slot 0) against the experts (Broad Twitter Corpus B)",
    "tweets-1": "tweets, a crowd worker (slot 1) against the experts (Broad Twitter Corpus B)",
}
MODEL_FREE = ("consistency",)


def parse_args(argv=None):
    parser = build_parser(__doc__)
    args = parser.parse_args(argv)
    check_args(parser, args)
    if args.name is None:
        args.name = "real-errors" + ("" if args.data == "conllpp" else f"-{args.data}")
        args.name += "" if args.sizes == ["all"] else "-" + "-".join(args.sizes)
        args.name += run_suffix(args)
    return args


def run_suffix(args) -> str:
    """What a result's default name adds for the settings it ran with."""
    return (
        (f"-scouts{args.ensemble}" if args.ensemble else "")
        + (f"-plus-{args.add_train}-train" if args.add_train else "")
        + (f"-{args.max_steps}-steps" if args.max_steps else "")
        + (f"-min-{args.min_steps}-steps" if args.min_steps is not None else "")
        + ("" if args.crf else "-no-crf")
    )


def check_args(parser: argparse.ArgumentParser, args) -> None:
    """Refuse (``parser.error``) settings that cannot run together."""
    if args.add_train and args.folds:
        parser.error("--add-train: OOF folds would train without the added sentences; --folds 0")
    for size in args.sizes:
        if size != "all" and not size.isdigit():
            parser.error(f"--sizes takes 'all' or numbers, got {size!r}")


def build_parser(doc: str) -> argparse.ArgumentParser:
    """This benchmark's arguments (``doc``: the help's description), here and in
    benchmarks.real_errors_articles."""
    parser = harness.arguments(doc, name=None)
    parser.add_argument(
        "--data",
        choices=DATA_SETS,
        default="conllpp",
        help="the real errors: CoNLL-2003 test against CoNLL++, or tweets of a crowd worker "
        "against the experts (judgment slot 0 or 1; benchmarks.tweets) (default: conllpp)",
    )
    parser.add_argument(
        "--sizes", nargs="+", default=["all"], help="'all' and/or sentence counts (default: all)"
    )
    parser.add_argument("--seeds", type=int, default=harness.SEEDS, help="(default: 3)")
    add_scout_arguments(parser)
    parser.add_argument(
        "--max-steps", type=int, help="the scout's training budget in steps (default: none)"
    )
    parser.add_argument(
        "--early-steps",
        type=int,
        help="also score the scout after this many steps of its training, as the backend's "
        "early scores (default: none)",
    )
    parser.add_argument(
        "--add-train",
        type=int,
        default=0,
        metavar="N",
        help="N sentences of CoNLL-2003 train join every project, annotated as given; only the "
        "test sentences are ranked (default: 0)",
    )
    parser.add_argument(
        "--scores",
        nargs="+",
        choices=PRODUCT,
        default=list(PRODUCT),
        help="the product's scores to compute; deterministic alone skips the K views "
        "(default: all)",
    )
    parser.add_argument(
        "--softmin-temperature",
        type=float,
        default=SOFTMIN_TEMPERATURE,
        help=f"of the product's scores (default: {SOFTMIN_TEMPERATURE}; 0: the lowest part)",
    )
    parser.add_argument("--n-samples", type=int, default=500, help="N (default: 500)")
    parser.add_argument("-k", type=int, default=10, help="K (default: 10)")
    parser.add_argument("--dropout", type=float, default=0.1, help="p (default: 0.1)")
    parser.add_argument("--method", default="kmeans", help="(default: kmeans)")
    parser.add_argument("--folds", type=int, default=5, help="OOF folds; 0: none (default: 5)")
    parser.add_argument(
        "--ensemble",
        type=int,
        help="scouts averaged (SubRegWeigh(n_scouts=); default: the product's, 3 for NER)",
    )
    parser.add_argument("--n-jobs", type=int, default=1, help="sampling processes (default: 1)")
    parser.add_argument(
        "--memory",
        type=float,
        nargs="+",
        default=[],
        metavar="STRENGTH",
        help="also rank by the deterministic score with the project's memory at each strength "
        "(SubRegWeigh(memory_strength=), subregweigh.memory), on the same scouts "
        "(default: none)",
    )
    parser.add_argument(
        "--rest-on-crf",
        action=argparse.BooleanOptionalAction,
        default=BY_NAME["rest_on_crf"].default,
        help="the product's policy (SubRegWeigh(rest_on_crf=)): where the scouts learned too "
        "little of their training annotations, the deterministic score is the CRF's with the "
        "project's memory; the other setting is ranked too, on the same scouts "
        f"(default: {'on' if BY_NAME['rest_on_crf'].default else 'off'}, the product's)",
    )
    parser.add_argument(
        "--crf-c2",
        type=float,
        nargs="+",
        default=[],
        metavar="C2",
        help="also rank by the deterministic score with the CRF trained at each L2 penalty "
        "(subregweigh.crf.FeatureTagger(c2=); the product's is "
        f"{FeatureTagger().c2:g}), beside the same scouts (default: none)",
    )
    parser.add_argument(
        "--cache",
        type=Path,
        help="keep each run's first scout's outputs here, where benchmarks.review_loop --cache "
        "finds them: the loop then reviews on the same scouts without training (default: none)",
    )
    return parser


def add_scout_arguments(parser: argparse.ArgumentParser) -> None:
    """The product's scout and CRF, as :func:`scout_options` and :func:`options` read them
    (``--max-steps`` apart: this benchmark's alone), here and in benchmarks.review_loop."""
    parser.add_argument("--epochs", type=int, help="(default: the scout's)")
    parser.add_argument("--learning-rate", type=float, help="(default: the scout's)")
    parser.add_argument(
        "--min-steps",
        type=int,
        help="the scout's optimizer steps at least, however few the texts (default: the scout's)",
    )
    harness.add_crf_argument(parser)
    parser.add_argument("--model", help="encoder name or path (default: the offline MiniLM)")
    parser.add_argument("--device", help="cpu, cuda... (default: the scout's choice)")
    harness.add_precision_argument(parser)


def load_pair(data: str = "conllpp"):
    """``(original, corrected, flags)``: CoNLL-2003 test as annotated and as corrected (or
    ``data``'s tweets, :mod:`benchmarks.tweets`), the same sentences in the same order, and
    which differ (bool, shape (n,))."""
    if data.startswith("tweets-"):
        from benchmarks.tweets import load_pair as tweets

        return tweets(int(data.rsplit("-", 1)[1]))
    _, original = harness.read_dataset(ORIGINAL)
    _, corrected = harness.read_dataset(CORRECTED)
    return original, corrected, differs(original, corrected)


def halves(n: int) -> dict[str, slice]:
    """The whole set and its two halves (the first and the last ``n // 2`` sentences, whole
    documents apart from the one cut): a setting chosen on one half is read on the other."""
    return {"whole": slice(0, n), "first half": slice(0, n // 2), "second half": slice(n // 2, n)}


def halves_base_rate(flags) -> str:
    """The sentence a table over :func:`halves` starts with."""
    n = len(flags)
    return (
        f"Base rate {flags.mean():.3f} ({int(flags.sum())} of {n} sentences; first half "
        f"{int(flags[: n // 2].sum())}, second half {int(flags[n // 2 :].sum())} erroneous)."
    )


def added_train(n: int, seed: int) -> list:
    """``n`` CoNLL-2003 train sentences drawn with ``seed`` (all of them when ``n`` is their
    number), annotated as given: the rest of a larger project around the ranked sentences."""
    if not n:
        return []
    _, train = harness.read_dataset(TRAIN)
    return harness.sample(train, min(n, len(train)), seed)


def draw(size: str, seed: int, n: int) -> np.ndarray:
    """The indices of a run's sentences: all of them, or ``size`` drawn with ``seed``."""
    if size == "all":
        return np.arange(n)
    return harness.sample_indices(n, int(size), seed)


def scout_options(args, seed: int) -> dict:
    """The product's scout options (subregweigh.options) of a run with ``seed`` (``args`` of
    this benchmark or of benchmarks.review_loop)."""
    return {
        "scout_model": args.model,
        "epochs": args.epochs,
        "max_steps": args.max_steps,
        "min_steps": args.min_steps,
        "learning_rate": args.learning_rate,
        "precision": args.precision,
        "device": args.device,
        "seed": seed,
    }


def options(args, seed: int) -> dict:
    """The product's options (subregweigh.options) of a run with ``seed``."""
    return {
        **scout_options(args, seed),
        "p": args.dropout,
        "n_samples": args.n_samples,
        "k": args.k,
        "method": args.method,
        "n_jobs": args.n_jobs,
        "softmin_temperature": args.softmin_temperature,
        "n_scouts": args.ensemble,
        "crf": args.crf,
        "rest_on_crf": getattr(args, "rest_on_crf", BY_NAME["rest_on_crf"].default),
    }


def policy_row(rest_on_crf: bool) -> str:
    """The row of the deterministic score with ``rest_on_crf`` set otherwise than the run's."""
    return f"deterministic, rest_on_crf {'on' if rest_on_crf else 'off'}"


def crf_c2_row(c2: float) -> str:
    """The row of the deterministic score with the CRF trained at L2 penalty ``c2``."""
    return f"deterministic, CRF c2 {c2:g}"


def scout(args, seed: int) -> Scout:
    return build_scout(scout_options(args, seed), "ner", progress=False)


def kind_recall(quality, flags, kinds) -> dict:
    """Of the sentences whose correction changed an entity of each kind, the share among the
    ``flags.sum()`` most doubtful."""
    top = set(np.argsort(np.asarray(quality), kind="stable")[: int(flags.sum())].tolist())
    out = {}
    for kind in CHANGE_KINDS:
        having = [i for i, k in enumerate(kinds) if kind in k]
        out[kind] = float(np.mean([i in top for i in having])) if having else float("nan")
    return out


def missing_rank(quality, kinds) -> float:
    """The median rank, as a share of the sentences (0: the most doubtful), of the sentences
    whose correction adds an entity the annotation missed: in the most doubtful quarter when
    at most 0.25 (NaN when none)."""
    order = np.argsort(np.asarray(quality), kind="stable")
    rank = np.empty(len(order), dtype=float)
    rank[order] = np.arange(len(order)) / len(order)
    missed = [rank[i] for i, k in enumerate(kinds) if "missing" in k]
    return float(np.median(missed)) if missed else float("nan")


class Scored(NamedTuple):
    """One run's scores: ``run`` (what it measured besides the rankings: its size, seed,
    scouts, seconds...), the ranked ``examples`` and their ``flags`` (bool, shape (n,)), what
    each one's correction changed (``kinds``: sets of :data:`CHANGE_KINDS`) and ``scores``
    (name -> (quality, shape (n,), seconds))."""

    run: dict
    examples: list
    flags: np.ndarray
    kinds: list
    scores: dict


def run_one(args, size: str, seed: int, pair) -> dict:
    """One run's result: :func:`score_run`'s ``run`` and its ``methods`` (:func:`methods_of`)."""
    scored = score_run(args, size, seed, pair)
    return {**scored.run, "methods": methods_of(scored.scores, scored.flags, scored.kinds)}


def methods_of(scores: dict, flags, kinds) -> dict:
    """Each score's ranking of the erroneous examples (``harness.ranking``, P@20, recall at
    the number of errors by kind of change, the missed entities' median rank) and seconds."""
    return {
        name: {
            **harness.ranking(quality, flags),
            P_AT_20: harness.precision_at(quality, flags, 20),
            **{f"recall_{k}": v for k, v in kind_recall(quality, flags, kinds).items()},
            "missing_rank": missing_rank(quality, kinds),
            "seconds": round(seconds, 2),
        }
        for name, (quality, seconds) in scores.items()
    }


def score_run(args, size: str, seed: int, pair) -> Scored:
    """Train the product on ``size`` of ``pair``'s original annotations (``load_pair``'s
    triple) with ``seed``, and score them by every method."""
    original, corrected, all_flags = pair
    pick = draw(size, seed, len(original))
    examples = [original[i] for i in pick]
    flags = all_flags[pick]
    kinds = [{c.kind for c in span_changes(original[i].label, corrected[i].label)} for i in pick]

    template = build_weigher(options(args, seed), "ner", progress=False)
    params = weigher_params(options(args, seed), progress=False)
    training = examples + added_train(args.add_train, seed)
    n_scouts = template.ensemble_size(len(training))  # the product's for this size, or --ensemble
    early, first_trained = {}, {}

    def train() -> SubRegWeigh:
        """The product's training as the Label Studio backend runs it: the CRF first, then the
        first scout (its early scores after --early-steps), then the others."""
        started = time.perf_counter()
        crf = template.crf_template()
        if crf is not None:
            crf.fit(training)
            first_trained["crf seconds"] = time.perf_counter() - started
        scouts = template.scout_templates(len(training))
        stops = (args.early_steps,) if args.early_steps else ()
        for stage in scouts[0].staged_fit(training, stop_points=stops):
            if stage.n_steps_ < stage.training_steps(len(training)):  # the early scores
                early_weigher = SubRegWeigh.from_parts(
                    [stage], progress=False, softmin_temperature=args.softmin_temperature
                )
                result = early_weigher.weigh_deterministic(examples)
                early["quality"] = result.score("deterministic")
                early["seconds"] = time.perf_counter() - started
        if n_scouts > 1:
            first_trained["seconds"] = time.perf_counter() - started
        for other in scouts[1:]:
            other.fit(training)
        first_trained["crf"] = crf  # as trained, before a resting weigher trains it again
        # what the scouts learned of the project's annotations, as the backend measures it
        return SubRegWeigh.from_parts(scouts, crf, **params).assess(examples, trained_on=training)

    srw, train_s = harness.timed(train)
    served, served_s = harness.timed(srw.weigh_deterministic, examples)
    other_policy = not params["rest_on_crf"]  # the other setting, on the same parts
    crf = first_trained["crf"]  # the CRF beside scouts that learned enough, and the early one
    scores_other = (
        SubRegWeigh.from_parts(srw.scouts_, crf, **{**params, "rest_on_crf": other_policy})
        .assess(examples, scout_proba=served.scout_proba)
        .weigh_deterministic(examples, scout_proba=served.scout_proba)
    )
    scores = {
        "deterministic": (served.score("deterministic"), train_s + served_s),
        policy_row(other_policy): (
            scores_other.score("deterministic"),
            train_s + served_s,
        ),
    }
    for c2 in args.crf_c2 if crf is not None else ():  # another CRF, the same scouts
        began = time.perf_counter()
        penalized = SubRegWeigh.from_parts(
            srw.scouts_, FeatureTagger(c2=c2).fit(training), learned=srw.learned_, **params
        )
        scores[crf_c2_row(c2)] = (
            penalized.weigh_deterministic(examples, scout_proba=served.scout_proba).score(
                "deterministic"
            ),
            train_s + served_s + time.perf_counter() - began,
        )
    labels = srw.scout_.labels_
    members, proba_s = harness.timed(
        lambda: [align_proba(s.predict_proba(examples), s.labels_, labels) for s in srw.scouts_]
    )
    proba = members[0]  # the first scout's
    # what the first scout learned of its own training annotations: its entity recall there
    learned = entity_recall(
        [ex.label for ex in examples],
        [tuple(labels[j] for j in p.argmax(axis=1)) for p in proba],
    ).get("all", {"found": 0, "total": 0})
    if args.cache and not args.add_train and not args.max_steps:  # the loop's scouts are these
        from benchmarks.review_loop import cache_file, save_outputs

        where = argparse.Namespace(**{**vars(args), "size": size})
        save_outputs(cache_file(where, seed), examples, labels, proba, train_s)
    mean_proba = [np.mean([m[i] for m in members], axis=0) for i in range(len(examples))]
    scouts_gold = harness.word_gold(examples, labels, mean_proba)
    first_gold = harness.word_gold(examples, labels, proba)
    crf_gold = crf.gold_proba(examples) if crf is not None else None
    alone = "scout alone" if n_scouts == 1 else f"{n_scouts} scouts alone"
    if crf_gold is not None:  # what the CRF adds, and what it does alone
        scores[f"{alone} (no CRF)"] = (
            harness.served_score(examples, scouts_gold, args.softmin_temperature),
            train_s + proba_s,
        )
        scores["CRF alone"] = (
            harness.served_score(examples, crf_gold, args.softmin_temperature),
            first_trained["crf seconds"],
        )
        scores["lowest word, scouts + CRF"] = (
            np.array([g.min() for g in mix_gold(scouts_gold, crf_gold)]),
            0.0,
        )
    if n_scouts > 1:  # what one scout gives (SRW_SCOUTS=1), as soon as it is trained
        one = mix_gold(first_gold, crf_gold) if crf_gold is not None else first_gold
        scores["one scout (SRW_SCOUTS=1)"] = (
            harness.served_score(examples, one, args.softmin_temperature),
            first_trained["seconds"],
        )
    memory = WordMemory.of(training) if args.memory else None  # what fit() would keep
    for strength in args.memory:  # the same scouts and CRF, the memory added
        remembering = SubRegWeigh.from_parts(
            srw.scouts_, crf, memory, **{**params, "memory_strength": strength}
        )
        scores[f"deterministic, memory {strength:g}"] = harness.timed(
            lambda w=remembering: w.weigh_deterministic(
                examples, scout_proba=served.scout_proba
            ).score("deterministic")
        )
        if crf is not None:  # what would serve where the scout learned too little
            crf_remembering = SubRegWeigh.from_parts(
                [], crf, memory, **{**params, "memory_strength": strength}
            )
            scores[f"CRF alone, memory {strength:g}"] = harness.timed(
                lambda w=crf_remembering: w.weigh_deterministic(examples).score("deterministic")
            )
    if early:
        scores[f"deterministic at {args.early_steps} steps (early)"] = (
            early["quality"],
            early["seconds"],
        )
    weigh_s = 0.0
    if set(args.scores) - {"deterministic"}:
        weighed, weigh_s = harness.timed(srw.weigh, examples)
        scores.update(
            (name, (weighed.score(name), train_s + weigh_s))
            for name in args.scores
            if name != "deterministic"
        )
    # cleanlab on the same scouts' probabilities (an ensemble's averaged)
    in_sample, cl_s = harness.timed(
        harness.cleanlab_in_sample, srw.scout_, examples, "ner", mean_proba
    )
    scores["cleanlab in-sample"] = (in_sample, train_s + proba_s + cl_s)
    softmin, cl_s = harness.timed(
        harness.cleanlab_in_sample,
        srw.scout_,
        examples,
        "ner",
        mean_proba,
        sentence_score_method="softmin",
    )
    scores["cleanlab in-sample, softmin"] = (softmin, train_s + proba_s + cl_s)
    if args.folds:
        scores["cleanlab OOF"] = harness.timed(
            harness.cleanlab_out_of_fold,
            scout(args, seed),
            labels,
            examples,
            "ner",
            args.folds,
            seed,
        )
    scores.update(
        (name, (q, 0.0)) for name, q in harness.trivial_baselines(examples, "ner", seed).items()
    )
    scores["consistency"] = harness.timed(consistency_scores, examples, "ner")
    run = {
        "size": size,
        "n": len(examples),
        "seed": seed,
        "machine": harness.machine(),
        "n_errors": int(flags.sum()),
        "n_scouts": n_scouts,
        "training_recall": learned["found"] / learned["total"] if learned["total"] else None,
        "learned_recall": srw.learned_.recall if srw.learned_ is not None else None,
        "rests_on_crf": srw.rests_on_crf_,
        "base_rate": float(flags.mean()),
        "scout_seconds": round(train_s, 2),
        "weigh_seconds": round(weigh_s, 2),
        # cleanlab's defaults are the lowest p(gold) of a word: lowest_gold should agree
        "cleanlab_vs_min_gold_max_diff": float(
            np.max(np.abs(in_sample - harness.lowest_gold(examples, labels, mean_proba)))
        ),
    }
    return Scored(run, examples, flags, kinds, scores)


METRICS = ("ap", "auroc", f"precision_at_{harness.TOP}", "r_precision", "seconds")
P_AT_20 = "precision_at_20"


def summarize(runs) -> dict:
    out = {}
    for size in dict.fromkeys(r["size"] for r in runs):
        these = [r for r in runs if r["size"] == size]
        names = list(dict.fromkeys(m for r in these for m in r["methods"]))
        keys = (*METRICS, *(f"recall_{k}" for k in CHANGE_KINDS), "missing_rank", P_AT_20)
        out[size] = {
            "n": these[0]["n"],
            "base_rate": harness.mean_sd([r["base_rate"] for r in these]),
            "n_errors": harness.mean_sd([r["n_errors"] for r in these]),
            **(
                {"training_recall": harness.mean_sd([r["training_recall"] for r in these])}
                if all(r.get("training_recall") is not None for r in these)
                else {}
            ),
            **(
                {"rests_on_crf": sum(bool(r["rests_on_crf"]) for r in these), "n_runs": len(these)}
                if all("rests_on_crf" in r for r in these)
                else {}
            ),
            "methods": {
                name: harness.summarize_rows([r["methods"][name] for r in these], keys)
                for name in names
            },
        }
    return out


def markdown(result) -> str:
    cfg = result["config"]
    lines = [
        f"## Real errors: {DATA_SETS[cfg.get('data', 'conllpp')]}",
        "",
        f"Scout: {cfg['model'] or 'the offline MiniLM'}, epochs {cfg['epochs'] or 'default'}"
        + (
            f"; {cfg['scouts']} scouts (seeds s, s+1000, ...), their p(gold) averaged"
            if cfg.get("scouts", 1) > 1
            else ""
        )
        + (f", at most {cfg['max_steps']} steps" if cfg.get("max_steps") else "")
        + (
            "; where the scouts learned too little (under half of their training entities "
            "found again), the deterministic score rests on the CRF with the project's memory "
            "(rest_on_crf)"
            if cfg.get("rest_on_crf")
            else ""
        )
        + (f", at least {cfg['min_steps']} steps" if cfg.get("min_steps") else "")
        + (
            f", trained with {cfg['add_train']} CoNLL-2003 train sentences besides the ranked ones"
            if cfg.get("add_train")
            else ""
        )
        + "; "
        + (
            "the deterministic score averages the scout's p(gold) with a CRF's (half each); "
            if cfg.get("crf")
            else ""
        )
        + (
            "the product's scores take a soft minimum over the annotated entities (each once) "
            f"and the words outside them at temperature "
            f"{cfg['softmin_temperature']:g}; "
            if "softmin_temperature" in cfg
            else ""
        )
        + f"K={cfg['k']} ({cfg['method']}), N={cfg['n_samples']}, p={cfg['dropout']}; cleanlab "
        f"OOF {cfg['folds']} folds. Mean ± sd over {cfg['seeds']} seeds (a subsample is drawn "
        "with its run's seed). Lower score = more doubtful.",
    ]
    for size, s in result["summary"].items():
        lines += size_section(
            s,
            f"### {'The whole set' if size == 'all' else f'{size} sentences'} "
            f"({s['n']} sentences, base rate {harness.pm(s['base_rate'])}, "
            f"{harness.pm(s['n_errors'], 1)} erroneous)",
        )
    return harness.document(lines, result)


def size_section(summary: dict, heading: str) -> list[str]:
    """The markdown of one size's :func:`summarize`: ``heading``, what the first scout learned
    (:func:`learned_lines`) and the scores' table (:func:`methods_table`)."""
    return ["", heading, "", *learned_lines(summary), *methods_table(summary["methods"])]


def learned_lines(summary: dict) -> list[str]:
    """The sentence of one size's :func:`summarize` on what the first scout learned of its own
    training annotations and how often the product rested on the CRF (none without them)."""
    if "training_recall" not in summary:
        return []
    rested = (
        f"; the product rested on the CRF in {summary['rests_on_crf']} of {summary['n_runs']} runs"
        if "rests_on_crf" in summary
        else ""
    )
    return [
        f"The first scout finds {harness.pm(summary['training_recall'])} of the entities of its "
        f"own training annotations (exact span and type){rested}.",
        "",
    ]


def methods_table(methods: dict) -> list[str]:
    """The table of :func:`summarize`'s ``methods`` of one size: a row per score."""
    rows = []
    for name, m in methods.items():
        kind = "product" if name in PRODUCT else "model-free" if name in MODEL_FREE else ""
        rows.append(
            [
                name + (f" ({kind})" if kind else ""),
                *(harness.pm(m[key]) if key in m else "" for key in METRICS[:4]),
                " / ".join(f"{m[f'recall_{k}']['mean']:.2f}" for k in CHANGE_KINDS),
                harness.pm(m[P_AT_20]) if P_AT_20 in m else "",
                harness.pm(m["missing_rank"]) if "missing_rank" in m else "",
                f"{m['seconds']['mean']:.0f}" if "seconds" in m else "",
            ]
        )
    return harness.table(
        [
            "score",
            "AP",
            "AUROC",
            f"P@{harness.TOP}",
            "R-precision",
            "recall@errors: " + " / ".join(CHANGE_KINDS),
            "P@20",
            "missed: median rank",
            "s",
        ],
        rows,
    )


def run_planned(
    args, argv, name: str, pair, run=run_one, summary=summarize, page=markdown, extra=None
):
    """Every size and seed of ``args``: ``run(args, size, seed, pair)`` each, the result
    (``summary`` of the runs, ``extra``'s fields) saved after each as ``page`` renders it,
    and printed at the end; ``name``: the benchmark's module, for the command line."""
    command_line = harness.command(name, argv)
    planned = [(size, seed) for size in args.sizes for seed in range(args.seeds)]
    runs = []
    for size, seed in planned:
        runs.append(run(args, size, seed, pair))
        result = {
            **harness.stamp(command_line),
            "config": {**harness.config(args), "scouts": runs[0]["n_scouts"]},
            "complete": len(runs) == len(planned),
            "summary": summary(runs),
            **(extra or {}),
            "runs": runs,
        }
        harness.save(args.out, args.name, result, page(result))
    print(page(result))
    return result


def main(argv=None) -> int:
    args = parse_args(argv)
    harness.start(args.threads)
    run_planned(args, argv, NAME, load_pair(args.data))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
