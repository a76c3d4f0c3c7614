"""The command line's arguments: every ``subregweigh`` command and its flags.

The engine's flags (weighing and the scout) are generated from :mod:`subregweigh.options`, which
declares their defaults, choices and help once; :mod:`subregweigh.cli` runs the commands.
Torch-free, so that ``--help`` answers at once.
"""

from __future__ import annotations

import argparse

from subregweigh.options import DEFAULT_NOISES, NOISES, SCOUT_OPTIONS, WEIGH_OPTIONS, add_arguments

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
    """SubRegWeigh's own settings, for every command that weighs (subregweigh.options)."""
    add_arguments(parser.add_argument_group("weighing (SubRegWeigh)"), WEIGH_OPTIONS)


def _add_saved_scout_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--save-scout",
        metavar="DIR",
        help="also save the trained scouts and the CRF here (DIR/scout, DIR/scout-1, ..., "
        "DIR/crf.npz)",
    )
    parser.add_argument(
        "--scout",
        metavar="DIR",
        help="use the scouts and the CRF saved here (--save-scout) instead of training them",
    )


def _add_scout_args(parser: argparse.ArgumentParser) -> None:
    """The scout's settings (subregweigh.options)."""
    add_arguments(parser.add_argument_group("scout (the model that is fine-tuned)"), SCOUT_OPTIONS)


def build_parser() -> argparse.ArgumentParser:
    """The ``subregweigh`` command's parser: every command and its flags."""
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
    train.add_argument("--weights", help="weights file written by weigh")
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
        default=list(DEFAULT_NOISES),
        help=f"noise kinds (default: {' '.join(DEFAULT_NOISES)}; classification runs one: all "
        "flip labels)",
    )
    selftest.add_argument("--rate", type=float, default=0.1, help="(default: 0.1)")
    _add_weigh_args(selftest)
    _add_scout_args(selftest)
    return parser
