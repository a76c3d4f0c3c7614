"""Serve the subregweigh Label Studio ML backend.

    python _wsgi.py                      # http://0.0.0.0:9090, embedded job runner, ./models
    python _wsgi.py --port 9091 --model-dir /data/models --log-level DEBUG
    python _wsgi.py --webhook-token 4    # the header for project 4's webhook, to paste by hand
    gunicorn -c gunicorn.conf.py _wsgi:app   # production (settings from the environment)

Every flag has an environment variable (see the README's configuration table); flags win.
Settings that cannot work (``-k 20 --n-samples 10``, say) stop the start with the reason.
"""

from __future__ import annotations

import argparse
import os
import sys

from backend.settings import METHODS, SCORES, Settings, SettingsError, configure_logging

# Flags that are settings (the rest: --host, --port, --log-level): dest == Settings field.
SETTINGS_FLAGS = (
    "model_dir",
    "label_studio_url",
    "redis_url",
    "queue_name",
    "scout_model",
    "k",
    "n_samples",
    "p",
    "method",
    "score",
    "w_min",
    "epochs",
    "retrain_after",
    "min_annotations",
)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "9090")))
    parser.add_argument("--log-level", default=os.environ.get("LOG_LEVEL", "INFO"))
    parser.add_argument(
        "--model-dir", help="per-project models and scores (MODEL_DIR, default ./models)"
    )
    parser.add_argument(
        "--label-studio-url", help="LABEL_STUDIO_URL (the API key: LABEL_STUDIO_API_KEY only)"
    )
    parser.add_argument(
        "--redis-url", help="REDIS_URL: run training on rq workers instead of in-process"
    )
    parser.add_argument("--queue-name", help="RQ_QUEUE_NAME (default subregweigh)")
    parser.add_argument(
        "--scout-model", help="SRW_MODEL: encoder name or path (default: offline MiniLM)"
    )
    parser.add_argument("-k", type=int, help="SRW_K (default 10)")
    parser.add_argument("--n-samples", type=int, help="SRW_N (default 500)")
    parser.add_argument("-p", type=float, help="SRW_P (default 0.1)")
    parser.add_argument("--method", choices=METHODS, help="SRW_METHOD")
    parser.add_argument(
        "--score", choices=SCORES, help="SRW_SCORE: a task's prediction score (default probability)"
    )
    parser.add_argument("--w-min", type=float, help="SRW_W_MIN (default 1/3)")
    parser.add_argument("--epochs", type=int, help="SRW_EPOCHS (default 3)")
    parser.add_argument(
        "--retrain-after", type=int, help="SRW_RETRAIN_AFTER annotation changes (default 10)"
    )
    parser.add_argument("--min-annotations", type=int, help="SRW_MIN_ANNOTATIONS (default 10)")
    parser.add_argument(
        "--webhook-token",
        metavar="PROJECT",
        help="print the header that lets Label Studio's webhook of PROJECT through basic auth "
        "(for the project's Settings > Webhooks, where a training could not add it) and exit",
    )
    args = parser.parse_args(argv)
    try:
        settings = Settings.from_env(**{name: getattr(args, name) for name in SETTINGS_FLAGS})
    except SettingsError as err:
        parser.error(str(err))
    if args.webhook_token is not None:
        print_webhook_token(parser, settings, args.webhook_token)
        return
    configure_logging(args.log_level)
    from backend.server import create_app

    create_app(settings).run(host=args.host, port=args.port, threaded=True)


def print_webhook_token(parser, settings: Settings, project: str) -> None:
    from backend import webhook_auth
    from backend.store import project_id

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
    from backend.server import create_app

    app = create_app(settings)
