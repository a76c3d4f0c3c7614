"""The engine's vocabularies and options, declared once.

Everything that names a choice of the engine (the selection methods, the scores, the scout's
arithmetic, the self-test's noises) and every option of a weighing that a user sets (the CLI's
flags, the Label Studio backend's engine settings) is declared here, with its default, help,
choices and bounds: the CLI's flags are generated from :data:`OPTIONS` (:func:`add_arguments`),
:func:`subregweigh.build.build_weigher` reads option values by these names, and a settings table
can be generated from them (:meth:`Option.setting`).

Torch-free and light (the standard library alone): the CLI's ``--help`` and the backend's
settings import it before anything heavy loads.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

TASKS = ("ner", "classification")

# How K candidates are chosen from N samples (subregweigh.selection); the last two are the
# authors' code's variants, for the ablation.
METHODS = ("random", "cossim", "kmeans", "cossim-sum", "kmeans-distinct")
DEFAULT_METHOD = "kmeans"

# The quality scores a WeighResult ranks by, the default first. "deterministic" (p(gold) on the
# scouts' deterministic tokenization; SubRegWeigh.weigh_deterministic computes it alone) finds the
# most errors, "probability" averages it over the K candidates, "agreement" is the paper's c/K
# (docs/evaluation.md measures each).
SCORES = ("deterministic", "probability", "agreement")
DEFAULT_SCORE = SCORES[0]

# The arithmetic of a scout's forward passes (Scout(precision=)).
PRECISIONS = ("float32", "bfloat16", "auto")
DEFAULT_PRECISION = "auto"

# The defaults of SubRegWeigh's and the scout's numeric parameters (their signatures and OPTIONS
# read these).
DEFAULT_P = 0.1  # subword regularization strength
DEFAULT_N_SAMPLES = 500  # N
DEFAULT_K = 10  # K
DEFAULT_W_MIN = 1 / 3  # the weight floor
DEFAULT_BATCH_SIZE = 16  # the scout's training batches

# The scout's defaults that depend on the task (Scout.default: None stands for these).
TASK_DEFAULTS = {
    "ner": {"epochs": 3, "learning_rate": 3e-4, "freeze_embeddings": True},
    "classification": {"epochs": 2, "learning_rate": 1e-4, "freeze_embeddings": False},
}
# NER on an encoder wider than SMALL_ENCODER_WIDTH (hidden size; the MiniLM's is 384): the
# MiniLM's 3e-4 is far too high for a base-sized encoder, and 5e-5 for 3 epochs leaves it
# undertrained; 1e-4 for 5 epochs was measured on all-mpnet-base-v2 (hidden 768) against
# CoNLL-2003's real errors (docs/evaluation.md).
SMALL_ENCODER_WIDTH = 512
WIDE_NER_DEFAULTS = {"epochs": 5, "learning_rate": 1e-4}

# The self-test's kinds of injected errors (subregweigh.selftest).
NOISES = ("paper", "sentence", "annotators")
# What a self-test injects unless told otherwise: the annotators' mix, whose AP over its base
# rate comes nearest the real errors' on the same 300-annotation projects of CoNLL++ and both
# tweet slots (6.0, 2.9, 3.4 against the real 4.4, 2.4, 2.4; the sentence noise 8.1, 7.8, 7.4;
# benchmarks/results/selftest-real), in one training instead of two.
DEFAULT_NOISES = ("annotators",)

# The soft minimum's default temperature (subregweigh.scores.soft_minimum): on CoNLL-2003's real
# errors the one that ranks above the plain minimum on both halves of the test set, for one scout
# and for three (docs/evaluation.md).
SOFTMIN_TEMPERATURE = 0.1

# Where the scouts learned too little of their training annotations (subregweigh.learned), a NER
# weigher with a CRF scores by the CRF with the project's memory at this strength
# (subregweigh.memory): on the crowd's tweets, where the default scout finds 24% to 43% of its
# own training entities, it ranks the real errors best of the strengths measured
# (docs/evaluation.md, "The project's memory").
RESTING_MEMORY_STRENGTH = 5.0

# ... and by a CRF trained again at this L2 penalty (subregweigh.crf.FeatureTagger(c2=)): alone
# with the memory on the crowd's tweets (300 and 788, both judgment slots, 3 seeds) it ranks the
# real errors better at 0.03 than at 0.3, the penalty that is best beside the scouts on CoNLL
# (benchmarks/results/resting-crf.md); a weigher whose scouts learned enough keeps the latter.
RESTING_CRF_C2 = 0.03

# Scouts a NER weigher trains by default (default_scouts), by the examples it trains on: three
# seeds beside the CRF rank CoNLL-2003's real errors better than one on the whole test set (3,453
# sentences), and no better on draws of 300 and 1,000 sentences, where they triple the wait
# (docs/evaluation.md: "Scouts by project size"); above the range, three scouts' training would
# take a large project's full ranking past the time it is allowed (benchmarks/scaling.py), where
# one scout with the CRF ranks well already. Classification keeps one (no real-error set
# measured an ensemble there).
NER_SCOUTS = 3
ENSEMBLE_EXAMPLES = (2000, 5000)

_FALSE_DEFAULT = {int: 0, float: 0.0, str: ""}


def default_scouts(task: str, n_examples: int | None = None) -> int:
    """The scouts a weigher of ``task`` trains on ``n_examples`` unless told: for NER
    :data:`NER_SCOUTS` within :data:`ENSEMBLE_EXAMPLES` (``None``: that many), else one; 1 for
    classification."""
    if task != "ner":
        return 1
    low, high = ENSEMBLE_EXAMPLES
    return NER_SCOUTS if n_examples is None or low <= n_examples <= high else 1


@dataclass(frozen=True)
class Option:
    """One option of a weighing: everything a CLI flag or a settings table needs.

    ``default`` None means "the built-in default", described by ``default_help`` (it may depend
    on the task or the encoder); a settings table that cannot hold None uses 0 or "" for it
    (:meth:`setting`), and :func:`subregweigh.build.build_weigher` reads 0, "" and None alike as
    that default. Bounds are what a settings table enforces; the engine checks what it must
    itself.
    """

    name: str  # the option's key (build_weigher's Mapping, the CLI's dest, a setting's name)
    type: type  # str, int, float or bool
    default: Any
    help: str  # what it does, without its default
    flags: tuple[str, ...] = ()  # the CLI's; (): not on the command line
    group: str = "weighing"  # "weighing" (SubRegWeigh) or "scout" (the model fine-tuned)
    choices: tuple = ()
    minimum: float | None = None
    maximum: float | None = None
    below: float | None = None  # an exclusive maximum
    also: tuple = ()  # values allowed outside the bounds (n_jobs=-1)
    default_help: str = ""  # the default in words, where the value alone says too little
    experiment: bool = False  # an experiment switch the benchmarks vary: a server need not show it

    @property
    def default_text(self) -> str:
        """The default as the CLI's help shows it ('' for a switch that is off by default)."""
        if self.default_help:
            return self.default_help
        if self.type is bool:
            return "on" if self.default else ""
        return "" if self.default is None else str(self.default)

    @property
    def metavar(self) -> str:
        """The CLI's name for the value: its last flag's, upper-case (``--n-samples N_SAMPLES``)."""
        return self.flags[-1].lstrip("-").replace("-", "_").upper()

    def setting(self) -> dict[str, Any]:
        """This option as a settings table declares it: ``name``, ``type``, ``default``,
        ``help``, ``choices``, ``minimum``, ``maximum``, ``below``, ``also``. A default of None
        becomes 0 (or "" for a string; a minimum of 0 allows it), and the help says what 0
        stands for."""
        default, help, minimum = self.default, self.help, self.minimum
        if default is None:
            default = _FALSE_DEFAULT[self.type]
            zero = "empty" if self.type is str else "0"
            help = f"{help} ({zero}: {self.default_help or 'the default'})"
            if minimum is not None:
                minimum = min(minimum, 0)
        return {
            "name": self.name,
            "type": self.type,
            "default": default,
            "help": help,
            "choices": self.choices,
            "minimum": minimum,
            "maximum": self.maximum,
            "below": self.below,
            "also": self.also,
        }


WEIGH_OPTIONS = (
    Option(
        "method",
        str,
        DEFAULT_METHOD,
        "how K candidates are chosen from N samples (kmeans-distinct and cossim-sum are the "
        "authors' code's variants)",
        ("--method",),
        choices=METHODS,
        experiment=True,
    ),
    Option(
        "p",
        float,
        DEFAULT_P,
        "subword regularization strength p (the dropout rate of the subword sampler)",
        ("-p", "--dropout"),
        minimum=0.0,
        below=1.0,
    ),
    Option(
        "n_samples",
        int,
        DEFAULT_N_SAMPLES,
        "N, segmentations sampled per example for kmeans and cossim, from which K are chosen "
        "(at least K)",
        ("--n-samples",),
        minimum=1,
    ),
    Option("k", int, DEFAULT_K, "K, the candidates predicted per example", ("-k",), minimum=1),
    Option(
        "w_min",
        float,
        DEFAULT_W_MIN,
        "weight floor: the training weight is max(w_min, c/K)",
        ("--w-min",),
        minimum=0.0,
        maximum=1.0,
        default_help="1/3",
    ),
    Option(
        "softmin_temperature",
        float,
        SOFTMIN_TEMPERATURE,
        "how the words' p(gold) become a text's deterministic or probability score: their soft "
        "minimum at this temperature (cleanlab's softmin; 0: the lowest p(gold))",
        ("--softmin-temperature",),
        minimum=0.0,
        experiment=True,
    ),
    Option(
        "memory_strength",
        float,
        0.0,
        "NER: update each word's p(gold) by how the project's other annotations label the same "
        "word form, the models counting as this many annotations (0: off); on a crowd's tweets "
        "it ranks the real errors better, on CoNLL++ worse, so it is off by default",
        ("--memory-strength",),
        minimum=0.0,
        experiment=True,
    ),
    Option(
        "n_jobs",
        int,
        1,
        "processes that sample and choose the candidates (-1: one per CPU core); the results "
        "are the same for any value",
        ("--n-jobs",),
        minimum=1,
        also=(-1,),
    ),
    Option(
        "n_scouts",
        int,
        None,
        "scouts trained with different seeds, their p(gold) averaged for the deterministic "
        "score: n times the training, better rankings of real errors",
        ("--scouts",),
        minimum=1,
        maximum=10,
        default_help=f"NER: {NER_SCOUTS} from {ENSEMBLE_EXAMPLES[0]:,} to "
        f"{ENSEMBLE_EXAMPLES[1]:,} annotations, else 1; classification: 1",
    ),
    Option(
        "crf",
        bool,
        True,
        "NER: train a CRF over cased word features and pretrained context vectors beside the "
        "scouts (a third of a scout's time) and average its p(gold) half and half with theirs "
        "for the deterministic score (real errors ranked better with the uncased default scout)",
        ("--crf",),
    ),
    Option(
        "rest_on_crf",
        bool,
        True,
        "NER with the CRF: where the scouts found under half of their own training annotations' "
        "entities again (a scout that learned too little, as on a few hundred sparse tweets), "
        f"score by the CRF with the project's memory (strength {RESTING_MEMORY_STRENGTH:g}), "
        f"the CRF trained again at L2 penalty {RESTING_CRF_C2:g}, instead of the scouts' doubts",
        ("--rest-on-crf",),
        experiment=True,
    ),
    Option(
        "score",
        str,
        DEFAULT_SCORE,
        "the ranking, lower = more doubtful: deterministic (the soft minimum of the scouts' "
        "p(gold) on the deterministic tokenization over entities and words; it finds the most "
        "errors), probability (the same, averaged over the K candidates) or agreement (the "
        "paper's c/K); the training weight stays max(w_min, c/K)",
        ("--score",),
        choices=SCORES,
    ),
)

SCOUT_OPTIONS = (
    Option(
        "scout_model",
        str,
        None,
        "the scout encoder: a Hugging Face model name or local path",
        ("--model",),
        group="scout",
        default_help="the bundled offline MiniLM",
    ),
    Option(
        "freeze_encoder",
        bool,
        False,
        "classification: train only a head on the frozen encoder (small data sets; use with "
        "e.g. --epochs 20 --learning-rate 3e-3)",
        ("--freeze-encoder",),
        group="scout",
    ),
    Option(
        "epochs",
        int,
        None,
        "scout training epochs",
        ("--epochs",),
        group="scout",
        minimum=1,
        default_help="3 for NER, 5 on an encoder wider than the MiniLM, 2 for classification",
    ),
    Option(
        "max_steps",
        int,
        None,
        "a training budget in optimizer steps: a large data set trains for fewer passes than "
        "the epochs, so that its scores come sooner",
        ("--max-steps",),
        group="scout",
        minimum=1,
        default_help="no budget",
        experiment=True,
    ),
    Option(
        "min_steps",
        int,
        None,
        "at least this many optimizer steps, however few the texts: a small or sparse data set "
        "passes over its texts more often than the epochs",
        ("--min-steps",),
        group="scout",
        minimum=0,
        default_help="the task's (none)",
        experiment=True,
    ),
    Option(
        "batch_size",
        int,
        DEFAULT_BATCH_SIZE,
        "scout training batch size",
        ("--batch-size",),
        group="scout",
        minimum=1,
    ),
    Option(
        "learning_rate",
        float,
        None,
        "scout learning rate",
        ("--learning-rate",),
        group="scout",
        minimum=0.0,
        default_help="3e-4 for NER, 1e-4 on an encoder wider than the MiniLM; 1e-4 for "
        "classification",
    ),
    Option(
        "max_length",
        int,
        None,
        "subwords the encoder reads at once, special tokens included; a longer text is read in "
        "overlapping windows, each word predicted from the one where it has the most context",
        ("--max-length",),
        group="scout",
        minimum=1,
        default_help="the model's limit",
    ),
    Option(
        "device",
        str,
        None,
        "where the scouts train and predict: cpu, cuda, cuda:1...",
        ("--device",),
        group="scout",
        default_help="cuda if available",
    ),
    Option(
        "precision",
        str,
        DEFAULT_PRECISION,
        "the scouts' forward passes, training and predicting: bfloat16 (matrix products in "
        "bfloat16 under torch.autocast; weights stay float32), float32, or auto: bfloat16 where "
        "the hardware multiplies it natively (CPUs with AVX512-BF16 or AMX, GPUs from Ampere "
        "on), else float32",
        ("--precision",),
        group="scout",
        choices=PRECISIONS,
        experiment=True,
    ),
    Option(
        "quantize",
        bool,
        False,
        "predict with int8 linear layers on CPU: faster weighing passes, scores that move a "
        "little (benchmarks/inference.py measures both)",
        group="scout",
        experiment=True,
    ),
    Option(
        "seed",
        int,
        0,
        "random seed of training and sampling",
        ("--seed",),
        group="scout",
        minimum=0,
    ),
)

OPTIONS = WEIGH_OPTIONS + SCOUT_OPTIONS
BY_NAME: dict[str, Option] = {option.name: option for option in OPTIONS}


def add_arguments(parser, options: Iterable[Option]) -> None:
    """Add a flag for each of ``options`` that has one to ``parser`` (an argparse parser or
    argument group): its value lands in ``args.<name>``, its default is the option's, a bool
    is a switch (``--crf``/``--no-crf`` when on by default)."""
    for option in options:
        if not option.flags:
            continue
        shown = option.default_text
        kwargs: dict[str, Any] = {
            "dest": option.name,
            "default": option.default,
            "help": f"{option.help} (default: {shown})" if shown else option.help,
        }
        if option.type is bool:
            kwargs["action"] = argparse.BooleanOptionalAction if option.default else "store_true"
        else:
            kwargs.update(type=option.type, metavar=option.metavar)
            if option.choices:
                kwargs.update(choices=option.choices, metavar=None)
        parser.add_argument(*option.flags, **kwargs)


def option_values(source, options: Sequence[Option] = OPTIONS) -> dict[str, Any]:
    """The values of ``options`` that ``source`` holds (a Mapping, or an object with them as
    attributes such as argparse's namespace), by name."""
    if isinstance(source, Mapping):
        return {o.name: source[o.name] for o in options if o.name in source}
    return {o.name: getattr(source, o.name) for o in options if hasattr(source, o.name)}
