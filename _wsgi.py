"""Serve the subregweigh Label Studio ML backend.

    python _wsgi.py                      # http://0.0.0.0:9090, embedded job runner, ./models
    python _wsgi.py -p 9091 --model-dir /data/models --log-level DEBUG
    python _wsgi.py --kwargs k=5 crf=off   # settings by field name
    python _wsgi.py --check              # check the settings, print them, exit 0 (or 2)
    python _wsgi.py --webhook-token 4    # the header for project 4's webhook, to paste by hand
    gunicorn -c gunicorn.conf.py _wsgi:app   # production (settings from the environment)

As in label-studio-ml's ``_wsgi.py``, ``-p`` is the port. Every setting has an environment
variable and most a flag (docs/configuration.md); flags win over ``--kwargs``, which wins over
the environment. Settings that cannot work (``-k 20 --n-samples 10``, say) stop the start with
the reason.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from backend.config.logs import configure_logging
from backend.config.settings import (
    Settings,
    SettingsError,
    add_arguments,
    from_arguments,
)

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def _port(value: str) -> int:
    try:
        port = int(value)
    except ValueError:
        hint = " (-p is the port, as in label-studio-ml)"
        raise argparse.ArgumentTypeError(f"invalid port {value!r}{hint}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"invalid port {value!r}: 0 to 65535")
    return port


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        usage="%(prog)s [-p PORT] [--host HOST] [--check] [--kwargs FIELD=VALUE ...] [SETTINGS]",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", default="0.0.0.0", help="the address to listen on")
    parser.add_argument(
        "-p",
        "--port",
        type=_port,
        default=os.environ.get("PORT", "9090"),
        help="the port to listen on (PORT; default 9090)",
    )
    parser.add_argument(
        "-d",
        "--debug",
        action="store_true",
        help="log at DEBUG (label-studio-ml's flag; Flask's debugger stays off: it would run code "
        "for anyone who reaches the port)",
    )
    parser.add_argument(
        "--log-level",
        type=str.upper,
        choices=LOG_LEVELS,
        default=(os.environ.get("LOG_LEVEL") or "INFO").upper(),
        help="LOG_LEVEL (default INFO)",
    )
    parser.add_argument(
        "--kwargs",
        "--with",
        nargs="+",
        metavar="FIELD=VALUE",
        default=[],
        help="settings by field name (docs/configuration.md), label-studio-ml's convention: "
        "--kwargs k=5 epochs=4",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="check the settings, print them with the address to serve on (secrets left out) "
        "and exit: 0 when they work, 2 when not",
    )
    parser.add_argument(
        "--webhook-token",
        metavar="PROJECT",
        help="print the header that lets Label Studio's webhook of PROJECT through basic auth "
        "(for the project's Settings > Webhooks, where a training could not add it) and exit",
    )
    add_arguments(parser)
    return parser


def main(argv=None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = from_arguments(args, args.kwargs)
    except SettingsError as err:
        parser.exit(2, f"{parser.prog}: error: {err}\n")
    if args.debug:
        args.log_level = "DEBUG"
    if args.check:
        served = dict(host=args.host, port=args.port, log_level=args.log_level)
        print(json.dumps({**served, "settings": settings.public()}, indent=2))
        return
    if args.webhook_token is not None:
        print_webhook_token(parser, settings, args.webhook_token)
        return
    configure_logging(args.log_level)
    from backend.queue.warmup import import_engine
    from backend.store.store import keep_files_private
    from backend.web.server import create_app

    keep_files_private()
    app = create_app(settings)
    import_engine(settings)
    app.run(host=args.host, port=args.port, threaded=True)


def print_webhook_token(parser, settings: Settings, project: str) -> None:
    from backend.labelstudio import webhook_auth
    from backend.store.store import project_id

    try:
        project = project_id(project)
        secret = webhook_auth.webhook_secret(settings)
    except (ValueError, webhook_auth.WebhookSecretUnavailable) as err:
        parser.error(str(err))
    token = webhook_auth.webhook_token(secret, project)
    print(f"{webhook_auth.TOKEN_HEADER}: {token}")


if __name__ == "__main__":
    main()
else:  # imported by a WSGI server: gunicorn _wsgi:app
    configure_logging()
    try:
        settings = Settings.from_env()
    except SettingsError as err:
        sys.exit(f"subregweigh backend: {err}")
    from backend.queue.warmup import import_engine
    from backend.store.store import keep_files_private
    from backend.web.server import create_app

    keep_files_private()
    app = create_app(settings)
    import_engine(settings)
