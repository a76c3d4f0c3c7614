"""Backend configuration: one :class:`Settings` object, built once, validated when built.

Every setting is declared once, in :data:`SETTINGS`: its field, type, default, bounds or
choices, help, environment variable, ``_wsgi.py`` flag, and whether it is a secret, a training
setting, one a project may override (:mod:`backend.config.project_settings`), and one its scores
depend on. The :class:`Settings` dataclass, :meth:`Settings.from_env`,
the validation and its messages, ``_wsgi.py``'s flags (:func:`add_arguments`),
:meth:`Settings.public`, and the generated docs/configuration.md and docker-compose.yml
environment (:mod:`backend.config.settings_docs`, held equal by a test) all come from it.

:meth:`Settings.from_env` is the one place that reads it: the environment, then the flags of
``_wsgi.py`` (which win). The server, its job runner and the trainings it starts all use that
object; nothing re-reads the environment behind it. An rq worker is another process, so a
training job carries the server's :meth:`Settings.training` (what a training computes: the
engine, the scout, when there is enough to train) and the worker adds its own environment's
:meth:`~Settings.from_env` for where things are and the credentials (MODEL_DIR, Label Studio,
Redis), which may differ from machine to machine and never travel through Redis.

The settings are what a user sets: where things are, credentials, limits, and the few engine
choices a project lead makes. The engine's experiment switches (selection methods, scores,
precision, dropout, ...) are parameters of :class:`~subregweigh.weigh.SubRegWeigh` and
:class:`~subregweigh.scout.Scout`, reached from the benchmarks, not settings.

Names shared with the Label Studio ecosystem keep their usual spelling (and label-studio-ml's
LABEL_STUDIO_HOST and LABEL_STUDIO_ACCESS_TOKEN are read where ours are unset); the engine's
own settings carry the ``SRW_`` prefix.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import difflib
import math
import numbers
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from backend.config.echo import shown
from backend.config.redact import redact
from subregweigh.options import BY_NAME as ENGINE_OPTIONS

_TYPE_WORDS = {str: "a string", int: "an integer", float: "a number", bool: "True or False"}
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


class SettingsError(ValueError):
    """Settings the backend cannot run with; the message names the variable and why."""


@dataclass(frozen=True)
class Setting:
    """The declaration of one setting: everything else about it is derived from this."""

    name: str  # the Settings field, and its key in _wsgi.py --kwargs
    type: type  # str, int, float or bool
    default: Any
    help: str  # what it does: the flag's help and the docs' meaning
    env: str  # the environment variable
    flags: tuple[str, ...] = ()  # _wsgi.py's; (): environment (and --kwargs) only
    group: str = "server"  # a key of GROUPS: the docs' section, compose's comment
    choices: tuple = ()
    minimum: float | None = None
    maximum: float | None = None
    below: float | None = None  # an exclusive maximum
    also: tuple = ()  # values allowed outside the bounds (say, -1 for one per CPU core)
    min_length: int = 0  # str; when the default is empty, empty is allowed (and means unset)
    pattern: str = ""  # str: a regular expression a non-empty value must match whole
    rule: str = ""  # the bounds in words, for messages and docs (default: from the bounds)
    secret: bool = False  # never in public(), repr or an error message
    url: bool = False  # may hold user:password@: public() masks the password
    training: bool = False  # what a training computes: travels with a queued job (TRAINING)
    per_project: bool = False  # a project may override it (its connection's extra parameters)
    scoring: bool = False  # the scores depend on it: a project's change of it retrains (SCORING)
    fallbacks: tuple[str, ...] = ()  # other variables read, in order, when env is unset
    compose: str | None = None  # docker-compose.yml's value; None: ${ENV:-default}

    @property
    def names(self) -> str:
        """How it is given, for messages: ``SRW_K (-k)``."""
        return f"{self.env} ({'/'.join(self.flags)})" if self.flags else self.env

    @property
    def bounds(self) -> str:
        """The values it takes, in words ('' when any of its type)."""
        if self.rule:
            return self.rule
        if self.choices:
            return f"one of {', '.join(map(str, self.choices))}"
        low = _number(self.minimum)
        if self.below is not None:
            return f"in [{low}, {_number(self.below)})"
        if self.maximum is not None:
            return f"in [{low}, {_number(self.maximum)}]"
        if self.minimum is not None:
            return f"at least {low}"
        if self.min_length == 1:
            return "not empty"
        if self.min_length:
            return f"at least {self.min_length} characters" + (
                ", or empty" if not self.default else ""
            )
        return ""

    @property
    def requirement(self) -> str:
        """What an error message asks for."""
        if self.choices and not self.rule:
            return f"choose one of {', '.join(map(str, self.choices))}"
        return "it must not be empty" if self.bounds == "not empty" else f"it must be {self.bounds}"

    def parse(self, raw: str, source: str):
        """``raw`` (from the environment or --kwargs) as this setting's type; ``source`` names
        where it came from in the message."""
        raw = raw.strip() if self.type is not str else raw
        if self.type is bool:
            if raw.lower() not in _TRUE + _FALSE:
                raise SettingsError(f"{source}={shown(raw)} is not 1/0, true/false, on/off")
            return raw.lower() in _TRUE
        try:
            return self.type(raw)
        except ValueError:
            hint = f" (the setting of {'/'.join(self.flags)})" if self.flags else ""
            raise SettingsError(
                f"{source}={shown(raw)} is not a valid {self.type.__name__}{hint}"
            ) from None

    def coerce(self, value):
        """``value`` as this setting's type (an int for a float setting, numpy's numbers), or
        as it is when it is not of that kind (:meth:`problem` says so)."""
        kind = {int: numbers.Integral, float: numbers.Real}.get(self.type)
        if kind and isinstance(value, kind) and not isinstance(value, bool):
            return self.type(value)
        return value

    def problem(self, value, names: str | None = None) -> str | None:
        """Why ``value`` cannot work, naming the variable and flag (or ``names``, where it was
        given otherwise); None when it can."""
        names = names or self.names
        value = self.coerce(value)
        if type(value) is not self.type:
            given = "set" if self.secret else shown(value)
            return f"{names} is {given}; it must be {_TYPE_WORDS[self.type]}"
        if value in self.also:
            return None
        if self.type is float and not math.isfinite(value):  # NaN passes every comparison
            return f"{names} is {shown(value)}; it must be a finite number"
        bad = (
            (self.choices and value not in self.choices)
            or (self.minimum is not None and value < self.minimum)
            or (self.maximum is not None and value > self.maximum)
            or (self.below is not None and value >= self.below)
            or (self.type is str and len(value) < self.min_length and (value or self.default != ""))
            or (self.pattern and value and not re.fullmatch(self.pattern, value))
        )
        if not bad:
            return None
        if self.secret:  # the message would repeat the secret
            return f"{self.env} is shorter than {self.min_length} characters"
        return f"{names} is {shown(value)}; {self.requirement}"


def _number(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


# Sections of the docs and of compose's environment: key -> (heading, compose's comment).
GROUPS = {
    "label-studio": (
        "Label Studio",
        "Label Studio (LABEL_STUDIO_PUBLIC_URL: as your browser reaches it, for the report)",
    ),
    "server": (
        "The server",
        "the server (SRW_WEBHOOK_SECRET empty: generated into the shared MODEL_DIR volume)",
    ),
    "redis": ("Redis: trainings on rq workers", "Redis and the rq workers"),
    "labeling": (
        "What a project weighs",
        "the labeling control weighed (empty: the labeling config's only one)",
    ),
    "engine": ("The engine", "the engine"),
    "scout": ("The scout", "the scout (empty or 0: the built-in default)"),
    "retraining": ("When to retrain", "when to retrain"),
    "review": ("Reviewers' decisions", "reviewers' decisions"),
}

# SRW_PROJECT_LIMITS' default: what one project may ask of a 2-core, 24 GB machine (three
# MiniLM scouts of 14,000 tasks trained in 1,244 s with a peak of 4,034 MiB: README).
DEFAULT_PROJECT_LIMITS = "k=50,n_samples=2000,n_scouts=5,epochs=20"


def _engine(name: str, env: str, flag: str, group: str) -> Setting:
    """The engine's option ``name`` (:data:`subregweigh.options.OPTIONS`: its type, default,
    bounds and help, declared there once) as a setting of every project's training."""
    return Setting(
        **ENGINE_OPTIONS[name].setting(),
        env=env,
        flags=(flag,),
        group=group,
        training=True,
        per_project=True,
        scoring=True,
    )


# Every setting, in the order of the docs and of docker-compose.yml.
SETTINGS: tuple[Setting, ...] = (
    Setting(
        "label_studio_url",
        str,
        "",
        "Label Studio's address, for reading annotations and writing predictions",
        "LABEL_STUDIO_URL",
        ("--label-studio-url",),
        group="label-studio",
        url=True,
        fallbacks=("LABEL_STUDIO_HOST",),
        compose="${LABEL_STUDIO_URL:-http://label-studio:8080}",
    ),
    Setting(
        "label_studio_api_key",
        str,
        "",
        "a legacy token or personal access token of Label Studio",
        "LABEL_STUDIO_API_KEY",
        group="label-studio",
        secret=True,
        fallbacks=("LABEL_STUDIO_ACCESS_TOKEN",),
        compose="${LABEL_STUDIO_API_KEY:-0b5e1c0ffee4d2a0a2f6c8e4b1d3f5a7c9e0b2d4}",
    ),
    Setting(
        "label_studio_public_url",
        str,
        "",
        "Label Studio as your browser reaches it (empty: LABEL_STUDIO_URL): the report links "
        "each task there",
        "LABEL_STUDIO_PUBLIC_URL",
        ("--label-studio-public-url",),
        group="label-studio",
        url=True,
        compose="${LABEL_STUDIO_PUBLIC_URL:-http://localhost:8080}",
    ),
    Setting(
        "model_dir",
        str,
        "./models",
        "per-project versions, scores and status",
        "MODEL_DIR",
        ("--model-dir",),
        min_length=1,
        compose="/data/models",
    ),
    Setting(
        "basic_auth_user",
        str,
        "",
        "when set with BASIC_AUTH_PASS, every endpoint but /health requires them; Label "
        "Studio's webhook gets a token instead; rq workers need them too, to take the password "
        "off webhooks that carry it",
        "BASIC_AUTH_USER",
        ("--basic-auth-user",),
        fallbacks=("ML_SERVER_BASIC_AUTH_USER",),  # label-studio-ml's name
    ),
    Setting(
        "basic_auth_pass",
        str,
        "",
        "the basic-auth password (the flag shows it to every user of this machine: prefer the "
        "variable)",
        "BASIC_AUTH_PASS",
        ("--basic-auth-pass",),
        secret=True,
        fallbacks=("ML_SERVER_BASIC_AUTH_PASS",),
    ),
    Setting(
        "webhook_secret",
        str,
        "",
        "the key of the webhook tokens and challenges (empty: generated into "
        "MODEL_DIR/.webhook-secret); set the same value on every machine that does not share "
        "MODEL_DIR; changing it invalidates the tokens, and the next training re-issues them",
        "SRW_WEBHOOK_SECRET",
        min_length=16,
        secret=True,
    ),
    Setting(
        "max_request_mb",
        int,
        50,
        "request size limit in MB (413 above)",
        "MAX_REQUEST_MB",
        ("--max-request-mb",),
        minimum=1,
    ),
    Setting(
        "project_limits",
        str,
        DEFAULT_PROJECT_LIMITS,
        "the most a project's own settings (its connection's extra parameters) may ask for, as "
        "NAME=MAX pairs; /setup refuses a value above them, and a training of a project whose "
        "stored value no longer fits fails saying so. The defaults suit a 2-core, 24 GB "
        "machine; the server's own SRW_* values are not bound by them",
        "SRW_PROJECT_LIMITS",
        pattern=r"([a-z_]+=[0-9]+)(,[a-z_]+=[0-9]+)*",
        rule="NAME=MAX pairs separated by commas, each NAME a numeric per-project setting",
    ),
    Setting(
        "training_seconds",
        int,
        7200,
        "a training (or self-test) still running after this many seconds is stopped and "
        "fails; the last good version keeps serving",
        "SRW_TRAINING_SECONDS",
        minimum=10,
    ),
    Setting(
        "training_memory_mb",
        int,
        12288,
        "a training (or self-test) whose process grows this many MB beyond its size when it "
        "started is stopped and fails; the last good version keeps serving",
        "SRW_TRAINING_MEMORY_MB",
        minimum=256,
    ),
    Setting(
        "redis_url",
        str,
        "",
        "run trainings on rq workers through this Redis (empty: in the server's process); "
        "REDIS_HOST, REDIS_PORT (6379) and REDIS_DB (0) build it when it is unset",
        "REDIS_URL",
        ("--redis-url",),
        group="redis",
        url=True,
        fallbacks=("REDIS_HOST", "REDIS_PORT", "REDIS_DB"),
        compose="redis://redis:6379/0",
    ),
    Setting(
        "queue_name",
        str,
        "subregweigh",
        "the rq queue (one per backend)",
        "RQ_QUEUE_NAME",
        ("--queue-name",),
        group="redis",
        min_length=1,
    ),
    Setting(
        "job_lock_seconds",
        int,
        60,
        "a training whose rq worker died shows as failed this many seconds later",
        "SRW_JOB_LOCK_SECONDS",
        ("--job-lock-seconds",),
        group="redis",
        minimum=1,
    ),
    Setting(
        "weigh_controls",
        str,
        "",
        "the labeling controls to weigh, by their names in the labeling config, where the "
        "config has several Labels or Choices controls on a Text (empty: every one of them, "
        "each with its own scouts, a task scored by its least reliable annotation of any); "
        "every other control (a comment box, a rating, ...) is left alone",
        "SRW_WEIGH_CONTROLS",
        ("--weigh-controls",),
        group="labeling",
        # names separated by commas, none blank
        pattern=r"\s*[\w.:-][\w .:-]{0,99}(,\s*[\w.:-][\w .:-]{0,99})*",
        rule="control names separated by commas (each at most 100 letters, digits, "
        "spaces and . _ : -), or empty",
        training=True,
        per_project=True,
        scoring=True,
    ),
    _engine("k", "SRW_K", "-k", "engine"),
    _engine("n_scouts", "SRW_SCOUTS", "--scouts", "engine"),
    _engine("crf", "SRW_CRF", "--crf", "engine"),
    _engine("n_samples", "SRW_N", "--n-samples", "engine"),
    _engine("scout_model", "SRW_MODEL", "--scout-model", "scout"),
    Setting(
        "reference",
        str,
        "",
        "a data set the scout trains on beside the project's annotations, unranked: a corpus "
        "annotated by the same guidelines (CoNLL, TSV, JSONL or a Label Studio export), named "
        "by its file name in MODEL_DIR/references, where only the server's administrator puts "
        "files (empty: none)",
        "SRW_REFERENCE",
        ("--reference",),
        pattern=r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}",  # a name the filesystem takes
        rule="a file name in MODEL_DIR/references (letters, digits, '.', '_' and '-', at most "
        "200), or empty",
        group="scout",
        training=True,
        per_project=True,
        scoring=True,
    ),
    _engine("freeze_encoder", "SRW_FREEZE_ENCODER", "--freeze-encoder", "scout"),
    _engine("epochs", "SRW_EPOCHS", "--epochs", "scout"),
    _engine("learning_rate", "SRW_LEARNING_RATE", "--learning-rate", "scout"),
    Setting(
        "retrain_after",
        int,
        10,
        "annotation changes before retraining",
        "SRW_RETRAIN_AFTER",
        ("--retrain-after",),
        group="retraining",
        minimum=1,
        per_project=True,
    ),
    Setting(
        "min_annotations",
        int,
        10,
        "annotated tasks needed to train",
        "SRW_MIN_ANNOTATIONS",
        ("--min-annotations",),
        group="retraining",
        minimum=1,
        training=True,
        per_project=True,
    ),
    Setting(
        "self_review",
        bool,
        False,
        "an annotator's save of her own annotation decides as a reviewer's does (confirms or "
        "fixes it); off: it is kept as self-reviewed, and neither confirms nor counts as a fix",
        "SRW_SELF_REVIEW",
        ("--self-review",),
        group="review",
        per_project=True,
    ),
    Setting(
        "write_reason",
        bool,
        False,
        "write why each task is flagged (the served note's first sentence, at most 240 "
        "characters) into the task's data field srw_reason, which the review control's header "
        "and a Data Manager column show; no other data field is changed; off: task data is "
        "never written",
        "SRW_WRITE_REASON",
        ("--write-reason",),
        group="review",
        per_project=True,
    ),
)

BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}
# What a training computes: the server's values go with every training job.
TRAINING = tuple(s.name for s in SETTINGS if s.training)
# Settings a project may override through its Label Studio connection's extra parameters
# (backend.config.project_settings); the rest are the server's alone.
PER_PROJECT = tuple(s.name for s in SETTINGS if s.per_project)
# The per-project settings SRW_PROJECT_LIMITS may bound: those whose cost grows with the value.
LIMITABLE = frozenset(s.name for s in SETTINGS if s.per_project and s.type is int)
# The per-project settings the scores depend on: a project's change of one retrains it.
SCORING = tuple(s.name for s in SETTINGS if s.scoring)
SECRETS = tuple(s.name for s in SETTINGS if s.secret)


def secrets_of(settings: Settings) -> list[str]:
    """The credentials in ``settings``, in every form they travel in: as given, URL-decoded
    from a URL, and the basic-auth header's base64 (what :mod:`backend.config.redact` masks)."""
    values = [getattr(settings, name) for name in SECRETS]  # every setting declared secret
    for url in (settings.label_studio_url, settings.label_studio_public_url, settings.redis_url):
        try:
            password = urlsplit(url).password
        except ValueError:
            password = None
        if password:
            values += [password, unquote(password)]
    if settings.basic_auth_user and settings.basic_auth_pass:
        pair = f"{settings.basic_auth_user}:{settings.basic_auth_pass}".encode()
        values.append(base64.b64encode(pair).decode())
    return [v for v in values if v]


def _declared(cls):
    """``cls`` as a frozen dataclass with one field per declared setting."""
    cls.__annotations__ = {s.name: s.type for s in SETTINGS}
    for s in SETTINGS:
        setattr(cls, s.name, field(default=s.default))
    return dataclass(frozen=True)(cls)


@_declared
class Settings:
    """Every knob of the backend, one field per :data:`SETTINGS` entry (docs/configuration.md).

    Raises :class:`SettingsError` when built with values no training could run with.
    """

    def __post_init__(self):
        # At start-up, not in a training hours later: say which variable is wrong.
        for s in SETTINGS:
            problem = s.problem(getattr(self, s.name))
            if problem:
                raise SettingsError(problem)
            object.__setattr__(self, s.name, s.coerce(getattr(self, s.name)))
        if self.reference and not self.reference_path.is_file():
            raise SettingsError(
                f"{BY_NAME['reference'].names} is {shown(self.reference)}; no such file in the "
                "reference folder (MODEL_DIR/references); it holds "
                + (", ".join(_files(self.reference_folder)) or "no data sets")
            )
        for name in self.limits:
            if name not in LIMITABLE:
                raise SettingsError(
                    f"SRW_PROJECT_LIMITS names {shown(name)}; it may bound "
                    + ", ".join(sorted(LIMITABLE))
                )
        if self.n_samples < self.k:
            n, k = BY_NAME["n_samples"], BY_NAME["k"]
            raise SettingsError(
                f"{n.names} is {self.n_samples}; N must be at least K ({k.names} is {self.k})"
            )

    def __repr__(self) -> str:
        return f"Settings({', '.join(f'{k}={v!r}' for k, v in self.public().items())})"

    @classmethod
    def from_env(cls, **flags) -> Settings:
        """Settings from the environment, where ``flags`` (field name -> value; None: not
        given), such as ``_wsgi.py``'s command line, win."""
        unknown = set(flags) - set(BY_NAME)
        if unknown:
            raise TypeError(f"unknown settings {sorted(unknown)}")
        values = {}
        for s in SETTINGS:
            source, raw = _read_env(s)
            if raw is not None:
                values[s.name] = s.parse(raw, f"environment variable {source}")
        values.update((name, value) for name, value in flags.items() if value is not None)
        _warn_undeclared()
        for s in SETTINGS:
            if s.url and s.name in values:
                values[s.name] = values[s.name].rstrip("/")
        return cls(**values)

    @property
    def reference_folder(self) -> Path:
        """Where SRW_REFERENCE's file is: MODEL_DIR/references."""
        return Path(self.model_dir) / "references"

    @property
    def reference_path(self) -> Path | None:
        """SRW_REFERENCE's file (None: no reference). The setting's pattern keeps it inside
        :attr:`reference_folder`: a project's extra parameters name a file there, no path."""
        return self.reference_folder / self.reference if self.reference else None

    @property
    def task_link_base(self) -> str:
        """Label Studio's address for links a browser follows: LABEL_STUDIO_PUBLIC_URL, else
        LABEL_STUDIO_URL (when the backend reaches it as browsers do)."""
        return self.label_studio_public_url or self.label_studio_url

    def training(self) -> dict:
        """What a training computes (:data:`TRAINING`), as plain values a job can carry."""
        return {name: getattr(self, name) for name in TRAINING}

    @property
    def controls_to_weigh(self) -> tuple[str, ...]:
        """SRW_WEIGH_CONTROLS as names, in order (``()``: every labeling control of the
        labeling config), for :func:`backend.labelstudio.tasks.parse_label_config`."""
        return tuple(name.strip() for name in self.weigh_controls.split(",") if name.strip())

    @property
    def limits(self) -> dict[str, int]:
        """SRW_PROJECT_LIMITS: setting name -> the most a project may set it to."""
        pairs = (pair.split("=", 1) for pair in self.project_limits.split(",") if pair)
        return {name: int(value) for name, value in pairs}

    def for_project(self, overrides: Mapping) -> Settings:
        """These settings with a project's ``overrides`` (field -> value, :data:`PER_PROJECT`
        only), checked as a whole (:class:`SettingsError`, say, when N falls below K), within
        the server's :attr:`limits`, and with a scout model only from what the server has
        (:func:`allowed_model`)."""
        unknown = set(overrides) - set(PER_PROJECT)
        if unknown:
            raise SettingsError(f"not settings a project may override: {sorted(unknown)}")
        limits = self.limits
        for name, value in overrides.items():
            limit = limits.get(name)
            if limit is not None and isinstance(value, (int, float)) and value > limit:
                raise SettingsError(
                    f"{BY_NAME[name].env} is {shown(value)}; this server lets a project set at "
                    f"most {limit} (SRW_PROJECT_LIMITS)"
                )
        model = overrides.get("scout_model")
        if model not in (None, "", self.scout_model) and not allowed_model(model):
            raise SettingsError(
                f"SRW_MODEL is {shown(model)}; a project may name only a model this server "
                "already has in its Hugging Face cache (an organisation/name), or the server's "
                "own (SRW_MODEL)"
            )
        return dataclasses.replace(self, **overrides)

    def with_training(self, training: Mapping) -> Settings:
        """These settings with ``training`` (from :meth:`training`, say another process's)."""
        unknown = set(training) - set(TRAINING)
        if unknown:
            raise SettingsError(f"not training settings: {sorted(unknown)}")
        return dataclasses.replace(self, **training)

    def public(self) -> dict:
        """The settings without secrets, for logs, repr and the status endpoint."""
        return {
            s.name: redact(getattr(self, s.name)) if s.url else getattr(self, s.name)
            for s in SETTINGS
            if not s.secret
        }


# A model name a project may give: a Hugging Face organisation/name, never a path.
_MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}")


def allowed_model(name: str) -> bool:
    """Whether a project may train its scout on ``name``: an ``organisation/name`` already in
    this machine's Hugging Face cache (nothing is downloaded for a project, and no path, such as
    another project's stored scout, is read)."""
    if not _MODEL_NAME.fullmatch(name) or ".." in name:
        return False
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # no hub library: only the server's own model
        return False
    return isinstance(try_to_load_from_cache(name, "config.json"), str)


def _files(folder: Path, shown: int = 20) -> list[str]:
    """The names of the first ``shown`` files in ``folder`` (none when it cannot be read)."""
    try:
        names = sorted(p.name for p in folder.iterdir() if p.is_file())
    except OSError:
        return []
    return names[:shown] + ([f"... {len(names) - shown} more"] if len(names) > shown else [])


def _read_env(s: Setting) -> tuple[str, str | None]:
    """(the variable it came from, the raw value; None: unset) of setting ``s``."""
    raw = os.environ.get(s.env)
    if raw:
        # label-studio-ml's name beside ours, saying something else: which one was meant?
        other = next((n for n in s.fallbacks if os.environ.get(n, raw) != raw), None)
        if other is not None and s.name != "redis_url":
            shown = "" if s.secret else f" ({raw!r} and {os.environ[other]!r})"
            raise SettingsError(f"{s.env} and {other} are both set and differ{shown}; unset one")
        return s.env, raw
    if s.name == "redis_url":  # the parts label-studio-ml's compose files set
        host = os.environ.get("REDIS_HOST")
        if not host:
            return s.env, None
        port = _part("REDIS_PORT", 6379)
        return "REDIS_HOST", f"redis://{host}:{port}/{_part('REDIS_DB', 0)}"
    for name in s.fallbacks:
        raw = os.environ.get(name)
        if raw:
            return name, raw
    return s.env, None


_warned: set[str] = set()


def _warn_undeclared() -> None:
    """A WARNING, once per process, for each SRW_* variable that is no setting: a typo, or one
    of an earlier build that is gone (docs/configuration.md lists those there are)."""
    import logging

    declared = {name for s in SETTINGS for name in (s.env, *s.fallbacks)}
    for name in sorted(os.environ):
        if name.startswith("SRW_") and name not in declared and name not in _warned:
            _warned.add(name)
            close = difflib.get_close_matches(name, declared, n=1)
            logging.getLogger(__name__).warning(
                "environment variable %s is not a setting and is ignored%s "
                "(docs/configuration.md lists the settings)",
                name,
                f"; did you mean {close[0]}?" if close else "",
            )


def _part(name: str, default: int) -> int:
    raw = os.environ.get(name) or str(default)
    try:
        return int(raw)
    except ValueError:
        raise SettingsError(f"environment variable {name}={raw!r} is not a valid int") from None


# ------------------------------------------------------------------------- the command line


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """A flag per declared setting that has one (dest: the field; default None: not given, so
    the environment's value stands), in argument groups as the docs have them."""
    groups = {
        key: parser.add_argument_group(f"settings: {heading}")
        for key, (heading, _) in GROUPS.items()
    }
    for s in SETTINGS:
        if not s.flags:
            continue
        default = "empty" if s.default == "" else _number(s.default)
        if s.type is bool:
            default = "on" if s.default else "off"
        help = f"{s.help} ({s.env}; default {default})".replace("%", "%%")
        kwargs: dict[str, Any] = dict(dest=s.name, default=None, help=help)
        if s.type is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        else:
            kwargs["type"] = s.type
            if s.choices:
                kwargs["choices"] = s.choices
            else:
                kwargs["metavar"] = s.name.upper()
        groups[s.group].add_argument(*s.flags, **kwargs)


def from_arguments(args: argparse.Namespace, kwargs: Sequence[str] = ()) -> Settings:
    """Settings from the environment, then ``kwargs`` (``--kwargs key=value ...``, settings by
    field name), then the flags :func:`add_arguments` made (each wins over what comes before)."""
    values = parse_kwargs(kwargs)
    values.update(
        (s.name, getattr(args, s.name))
        for s in SETTINGS
        if s.flags and getattr(args, s.name, None) is not None
    )
    return Settings.from_env(**values)


def parse_kwargs(pairs: Sequence[str]) -> dict[str, Any]:
    """``["k=5", "epochs=4"]`` as {field: value}, each value parsed as its setting's
    type; :class:`SettingsError` names a malformed pair or an unknown field."""
    out = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        name = name.strip().replace("-", "_")
        if not sep:
            raise SettingsError(f"--kwargs {pair!r}: expected FIELD=VALUE")
        if name not in BY_NAME:
            close = difflib.get_close_matches(name, BY_NAME, n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            raise SettingsError(
                f"--kwargs {pair!r}: no setting {name!r} ({hint}the fields: docs/configuration.md)"
            )
        out[name] = BY_NAME[name].parse(raw, f"--kwargs {name}")
    return out
