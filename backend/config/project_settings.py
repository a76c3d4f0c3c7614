"""Per-project settings: a Label Studio connection's extra parameters override the server's.

One backend serves many projects of different sizes and kinds; the settings whose declaration
says ``per_project`` (:data:`backend.config.settings.PER_PROJECT`: K, N, the number of scouts,
the CRF, the model and whether its encoder is frozen, the reference corpus, the epochs and the
learning rate, which the scores depend on; and retrain-after, min-annotations and self-review,
which they do not) may be set per project in the project's Settings > Model > the connection's
"extra params". Label Studio 1.23 sends them, as
stored, with every ``/setup``: a JSON object when the connection was made through the API with
one, text when typed in its form (see the Label Studio facts). :func:`parse_extra_params` reads
either kind of text, a JSON object or ``KEY=VALUE`` lines, naming a setting by its field
(``k``), variable (``SRW_K``) or flag (``n-samples``), and checks every value with the rules of
the environment; /setup refuses what does not pass with a message Label Studio shows on connect.

What passed is stored with the project (``MODEL_DIR/<project>/settings.json``,
:meth:`~backend.store.store.ProjectStore.overrides`), so restarts and queued trainings (an rq job
carries the server's training settings; the worker reads the project's over them) use it.
:func:`effective` is what every training, self-test, rescore and request of a project runs with;
:func:`apply` stores a /setup's parameters and says which scoring settings
(:data:`~backend.config.settings.SCORING`) changed, which retrains the project.
"""

from __future__ import annotations

import difflib
import json
import logging
from collections.abc import Mapping
from typing import Any

from backend.config.settings import PER_PROJECT, SCORING, SETTINGS, Setting, Settings, SettingsError
from backend.store.disk import no_space
from backend.store.store import ProjectStore

logger = logging.getLogger(__name__)

SOURCE = "the Label Studio connection's extra parameters"
MAX_CHARS = 10_000  # extra parameters longer than this are refused, unread
_SHOWN = 60  # characters of a bad key or value a message repeats


_JSON_TYPES = {dict: "an object", list: "an array", type(None): "null", bool: "true or false"}


def _json_type(value) -> str:
    """What ``value`` is, in JSON's words: ``an array``, ``a number``."""
    return _JSON_TYPES.get(type(value), "text" if isinstance(value, str) else "a number")


def _key(name: str) -> str:
    return name.strip().lstrip("-").lower().replace("-", "_")


# Every name a setting goes by (field, variable, flags, and label-studio-ml's variables) -> it.
ALIASES: dict[str, Setting] = {
    _key(alias): s for s in SETTINGS for alias in (s.name, s.env, *s.flags, *s.fallbacks)
}


class ProjectSettingsError(SettingsError):
    """A project's stored settings no longer work with the server's (its defaults changed)."""


def _setting(key) -> Setting:
    """The per-project setting ``key`` names, or :class:`SettingsError` saying why not."""
    shown = repr(str(key)[:_SHOWN])
    s = ALIASES.get(_key(key)) if isinstance(key, str) else None
    if s is None:
        close = difflib.get_close_matches(_key(str(key)), PER_PROJECT, n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        raise SettingsError(
            f"extra parameter {shown}: no such setting ({hint}a project may set "
            f"{', '.join(PER_PROJECT)}; docs/configuration.md)"
        )
    if not s.per_project:
        raise SettingsError(
            f"extra parameter {shown}: {s.env} is the server's setting; a project cannot "
            f"override it (a project may set {', '.join(PER_PROJECT)})"
        )
    return s


def _lines(text: str) -> dict[str, str]:
    """``KEY=VALUE`` pairs, one a line (or separated by ``;``); blank lines and ``#`` comments
    skipped."""
    pairs: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        for part in line.split(";"):
            part = part.strip()
            if not part or part.startswith("#"):
                continue
            key, sep, value = part.partition("=")
            if not sep or not key.strip():
                raise SettingsError(
                    f"extra parameters, line {number}: {part[:_SHOWN]!r} is not KEY=VALUE "
                    '(give KEY=VALUE lines, or a JSON object such as {"k": 5})'
                )
            if key.strip() in pairs:
                raise SettingsError(f"extra parameters: {key.strip()[:_SHOWN]!r} is given twice")
            pairs[key.strip()] = value.strip()
    return pairs


def _as_mapping(raw) -> Mapping:
    if isinstance(raw, Mapping):
        return raw
    if not isinstance(raw, str):
        raise SettingsError(
            f"extra parameters must be a JSON object or KEY=VALUE lines, not {_json_type(raw)}"
        )
    if len(raw) > MAX_CHARS:
        raise SettingsError(f"extra parameters are {len(raw)} characters; at most {MAX_CHARS}")
    text = raw.strip()
    if not text.startswith(("{", "[")):
        return _lines(text)
    try:
        value = json.loads(text)
    except ValueError as err:
        raise SettingsError(
            f"extra parameters are not valid JSON: {getattr(err, 'msg', err)} (line "
            f"{getattr(err, 'lineno', '?')}, column {getattr(err, 'colno', '?')})"
        ) from None
    if not isinstance(value, dict):
        raise SettingsError(f"extra parameters must be a JSON object, not {_json_type(value)}")
    return value


def parse_extra_params(raw) -> dict[str, Any]:
    """A connection's extra parameters as ``{field: value}`` of per-project settings.

    ``raw`` is what Label Studio sends: None or empty (no overrides), a JSON object, or text
    holding a JSON object or ``KEY=VALUE`` lines. A key names a setting by field, variable or
    flag, in any case; a value is of the setting's type or text parsed as it. Raises
    :class:`SettingsError` naming the first parameter that is unknown, the server's own, or
    outside the setting's bounds (the environment's rules, :meth:`Setting.problem`).
    """
    if raw is None or raw == "":
        return {}
    out: dict[str, Any] = {}
    for key, value in _as_mapping(raw).items():
        s = _setting(key)
        if s.name in out:
            raise SettingsError(
                f"extra parameters: {s.name} is given twice (as {str(key)[:_SHOWN]!r} too)"
            )
        where = f"extra parameter {str(key)[:_SHOWN]}"
        if not isinstance(value, (str, int, float, bool)):
            raise SettingsError(f"{where} is {_json_type(value)}; give one value")
        if isinstance(value, str) and len(value) > 1000:
            raise SettingsError(f"{where} is {len(value)} characters; at most 1000")
        if isinstance(value, str) and s.type is not str:
            value = s.parse(value, where)
        problem = s.problem(value, names=where)
        if problem:
            raise SettingsError(problem)
        out[s.name] = s.coerce(value)
    return out


def effective(settings: Settings, store: ProjectStore) -> Settings:
    """What ``store``'s project runs with: ``settings`` (the server's) with the overrides it
    stored. Raises :class:`ProjectSettingsError` when they no longer fit the server's (the
    server's defaults changed since they were set): the project's training fails saying so,
    rather than running with settings nobody chose."""
    overrides = store.overrides()
    if not overrides:
        return settings
    try:
        return settings.for_project(parse_extra_params(overrides))
    except SettingsError as err:
        raise ProjectSettingsError(
            f"project {store.project}: the settings from {SOURCE} do not work with this "
            f"server's: {err}; change them in the project's Settings > Model"
        ) from None


def check(settings: Settings, raw) -> tuple[dict, Settings]:
    """``raw`` extra parameters as overrides, and the settings they make with ``settings`` (the
    server's), checked as a whole (N at least K) and within the server's limits;
    :class:`SettingsError` naming what does not work."""
    overrides = parse_extra_params(raw)
    return overrides, settings.for_project(overrides)


def apply(settings: Settings, store: ProjectStore, raw) -> list[str]:
    """Check a /setup's ``raw`` extra parameters against ``settings`` (the server's), store
    them as the project's, and return the scoring settings whose effective value they changed
    (``["k", "epochs"]``; [] when nothing that changes the scores changed). Raises
    :class:`SettingsError`, storing nothing, when they do not work: the project keeps the
    settings it had."""
    overrides, new = check(settings, raw)
    try:
        old_overrides = store.replace_overrides(overrides)
    except OSError as err:
        if not no_space(err):
            raise
        raise SettingsError(
            f"the disk of MODEL_DIR is full: project {store.project}'s settings are not stored "
            "(it keeps the ones it had); free space there, then save the connection again"
        ) from None
    if old_overrides == overrides:
        return []
    try:
        old = settings.for_project(parse_extra_params(old_overrides))
    except SettingsError:  # what was stored no longer worked: compare with the server's
        old = settings
    changed = [name for name in SCORING if getattr(old, name) != getattr(new, name)]
    logger.info(
        "project %s: settings from %s: %s%s",
        store.project,
        SOURCE,
        ", ".join(f"{k}={v!r}" for k, v in overrides.items()) or "none (the server's)",
        "; changed what the scores depend on: " + ", ".join(changed) if changed else "",
    )
    return changed


def shown(settings: Settings, store: ProjectStore) -> dict:
    """What /status and the report show of a project's settings: ``effective`` (every
    per-project setting as its trainings use it), ``overrides`` (what the project set) and
    ``source``; with ``error`` instead of ``effective`` when the overrides no longer work."""
    overrides = store.overrides()
    out: dict[str, Any] = {"overrides": overrides, "source": SOURCE}
    try:
        project = effective(settings, store)
    except ProjectSettingsError as err:
        return {**out, "error": str(err)}
    return {"effective": {name: getattr(project, name) for name in PER_PROJECT}, **out}
