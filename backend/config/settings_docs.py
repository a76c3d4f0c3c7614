"""The files generated from the settings' declaration (:data:`backend.config.settings.SETTINGS`).

    python -m backend.config.settings_docs          # exit 1, naming the stale files, if any
    python -m backend.config.settings_docs --write  # regenerate them

It writes docs/configuration.md (every variable), the README's short table of the main
settings (between its ``settings:begin``/``settings:end`` comments), and docker-compose.yml's
``x-subregweigh-env`` environment block. tests/backend/test_backend_settings.py fails while any
of them differs from what this generates.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from backend.config.settings import GROUPS, SETTINGS, Setting, _number

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs" / "configuration.md"
README = REPO / "README.md"
COMPOSE = REPO / "docker-compose.yml"
README_BEGIN = "<!-- settings:begin (generated: python -m backend.config.settings_docs --write) -->"
README_END = "<!-- settings:end -->"
COMPOSE_ANCHOR = "x-subregweigh-env: &subregweigh-env"

# The README's short table: the settings a deployment sets first.
README_SETTINGS = (
    "label_studio_url",
    "label_studio_api_key",
    "model_dir",
    "basic_auth_user",
    "basic_auth_pass",
    "redis_url",
    "scout_model",
    "score",
)


@dataclass(frozen=True)
class Variable:
    """A variable that is not a :class:`~backend.config.settings.Settings` field: read by the
    process, gunicorn.conf.py or compose itself."""

    env: str
    default: str
    help: str
    read_by: str  # who reads it
    flags: tuple[str, ...] = ()
    compose: str | None = None  # its value in compose's shared environment, if there


OTHER = (
    Variable(
        "LOG_LEVEL",
        "INFO",
        "DEBUG, INFO, WARNING or ERROR",
        "server, worker",
        ("--log-level",),
        compose="${LOG_LEVEL:-INFO}",
    ),
    Variable(
        "PORT", "9090", "the port the server listens on", "server, gunicorn", ("-p", "--port")
    ),
    Variable("WORKERS", "2", "gunicorn processes", "gunicorn"),
    Variable("THREADS", "4", "threads in each gunicorn process", "gunicorn"),
    Variable(
        "GUNICORN_TIMEOUT",
        "300",
        "seconds a gunicorn process may miss its heartbeat before it is restarted (a request "
        "may take longer)",
        "gunicorn",
    ),
    Variable(
        "MAX_REQUESTS",
        "0",
        "recycle a gunicorn process after this many requests (0: never)",
        "gunicorn",
    ),
    Variable(
        "IDLE_TIMEOUT",
        "30",
        "seconds a connection may send nothing (waiting for a request or in the middle of one) "
        "or read nothing of its reply before the server closes it (docs/deploying.md)",
        "gunicorn",
    ),
    Variable(
        "OMP_NUM_THREADS",
        "1 in gunicorn",
        "torch threads per request (`WORKER_THREADS` sets it for compose's rq workers)",
        "torch",
        compose="${OMP_NUM_THREADS:-1}",
    ),
    Variable("WORKER_THREADS", "2", "`OMP_NUM_THREADS` of compose's rq workers", "compose"),
    Variable("BACKEND_PORT", "9090", "the backend's port published on 127.0.0.1", "compose"),
    Variable("LABEL_STUDIO_PORT", "8080", "Label Studio's port published on 127.0.0.1", "compose"),
    Variable(
        "LABEL_STUDIO_USERNAME",
        "admin@example.com",
        "the bundled Label Studio's admin; change it",
        "compose",
    ),
    Variable(
        "LABEL_STUDIO_PASSWORD",
        "admin12345",
        "the bundled Label Studio's admin password; change it",
        "compose",
    ),
    Variable(
        "COMPOSE_PROFILES",
        "label-studio (in .env)",
        "empty: no bundled Label Studio; add `gpu` for the CUDA worker",
        "compose",
    ),
)

INTRO = """\
# Configuration

<!-- Generated from backend/config/settings.py by `python -m backend.config.settings_docs --write`;
edit the declaration there, not this file (tests/backend/test_backend_settings.py fails while they
differ). -->

The server (`python _wsgi.py`, whose flags win over the environment; gunicorn reads the
environment alone) and `python -m backend.queue.worker` read the same variables, in one place
(`Settings.from_env` in `backend/config/settings.py`, where each setting is declared once), into one
object that the server, its job runner and every training it starts use. It is checked when
read: settings no training could run with (`SRW_K` above `SRW_N`, `SRW_SCOUTS` of 11, an
`SRW_CRF` that is not on or off, ...) stop the server or the worker at start-up, naming the
variable, the flag and the reason; `python _wsgi.py --check` checks them and exits (0: they
work, 2: they do not).
`docker-compose.yml` passes every variable to the backend and its workers, with these defaults
unless the table says otherwise.

Every setting can also be given to `_wsgi.py` by its field name, as label-studio-ml's
`_wsgi.py` takes its model's arguments: `python _wsgi.py --kwargs k=5 crf=off`
(flags win over `--kwargs`, which wins over the environment).

Scope **training**: what a training computes. A training on an rq worker computes with the
server's values, which the job carries, over which the worker reads the project's own (below).
Scope **process**: each process reads its own environment. On an rq worker that is where things
are and the credentials (`MODEL_DIR`, Label Studio, Redis, `BASIC_AUTH_*` for the webhook
header), which may differ from machine to machine and never go through Redis. An `SRW_*`
variable that is no setting (a typo, or one of an earlier build) is named in a WARNING at start-up
and ignored.

Column **project**: whether a Label Studio project may set it for itself (see
[Per-project settings](#per-project-settings)); *retrains*: a change of it changes the scores,
so the project is retrained.
"""


def _code(text: str) -> str:
    return f"`{text}`"


def _default(s: Setting) -> str:
    if s.type is bool:
        shown = "on" if s.default else "off"
    elif s.default == "":
        shown = "(empty)"
    else:
        shown = _code(_number(s.default))
    compose = _compose_value(s)
    if s.compose is not None and compose != _compose_default(s):
        shown += f"; compose: {_code(_interpolated_default(compose))}"
    return shown


def _interpolated_default(value: str) -> str:
    """``${X:-default}`` -> default; a literal value as it is."""
    match = re.fullmatch(r"\$\{\w+:-(.*)\}", value)
    return match.group(1) if match else value


def _variable(s: Setting) -> str:
    shown = _code(s.env)
    if s.fallbacks:
        shown += f" (or {', '.join(map(_code, s.fallbacks))})"
    return shown


def _flags(flags: tuple[str, ...], boolean: bool = False) -> str:
    if not flags:
        return ""
    shown = [_code(f) for f in flags]
    if boolean:
        shown += [_code("--no-" + f.removeprefix("--")) for f in flags if f.startswith("--")]
    return ", ".join(shown)


def _row(cells) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def _settings_table(settings, columns: str) -> list[str]:
    heads = {
        "full": ("variable", "flag", "field", "default", "values", "scope", "project", "meaning"),
        "short": ("variable", "flag", "default", "meaning"),
    }[columns]
    lines = [_row(heads), _row(["---"] * len(heads))]
    for s in settings:
        full = {
            "variable": _variable(s),
            "flag": _flags(s.flags, s.type is bool),
            "field": _code(s.name),
            "default": _default(s),
            "values": s.bounds,
            "scope": "training" if s.training else "process",
            "project": ("yes, retrains" if s.scoring else "yes") if s.per_project else "",
            "meaning": s.help + ("; secret: never logged or shown" if s.secret else ""),
        }
        lines.append(_row(full[h] for h in heads))
    return lines


PER_PROJECT_INTRO = """\
## Per-project settings

One backend serves many Label Studio projects of different sizes and kinds. A project sets its
own values in its ML backend connection's **extra params** (*Settings > Model*, the connection's
*Edit*; or `extra_params` of `POST /api/ml`, `PATCH /api/ml/{id}`), which override the server's
for that project alone. Label Studio sends them with every `/setup`, that is when the connection
is saved and each time the project's model settings are opened or predictions retrieved
([Label Studio](label-studio.md#per-project-settings)). Give a JSON object or `KEY=VALUE` lines,
a setting named by its field, variable or flag:

```text
k=5
crf=off
SRW_EPOCHS=4
```

Each value is checked with the same rules as the environment, and with the server's other
settings (N at least K). A value that does not work refuses the connection: Label Studio shows
`400 Client Error: extra parameter k is 0; it must be at least 1 for url: .../setup`, does not
save it, and the project keeps the settings it had. Accepted settings are stored with the project
(`MODEL_DIR/<project>/settings.json`): restarts and queued trainings use them, and `/status` and
the report show the project's effective settings. A change of a setting marked *retrains* starts
a training of a project that has a version (or a training under way); a change of another (when
to retrain, how many annotations a training needs) applies from the next event or
training. Empty extra params: the server's settings.

The settings a project may set (the default: the server's):
"""


def markdown() -> str:
    """docs/configuration.md."""
    out = [INTRO]
    for key, (heading, _) in GROUPS.items():
        out += [f"## {heading}", ""]
        out += _settings_table([s for s in SETTINGS if s.group == key], "full")
        out.append("")
    out.append(PER_PROJECT_INTRO)
    out += [_row(("field", "variable", "values", "a change")), _row(["---"] * 4)]
    for s in SETTINGS:
        if s.per_project:
            values = s.bounds or ("on or off" if s.type is bool else "any")
            change = "retrains" if s.scoring else "from the next event or training"
            out.append(_row((_code(s.name), _code(s.env), values, change)))
    out.append("")
    out += [
        "## Other variables",
        "",
        "Not settings of the backend's own: the process, gunicorn (`gunicorn.conf.py`) or",
        "`docker-compose.yml` reads them.",
        "",
        _row(("variable", "flag", "default", "read by", "meaning")),
        _row(["---"] * 5),
    ]
    for v in OTHER:
        out.append(_row((_code(v.env), _flags(v.flags), _code(v.default), v.read_by, v.help)))
    return "\n".join(out) + "\n"


def readme_block() -> str:
    """The README's table of the main settings, markers included."""
    main = [s for name in README_SETTINGS for s in SETTINGS if s.name == name]
    lines = [README_BEGIN, *_settings_table(main, "short"), README_END]
    return "\n".join(lines)


def _compose_default(s: Setting) -> str:
    if s.type is bool:
        default = "1" if s.default else "0"
    elif isinstance(s.default, float):
        default = format(s.default, ".10g")
    else:
        default = str(s.default)
    return f"${{{s.env}:-{default}}}"


def _compose_value(s: Setting) -> str:
    return s.compose if s.compose is not None else _compose_default(s)


def compose_block() -> str:
    """docker-compose.yml's shared environment (``x-subregweigh-env``), anchor line included."""
    lines = [COMPOSE_ANCHOR]
    for key, (heading, comment) in GROUPS.items():
        lines.append(f"  # {comment}")
        lines += [f"  {s.env}: {_compose_value(s)}" for s in SETTINGS if s.group == key]
    lines.append("  # the processes")
    lines += [f"  {v.env}: {v.compose}" for v in OTHER if v.compose is not None]
    return "\n".join(lines)


def compose_env() -> dict[str, str]:
    """The shared environment as compose writes it: variable -> value (uninterpolated)."""
    return dict(
        line.strip().split(": ", 1)
        for line in compose_block().splitlines()[1:]
        if not line.strip().startswith("#")
    )


# ----------------------------------------------------------------------------- the files


def _replace_between(text: str, begin: str, end: str, new: str, where: str) -> str:
    """``text`` with the part from the line ``begin`` to the line ``end`` (both replaced) or, with
    ``end`` empty, to the first blank line (kept), replaced by ``new``."""
    start = text.find(begin)
    if start < 0:
        raise ValueError(f"{where}: no line {begin!r}")
    stop = text.find(end or "\n\n", start)
    if stop < 0:
        raise ValueError(f"{where}: nothing ends the part that starts {begin!r}")
    return text[:start] + new + text[stop + len(end) :]


def generated() -> dict[Path, str]:
    """Each generated file's expected text, from the files as they are."""
    readme = _replace_between(
        README.read_text(), README_BEGIN, README_END, readme_block(), "README.md"
    )
    compose = _replace_between(
        COMPOSE.read_text(), COMPOSE_ANCHOR, "", compose_block(), "docker-compose.yml"
    )
    return {DOCS: markdown(), README: readme, COMPOSE: compose}


def stale(expected: dict[Path, str] | None = None) -> list[Path]:
    """The generated files that differ from the declaration (``expected``: :func:`generated`)."""
    expected = generated() if expected is None else expected
    return [p for p, text in expected.items() if not p.exists() or p.read_text() != text]


def _shown(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m backend.config.settings_docs",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--write", action="store_true", help="regenerate the stale files")
    args = parser.parse_args(argv)
    expected = generated()
    behind = stale(expected)
    for path in behind:
        if args.write:
            path.write_text(expected[path])
            print(f"wrote {_shown(path)}")
        else:
            print(
                f"{_shown(path)} is stale: python -m backend.config.settings_docs --write",
                file=sys.stderr,
            )
    return 1 if behind and not args.write else 0


if __name__ == "__main__":
    sys.exit(main())
