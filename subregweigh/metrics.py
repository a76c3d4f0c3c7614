"""Evaluation: how well reliability scores find corrupted examples, and task scores."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from seqeval.metrics import sequence_labeling, v1
from seqeval.scheme import IOB2
from sklearn.metrics import average_precision_score, roc_auc_score

from subregweigh.tags import entity_spans


def _default_ks(n: int, n_pos: int) -> list[int]:
    ks = [n_pos, round(0.01 * n), round(0.05 * n), round(0.10 * n)]
    return list(dict.fromkeys(min(max(1, int(k)), n) for k in ks))


def hits_at_k(score: np.ndarray, positive: np.ndarray, k: int) -> float:
    """Expected number of positives among the ``k`` highest scores.

    A tie group cut by the top-``k`` boundary counts in proportion (the expectation over a
    random order inside the group), so the result does not depend on the input order.
    """
    threshold = np.sort(score)[::-1][k - 1]
    above = score > threshold
    tied = score == threshold
    n_above = int(above.sum())
    hits = float(positive[above].sum())
    return hits + (k - n_above) * float(positive[tied].sum()) / float(tied.sum())


def detection_report(
    reliability: Any, corrupted: Any, ks: Sequence[int] | None = None
) -> dict[str, Any]:
    """Score reliability values as a detector of corrupted examples.

    The detection score is ``1 - reliability``: less reliable examples rank first.

    Parameters
    ----------
    reliability : array-like of float, shape (n,)
        Values in [0, 1].
    corrupted : array-like of bool, shape (n,)
        True for examples whose label was corrupted (the positives).
    ks : sequence of int, optional
        Cut-offs for precision/recall at k, each in [1, n]. Default: the number of corrupted
        examples and 1%, 5%, 10% of n, each rounded and clipped to [1, n], duplicates dropped.

    Returns
    -------
    dict
        ``n``, ``n_corrupted``, ``n_clean``; ``average_precision`` and ``auroc``
        (sklearn; NaN when there are no positives or no negatives); ``precision_at_k`` and
        ``recall_at_k`` (dicts ``{k: value}``; recall is NaN without positives; a tie group
        at the cut-off counts fractionally); ``mean_reliability_clean`` and
        ``mean_reliability_corrupted`` (NaN if empty); ``note`` (why something is NaN, or "").

    Raises
    ------
    ValueError
        If the shapes differ, ``n == 0``, a reliability is NaN or outside [0, 1], or a k is
        outside [1, n].
    """
    r = np.asarray(reliability, dtype=float)
    y = np.asarray(corrupted)
    if r.ndim != 1 or y.shape != r.shape:
        raise ValueError(
            f"reliability {r.shape} and corrupted {y.shape} must be 1-D of equal length"
        )
    n = r.shape[0]
    if n == 0:
        raise ValueError("no examples")
    if np.isnan(r).any() or (r < 0).any() or (r > 1).any():
        raise ValueError("reliability values must be in [0, 1] (no NaN)")
    if y.dtype != bool:
        if not np.isin(y, (0, 1)).all():
            raise ValueError("corrupted must be boolean (or 0/1)")
        y = y.astype(bool)
    score = 1.0 - r
    n_pos = int(y.sum())
    n_neg = n - n_pos

    notes = []
    if n_pos and n_neg:
        ap = float(average_precision_score(y, score))
        auroc = float(roc_auc_score(y, score))
    else:
        ap = auroc = float("nan")
        which = "corrupted" if not n_pos else "clean"
        notes.append(f"no {which} examples: average precision and AUROC are undefined (NaN)")
    if not n_pos:
        notes.append("recall at k is undefined without corrupted examples (NaN)")

    ks = _default_ks(n, n_pos) if ks is None else [int(k) for k in ks]
    precision_at_k: dict[int, float] = {}
    recall_at_k: dict[int, float] = {}
    for k in ks:
        if not 1 <= k <= n:
            raise ValueError(f"k={k} is outside [1, {n}]")
        hits = hits_at_k(score, y, k)
        precision_at_k[k] = hits / k
        recall_at_k[k] = hits / n_pos if n_pos else float("nan")

    return {
        "n": n,
        "n_corrupted": n_pos,
        "n_clean": n_neg,
        "average_precision": ap,
        "auroc": auroc,
        "precision_at_k": precision_at_k,
        "recall_at_k": recall_at_k,
        "mean_reliability_clean": float(r[~y].mean()) if n_neg else float("nan"),
        "mean_reliability_corrupted": float(r[y].mean()) if n_pos else float("nan"),
        "note": "; ".join(notes),
    }


def entity_f1(
    gold_tag_seqs: Sequence[Sequence[str]],
    pred_tag_seqs: Sequence[Sequence[str]],
    *,
    mode: str | None = "IOB2",
) -> dict[str, float]:
    """Micro entity precision, recall and F1 (seqeval).

    Parameters
    ----------
    gold_tag_seqs, pred_tag_seqs : sequence of sequence of str, length n
        Tag sequences; sequence ``i`` must have the same length in both.
    mode : {"IOB2", None}, default "IOB2"
        ``"IOB2"``: seqeval's strict mode with the IOB2 scheme (an entity must start with
        ``B-``); ``None``: seqeval's default, conlleval-compatible mode.

    Returns
    -------
    dict
        ``precision``, ``recall``, ``f1`` (0.0 when undefined).
    """
    if len(gold_tag_seqs) != len(pred_tag_seqs):
        raise ValueError(f"{len(gold_tag_seqs)} gold vs {len(pred_tag_seqs)} predicted sequences")
    gold = [list(s) for s in gold_tag_seqs]
    pred = [list(s) for s in pred_tag_seqs]
    for i, (g, p) in enumerate(zip(gold, pred)):
        if len(g) != len(p):
            raise ValueError(f"sequence {i}: {len(g)} gold tags vs {len(p)} predicted tags")
    if mode == "IOB2":
        p, r, f, _ = v1.precision_recall_fscore_support(
            gold, pred, average="micro", zero_division=0, scheme=IOB2
        )
    elif mode is None:
        p, r, f, _ = sequence_labeling.precision_recall_fscore_support(
            gold, pred, average="micro", zero_division=0
        )
    else:
        raise ValueError(f"mode must be 'IOB2' or None, got {mode!r}")
    return {"precision": float(p), "recall": float(r), "f1": float(f)}


def entity_recall(
    gold_tag_seqs: Sequence[Sequence[str]], pred_tag_seqs: Sequence[Sequence[str]]
) -> dict[str, dict[str, int]]:
    """Per entity type, how many of the gold entities the predictions hold exactly (the same
    words, the same type): what a scout learned of the annotations it trained on.

    Parameters
    ----------
    gold_tag_seqs, pred_tag_seqs : sequence of sequence of str, length n
        IOB2 tags, sequence ``i`` of the same length in both.

    Returns
    -------
    dict
        ``{type: {"found": int, "total": int}}`` for every type the gold sequences hold, and
        ``"all"`` over them; empty without gold entities.
    """
    if len(gold_tag_seqs) != len(pred_tag_seqs):
        raise ValueError(f"{len(gold_tag_seqs)} gold vs {len(pred_tag_seqs)} predicted sequences")
    out: dict[str, dict[str, int]] = {}
    for gold, pred in zip(gold_tag_seqs, pred_tag_seqs):
        predicted = set(entity_spans(pred))
        for span in entity_spans(gold):
            for key in (span[0], "all"):
                row = out.setdefault(key, {"found": 0, "total": 0})
                row["total"] += 1
                row["found"] += span in predicted
    return out


def accuracy(gold_labels: Sequence[Any], pred_labels: Sequence[Any]) -> float:
    """Fraction of examples whose predicted label equals the gold label exactly.

    Labels are compared as tuples (a whole tag sequence or sorted class tuple); a bare
    string counts as a 1-tuple.
    """
    if len(gold_labels) != len(pred_labels):
        raise ValueError(f"{len(gold_labels)} gold vs {len(pred_labels)} predicted labels")
    if not len(gold_labels):
        raise ValueError("no labels")

    def as_tuple(x: Any) -> tuple:
        return (x,) if isinstance(x, str) else tuple(x)

    same = sum(as_tuple(g) == as_tuple(p) for g, p in zip(gold_labels, pred_labels))
    return same / len(gold_labels)
