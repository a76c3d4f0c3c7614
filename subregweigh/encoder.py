"""The pretrained encoder under a scout: its tokenizer and width, whether the hardware computes
bfloat16 natively, the model with a head for the task (a token classifier, or the encoder
mean-pooled under a linear head), its transformer layers, and its inputs (:class:`ModelInputs`:
a segmentation's input ids, a long one's windows (:mod:`subregweigh.windows`), and padded batches
of them).
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path
from types import SimpleNamespace

import torch

# At import, not lazily in functions: transformers resolves names on first use, and two threads
# doing that at once (two projects training in one server) fail with an ImportError.
from transformers import AutoConfig, AutoModel, AutoModelForTokenClassification, AutoTokenizer
from transformers import logging as hf_logging

from subregweigh.windows import Windows, plan_windows

logger = logging.getLogger(__name__)


def load_tokenizer(path: str):
    """The fast tokenizer of ``path``, words pre-split (``is_split_into_words``): byte-level
    BPE tokenizers need ``add_prefix_space`` for that, the others refuse the argument."""
    try:
        return AutoTokenizer.from_pretrained(path, use_fast=True, add_prefix_space=True)
    except TypeError:
        return AutoTokenizer.from_pretrained(path, use_fast=True)


@functools.lru_cache(maxsize=16)
def width_of(model: str) -> int | None:
    """:func:`encoder_width` of the model ``model`` names (its config only, not its weights)."""
    return encoder_width(AutoConfig.from_pretrained(model))


def import_model_code(path: str) -> None:
    """Import the ``transformers`` modules of the model at ``path`` (a local folder, or a hub
    name already in the local cache: nothing is downloaded), which ``transformers`` otherwise
    imports lazily on the first load of such a model, some 2 s on 2 cores. A long-running
    process calls it at start-up, so that its first training does not wait for it.

    Raises ``OSError`` where the model's config is not found locally.
    """
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING,
        MODEL_MAPPING,
    )

    config = AutoConfig.from_pretrained(path, local_files_only=True)
    for mapping in (MODEL_MAPPING, MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING):
        if type(config) in mapping:
            mapping[type(config)]  # imports the module that defines the class


def encoder_width(config) -> int | None:
    """The hidden size of a Hugging Face model ``config`` (BERT-like ``hidden_size``, T5-like
    ``d_model``, DistilBERT's ``dim``); None when it declares none of them."""
    for name in ("hidden_size", "d_model", "dim"):
        width = getattr(config, name, None)
        if isinstance(width, int):
            return width
    return None


def bfloat16_native(device: torch.device) -> bool:
    """Whether ``device`` multiplies bfloat16 matrices in hardware: a CPU with AVX512-BF16 or
    AMX (as oneDNN reports it), a CUDA GPU with bfloat16 support."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    if device.type == "cpu":
        supported = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
        return bool(torch.backends.mkldnn.is_available() and supported and supported())
    return False


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


def transformer_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The encoder's transformer layers, lowest first: the longest ``ModuleList`` in ``model``
    (BERT-like ``encoder.layer``, DistilBERT's ``transformer.layer``...)."""
    lists = [m for m in model.modules() if isinstance(m, torch.nn.ModuleList)]
    return list(max(lists, key=len)) if lists else []


def freeze(model, *, encoder: bool = False, embeddings: bool = False, layers: int = 0) -> list:
    """Set which of ``model``'s weights train, and return them: all but, with ``encoder``, the
    whole encoder under a classification head; with ``embeddings``, the word-embedding matrix;
    the lowest ``layers`` transformer layers (:func:`transformer_layers`)."""
    model.requires_grad_(True)  # a warm start refits what this fit's settings say
    if encoder:
        model.encoder.requires_grad_(False)
    if embeddings:
        model.get_input_embeddings().requires_grad_(False)
    stack = transformer_layers(model)
    if not 0 <= layers <= len(stack):
        raise ValueError(f"freeze_layers={layers}: the encoder has {len(stack)} layers")
    for layer in stack[:layers]:
        layer.requires_grad_(False)
    return [p for p in model.parameters() if p.requires_grad]


def load_model(path: str, task: str, labels: list[str], progress: bool = True):
    """The pretrained encoder at ``path`` with a head for ``task`` over ``labels``: a token
    classifier for NER, :class:`MeanPoolClassifier` for classification (a saved scout's head is
    read back; a base encoder's starts fresh)."""
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # "newly initialized head" is expected, not news
    if not progress:
        hf_logging.disable_progress_bar()
    try:
        if task == "classification":
            return MeanPoolClassifier.from_pretrained(path, len(labels))
        return AutoModelForTokenClassification.from_pretrained(
            path,
            num_labels=len(labels),
            id2label=dict(enumerate(labels)),
            label2id={label: i for i, label in enumerate(labels)},
        )
    finally:
        hf_logging.set_verbosity(verbosity)


class ModelInputs:
    """How a tokenizer's segmentations become a model's input: the special tokens around a text's
    subwords, at most ``max_length`` tokens in all (the model's limit when None or larger; its
    ``config``'s position embeddings, when given, bound it too), batches padded with the
    tokenizer's pad id."""

    def __init__(self, tokenizer, max_length: int | None = None, config=None):
        probe = tokenizer(["a"], is_split_into_words=True, return_special_tokens_mask=True)
        ids, special = probe["input_ids"], probe["special_tokens_mask"]
        first = special.index(0)
        self.prefix = ids[:first]
        self.suffix = ids[first + 1 :]
        limit = max_length or getattr(tokenizer, "model_max_length", 512)
        positions = getattr(config, "max_position_embeddings", None) or 512
        self.max_length = int(min(limit, positions, 100_000))
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    @property
    def budget(self) -> int:
        """Subwords a text may have, the special tokens left out."""
        return self.max_length - len(self.prefix) - len(self.suffix)

    def fits(self, seg) -> bool:
        """Whether the segmentation ``seg`` (one tuple of subword ids per word) is read whole,
        in one window."""
        return sum(len(word_ids) for word_ids in seg) <= self.budget

    def encode_windows(self, seg, where: str = "", stride: int | None = None):
        """A segmentation too long for one window as overlapping windows
        (:func:`~subregweigh.windows.plan_windows` over its words' subword counts, ``stride``
        subwords shared; None: half the budget).

        Returns
        -------
        windows : Windows
            Their word spans and each word's owning window.
        encoded : list of (input ids, first subword of each of the window's words)
            One per window, as :meth:`encode` gives them (-1: a word with no subword). A word
            longer than the budget is a window of its own, its subwords cut to the budget
            (logged, naming ``where``).
        """
        budget = self.budget
        windows: Windows = plan_windows([len(word_ids) for word_ids in seg], budget, stride)
        for k in windows.cut:
            start = windows.spans[k][0]
            logger.warning(
                "%s: word %d has %d subwords, more than the %d a window holds; read cut",
                where or "a text",
                start + 1,
                len(seg[start]),
                budget,
            )
        encoded = []
        for start, end in windows.spans:
            ids, first = list(self.prefix), []
            for word_ids in seg[start:end]:
                first.append(len(ids) if word_ids else -1)
                ids.extend(word_ids[:budget])
            encoded.append((ids + list(self.suffix), first))
        return windows, encoded

    def encode(self, seg, where: str = "") -> tuple[list[int], list[int]]:
        """input ids and, per word, the position of its first subword (-1: truncated away);
        a truncation is logged, naming ``where`` (none: silent). The scout encodes so only the
        texts that :meth:`fits`, and reads the others with :meth:`encode_windows`."""
        budget = self.max_length - len(self.prefix) - len(self.suffix)
        ids = list(self.prefix)
        first = []
        for word_ids in seg:
            if word_ids and len(ids) - len(self.prefix) + len(word_ids) <= budget:
                first.append(len(ids))
                ids.extend(word_ids)
            else:
                first.append(-1)
                budget = -1  # nothing after a truncated word: keep word order intact
        if first and first[-1] == -1 and where:
            logger.warning(
                "%s: longer than %d subwords; truncated after word %d of %d",
                where,
                self.max_length,
                sum(f >= 0 for f in first),
                len(first),
            )
        return ids + list(self.suffix), first

    def batches(self, encoded, order, batch_size: int):
        """``(rows, input_ids, attention_mask)`` of each batch of ``batch_size`` texts of
        ``encoded`` (:meth:`encode`'s) taken in ``order``, padded to the batch's longest."""
        for start in range(0, len(order), batch_size):
            batch = [encoded[i] for i in order[start : start + batch_size]]
            width = max(len(ids) for ids, _ in batch)
            input_ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, (ids, _) in enumerate(batch):
                input_ids[row, : len(ids)] = torch.tensor(ids)
                mask[row, : len(ids)] = 1
            yield order[start : start + batch_size], input_ids, mask
