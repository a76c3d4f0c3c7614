"""What every benchmark shares: data, noise, metrics, baselines, tables, plots and provenance.

A benchmark is a module of this package run from the repository root, ``python -m
benchmarks.NAME [options]``, with a ``main(argv=None)``; it declares what it compares and calls
this harness. Each writes ``benchmarks/results/STEM.json`` and ``STEM.md`` (``--out``,
``--name``), and ``python -m benchmarks.index`` lists them all in ``results/INDEX.md``.

Data and noise
    ``DATA``, ``RESULTS``, ``REPO``      ../shared/data; benchmarks/results; the repository
    ``DATASETS``                          name -> (task, file): ``conll`` (CoNLL++ train),
                                          ``sst2`` (train), ``conllpp-dev``, ``conllpp-test``
                                          (CoNLL++: the corrected test set), ``conll2003-test``
                                          (the original eng.testb, sentence by sentence the same)
    ``read_dataset(dataset)``             (task, every example of the file)
    ``sample(examples, n, seed)``         a seeded random subset of n, in file order
    ``load(dataset, n, seed)``            (task, ``sample`` of the data set)
    ``NOISE``, ``corrupt(...)``           noise kinds (sentence, paper, flip) -> (noisy, flags)
    ``noisy_sample(dataset, n, noise, rate, seed)``  (task, noisy, flags): ``load``, ``corrupt``
    ``SEEDS``                             the default number of seeds (runs use 0..SEEDS-1)
Scores and metrics (a *quality* score: lower = more doubtful)
    ``ranking(quality, flags)``           AP, AUROC, precision in the top 50, R-precision
    ``precision_at(quality, flags, k)``   share of errors among the k most doubtful (ties fair)
    ``trivial_baselines(examples, task, seed)``  random, length, entity count (NER)
    ``cleanlab_in_sample(fitted, examples, task)``  cleanlab on a fitted scout's probabilities
    ``word_gold(examples, labels, proba)``  NER: each word's p(annotated tag), per example
    ``served_score(examples, gold, t)``   the product's score from them, at a temperature
    ``soft_min_gold(...)``                the same from a scout's probabilities
    ``lowest_gold(...)``                  their lowest: cleanlab's default quality
    ``cleanlab_out_of_fold(scout, labels, examples, task, folds, seed)``  on K-fold scouts'
    ``timed(fn, *args, **kwargs)``        (fn's result, wall seconds)
    ``timed_cpu(fn, *args, **kwargs)``    (fn's result, wall seconds, CPU seconds)
Summaries, tables, plots
    ``mean_sd(values)``, ``pm(stat)``     {"mean", "sd", "n"}, and "0.512 ± 0.034"
    ``mean_base_rate(runs)``              mean_sd of the runs' base rates
    ``summarize_rows(rows, keys)``        mean_sd of each key present in every row
    ``table(header, rows, align)``        markdown table lines
    ``figure(path)``                      context manager: matplotlib axes saved to path (PNG)
Command line
    ``arguments(doc, name, threads)``     an argparse parser with ``--out``, ``--name``,
                                          ``--threads``
    ``add_precision_argument(parser)``    the scout's ``--precision``
    ``add_view_arguments(parser)``        SubRegWeigh's K views: ``--n-samples``, ``-k``, ``-p``,
                                          ``--method``; ``view_params(args)``, their values
    ``add_backend_arguments(parser, ensemble)``  the backend's SRW_EPOCHS, SRW_K, SRW_N (and
                                          SRW_CRF, SRW_SCOUTS) for a benchmark that runs it
    ``backend_env(args)``                 those given, as the backend's environment
    ``start(threads)``                    logging, and torch threads
Provenance and results
    ``command(name, argv)``               "python -m benchmarks.NAME ARGS"
    ``machine()``, ``matmul_gflops()``    the machine in words; its speed now (GFLOP/s)
    ``git_commit()``                      the commit the code ran at, and if it had changes
    ``now()``, ``stamp(command)``         the provenance fields a result starts with
    ``footer(result)``                    the markdown lines saying command, machine, commit, date
    ``document(lines, result)``           a result's markdown: lines, a blank line, the footer
    ``config(args)``                      arguments as JSON values
    ``save(out, name, result, markdown)`` writes STEM.json and STEM.md atomically
    ``report(args, result, markdown)``    saves as ``args.out/args.name`` and prints the markdown
    ``atomic_write(path, data)``, ``earlier_result(out, name, resume)``
    ``run_seeds(args, name, argv, run_seed, summarize, markdown)``  seeds 0.., saved after each
    ``seeded_main(name, argv, parse_args, run_seed, summarize, markdown)``  a seeded benchmark's
                                          main: arguments, ``start``, ``run_seeds``
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import functools
import json
import logging
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch
from sklearn.metrics import average_precision_score, roc_auc_score

from benchmarks.baselines import (
    cleanlab_scores,
    entity_count_scores,
    entity_first_scores,
    label_indices,
    length_scores,
    out_of_fold_proba,
    random_scores,
)
from subregweigh.encoder import bfloat16_native
from subregweigh.io import read_conll, read_tsv
from subregweigh.metrics import hits_at_k
from subregweigh.noise import inject_ner_noise, inject_sentence_noise
from subregweigh.options import PRECISIONS
from subregweigh.scores import entity_parts, soft_minimum

REPO = Path(__file__).resolve().parents[1]
# ../shared/data beside the checkout; SUBREGWEIGH_DATA elsewhere (a GPU machine, say)
DATA = Path(os.environ.get("SUBREGWEIGH_DATA") or REPO.parent / "shared" / "data")
RESULTS = REPO / "benchmarks" / "results"

# ----------------------------------------------------------------------------- data and noise

DATASETS = {
    "conll": ("ner", DATA / "conllpp" / "conllpp_train.txt"),
    "sst2": ("classification", DATA / "sst2" / "train.tsv"),
    "conllpp-dev": ("ner", DATA / "conllpp" / "conllpp_dev.txt"),
    "conllpp-test": ("ner", DATA / "conllpp" / "conllpp_test.txt"),
    "conll2003-test": ("ner", DATA / "conll2003" / "eng.testb"),
}
NOISE = {  # noise -> (datasets it applies to, default rate)
    "sentence": (("conll", "sst2"), 0.15),
    "paper": (("conll",), 0.10),
    "flip": (("sst2",), 0.10),
}
SEEDS = 3
TOP = 50  # ranking()'s precision in the top TOP


def read_dataset(dataset: str):
    """``(task, examples)``: every example of ``DATASETS[dataset]``, in file order."""
    task, path = DATASETS[dataset]
    return task, read_conll(path) if task == "ner" else read_tsv(path)


def sample_indices(total: int, n: int, seed: int) -> np.ndarray:
    """The sorted indices of a seeded random subset of ``n`` of ``total`` examples."""
    if n > total:
        raise ValueError(f"{n} examples asked for, {total} there")
    return np.sort(np.random.default_rng(seed).choice(total, size=n, replace=False))


def sample(examples: Sequence, n: int, seed: int) -> list:
    """A seeded random subset of ``n`` examples, in file order (the first ``n`` would be a
    handful of documents)."""
    return [examples[i] for i in sample_indices(len(examples), n, seed)]


def load(dataset: str, n: int, seed: int):
    """``(task, examples)``: ``n`` examples of ``dataset`` drawn with ``seed``."""
    task, examples = read_dataset(dataset)
    return task, sample(examples, n, seed)


def corrupt(examples, task: str, noise: str, rate: float, seed: int):
    """``(noisy examples, corrupted flags)``: ``paper``, ``rate`` of all word labels replaced
    (NER); otherwise ``rate`` of the examples get one error each (``sentence``: retype, drop, add
    or shift one entity, NER; ``flip`` or ``sentence`` for classification: another label)."""
    if noise == "paper":
        return inject_ner_noise(examples, rate, random_state=seed)
    return inject_sentence_noise(examples, rate, task=task, random_state=seed)


def noisy_sample(dataset: str, n: int, noise: str, rate: float, seed: int):
    """``(task, noisy examples, corrupted flags)``: :func:`load`'s ``n`` examples of ``dataset``
    drawn with ``seed``, given :func:`corrupt`'s ``noise`` at ``rate`` with the same seed."""
    task, examples = load(dataset, n, seed)
    return (task, *corrupt(examples, task, noise, rate, seed))


# ----------------------------------------------------------------------------- scores, metrics


def precision_at(quality, flags, k: int) -> float:
    """The share of flagged examples among the ``k`` lowest ``quality`` (``min(k, n)`` when
    fewer); a tie group cut by the boundary counts in proportion, so input order is irrelevant."""
    doubt = -np.asarray(quality, dtype=float)
    k = min(int(k), len(doubt))
    if k < 1:
        return float("nan")
    return hits_at_k(doubt, np.asarray(flags, dtype=bool), k) / k


def ranking(quality, flags) -> dict:
    """How ``quality`` (lower = more doubtful) ranks the flagged examples first: ``ap``
    (average precision), ``auroc``, ``precision_at_50`` (errors among the 50 most doubtful, or
    all when fewer) and ``r_precision`` (errors among as many most doubtful as there are errors:
    precision = recall there). NaN when every example or none is flagged."""
    doubt = -np.asarray(quality, dtype=float)
    flags = np.asarray(flags, dtype=bool)
    if np.isnan(doubt).any():
        raise ValueError("NaN score")
    if flags.all() or not flags.any():
        nan = float("nan")
        return {"ap": nan, "auroc": nan, f"precision_at_{TOP}": nan, "r_precision": nan}
    return {
        "ap": float(average_precision_score(flags, doubt)),
        "auroc": float(roc_auc_score(flags, doubt)),
        f"precision_at_{TOP}": precision_at(quality, flags, TOP),
        "r_precision": precision_at(quality, flags, int(flags.sum())),
    }


def trivial_baselines(examples, task: str, seed: int) -> dict[str, np.ndarray]:
    """What a detector gets for free: ``random`` (seeded), ``length`` (longest first) and, for
    NER, ``entity count`` (most entities first) and ``an entity first`` (annotations with an
    entity first, random within, seeded); quality scores."""
    scores = {"random": random_scores(len(examples), seed), "length": length_scores(examples)}
    if task == "ner":
        scores["entity count"] = entity_count_scores(examples)
        scores["an entity first"] = entity_first_scores(examples, seed)
    return scores


def cleanlab_in_sample(fitted, examples, task: str, proba=None, **kwargs) -> np.ndarray:
    """cleanlab's label quality on the probabilities of ``fitted``, a scout trained on these
    very ``examples`` (with cleanlab's defaults: the deterministic p(gold), NER its minimum over
    words; ``kwargs`` go to cleanlab); ``proba``: its ``predict_proba(examples)`` if already
    computed."""
    given = label_indices(examples, fitted.labels_, task)
    proba = fitted.predict_proba(examples) if proba is None else proba
    return cleanlab_scores(given, proba, task, **kwargs)


def word_gold(examples, labels, proba) -> list[np.ndarray]:
    """NER: per example, the probability of each word's annotated tag, shape (n_words,), read
    off ``proba`` (``Scout.predict_proba``, columns in ``labels``' order)."""
    given = label_indices(examples, labels, "ner")
    return [p[np.arange(len(g)), g] for p, g in zip(proba, given)]


def served_score(examples, gold, temperature: float) -> np.ndarray:
    """NER: per example, the product's score from ``gold`` (:func:`word_gold`, one array per
    example): the soft minimum at ``temperature`` of its entity parts (``entity_parts``: each
    annotated entity once, then the words outside them), shape (n,)."""
    return np.array(
        [soft_minimum(entity_parts(g, ex.label), temperature) for g, ex in zip(gold, examples)]
    )


def soft_min_gold(examples, labels, proba, temperature: float) -> np.ndarray:
    """NER: :func:`served_score` from a scout's probabilities, shape (n,)."""
    return served_score(examples, word_gold(examples, labels, proba), temperature)


def lowest_gold(examples, labels, proba) -> np.ndarray:
    """NER: per example, the lowest of its words' p(annotated tag), shape (n,): cleanlab's
    default label quality (``cleanlab.token_classification``), the product's score until
    2026-11-25."""
    return np.array([g.min() for g in word_gold(examples, labels, proba)])


def cleanlab_out_of_fold(scout, labels, examples, task: str, folds: int, seed: int) -> np.ndarray:
    """cleanlab's label quality on out-of-fold probabilities: ``folds`` copies of the unfitted
    ``scout`` (the same family as SubRegWeigh's), each predicting the fold it did not train on;
    ``labels``: the label space, e.g. the fitted scout's ``labels_``."""
    proba = out_of_fold_proba(
        examples, scout, labels, n_folds=folds, random_state=seed, progress=False
    )
    return cleanlab_scores(label_indices(examples, labels, task), proba, task)


def timed(fn: Callable, *args, **kwargs):
    """``(fn(*args, **kwargs), wall seconds)``."""
    began = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - began


def timed_cpu(fn: Callable, *args, **kwargs):
    """``(fn(*args, **kwargs), wall seconds, CPU seconds)``; CPU seconds: this process's, all
    threads (less disturbed than wall time by other jobs on a shared machine)."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - wall, time.process_time() - cpu


# ----------------------------------------------------------------------------- summaries


def mean_sd(values) -> dict:
    """``{"mean", "sd" (sample; NaN for one value), "n"}`` of ``values``."""
    v = np.asarray(values, dtype=float)
    return {
        "mean": float(np.mean(v)),
        "sd": float(np.std(v, ddof=1)) if len(v) > 1 else float("nan"),
        "n": int(len(v)),
    }


def pm(stat: dict, digits: int = 3) -> str:
    """A ``mean_sd`` as "mean ± sd" (the mean alone for one value)."""
    if stat["n"] > 1:
        return f"{stat['mean']:.{digits}f} ± {stat['sd']:.{digits}f}"
    return f"{stat['mean']:.{digits}f}"


def mean_base_rate(runs: Sequence[dict]) -> dict:
    """:func:`mean_sd` of the runs' ``base_rate`` (the share of corrupted examples)."""
    return mean_sd([r["base_rate"] for r in runs])


def summarize_rows(rows: Sequence[dict], keys: Sequence[str]) -> dict:
    """``{key: mean_sd over rows}`` for each of ``keys`` that every row has (results made
    before a key existed lack it)."""
    return {key: mean_sd([r[key] for r in rows]) for key in keys if all(key in r for r in rows)}


def table(header: Sequence[str], rows: Sequence[Sequence], align: str | None = None) -> list[str]:
    """A markdown table's lines; ``align``: one letter per column, ``l`` left, ``r`` right
    (default: the first column left, the rest right)."""
    align = align or "l" + "r" * (len(header) - 1)
    if len(align) != len(header):
        raise ValueError(f"align {align!r} for {len(header)} columns")
    lines = ["| " + " | ".join(header) + " |"]
    lines.append("|" + "".join("---:|" if a == "r" else "---|" for a in align))
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return lines


@contextlib.contextmanager
def figure(path: Path, figsize: tuple[float, float] = (7, 4.5)):
    """``with figure(path) as ax:`` draw on ``ax``; on leaving, the figure is laid out and
    written to ``path`` (PNG, 120 dpi) and closed. No display needed (matplotlib's Agg)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=figsize)
    try:
        yield ax
        fig.tight_layout()
        fig.savefig(path, dpi=120)
    finally:
        plt.close(fig)


# ----------------------------------------------------------------------------- command line


def arguments(doc: str, name: str | None = None, threads: bool = True) -> argparse.ArgumentParser:
    """A benchmark's parser: ``doc`` as its help; ``--out`` (default ``RESULTS``), ``--name``
    (the output file stem, default ``name``; None: the benchmark derives it from the other
    options) and, with ``threads``, ``--threads`` (torch threads)."""
    parser = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    if threads:
        parser.add_argument("--threads", type=int, help="torch threads (default: torch's choice)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="(default: benchmarks/results)")
    parser.add_argument(
        "--name", default=name, help=f"output file stem (default: {name or 'see above'})"
    )
    return parser


def add_precision_argument(parser: argparse.ArgumentParser) -> None:
    """``--precision``, the scout's, default auto. Results recorded before it (float32
    throughout) have no precision in their settings, so they do not resume under it."""
    parser.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="auto",
        help="the scout's forward passes (default: auto, the scout's; results before "
        "2026-11-24 are float32)",
    )


def add_crf_argument(parser: argparse.ArgumentParser) -> None:
    """``--crf`` / ``--no-crf``: NER's CRF beside the scouts (``SubRegWeigh(crf=)``), on as in
    the product."""
    parser.add_argument(
        "--crf",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="NER: the product's CRF beside the scouts (SubRegWeigh(crf=); default: on)",
    )


def add_view_arguments(parser: argparse.ArgumentParser) -> None:
    """SubRegWeigh's K views, as the paper sets them by default: ``--n-samples`` (N),
    ``-k`` (K), ``-p`` (the dropout) and ``--method`` (how the K are chosen); given to the
    weigher by :func:`view_params`."""
    parser.add_argument("--n-samples", type=int, default=500, help="N (default: 500)")
    parser.add_argument("-k", type=int, default=10, help="K (default: 10)")
    parser.add_argument("-p", type=float, default=0.1, help="(default: 0.1)")
    parser.add_argument("--method", default="kmeans", help="K selection (default: kmeans)")


def view_params(args) -> dict:
    """SubRegWeigh's parameters from :func:`add_view_arguments`' arguments."""
    return {"p": args.p, "n_samples": args.n_samples, "k": args.k, "method": args.method}


def add_backend_arguments(parser: argparse.ArgumentParser, ensemble: bool = False) -> None:
    """The engine settings of a backend a benchmark runs, each at the backend's default unless
    given (:func:`backend_env`): ``--epochs``, ``-k``, ``--n-samples`` and, with ``ensemble``,
    ``--crf`` and ``--scouts``."""
    parser.add_argument("--epochs", type=int, help="SRW_EPOCHS (default: the backend's)")
    if ensemble:
        parser.add_argument(
            "--crf",
            action=argparse.BooleanOptionalAction,
            help="SRW_CRF (default: the backend's, on)",
        )
        parser.add_argument(
            "--scouts", type=int, help="SRW_SCOUTS (default: the backend's, 3 for NER)"
        )
    parser.add_argument("-k", type=int, help="SRW_K (default: the backend's, 10)")
    parser.add_argument("--n-samples", type=int, help="SRW_N (default: the backend's, 500)")


def backend_env(args) -> dict[str, str]:
    """The backend's SRW_* settings that the command line gives (:func:`add_backend_arguments`),
    as environment variables; those not given are left out, at the backend's defaults."""
    given = {
        "SRW_EPOCHS": args.epochs,
        "SRW_K": args.k,
        "SRW_N": args.n_samples,
        "SRW_SCOUTS": vars(args).get("scouts"),
    }
    env = {name: str(value) for name, value in given.items() if value is not None}
    if vars(args).get("crf") is not None:
        env["SRW_CRF"] = "true" if args.crf else "false"
    return env


def start(threads: int | None) -> None:
    """What every benchmark does first: INFO logs with the time, the engine's own logs at
    WARNING (one line per run is enough), and ``threads`` torch threads if given."""
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S"
    )
    logging.getLogger("subregweigh").setLevel(logging.WARNING)
    if threads:
        torch.set_num_threads(threads)


# ----------------------------------------------------------------------------- provenance


def command(name: str, argv=None) -> str:
    """The command line that ran benchmark ``name`` (``argv``: main()'s arguments, else
    sys.argv)."""
    args = sys.argv[1:] if argv is None else argv
    return " ".join(["python", "-m", f"benchmarks.{name}", *map(shlex.quote, args)])


def machine() -> str:
    """The machine in words; "bfloat16 native" says what a scout's ``precision="auto"`` ran."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return (
        f"{platform.machine()}, {os.cpu_count()} CPUs, {torch.get_num_threads()} torch threads, "
        f"{'CUDA ' + torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU'}"
        f"{', bfloat16 native' if bfloat16_native(device) else ''}, "
        f"torch {torch.__version__}, Python {platform.python_version()}"
    )


def matmul_gflops(windows: int = 8, window: float = 0.25, n: int = 1024) -> float:
    """This machine's speed now: float32 GFLOP/s of ``n`` x ``n`` matrix products on torch's
    threads, the median of ``windows`` windows of ``window`` seconds (on a shared machine a
    single window can be far off from the next). A scout's training is mostly such products
    (69% of its CPU time, ``training_step``), so results measured at different speeds are
    not compared."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    for _ in range(3):  # warm up the BLAS threads
        torch.mm(a, b)
    rates = []
    for _ in range(windows):
        products, began = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - began) < window:
            torch.mm(a, b)
            products += 1
        rates.append(2 * n**3 * products / elapsed / 1e9)
    return round(statistics.median(rates), 1)


_speed_at_first_stamp = functools.cache(matmul_gflops)


@functools.cache
def git_commit() -> dict:
    """``{"commit": hash or None, "uncommitted_changes": bool}`` of the repository now
    (tracked files only; None outside a git checkout)."""

    def git(*args) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=30
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "--short=12", "HEAD")
    changes = git("status", "--porcelain", "--untracked-files=no") if commit else None
    return {"commit": commit, "uncommitted_changes": bool(changes)}


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def stamp(command_line: str | None = None) -> dict:
    """The provenance fields a result starts with: ``command`` (if given), ``machine``,
    ``date``, ``matmul_gflops`` (the speed check, once per process), ``commit``,
    ``uncommitted_changes``."""
    return {
        **({"command": command_line} if command_line is not None else {}),
        "machine": machine(),
        "date": now(),
        "matmul_gflops": _speed_at_first_stamp(),
        **git_commit(),
    }


def footer(result: dict) -> list[str]:
    """Markdown lines naming the command(s), machine, commit and date of ``result``, and that it
    is incomplete where its ``complete`` says so."""
    lines = []
    if "command" in result:
        lines.append(f"Command: `{result['command']}`")
    if "commands" in result:
        lines += ["Commands:", "", *[f"    {c}" for c in result["commands"]], ""]
    lines.append(
        f"Machine: {result['machine']}."
        + (
            f" Speed check: {result['matmul_gflops']} GFLOP/s (float32 matrix products)."
            if "matmul_gflops" in result
            else ""
        )
    )
    if result.get("commit"):
        changes = " with uncommitted changes" if result.get("uncommitted_changes") else ""
        lines.append(f"Commit: {result['commit']}{changes}.")
    lines.append(f"Date: {result['date']}.")
    if not result.get("complete", True):
        lines.append("INCOMPLETE: stopped before every run finished.")
    return lines


def document(lines: Sequence[str], result: dict) -> str:
    """A result's markdown: ``lines``, a blank line and its :func:`footer`, ending in a newline."""
    return "\n".join([*lines, "", *footer(result)]) + "\n"


# ----------------------------------------------------------------------------- results


def config(args) -> dict:
    """A benchmark's parsed arguments as JSON values (paths as strings)."""
    return {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}


def atomic_write(path: Path, data: bytes | str) -> None:
    """Write ``path`` whole or not at all (a temporary file renamed over it), mode 0644."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)
    os.chmod(tmp, 0o644)  # mkstemp's 0600 would make results unreadable to others
    os.replace(tmp, path)


def earlier_result(out: Path, name: str, resume: bool) -> dict | None:
    """What an earlier run wrote to ``out/name.json``, for ``--resume`` to continue; None without
    ``resume`` or without that file."""
    path = out / f"{name}.json"
    if not resume or not path.exists():
        return None
    return json.loads(path.read_text())


def save(out: Path, name: str, result: dict, markdown: str) -> None:
    """Write ``out/name.json`` and ``out/name.md``."""
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / f"{name}.json", json.dumps(result, indent=2) + "\n")
    atomic_write(out / f"{name}.md", markdown)


def report(args, result: dict, markdown: Callable[[dict], str]) -> None:
    """What a benchmark does with its finished ``result``: :func:`save` it, with its
    ``markdown(result)``, as ``args.out/args.name``, and print the markdown."""
    text = markdown(result)
    save(args.out, args.name, result, text)
    print(text)


def run_planned(args, name: str, argv, planned, run, summarize, markdown, extra=None) -> dict:
    """Run ``run(*plan)`` for each ``plan`` of ``planned`` (tuples of arguments), saving
    ``args.out/args.name`` after each (a stopped run keeps what it finished: ``complete``
    false), the result ``summarize(runs)`` with ``extra``'s fields; prints and returns it.
    ``name``: the benchmark's module, for its command line."""
    command_line = command(name, argv)
    runs: list[dict] = []
    for plan in planned:
        runs.append(run(*plan))
        result = {
            **stamp(command_line),
            "config": config(args),
            "complete": len(runs) == len(planned),
            **(extra or {}),
            "summary": summarize(runs),
            "runs": runs,
        }
        save(args.out, args.name, result, markdown(result))
    print(markdown(result))
    return result


def run_seeds(args, name: str, argv, run_seed, summarize, markdown) -> dict:
    """:func:`run_planned` of ``run_seed(args, seed)`` for seeds 0..args.seeds-1."""
    planned = [(args, seed) for seed in range(args.seeds)]
    return run_planned(args, name, argv, planned, run_seed, summarize, markdown)


def seeded_main(name: str, argv, parse_args, run_seed, summarize, markdown) -> int:
    """The whole ``main`` of a benchmark of seeded runs: ``parse_args(argv)``, :func:`start` with
    its ``--threads``, :func:`run_seeds`; 0, the exit status."""
    args = parse_args(argv)
    start(args.threads)
    run_seeds(args, name, argv, run_seed, summarize, markdown)
    return 0
