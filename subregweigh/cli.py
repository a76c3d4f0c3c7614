"""Command line: ``subregweigh {weigh,crossweigh,noise,train,evaluate,report,selftest}``.

Every command reads CoNLL (2 or 4 columns, IOB1 or IOB2), TSV (``sentence<TAB>label``), JSONL or
a Label Studio JSON export, chosen by extension or ``--format``, and writes its outputs
atomically. Bad input ends with one line naming the file and line at fault, and exit status 2.
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import sys
import time
from pathlib import Path

import numpy as np

from subregweigh.example import DataError
from subregweigh.io import (
    atomic_write_text,
    check_writable,
    read_dataset,
    read_weights,
    write_dataset,
    write_weights,
)
from subregweigh.io.dataset import dataset_format

# subregweigh.weigh.SCORES, default first (held equal by a test): importing that module here
# would load torch before `--help` can answer.
SCORES = ("deterministic", "probability", "agreement")
SOFTMIN_TEMPERATURE = 0.1  # subregweigh.weigh.SOFTMIN_TEMPERATURE, likewise
NOISES = ("paper", "sentence")  # subregweigh.selftest.NOISES, likewise

logger = logging.getLogger("subregweigh")

EXAMPLES = """examples:
  # weigh a CoNLL training set with the paper's defaults (K-means, N=500, K=10, p=0.1)
  subregweigh weigh eng.train -o weights.jsonl

  # the paper's output: CoNLL with a weight column, for a downstream trainer
  subregweigh weigh eng.train -o train.weighted.conll

  # train the final model with loss w * L and score it on a dev set
  subregweigh train eng.train --weights weights.jsonl --eval eng.testa -o final-model/

  # measure detection: corrupt 10% of the labels, weigh, compare
  subregweigh noise eng.train -o noisy.conll --flags corrupted.jsonl
  subregweigh weigh noisy.conll -o weights.jsonl
  subregweigh evaluate --scores weights.jsonl --flags corrupted.jsonl

  # a Label Studio JSON export (Project > Export > JSON): weights keyed by task id
  subregweigh weigh export.json -o weights.jsonl
  subregweigh train export.json --weights weights.jsonl -o final-model/

  # a project report (every annotation, per label and annotator), and how far to trust it
  subregweigh weigh export.json --annotations all -o weights.jsonl
  subregweigh report weights.jsonl -o report.html
  subregweigh selftest export.json -o selftest.json
"""


FORMATS = ["conll", "tsv", "jsonl", "label-studio"]
FORMAT_HELP = (
    "input format (default: by extension; a .json file holding a JSON array is a "
    "Label Studio export)"
)
TEXT_FIELD_HELP = (
    "Label Studio export: the key of the text in each task's data (default: its only string field)"
)
ANNOTATIONS_HELP = (
    "Label Studio export: each task's latest non-cancelled annotation (example id = task id; "
    "the default), or all of them (id task/annotation, as the ML backend weighs them)"
)


def _add_format_args(parser: argparse.ArgumentParser, annotations: str = "latest") -> None:
    parser.add_argument("--format", choices=FORMATS, help=FORMAT_HELP)
    parser.add_argument("--text-field", metavar="KEY", help=TEXT_FIELD_HELP)
    parser.add_argument(
        "--annotations",
        choices=["latest", "all"],
        default=annotations,
        help=ANNOTATIONS_HELP.replace("the default", f"default: {annotations}"),
    )


DATA_HELP = (
    "training data: .conll/.txt (CoNLL), .tsv, .jsonl, or a Label Studio JSON export "
    "(.json; example ids are the task ids)"
)


def _add_data_args(
    parser: argparse.ArgumentParser, help: str = DATA_HELP, annotations: str = "latest"
) -> None:
    parser.add_argument("data", help=help)
    _add_format_args(parser, annotations)
    parser.add_argument("--limit", type=int, help="use only the first LIMIT examples")


def _add_weigh_args(parser: argparse.ArgumentParser) -> None:
    """SubRegWeigh's own settings, for every command that weighs."""
    group = parser.add_argument_group("weighing (SubRegWeigh)")
    group.add_argument(
        "--method",
        choices=["kmeans", "cossim", "random", "kmeans-distinct", "cossim-sum"],
        default="kmeans",
        help="how K candidates are chosen from N samples (default: kmeans; the last two are "
        "the authors' code's variants)",
    )
    group.add_argument(
        "-p",
        "--dropout",
        type=float,
        default=0.1,
        help="subword regularization strength p (default: 0.1)",
    )
    group.add_argument(
        "--n-samples",
        type=int,
        default=500,
        help="N, samples per example for kmeans/cossim (default: 500)",
    )
    group.add_argument("-k", type=int, default=10, help="K, predictions per example (default: 10)")
    group.add_argument(
        "--w-min",
        type=float,
        default=1 / 3,
        help="weight floor: weight = max(w_min, c/K) (default: 1/3)",
    )
    group.add_argument(
        "--softmin-temperature",
        type=float,
        default=SOFTMIN_TEMPERATURE,
        help="how the words' p(gold) become a text's score: their soft minimum at this "
        f"temperature (default: {SOFTMIN_TEMPERATURE}; 0: the lowest p(gold))",
    )
    group.add_argument(
        "--n-jobs",
        type=int,
        help="processes that sample and choose the candidates (default: 1; -1: one per CPU "
        "core); the results are the same for any value",
    )
    group.add_argument(
        "--scouts",
        type=int,
        default=None,
        help="scouts trained with different seeds, their p(gold) averaged for the deterministic "
        "score (default: 3 for NER, 1 for classification); n times the training, better "
        "rankings of real errors",
    )
    group.add_argument(
        "--crf",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="NER: train a CRF over cased word features and pretrained context vectors beside "
        "the scout (a third of its time) and average "
        "its p(gold) half and half with the scouts' for the deterministic score (default: on; "
        "real errors ranked better with the uncased default scout). --save-scout keeps it in "
        "the scout's folder, --scout loads it from there",
    )
    group.add_argument(
        "--score",
        choices=SCORES,
        default=SCORES[0],
        help="the ranking written as the `score` column and printed: deterministic (the "
        "soft minimum of the scout's p(gold) on the deterministic tokenization over entities "
        "and words; "
        "default, it finds most "
        "errors), probability (the same, averaged over the K candidates) or agreement (the paper's "
        "c/K). The training weight stays max(w_min, c/K).",
    )


def _add_saved_scout_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--save-scout", metavar="DIR", help="also save the trained scout here")
    parser.add_argument(
        "--scout", metavar="DIR", help="use this saved scout instead of training one"
    )


def _add_scout_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("scout (the model that is fine-tuned)")
    group.add_argument(
        "--model",
        help="Hugging Face model name or local path (default: the bundled offline MiniLM)",
    )
    group.add_argument(
        "--freeze-encoder",
        action="store_true",
        help="classification: train only the head (small data sets; use with "
        "e.g. --epochs 20 --learning-rate 3e-3)",
    )
    group.add_argument(
        "--epochs",
        type=int,
        help="training epochs (default: 3 for NER, 5 on an encoder wider than the MiniLM, "
        "2 for classification)",
    )
    group.add_argument(
        "--max-steps",
        type=int,
        help="a training budget in optimizer steps: large data sets train for fewer passes "
        "than --epochs (default: none)",
    )
    group.add_argument("--batch-size", type=int, default=16, help="(default: 16)")
    group.add_argument(
        "--learning-rate",
        type=float,
        help="(default: 3e-4 for NER, 1e-4 on an encoder wider than the MiniLM; 1e-4 for "
        "classification)",
    )
    group.add_argument(
        "--max-length",
        type=int,
        help="subwords per text; longer texts are truncated with a warning",
    )
    group.add_argument("--device", help="cpu, cuda, cuda:1... (default: cuda if available)")
    group.add_argument(
        "--precision",
        choices=["float32", "bfloat16", "auto"],
        default="auto",
        help="forward passes' arithmetic; auto: bfloat16 where the hardware multiplies it "
        "natively, else float32 (default: auto)",
    )
    group.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="subregweigh",
        description="Find annotation errors in NLP datasets with scouts trained on the "
        "annotations (SubRegWeigh). Each example gets a score, the scouts' probability of its "
        "label (for NER beside a CRF's): low = likely annotation error. The paper's c/K, the "
        "share of K differently-tokenized copies on which a scout reproduces the label, gives "
        "the training weight max(w_min, c/K).",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="no progress bars, warnings only"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    weigh = sub.add_parser(
        "weigh",
        help="train a scout and weigh every example (SubRegWeigh)",
        description="Train a scout on DATA, re-tokenize each example K ways and weigh it by "
        "how often the scout reproduces its label.",
    )
    _add_data_args(weigh)
    weigh.add_argument(
        "-o",
        "--output",
        required=True,
        help="weights file: .jsonl or .csv (all columns), .conll/.txt (word, tag, weight)",
    )
    weigh.add_argument(
        "--reference",
        metavar="FILE",
        help="annotated data of the same task that the scout trains on beside DATA and that is "
        "not weighed: the corpus a new batch of annotations joins (docs/evaluation.md measures "
        "what it buys)",
    )
    _add_weigh_args(weigh)
    _add_saved_scout_args(weigh)
    _add_scout_args(weigh)

    cross = sub.add_parser(
        "crossweigh",
        help="the CrossWeigh baseline: k folds x T iterations of scouts",
        description="Weigh DATA with CrossWeigh (entity-disjoint folds for NER): "
        "weight = epsilon ** (number of iterations whose held-out prediction was wrong).",
    )
    _add_data_args(cross)
    cross.add_argument("-o", "--output", required=True, help="weights file (.jsonl, .csv, .conll)")
    cross.add_argument("--folds", type=int, default=10, help="k (default: 10)")
    cross.add_argument("--iterations", type=int, default=3, help="T (default: 3)")
    cross.add_argument("--epsilon", type=float, default=0.7, help="(default: 0.7)")
    _add_scout_args(cross)

    noise = sub.add_parser(
        "noise",
        help="inject pseudo-incorrect labels, recording which examples changed",
        description="NER: replace RATE of all word labels with a different B-X or O and repair "
        "the following I- tags (the paper's procedure). Classification: flip RATE of the labels.",
    )
    _add_data_args(noise)
    noise.add_argument("-o", "--output", required=True, help="noisy data (.conll, .tsv or .jsonl)")
    noise.add_argument(
        "--flags", required=True, help="JSONL file of {id, corrupted} per example, for `evaluate`"
    )
    noise.add_argument("--rate", type=float, default=0.1, help="(default: 0.1)")
    noise.add_argument("--seed", type=int, default=0, help="(default: 0)")

    train = sub.add_parser(
        "train",
        help="train a final model, optionally with per-example weights (loss w * L)",
    )
    _add_data_args(train)
    train.add_argument("-o", "--output", required=True, metavar="DIR", help="model directory")
    train.add_argument("--weights", help="weights file written by weigh/crossweigh")
    train.add_argument("--eval", metavar="DEV", help="score the trained model on this data")
    _add_scout_args(train)

    evaluate = sub.add_parser(
        "evaluate",
        help="detection quality of scores against noise flags, or task metrics of a model",
        description="Either --scores with --flags (average precision, AUROC, precision/recall "
        "at k of 1 - reliability), or --model with --data (entity F1 or accuracy).",
    )
    evaluate.add_argument("--scores", help="weights file with a reliability (or weight) column")
    evaluate.add_argument("--flags", help="JSONL of {id, corrupted} written by `noise`")
    evaluate.add_argument(
        "--column",
        default="score",
        help="score column to read (default: score, the ranking `weigh` chose; else "
        "reliability, else weight)",
    )
    evaluate.add_argument("--model", metavar="DIR", help="a model directory written by `train`")
    evaluate.add_argument("--data", help="labelled data to score the model on")
    _add_format_args(evaluate)
    evaluate.add_argument("-o", "--output", help="also write the report here as JSON")

    report = sub.add_parser(
        "report",
        help="a project report: score histogram, per label, per annotator, the most doubtful",
        description="Write a one-page report (static HTML, or its data as JSON) from the "
        "weights `weigh` wrote (.jsonl), or from data, which is weighed first (a Label Studio "
        "export: every annotation, with its annotator).",
    )
    _add_data_args(
        report,
        help="weights written by `weigh` (.jsonl), or data to weigh (as for `weigh`)",
        annotations="all",
    )
    report.add_argument("-o", "--output", required=True, help="report.html, or .json for the data")
    report.add_argument(
        "--threshold",
        type=float,
        default=0.5,
        help="scores below it count as doubtful (default: 0.5)",
    )
    report.add_argument(
        "--top", type=int, default=20, help="how many doubtful tasks to show (default: 20)"
    )
    report.add_argument(
        "--expected-error-rate",
        type=float,
        metavar="RATE",
        help="the share of wrong annotations you expect (default: the scores' estimate, "
        "mean(1 - score))",
    )
    report.add_argument("--selftest", metavar="JSON", help="a `selftest` result to include")
    report.add_argument(
        "--label-studio-url",
        metavar="URL",
        help="with --project: link each task to <URL>/projects/<project>/data?task=<id>",
    )
    report.add_argument("--project", type=int, help="the Label Studio project id, for links")
    report.add_argument("--title", default="Annotation report", help="the page's title")
    _add_weigh_args(report)
    _add_scout_args(report)

    selftest = sub.add_parser(
        "selftest",
        help="how far to trust the flags: inject known errors into a copy, weigh, measure",
        description="Inject the paper's noise (NER: RATE of the word labels; classification: "
        "flipped labels) and sentence-level noise (RATE of the examples with one error each) "
        "into a copy of DATA, weigh each copy with these settings, and report average "
        "precision, precision at the number of injected errors, and the base rate.",
    )
    _add_data_args(selftest, annotations="all")
    selftest.add_argument("-o", "--output", help="also write the result here as JSON")
    selftest.add_argument(
        "--noise",
        nargs="+",
        choices=NOISES,
        default=list(NOISES),
        help="noise kinds (default: both; classification runs one: both flip labels)",
    )
    selftest.add_argument("--rate", type=float, default=0.1, help="(default: 0.1)")
    _add_weigh_args(selftest)
    _add_scout_args(selftest)
    return parser


# --------------------------------------------------------------------------------- commands


def _read(args, path) -> tuple[list, str]:
    return read_dataset(
        path, format=args.format, text_field=args.text_field, annotations=args.annotations
    )


def _load(args) -> tuple[list, str]:
    examples, task = _read(args, args.data)
    if getattr(args, "limit", None):
        examples = examples[: args.limit]
    logger.info("read %d %s examples from %s", len(examples), task, args.data)
    return examples, task


def _load_reference(args, task: str) -> list:
    """``--reference``'s examples (none without it), of DATA's ``task``."""
    if not args.reference:
        return []
    if args.scout:
        raise DataError("--reference is training data; --scout loads a trained scout instead")
    reference, kind = _read(args, args.reference)
    if kind != task:
        raise DataError(f"--reference {args.reference} holds {kind} data; DATA is {task}")
    logger.info("read %d reference examples from %s", len(reference), args.reference)
    return reference


def _scout(args, task, examples):
    from subregweigh.scout import Scout

    return Scout(
        model=args.model,
        task=task,
        multi_label=task == "classification" and any(len(ex.label) != 1 for ex in examples),
        freeze_encoder=args.freeze_encoder,
        epochs=args.epochs,
        max_steps=args.max_steps,
        batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        max_length=args.max_length,
        precision=args.precision,
        random_state=args.seed,
        device=args.device,
        progress=not args.quiet,
    )


WEIGHTS_SUFFIXES = (".jsonl", ".csv", ".conll", ".txt")


def _weigh_params(args) -> dict:
    return dict(
        p=args.dropout,
        n_samples=args.n_samples,
        k=args.k,
        method=args.method,
        w_min=args.w_min,
        softmin_temperature=args.softmin_temperature,
        random_state=args.seed,
        progress=not args.quiet,
        n_jobs=args.n_jobs,
    )


def _weigh(args, examples, task, reference=()):
    """Train (or load) a scout and weigh ``examples``: the WeighResult. ``reference``: more
    annotated examples to train on, not weighed."""
    from subregweigh.crf import CRF_FILE, FeatureTagger, crf_path
    from subregweigh.scout import Scout
    from subregweigh.weigh import SubRegWeigh

    start = time.perf_counter()
    if getattr(args, "scout", None):
        scouts = [
            Scout.load(folder, device=args.device, progress=not args.quiet)
            for folder in _ensemble_folders(args.scout)
        ]
        for scout in scouts:
            scout.precision = args.precision
        crf_file = crf_path(args.scout)
        crf = FeatureTagger.load(crf_file) if args.crf and crf_file.is_file() else None
        srw = SubRegWeigh.from_scout(*scouts, crf=crf, **_weigh_params(args))
        logger.info(
            "loaded %d scout(s) from %s%s", len(scouts), args.scout, " with the CRF" if crf else ""
        )
    else:
        training = [*examples, *reference]
        srw = SubRegWeigh(
            _scout(args, task, training),
            **_weigh_params(args),
            n_scouts=args.scouts,
            crf=args.crf,
        ).fit(training)
        logger.info(
            "trained %d scout(s) on %d examples in %.1f s",
            len(srw.scouts_),
            len(training),
            time.perf_counter() - start,
        )
        if getattr(args, "save_scout", None):
            for folder, scout in zip(
                _ensemble_folders(args.save_scout, len(srw.scouts_)), srw.scouts_
            ):
                scout.save(folder)  # the first replaces the whole folder: no stale members
            if srw.crf_ is not None:
                srw.crf_.save(Path(args.save_scout) / CRF_FILE)
            logger.info("saved %d scout(s) to %s", len(srw.scouts_), args.save_scout)
    return srw.weigh(examples)


def _ensemble_folders(folder, n: int | None = None) -> list[Path]:
    """Where --save-scout keeps an ensemble: the first scout in ``folder`` itself (so a folder
    of one scout is a plain saved scout), scout j in ``folder/scout-j``. ``n``: that many
    folders; None: those of the scouts saved in ``folder``."""
    folder = Path(folder)
    if n is None:
        n = 1
        while (folder / f"scout-{n}").is_dir():
            n += 1
    return [folder if j == 0 else folder / f"scout-{j}" for j in range(n)]


def _annotation_columns(args, examples) -> dict[str, list]:
    """A Label Studio export's ``task`` and ``annotator`` per example (none for other data)."""
    if dataset_format(args.data, args.format) != "label-studio":
        return {}
    return {
        "task": [ex.id.split("/", 1)[0] for ex in examples],
        "annotator": [ex.annotator for ex in examples],
    }


def cmd_weigh(args) -> int:
    check_writable(args.output, WEIGHTS_SUFFIXES)  # before hours of training, not after
    examples, task = _load(args)
    reference = _load_reference(args, task)
    start = time.perf_counter()
    result = _weigh(args, examples, task, reference)
    score = result.score(args.score)
    extra = {"score": score, **result.columns(), **_annotation_columns(args, examples)}
    write_weights(args.output, examples, result.weight, task=task, extra=extra)
    logger.info(
        "wrote weights of %d examples to %s (%.1f s in all)",
        len(examples),
        args.output,
        time.perf_counter() - start,
    )
    _print_most_doubtful(examples, score, args.score)
    return 0


def _print_most_doubtful(examples, score, name: str = "reliability", n: int = 10) -> None:
    order = np.argsort(score, kind="stable")[:n]
    print(
        f"{int((score < 0.5).sum())} of {len(examples)} examples have {name} < 0.5; most doubtful:"
    )
    for i in order:
        text = examples[i].text
        print(
            f"  {score[i]:.2f}  id={examples[i].id}  {text[:70]}{'...' if len(text) > 70 else ''}"
        )


def cmd_crossweigh(args) -> int:
    from subregweigh.crossweigh import CrossWeigh

    check_writable(args.output, WEIGHTS_SUFFIXES)
    examples, task = _load(args)
    start = time.perf_counter()
    result = CrossWeigh(
        _scout(args, task, examples),
        n_folds=args.folds,
        n_iterations=args.iterations,
        epsilon=args.epsilon,
        random_state=args.seed,
        progress=not args.quiet,
    ).weigh(examples)
    write_weights(args.output, examples, result.weight, task=task, extra=result.columns())
    logger.info(
        "wrote CrossWeigh weights of %d examples to %s (%.1f s)",
        len(examples),
        args.output,
        time.perf_counter() - start,
    )
    _print_most_doubtful(examples, result.reliability)
    return 0


def cmd_noise(args) -> int:
    from subregweigh.noise import flip_labels, inject_ner_noise

    check_writable(args.output)
    check_writable(args.flags)
    examples, task = _load(args)
    inject = inject_ner_noise if task == "ner" else flip_labels
    noisy, corrupted = inject(examples, args.rate, random_state=args.seed)
    write_dataset(args.output, noisy, task=task)
    atomic_write_text(
        args.flags,
        "".join(
            json.dumps({"id": ex.id, "corrupted": bool(c)}) + "\n"
            for ex, c in zip(noisy, corrupted)
        ),
    )
    logger.info(
        "corrupted %d of %d examples (rate %.2f); wrote %s and %s",
        int(corrupted.sum()),
        len(noisy),
        args.rate,
        args.output,
        args.flags,
    )
    return 0


def cmd_train(args) -> int:
    if not Path(args.output).resolve().parent.is_dir():
        raise DataError(
            f"{args.output}: the directory {Path(args.output).resolve().parent} does not exist"
        )
    examples, task = _load(args)
    weights = read_weights(args.weights, examples) if args.weights else None
    scout = _scout(args, task, examples).fit(examples, sample_weight=weights)
    scout.save(args.output)
    logger.info("saved model to %s", args.output)
    if args.eval:
        report = _task_report(scout, *_read(args, args.eval))
        print(json.dumps(report, indent=2))
    return 0


def _task_report(scout, examples, task) -> dict:
    from subregweigh.metrics import accuracy, entity_f1

    predicted = scout.predict(examples)
    gold = [ex.label for ex in examples]
    if task == "ner":
        return {"examples": len(examples), **entity_f1(gold, predicted)}
    return {"examples": len(examples), "accuracy": accuracy(gold, predicted)}


def _read_column(path: str, column: str) -> dict[str, float]:
    """id -> score from a .jsonl or .csv weights file (``column``; for the default ``score``,
    falling back to ``reliability`` then ``weight``, as older and CrossWeigh files have)."""
    if path.endswith(".csv"):
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    else:
        rows = []
        with open(path, encoding="utf-8") as f:
            for line_no, line in enumerate(f, 1):
                if line.strip():
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError as err:
                        raise DataError(f"{path}:{line_no}: invalid JSON: {err.msg}") from None
    if not rows:
        raise DataError(f"{path}: no rows")
    fallbacks = [column] + (["reliability", "weight"] if column == "score" else [])
    key = next((name for name in fallbacks if name in rows[0]), None)
    if key is None:
        raise DataError(f"{path}: has no {' or '.join(map(repr, fallbacks))} column")
    return {str(row["id"]): float(row[key]) for row in rows}


def cmd_evaluate(args) -> int:
    from subregweigh.metrics import detection_report
    from subregweigh.scout import Scout

    if args.scores and args.flags:
        scores = _read_column(args.scores, args.column)
        flags = _read_column(args.flags, "corrupted")
        missing = sorted(set(flags) - set(scores))
        if missing:
            raise DataError(
                f"{args.scores}: no score for id {missing[0]!r} ({len(missing)} missing)"
            )
        ids = list(flags)
        report = detection_report(
            np.array([scores[i] for i in ids]), np.array([flags[i] > 0 for i in ids])
        )
        report = {
            k: ({str(kk): vv for kk, vv in v.items()} if isinstance(v, dict) else v)
            for k, v in report.items()
        }
    elif args.model and args.data:
        examples, task = _read(args, args.data)
        report = _task_report(Scout.load(args.model), examples, task)
    else:
        raise DataError("evaluate needs --scores and --flags, or --model and --data")
    text = json.dumps(report, indent=2, default=float)
    print(text)
    if args.output:
        atomic_write_text(args.output, text + "\n")
    return 0


def _is_weights_file(path: str) -> bool:
    """Whether ``path`` holds weights written by `weigh` (JSONL records with a weight) rather
    than data to weigh."""
    if not path.lower().endswith(".jsonl"):
        return False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                try:
                    first = json.loads(line)
                except json.JSONDecodeError:
                    return False  # the data reader says what is wrong, naming the line
                return isinstance(first, dict) and "weight" in first
    return False


def _read_json(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except json.JSONDecodeError as err:
        raise DataError(f"{path}:{err.lineno}: invalid JSON ({err.msg})") from None
    if not isinstance(value, dict):
        raise DataError(f"{path}:1: expected a JSON object")
    return value


def cmd_report(args) -> int:
    from subregweigh.io.weights import read_records
    from subregweigh.report import AnnotationTable, build_report
    from subregweigh.report_html import REPORT_SUFFIXES, write_report

    check_writable(args.output, REPORT_SUFFIXES)
    if (args.label_studio_url is None) != (args.project is None):
        raise DataError("links need both --label-studio-url and --project")
    selftest = _read_json(args.selftest) if args.selftest else None
    if _is_weights_file(args.data):
        records = read_records(args.data)
        table = AnnotationTable.from_records(
            [r for _, r in records], [f"{args.data}:{line}" for line, _ in records]
        )
        meta = {"weights": args.data}
    else:
        examples, task = _load(args)
        result = _weigh(args, examples, task)
        columns = _annotation_columns(args, examples)
        table = AnnotationTable.from_result(
            examples, result, task, args.score, tasks=columns.get("task")
        )
        meta = {
            "data": args.data,
            "score": args.score,
            "n_annotations": len(examples),
            "model": args.model or "the bundled MiniLM",
            "settings": {k: v for k, v in _weigh_params(args).items() if k != "progress"},
        }
    link = None
    if args.label_studio_url:
        base = args.label_studio_url.rstrip("/")
        link = lambda task: f"{base}/projects/{args.project}/data?task={task}"  # noqa: E731
    report = build_report(
        table,
        threshold=args.threshold,
        top=args.top,
        expected_error_rate=args.expected_error_rate,
        meta=meta,
        selftest=selftest,
        task_url=link,
    )
    write_report(args.output, report, title=args.title)
    summary = report["summary"]
    print(
        f"{summary['n_doubtful']} of {summary['n']} annotations score below {args.threshold} "
        f"({summary['expected_error_rate']:.1%} errors expected); wrote {args.output}"
    )
    return 0


def cmd_selftest(args) -> int:
    from subregweigh.io.weights import to_json
    from subregweigh.selftest import describe, self_test
    from subregweigh.weigh import SubRegWeigh

    if args.output:
        check_writable(args.output, (".json",))
    examples, task = _load(args)
    outcome = self_test(
        examples,
        task,
        lambda: SubRegWeigh(
            _scout(args, task, examples), **_weigh_params(args), n_scouts=args.scouts, crf=args.crf
        ),
        noises=args.noise,
        rate=args.rate,
        score=args.score,
        random_state=args.seed,
    )
    for result in outcome["results"]:
        print(f"{result['noise']} noise, {result['n_injected']} of {outcome['n']}: ", end="")
        print(describe(result))
    if args.output:
        atomic_write_text(args.output, json.dumps(to_json(outcome), indent=1) + "\n")
    return 0


COMMANDS = {
    "report": cmd_report,
    "selftest": cmd_selftest,
    "weigh": cmd_weigh,
    "crossweigh": cmd_crossweigh,
    "noise": cmd_noise,
    "train": cmd_train,
    "evaluate": cmd_evaluate,
}


def main(argv: list[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING if args.quiet else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    try:
        return COMMANDS[args.command](args)
    except (DataError, ValueError, FileNotFoundError, IsADirectoryError, PermissionError) as err:
        print(f"subregweigh {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("subregweigh: interrupted; no output was written partially", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
