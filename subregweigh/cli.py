"""Command line: ``subregweigh {weigh,noise,train,evaluate,report,selftest}``, run by :func:`main`
(the flags: :mod:`subregweigh.cli_args`).

Every command reads CoNLL (2 or 4 columns, IOB1 or IOB2), TSV (``sentence<TAB>label``), JSONL or
a Label Studio JSON export, chosen by extension or ``--format``, and writes its outputs
atomically. Bad input ends with one line naming the file and line at fault, and exit status 2.
"""

from __future__ import annotations

import csv
import json
import logging
import sys
import time
from pathlib import Path

import numpy as np

from subregweigh.cli_args import build_parser
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
from subregweigh.options import option_values

logger = logging.getLogger("subregweigh")


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


def _multi_label(task, examples) -> bool:
    return task == "classification" and any(len(ex.label) != 1 for ex in examples)


def _options(args) -> dict:
    """The engine's option values the command line set (subregweigh.options)."""
    return option_values(args)


WEIGHTS_SUFFIXES = (".jsonl", ".csv", ".conll", ".txt")


def _weigh(args, examples, task, reference=()):
    """Train (or load) the scouts and weigh ``examples``: ``(weigher, WeighResult)``.
    ``reference``: more annotated examples to train on, not weighed. A scout that learned too
    little of its training annotations is warned about in the log."""
    from subregweigh.build import build_weigher, weigher_params
    from subregweigh.weigh import SubRegWeigh

    start = time.perf_counter()
    options = _options(args)
    if getattr(args, "scout", None):
        srw = SubRegWeigh.load(
            args.scout,
            device=args.device,
            precision=args.precision,
            crf=args.crf,
            **weigher_params(options, progress=not args.quiet),
        )
        logger.info(
            "loaded %d scout(s) from %s%s",
            len(srw.scouts_),
            args.scout,
            " with the CRF" if srw.crf_ is not None else "",
        )
    else:
        training = [*examples, *reference]
        srw = build_weigher(
            options, task, _multi_label(task, training), progress=not args.quiet
        ).fit(training)
        logger.info(
            "trained %d scout(s) on %d examples in %.1f s",
            len(srw.scouts_),
            len(training),
            time.perf_counter() - start,
        )
        if getattr(args, "save_scout", None):
            srw.save(args.save_scout)
            logger.info("saved %d scout(s) to %s", len(srw.scouts_), args.save_scout)
    if srw.learned_ is not None and srw.learned_.too_little:
        logger.warning("%s", srw.learned_.message())
    return srw, srw.weigh(examples)


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
    _, result = _weigh(args, examples, task, reference)
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
    from subregweigh.build import build_scout

    weights = read_weights(args.weights, examples) if args.weights else None
    scout = build_scout(_options(args), task, _multi_label(task, examples), not args.quiet)
    scout.fit(examples, sample_weight=weights)
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
    from subregweigh.build import weigher_params
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
        meta, learned = {"weights": args.data}, None
    else:
        examples, task = _load(args)
        srw, result = _weigh(args, examples, task)
        learned = srw.learned_
        columns = _annotation_columns(args, examples)
        table = AnnotationTable.from_result(
            examples, result, task, args.score, tasks=columns.get("task")
        )
        meta = {
            "data": args.data,
            "score": args.score,
            "n_annotations": len(examples),
            "model": args.scout_model or "the bundled MiniLM",
            "settings": {
                k: v for k, v in weigher_params(_options(args)).items() if k != "progress"
            },
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
        learned=learned,
    )
    write_report(args.output, report, title=args.title)
    summary = report["summary"]
    print(
        f"{summary['n_doubtful']} of {summary['n']} annotations score below {args.threshold} "
        f"({summary['expected_error_rate']:.1%} errors expected); wrote {args.output}"
    )
    return 0


def cmd_selftest(args) -> int:
    from subregweigh.build import build_weigher
    from subregweigh.io.weights import to_json
    from subregweigh.selftest import describe, self_test

    if args.output:
        check_writable(args.output, (".json",))
    examples, task = _load(args)
    outcome = self_test(
        examples,
        task,
        lambda: build_weigher(
            _options(args), task, _multi_label(task, examples), progress=not args.quiet
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
    "noise": cmd_noise,
    "train": cmd_train,
    "evaluate": cmd_evaluate,
}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
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
