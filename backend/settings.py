"""Backend configuration: one :class:`Settings` object, built once, validated when built.

:meth:`Settings.from_env` is the one place that reads it: the environment, then the flags of
``_wsgi.py`` (which win). The server, its job runner and the trainings it starts all use that
object; nothing re-reads the environment behind it. An rq worker is another process, so a
training job carries the server's :meth:`Settings.training` (what a training computes: the
engine, the scout, when there is enough to train) and the worker adds its own environment's
:meth:`~Settings.from_env` for where things are and the credentials (MODEL_DIR, Label Studio,
Redis), which may differ from machine to machine and never travel through Redis, and for the
processes that sample candidates (SRW_N_JOBS: that machine's cores; the scores do not depend on
it).

Names shared with the Label Studio ecosystem keep their usual spelling; the engine's own
settings carry the ``SRW_`` prefix.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields

# The process id tells gunicorn workers and rq workers apart in one log.
LOG_FORMAT = "%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"

# The engine's selection methods (subregweigh.selection.METHODS, held equal by a test): importing
# that module would load scikit-learn here, in every process, before anything is served.
METHODS = ("random", "cossim", "kmeans", "cossim-sum", "kmeans-distinct")
# The same for the scout's arithmetic (subregweigh.scout.PRECISIONS): importing it loads torch.
PRECISIONS = ("float32", "bfloat16", "auto")
# The same for the quality scores (subregweigh.weigh.SCORES); the first is the default.
SCORES = ("deterministic", "probability", "agreement")

# The training settings that shape the scout: a version trained with other values is not
# refitted (warm-started) but replaced by a training from the base encoder.
SCOUT = (
    "scout_model",
    "freeze_encoder",
    "epochs",
    "batch_size",
    "learning_rate",
    "max_length",
    "seed",
)
# What a training computes: the server's values go with every training job.
TRAINING = (
    *SCOUT,
    "k",
    "n_samples",
    "p",
    "method",
    "score",
    "w_min",
    "min_annotations",
    "warm_start",
    "warm_epochs",
    "full_retrain_every",
    "quantize",
    "precision",
)


class SettingsError(ValueError):
    """Settings the backend cannot run with; the message names the variable and why."""


def configure_logging(level: str | None = None) -> None:
    """Log to stderr at ``level`` (default: LOG_LEVEL, else INFO)."""
    import logging

    level = (level or os.environ.get("LOG_LEVEL") or "INFO").upper()
    logging.basicConfig(level=getattr(logging, level, logging.INFO), format=LOG_FORMAT)


def _flag(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return default
    if raw not in {"1", "true", "yes", "on", "0", "false", "no", "off"}:
        raise SettingsError(f"environment variable {name}={raw!r} is not 1/0, true/false, on/off")
    return raw in {"1", "true", "yes", "on"}


def _env(name: str, default, kind=str):
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return kind(raw)
    except ValueError:
        raise SettingsError(
            f"environment variable {name}={raw!r} is not a valid {kind.__name__}"
        ) from None


@dataclass(frozen=True)
class Settings:
    """Every knob of the backend. See the README's configuration table.

    Raises :class:`SettingsError` when built with values no training could run with.
    """

    label_studio_url: str = ""
    label_studio_api_key: str = field(default="", repr=False)
    label_studio_public_url: str = ""  # Label Studio as browsers reach it (report links)
    model_dir: str = "./models"
    basic_auth_user: str = ""
    basic_auth_pass: str = field(default="", repr=False)
    # Label Studio's webhook authenticates with a token derived from this, not the password
    # (backend.webhook_auth); empty: generated once into MODEL_DIR/.webhook-secret
    webhook_secret: str = field(default="", repr=False)
    redis_url: str = field(default="", repr=False)
    queue_name: str = "subregweigh"
    # engine
    scout_model: str = ""
    k: int = 10
    n_samples: int = 500
    p: float = 0.1
    method: str = "kmeans"
    score: str = SCORES[0]  # what a task's prediction score is (lower = review first)
    w_min: float = 1 / 3
    freeze_encoder: bool = False  # classification scouts of small projects
    epochs: int = 0  # 0: the scout's per-task default
    batch_size: int = 16
    learning_rate: float = 0.0  # 0: the scout's per-task default
    max_length: int = 0
    seed: int = 0
    # how to retrain: refit the current version's scout for warm_epochs when its labels and
    # scout settings still hold, but from the base encoder every full_retrain_every-th time
    warm_start: bool = False
    warm_epochs: int = 1
    full_retrain_every: int = 5
    quantize: bool = False  # int8 forward passes on CPU (faster weighing, scores move a little)
    precision: str = "auto"  # bfloat16 forward passes where the hardware has them, else float32
    # processes sampling a training's candidates (-1: one per core); the same scores for any
    # value, so it is this machine's setting (an rq worker's own), not one a job carries
    n_jobs: int = 1
    # when to train
    retrain_after: int = 10
    min_annotations: int = 10
    max_request_mb: int = 50
    # serving and jobs
    cached_models: int = 4  # scouts kept loaded per process (LRU)
    job_lock_seconds: int = 60  # a dead rq worker's training is declared failed this soon

    def __post_init__(self):
        # At start-up, not in a training hours later: say which variable is wrong.
        def require(ok: bool, name: str, rule: str) -> None:
            if not ok:
                raise SettingsError(f"{_NAMES[name]} is {getattr(self, name)!r}; {rule}")

        require(self.method in METHODS, "method", f"choose one of {', '.join(METHODS)}")
        require(self.score in SCORES, "score", f"choose one of {', '.join(SCORES)}")
        require(self.precision in PRECISIONS, "precision", f"choose one of {', '.join(PRECISIONS)}")
        require(self.k >= 1, "k", "K must be at least 1")
        require(
            self.n_samples >= self.k,
            "n_samples",
            f"N must be at least K ({_NAMES['k']} is {self.k})",
        )
        require(0.0 <= self.p < 1.0, "p", "p must be in [0, 1)")
        require(0.0 <= self.w_min <= 1.0, "w_min", "the weight floor must be in [0, 1]")
        require(
            self.n_jobs == -1 or self.n_jobs >= 1,
            "n_jobs",
            "it must be at least 1, or -1 for one process per CPU core",
        )
        for name in ("epochs", "learning_rate", "max_length", "seed"):
            require(getattr(self, name) >= 0, name, "it must not be negative (0: the default)")
        for name in (
            "batch_size",
            "warm_epochs",
            "full_retrain_every",
            "retrain_after",
            "min_annotations",
            "max_request_mb",
            "cached_models",
            "job_lock_seconds",
        ):
            require(getattr(self, name) >= 1, name, "it must be at least 1")
        require(bool(self.queue_name), "queue_name", "the queue needs a name")
        if self.webhook_secret and len(self.webhook_secret) < 16:
            # Not require(): the message would repeat the secret.
            raise SettingsError("SRW_WEBHOOK_SECRET is shorter than 16 characters")

    @classmethod
    def from_env(cls, **flags) -> Settings:
        """Settings from the environment, where ``flags`` (field name -> value; None: not
        given), such as ``_wsgi.py``'s command line, win."""
        unknown = set(flags) - {f.name for f in fields(cls)}
        if unknown:
            raise TypeError(f"unknown settings {sorted(unknown)}")
        redis_url = _env("REDIS_URL", "")
        if not redis_url and os.environ.get("REDIS_HOST"):
            host, port = os.environ["REDIS_HOST"], _env("REDIS_PORT", 6379, int)
            redis_url = f"redis://{host}:{port}/{_env('REDIS_DB', 0, int)}"
        values = dict(
            label_studio_url=_env("LABEL_STUDIO_URL", ""),
            label_studio_api_key=_env("LABEL_STUDIO_API_KEY", ""),
            label_studio_public_url=_env("LABEL_STUDIO_PUBLIC_URL", ""),
            model_dir=_env("MODEL_DIR", cls.model_dir),
            basic_auth_user=_env("BASIC_AUTH_USER", ""),
            basic_auth_pass=_env("BASIC_AUTH_PASS", ""),
            webhook_secret=_env("SRW_WEBHOOK_SECRET", ""),
            redis_url=redis_url,
            queue_name=_env("RQ_QUEUE_NAME", cls.queue_name),
            scout_model=_env("SRW_MODEL", ""),
            k=_env("SRW_K", cls.k, int),
            n_samples=_env("SRW_N", cls.n_samples, int),
            p=_env("SRW_P", cls.p, float),
            method=_env("SRW_METHOD", cls.method),
            score=_env("SRW_SCORE", cls.score),
            w_min=_env("SRW_W_MIN", cls.w_min, float),
            freeze_encoder=_flag("SRW_FREEZE_ENCODER"),
            epochs=_env("SRW_EPOCHS", cls.epochs, int),
            batch_size=_env("SRW_BATCH_SIZE", cls.batch_size, int),
            learning_rate=_env("SRW_LEARNING_RATE", cls.learning_rate, float),
            max_length=_env("SRW_MAX_LENGTH", cls.max_length, int),
            seed=_env("SRW_SEED", cls.seed, int),
            warm_start=_flag("SRW_WARM_START", cls.warm_start),
            quantize=_flag("SRW_QUANTIZE"),
            precision=_env("SRW_PRECISION", cls.precision),
            n_jobs=_env("SRW_N_JOBS", cls.n_jobs, int),
            warm_epochs=_env("SRW_WARM_EPOCHS", cls.warm_epochs, int),
            full_retrain_every=_env("SRW_FULL_RETRAIN_EVERY", cls.full_retrain_every, int),
            retrain_after=_env("SRW_RETRAIN_AFTER", cls.retrain_after, int),
            min_annotations=_env("SRW_MIN_ANNOTATIONS", cls.min_annotations, int),
            max_request_mb=_env("MAX_REQUEST_MB", cls.max_request_mb, int),
            cached_models=_env("SRW_CACHED_MODELS", cls.cached_models, int),
            job_lock_seconds=_env("SRW_JOB_LOCK_SECONDS", cls.job_lock_seconds, int),
        )
        values.update((name, value) for name, value in flags.items() if value is not None)
        values["label_studio_url"] = values["label_studio_url"].rstrip("/")
        values["label_studio_public_url"] = values["label_studio_public_url"].rstrip("/")
        return cls(**values)

    @property
    def task_link_base(self) -> str:
        """Label Studio's address for links a browser follows: LABEL_STUDIO_PUBLIC_URL, else
        LABEL_STUDIO_URL (when the backend reaches it as browsers do)."""
        return self.label_studio_public_url or self.label_studio_url

    def training(self) -> dict:
        """What a training computes (:data:`TRAINING`), as plain values a job can carry."""
        return {name: getattr(self, name) for name in TRAINING}

    def with_training(self, training: Mapping) -> Settings:
        """These settings with ``training`` (from :meth:`training`, say another process's)."""
        unknown = set(training) - set(TRAINING)
        if unknown:
            raise SettingsError(f"not training settings: {sorted(unknown)}")
        return dataclasses.replace(self, **training)

    def public(self) -> dict:
        """The settings without secrets, for logs and the status endpoint."""
        hidden = {"label_studio_api_key", "basic_auth_pass", "webhook_secret"}
        from backend.redact import redact

        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in hidden}
        for name in ("label_studio_url", "label_studio_public_url", "redis_url"):
            out[name] = redact(out[name])  # scheme://user:password@host
        return out


# How a setting is given: its environment variable, and _wsgi.py's flag for it.
_NAMES = {
    "method": "SRW_METHOD (--method)",
    "score": "SRW_SCORE (--score)",
    "precision": "SRW_PRECISION",
    "k": "SRW_K (-k)",
    "n_samples": "SRW_N (--n-samples)",
    "p": "SRW_P (-p)",
    "w_min": "SRW_W_MIN (--w-min)",
    "epochs": "SRW_EPOCHS (--epochs)",
    "learning_rate": "SRW_LEARNING_RATE",
    "max_length": "SRW_MAX_LENGTH",
    "seed": "SRW_SEED",
    "batch_size": "SRW_BATCH_SIZE",
    "n_jobs": "SRW_N_JOBS",
    "warm_epochs": "SRW_WARM_EPOCHS",
    "full_retrain_every": "SRW_FULL_RETRAIN_EVERY",
    "retrain_after": "SRW_RETRAIN_AFTER (--retrain-after)",
    "min_annotations": "SRW_MIN_ANNOTATIONS (--min-annotations)",
    "max_request_mb": "MAX_REQUEST_MB",
    "cached_models": "SRW_CACHED_MODELS",
    "job_lock_seconds": "SRW_JOB_LOCK_SECONDS",
    "queue_name": "RQ_QUEUE_NAME (--queue-name)",
}
