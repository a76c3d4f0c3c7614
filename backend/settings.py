"""Backend configuration from the environment (and `_wsgi.py` flags, which set it).

Names shared with the Label Studio ecosystem keep their usual spelling; the engine's own
settings carry the ``SRW_`` prefix.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields

SECRET_NAMES = ("LABEL_STUDIO_API_KEY", "BASIC_AUTH_PASS", "REDIS_PASSWORD")
# The process id tells gunicorn workers and rq workers apart in one log.
LOG_FORMAT = "%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"


def configure_logging(level: str | None = None) -> None:
    """Log to stderr at ``level`` (default: LOG_LEVEL, else INFO)."""
    import logging

    level = (level or os.environ.get("LOG_LEVEL") or "INFO").upper()
    logging.basicConfig(level=getattr(logging, level, logging.INFO), format=LOG_FORMAT)


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def _env(name: str, default, kind=str):
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return kind(raw)
    except ValueError:
        raise SystemExit(
            f"environment variable {name}={raw!r} is not a valid {kind.__name__}"
        ) from None


@dataclass(frozen=True)
class Settings:
    """Every knob of the backend. See the README's configuration table."""

    label_studio_url: str = ""
    label_studio_api_key: str = field(default="", repr=False)
    model_dir: str = "./models"
    basic_auth_user: str = ""
    basic_auth_pass: str = field(default="", repr=False)
    redis_url: str = field(default="", repr=False)
    queue_name: str = "subregweigh"
    # engine
    scout_model: str = ""
    k: int = 10
    n_samples: int = 500
    p: float = 0.1
    method: str = "kmeans"
    w_min: float = 1 / 3
    freeze_encoder: bool = False  # classification scouts of small projects
    epochs: int = 0  # 0: the scout's per-task default
    batch_size: int = 16
    learning_rate: float = 0.0  # 0: the scout's per-task default
    max_length: int = 0
    seed: int = 0
    # when to train
    retrain_after: int = 10
    min_annotations: int = 10
    max_request_mb: int = 50
    # serving and jobs
    cached_models: int = 4  # scouts kept loaded per process (LRU)
    job_lock_seconds: int = 60  # a dead rq worker's training is declared failed this soon

    @classmethod
    def from_env(cls) -> Settings:
        redis_url = _env("REDIS_URL", "")
        if not redis_url and os.environ.get("REDIS_HOST"):
            host, port = os.environ["REDIS_HOST"], _env("REDIS_PORT", 6379, int)
            redis_url = f"redis://{host}:{port}/{_env('REDIS_DB', 0, int)}"
        return cls(
            label_studio_url=_env("LABEL_STUDIO_URL", "").rstrip("/"),
            label_studio_api_key=_env("LABEL_STUDIO_API_KEY", ""),
            model_dir=_env("MODEL_DIR", cls.model_dir),
            basic_auth_user=_env("BASIC_AUTH_USER", ""),
            basic_auth_pass=_env("BASIC_AUTH_PASS", ""),
            redis_url=redis_url,
            queue_name=_env("RQ_QUEUE_NAME", cls.queue_name),
            scout_model=_env("SRW_MODEL", ""),
            k=_env("SRW_K", cls.k, int),
            n_samples=_env("SRW_N", cls.n_samples, int),
            p=_env("SRW_P", cls.p, float),
            method=_env("SRW_METHOD", cls.method),
            w_min=_env("SRW_W_MIN", cls.w_min, float),
            freeze_encoder=_flag("SRW_FREEZE_ENCODER"),
            epochs=_env("SRW_EPOCHS", cls.epochs, int),
            batch_size=_env("SRW_BATCH_SIZE", cls.batch_size, int),
            learning_rate=_env("SRW_LEARNING_RATE", cls.learning_rate, float),
            max_length=_env("SRW_MAX_LENGTH", cls.max_length, int),
            seed=_env("SRW_SEED", cls.seed, int),
            retrain_after=_env("SRW_RETRAIN_AFTER", cls.retrain_after, int),
            min_annotations=_env("SRW_MIN_ANNOTATIONS", cls.min_annotations, int),
            max_request_mb=_env("MAX_REQUEST_MB", cls.max_request_mb, int),
            cached_models=_env("SRW_CACHED_MODELS", cls.cached_models, int),
            job_lock_seconds=_env("SRW_JOB_LOCK_SECONDS", cls.job_lock_seconds, int),
        )

    def public(self) -> dict:
        """The settings without secrets, for logs and the status endpoint."""
        hidden = {"label_studio_api_key", "basic_auth_pass"}
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in hidden}
        if self.redis_url and "@" in self.redis_url:  # redis://:password@host
            scheme, rest = self.redis_url.split("://", 1)
            out["redis_url"] = f"{scheme}://***@{rest.rsplit('@', 1)[1]}"
        return out
