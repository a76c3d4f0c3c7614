"""A project's weighers: the unfitted one its settings describe (:func:`engine`) and a published
version's fitted one (:func:`weigher`), loaded at most once per process: the scout cache."""

from __future__ import annotations

import ctypes
import functools
import gc
import logging
import os
import threading
import time
from collections import OrderedDict

from backend.config.settings import Settings
from backend.store.store import CorruptVersion, ProjectStore
from subregweigh.io.labelstudio import LabelingSpec

logger = logging.getLogger(__name__)


# Every training of a project starts from this seed: the same annotations, the same scores.
SEED = 0
# Fitted weighers kept loaded per server process (the least recently used goes first): a
# MiniLM version takes about 100 MB per scout.
CACHED_MODELS = 4


def options(settings: Settings, spec: LabelingSpec | None = None) -> dict:
    """The engine's option values (:data:`subregweigh.options.OPTIONS`) that ``settings`` set:
    its engine and scout settings, by the same names; the rest are the engine's defaults.
    With ``spec``, the encoder is frozen for classification only."""
    from subregweigh.options import BY_NAME

    values = {name: getattr(settings, name) for name in BY_NAME if hasattr(settings, name)}
    values["seed"] = SEED
    if spec is not None:
        values["freeze_encoder"] = settings.freeze_encoder and spec.task == "classification"
    return values


def part_params(settings: Settings) -> dict:
    """The parameters of a fitted weigher's parts, beside its scouts and CRF: what a training
    composes them with and what a published version is loaded with."""
    from subregweigh.build import weigher_params

    return weigher_params(options(settings), progress=False)


def engine(settings: Settings, spec: LabelingSpec):
    """An unfitted :class:`~subregweigh.weigh.SubRegWeigh` for a project labelled as ``spec``."""
    from subregweigh.build import build_weigher

    return build_weigher(options(settings, spec), spec.task, spec.multi_label, progress=False)


# (project dir, version), or (project dir, version, sub-folder) for one control's of several
_weighers: OrderedDict[tuple, object] = OrderedDict()

_weighers_lock = threading.Lock()


def weigher(settings: Settings, store: ProjectStore, version: str, part: str = ""):
    """The fitted SubRegWeigh of ``version`` (``part``: of its sub-folder, one control's of a
    version of several, :func:`control_weighers`), loaded at most once per process; the
    :data:`CACHED_MODELS` most recently used stay loaded.

    Raises :class:`CorruptVersion` when its files do not load (the caller marks it BROKEN).
    """
    from subregweigh.crf import crf_path
    from subregweigh.parts import saved_scouts
    from subregweigh.weigh import SubRegWeigh

    key = (str(store.root.resolve()), version, *((part,) if part else ()))
    with _weighers_lock:  # one load at a time: concurrent requests wait for it, not repeat it
        if key in _weighers:
            _weighers.move_to_end(key)
            return _weighers[key]
        start = time.perf_counter()
        store.verify(version)
        folder = store.versions / version / part if part else store.versions / version
        if not saved_scouts(folder) and not crf_path(folder).is_file():
            raise CorruptVersion(version, "it holds neither a scout nor a CRF")
        try:
            srw = SubRegWeigh.load(folder, **part_params(settings))
        except MemoryError:
            raise
        except Exception as err:
            raise CorruptVersion(
                version, f"the scout does not load ({type(err).__name__}: {err})"
            ) from err
        _weighers[key] = srw
        while len(_weighers) > CACHED_MODELS:
            _weighers.popitem(last=False)
        logger.info(
            "project %s: loaded the scout of version %s in %.1f s (pid %d; %d cached)",
            store.project,
            version,
            time.perf_counter() - start,
            os.getpid(),
            len(_weighers),
        )
        return srw


def control_weighers(settings: Settings, store: ProjectStore, version: str) -> dict:
    """Control name -> the fitted weigher of each control ``version`` weighs: a version of
    several controls' (its meta's ``weighers``, each control's sub-folder), else the version's
    one weigher under the name of the control it weighed. Raises :class:`CorruptVersion` as
    :func:`weigher` does."""
    meta = store.meta(version)
    parts = meta.get("weighers")
    if not parts:
        weighed = (meta.get("controls") or {}).get("weighed") or [{}]
        return {weighed[0].get("name", ""): weigher(settings, store, version)}
    return {p["control"]: weigher(settings, store, version, p["folder"]) for p in parts}


def remember(store: ProjectStore, version: str, srw, part: str = "") -> None:
    """Cache ``srw`` as ``version``'s fitted weigher (``part``: its sub-folder's, one control's
    of several), made in this process (a refresh's, whose scouts are loaded already):
    :func:`weigher` serves it without loading its files."""
    key = (str(store.root.resolve()), version, *((part,) if part else ()))
    with _weighers_lock:
        _weighers[key] = srw
        _weighers.move_to_end(key)
        while len(_weighers) > CACHED_MODELS:
            _weighers.popitem(last=False)


def forget_versions(store: ProjectStore, keep: str) -> None:
    """Drop the loaded scouts of ``store``'s project other than version ``keep``. A project
    serves one version, its newest good one: an older one would stay in the cache only to take
    memory (~100 MB a MiniLM scout) until :data:`CACHED_MODELS` other loads pushed it out."""
    root = str(store.root.resolve())
    with _weighers_lock:
        for key in [k for k in _weighers if k[0] == root and k[1] != keep]:
            del _weighers[key]


@functools.lru_cache(maxsize=1)
def _malloc_trim():
    """glibc's ``malloc_trim``, or None (musl, macOS)."""
    try:
        return ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):
        return None


def release_memory() -> None:
    """Give back to the system the memory a finished training freed: a garbage collection,
    then glibc's ``malloc_trim(0)``, which returns the free pages of every malloc arena.

    Each training runs in a new thread, whose allocations glibc serves from one of up to
    8 x cores arenas; what the scout's tensors free there stayed in the arena, fragmented. With
    superseded versions in the scout cache too, the resident size of an embedded backend grew
    from 947 MiB after the first of 20 tiny warm-started trainings to 1,813 MiB after the 20th;
    with this and :func:`forget_versions`, 707 and 717 MiB
    (tests/operations/test_memory_soak.py)."""
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
