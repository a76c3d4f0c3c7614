"""A scout's head, as numbers: its label space (:func:`label_space`), what a label becomes to
train on (the target and the weighted loss), and what the logits say back (the labels, their
probabilities, p(gold)).

One :class:`Head` per label space: NER tags a label on each word's first subword; single-label
classification takes a softmax over the classes, multi-label one sigmoid per class.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from subregweigh.example import Example, Task


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


@dataclass(frozen=True)
class Head:
    """The head of a scout over ``labels`` (its ``labels_``) for ``task``."""

    labels: Sequence[str]
    task: str
    multi_label: bool = False

    def target(self, label: tuple[str, ...]):
        """What the loss compares the logits with: NER, the tag index of each word;
        multi-label, a 0/1 vector over the labels; single-label, the class index."""
        index = {name: i for i, name in enumerate(self.labels)}
        if self.task == "ner":
            return [index[tag] for tag in label]
        if self.multi_label:
            vector = np.zeros(len(self.labels), dtype=np.float32)
            vector[[index[c] for c in label]] = 1.0
            return vector
        return index[label[0]]

    def loss(self, logits, texts, targets, weights):
        """Per-text loss times its weight, averaged over the batch (``w * L``).

        ``logits`` are the batch's windows' (NER: shape (n_windows, n_subwords, n_labels);
        classification: (n_windows, n_labels)); ``texts`` holds, per text of the batch, ``(i,
        windows, shares)``: its index into ``targets``, its windows as ``(row of logits, first
        subword of each of the text's words in that window, -1 where the window does not own
        the word)``, and each window's share of the words. A text that fits is one window of
        share 1. NER: a text's loss is the mean over its words, each once, from the window that
        owns it; classification: that of the windows' logits weighted by their shares.
        """
        weights = weights.to(logits.device)
        if self.task == "ner":
            per_example = []
            for i, windows, _ in texts:
                scored = [
                    (
                        logits[b, [p for p in first if p >= 0]],
                        [t for p, t in zip(first, targets[i]) if p >= 0],
                    )
                    for b, first in windows
                ]
                rows = scored[0][0] if len(scored) == 1 else torch.cat([r for r, _ in scored])
                gold = [t for _, tags in scored for t in tags]
                per_example.append(
                    torch.nn.functional.cross_entropy(
                        rows, torch.tensor(gold, device=logits.device)
                    )
                )
            losses = torch.stack(per_example)
        else:
            text_logits = torch.stack(
                [
                    logits[windows[0][0]]
                    if len(windows) == 1
                    else (
                        torch.tensor(shares, dtype=logits.dtype, device=logits.device)[:, None]
                        * logits[[b for b, _ in windows]]
                    ).sum(dim=0)
                    for _, windows, shares in texts
                ]
            )
            rows = [i for i, _, _ in texts]
            if self.multi_label:
                gold = torch.tensor(np.stack([targets[i] for i in rows]), device=logits.device)
                losses = torch.nn.functional.binary_cross_entropy_with_logits(
                    text_logits, gold, reduction="none"
                ).mean(dim=1)
            else:
                gold = torch.tensor([targets[i] for i in rows], device=logits.device)
                losses = torch.nn.functional.cross_entropy(text_logits, gold, reduction="none")
        return (weights * losses).mean()

    def decode(self, logits, first_positions) -> tuple[str, ...]:
        """The label of one text's ``logits`` (NER: shape (n_subwords, n_labels), read at each
        word's first subword, ``"O"`` for a word truncated away (-1); classification: shape
        (n_labels,))."""
        if self.task == "ner":
            best = logits.argmax(dim=-1).tolist()
            return tuple(self.labels[best[p]] if p >= 0 else "O" for p in first_positions)
        if self.multi_label:
            return tuple(self.labels[i] for i in np.flatnonzero(logits.numpy() > 0.0))
        return (self.labels[int(logits.argmax())],)

    def proba(self, logits, first_positions) -> torch.Tensor:
        """Every label's probability from one text's ``logits``: see
        :meth:`subregweigh.scout.Scout.predict_proba`."""
        if self.task == "ner":
            kept = torch.tensor([max(p, 0) for p in first_positions], dtype=torch.long)
            proba = torch.softmax(logits[kept], dim=-1)
            truncated = torch.tensor([p < 0 for p in first_positions], dtype=torch.bool)
            if truncated.any():
                proba[truncated] = 0.0
                proba[truncated, list(self.labels).index("O")] = 1.0
            return proba
        if self.multi_label:
            return torch.sigmoid(logits)
        return torch.softmax(logits, dim=-1)

    def gold_proba(self, proba: np.ndarray, gold, index) -> np.ndarray:
        """p(``gold``) from one text's :meth:`proba` (``index``: label -> column); see
        :meth:`subregweigh.scout.Scout.score_segmentations`."""
        if self.task == "ner":
            cols = np.array([index.get(tag, -1) for tag in gold], dtype=np.int64)
            p = proba[np.arange(len(cols)), np.maximum(cols, 0)]
            return np.where(cols >= 0, p, 0.0).astype(np.float32)
        if self.multi_label:
            member = np.zeros(len(self.labels), dtype=bool)
            member[[index[c] for c in gold if c in index]] = True
            unknown = sum(c not in index for c in gold)
            p = np.where(member, proba, 1.0 - proba)
            return np.concatenate([p, np.zeros(unknown)]).astype(np.float32)
        known = len(gold) == 1 and gold[0] in index
        return np.array([proba[index[gold[0]]] if known else 0.0], dtype=np.float32)
