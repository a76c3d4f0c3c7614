"""Choosing K of the N sampled segmentations of one text.

Each text's candidates are vectorized with TF-IDF, subword ids as terms and the text's own N draws
as the corpus (a candidate drawn c times counts c times in the document frequencies). Then:

* ``random``: no choice at all; draw N=K segmentations and use every draw.
* ``cossim``: greedy. Take the candidate least similar to the deterministic segmentation, then
  repeatedly the one whose highest similarity to the deterministic segmentation and to those
  already chosen is lowest.
* ``kmeans``: K-means with K clusters (draw counts as sample weights); for each cluster the real
  candidate nearest its centroid vector. (The paper's public code compares candidates with the
  scalar mean of the centroid; the vector is what the method describes.)

Two variants, as the authors' code does them, for the ablation in ``benchmarks/ablation.py``:

* ``cossim-sum``: repeatedly the candidate whose *summed* similarity to the deterministic
  segmentation and to those already chosen is lowest (a candidate may be chosen twice);
* ``kmeans-distinct``: K-means over the distinct candidates, each counted once, so the frequent
  draws (above all the deterministic segmentation itself) weigh no more than rare ones.

Selections return ``(index, multiplicity)``: candidate indices and how many of the K slots each
fills, so that each distinct segmentation is predicted once and counted as often as it was chosen.
:func:`choose_candidates` does it for a data set, each text with its own seed, in one process or
several.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence

import joblib
import numpy as np
from scipy import sparse
from sklearn.cluster import KMeans
from sklearn.exceptions import ConvergenceWarning
from sklearn.feature_extraction.text import TfidfTransformer
from threadpoolctl import threadpool_limits
from tqdm.auto import tqdm

from subregweigh.options import METHODS
from subregweigh.subword import Candidates, Segmentation

logger = logging.getLogger(__name__)

# choose_candidates(n_jobs=...): inputs smaller than this are sampled in-process, and each process
# gets about this many chunks of texts.
MIN_PARALLEL_EXAMPLES = 64
CHUNKS_PER_PROCESS = 4


def tfidf_vectors(
    candidates: Candidates, reference: Segmentation, n_terms: int
) -> tuple[np.ndarray, np.ndarray]:
    """L2-normalized TF-IDF vectors of the candidates and of the reference segmentation.

    Returns
    -------
    X : ndarray of shape (m, t)
        One row per distinct candidate; ``t`` is the number of distinct subwords in play.
    x_ref : ndarray of shape (t,)
    """
    counts = candidates.term_counts(n_terms)
    ref_ids = [i for ids in reference for i in ids]
    ref = sparse.csr_matrix(
        (np.ones(len(ref_ids)), (np.zeros(len(ref_ids), dtype=np.int64), ref_ids)),
        shape=(1, n_terms),
    )
    used = np.union1d(counts.indices, ref.indices)  # only the subwords this text uses
    counts, ref = counts[:, used], ref[:, used]
    draws = counts[np.repeat(np.arange(counts.shape[0]), candidates.counts)]
    transformer = TfidfTransformer().fit(draws)
    return transformer.transform(counts).toarray(), transformer.transform(ref).toarray()[0]


def select_cossim(
    X: np.ndarray, x_ref: np.ndarray, k: int, rule: str = "maxmin"
) -> tuple[np.ndarray, np.ndarray]:
    """Greedy diversity. ``rule="maxmin"``: ``min(k, m)`` distinct candidates, each chosen once,
    each the least similar to its most similar predecessor. ``rule="sum"`` (the authors' code):
    K picks, each the lowest summed similarity to the predecessors; repeats allowed.

    Parameters
    ----------
    X : ndarray of shape (m, t), rows L2-normalized
    x_ref : ndarray of shape (t,), the deterministic segmentation's vector
    """
    if rule == "sum":
        summed = X @ x_ref
        picks = []
        for _ in range(k):
            picks.append(int(np.argmin(summed)))  # ties: lowest index, i.e. first drawn
            summed = summed + X @ X[picks[-1]]
        index, multiplicity = np.unique(picks, return_counts=True)
        return index.astype(np.int64), multiplicity.astype(np.int64)
    m = X.shape[0]
    closest = X @ x_ref  # highest similarity to anything already "taken"
    chosen = []
    for _ in range(min(k, m)):
        closest_masked = closest.copy()
        closest_masked[chosen] = np.inf
        i = int(np.argmin(closest_masked))  # ties: lowest index, i.e. first drawn
        chosen.append(i)
        closest = np.maximum(closest, X @ X[i])
    return np.array(chosen, dtype=np.int64), np.ones(len(chosen), dtype=np.int64)


def select_kmeans(
    X: np.ndarray, counts: np.ndarray | None, k: int, random_state: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """One real, distinct candidate per K-means cluster: the one nearest the centroid vector.

    With ``m <= k`` distinct candidates, all are chosen once.

    Parameters
    ----------
    X : ndarray of shape (m, t)
    counts : ndarray of shape (m,) or None
        Draw counts, used as sample weights; None counts each distinct candidate once.
    """
    m = X.shape[0]
    if m <= k:
        return np.arange(m, dtype=np.int64), np.ones(m, dtype=np.int64)
    with warnings.catch_warnings():
        # Fewer distinct points than clusters after weighting is fine: we dedupe below.
        warnings.simplefilter("ignore", ConvergenceWarning)
        km = KMeans(n_clusters=k, n_init=1, random_state=random_state).fit(X, sample_weight=counts)
    distances = ((X[None, :, :] - km.cluster_centers_[:, None, :]) ** 2).sum(axis=2)  # (k, m)
    chosen: list[int] = []
    # Centroids whose nearest member is taken fall back to their next-nearest member.
    for c in np.argsort(distances.min(axis=1), kind="stable"):
        for i in np.argsort(distances[c], kind="stable"):
            if i not in chosen:
                chosen.append(int(i))
                break
    return np.array(sorted(chosen), dtype=np.int64), np.ones(len(chosen), dtype=np.int64)


def choose(
    candidates: Candidates,
    reference: Segmentation,
    k: int,
    method: str,
    n_terms: int,
    random_state: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Dispatch to a selection ``method``; see the module docstring.

    Returns
    -------
    index : ndarray of shape (j,), distinct candidate indices, j <= k
    multiplicity : ndarray of shape (j,), how many of the K slots each fills
    """
    if method not in METHODS:
        raise ValueError(f"unknown selection method {method!r}; choose one of {', '.join(METHODS)}")
    if method == "random":
        # Random draws exactly K; duplicates fill several slots.
        return np.arange(len(candidates), dtype=np.int64), candidates.counts.copy()
    if len(candidates) == 1:
        return np.zeros(1, dtype=np.int64), np.ones(1, dtype=np.int64)
    X, x_ref = tfidf_vectors(candidates, reference, n_terms)
    if method in ("cossim", "cossim-sum"):
        return select_cossim(X, x_ref, k, rule="sum" if method == "cossim-sum" else "maxmin")
    counts = candidates.counts if method == "kmeans" else None
    return select_kmeans(X, counts, k, random_state)


def sample_and_choose(
    sampler, texts, seeds, n: int, k: int, method: str
) -> tuple[list[Segmentation], list[int], list[int]]:
    """Draw ``n`` segmentations of each text with ``sampler`` and choose ``k`` by ``method``.

    One text at a time, each with its own seed, so the result of a text does not depend on the
    others: :class:`~subregweigh.weigh.SubRegWeigh` runs contiguous chunks of texts in worker
    processes (``n_jobs``) and concatenates. A module-level function of a torch-free module, so
    that it pickles and the workers start without loading torch.

    Parameters
    ----------
    sampler : SubwordSampler
    texts : iterable of sequence of str
        The words of each text (possibly wrapped in a progress bar).
    seeds : sequence of numpy.random.SeedSequence, one per text
    n, k, method :
        Draws per text, K, and the selection method (see :func:`choose`).

    Returns
    -------
    segmentations : list of Segmentation
        The chosen distinct segmentations, text after text.
    sizes : list of int
        How many of them belong to each text.
    multiplicity : list of int
        How many of its text's K slots each fills.
    """
    segmentations, sizes, multiplicity = [], [], []
    # Tiny per-text K-means problems: extra BLAS/OpenMP threads only add contention (6x slower
    # with torch's thread pool alive in the same process).
    with threadpool_limits(1):
        for words, seed in zip(texts, seeds):
            rng = np.random.default_rng(seed)
            drawn = sampler.sample(words, n, rng)
            index, mult = choose(
                drawn,
                sampler.segment(words),
                k,
                method,
                sampler.n_terms,
                random_state=int(rng.integers(2**31 - 1)),
            )
            segmentations.extend(drawn[j] for j in index)
            sizes.append(len(index))
            multiplicity.extend(mult.tolist())
    return segmentations, sizes, multiplicity


def choose_candidates(
    sampler,
    texts: Sequence[Sequence[str]],
    *,
    n: int,
    k: int,
    method: str,
    random_state: int,
    n_jobs: int | None = None,
    progress: bool = True,
) -> tuple[list[Segmentation], np.ndarray, np.ndarray]:
    """The K candidates of every text: :func:`sample_and_choose` with one seed per text (spawned
    from ``random_state``), so results depend neither on batch composition nor on ``n_jobs``.

    Returns ``(segmentations, owner, multiplicity)``: ``owner[j]`` is the index of the text of
    segmentation ``j``, ``multiplicity[j]`` how many of its K slots it fills. ``n_jobs``: None or
    1, this process; -1, one per CPU core; else that many (:func:`n_processes`).
    """
    seeds = np.random.SeedSequence(random_state).spawn(len(texts))
    desc = f"sampling ({method})"
    processes = n_processes(n_jobs, len(texts))
    if processes == 1:
        bar = tqdm(list(texts), desc=desc, unit="text", disable=not progress)
        segmentations, sizes, multiplicity = sample_and_choose(sampler, bar, seeds, n, k, method)
    else:
        segmentations, sizes, multiplicity = _in_processes(
            sampler, list(texts), seeds, n, k, method, processes, desc, progress
        )
    owner = np.repeat(np.arange(len(texts), dtype=np.int64), sizes)
    _warn_if_collapsed(owner, len(texts), k, sampler)
    return segmentations, owner, np.array(multiplicity, dtype=np.int64)


def n_processes(n_jobs: int | None, n_texts: int) -> int:
    """Processes :func:`choose_candidates` uses for ``n_texts``: 1 for small inputs, where
    starting workers costs more than it saves."""
    if n_jobs is None or n_jobs == 1:
        return 1
    n_jobs = joblib.cpu_count() if n_jobs == -1 else int(n_jobs)
    if n_jobs <= 1 or n_texts < max(MIN_PARALLEL_EXAMPLES, 2 * n_jobs):
        return 1
    return n_jobs


def _in_processes(sampler, texts, seeds, n, k, method, n_jobs, desc, progress):
    """:func:`sample_and_choose` over contiguous chunks of ``texts`` in ``n_jobs`` processes
    (about 4 chunks each, so that slow chunks even out), concatenated in order."""
    size = -(-len(texts) // (n_jobs * CHUNKS_PER_PROCESS))
    starts = range(0, len(texts), size)
    jobs = joblib.Parallel(n_jobs=n_jobs, backend="loky", return_as="generator")(
        joblib.delayed(sample_and_choose)(
            sampler, texts[start : start + size], seeds[start : start + size], n, k, method
        )
        for start in starts
    )
    segmentations, sizes, multiplicity = [], [], []
    with tqdm(total=len(texts), desc=desc, unit="text", disable=not progress) as bar:
        for segs, chunk_sizes, mult in jobs:  # in order: chunk after chunk
            segmentations.extend(segs)
            sizes.extend(chunk_sizes)
            multiplicity.extend(mult)
            bar.update(len(chunk_sizes))
    return segmentations, sizes, multiplicity


def _warn_if_collapsed(owner: np.ndarray, n: int, k: int, sampler) -> None:
    # A sampler that barely varies at this p (Unigram at p=0.1: inverse temperature 9)
    # leaves one or two distinct segmentations per text, and the K votes say little.
    few = np.bincount(owner, minlength=n) < min(k, 3)
    if n and few.mean() > 0.5:
        logger.warning(
            "%d of %d examples have fewer than %d distinct segmentations among their K=%d "
            "(%s at p=%g): their scores rest on one or two tokenizations. Raise p (Unigram "
            "models: 0.3 or more; python -m benchmarks.diversity measures it)",
            int(few.sum()),
            n,
            min(k, 3),
            k,
            sampler.kind,
            sampler.p,
        )
