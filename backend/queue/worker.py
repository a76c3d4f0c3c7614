"""An rq worker for the backend's training, rescore and self-test jobs.

Run ``python -m backend.queue.worker``. Reads REDIS_URL (or REDIS_HOST/PORT/DB), RQ_QUEUE_NAME,
MODEL_DIR, LABEL_STUDIO_URL and LABEL_STUDIO_API_KEY from its environment: where things are,
and the credentials.
What a training computes (K, N, the scout, ...) comes with each job, from the server that
queued it, so a worker trains exactly as that server would whatever its own SRW_* say. Start
as many as you like, on this machine or others (a GPU box, say) that share MODEL_DIR and
Redis; each runs one job at a time (a rescore queued behind a training waits for it, unless
another worker is free), and a per-project lock keeps two from training the same project.
If Redis goes away the worker waits and reconnects (rq retries with backoff).
"""

from __future__ import annotations

import logging
import os
import sys
import time

from backend.config import logs, redact
from backend.config.logs import configure_logging
from backend.config.settings import Settings, SettingsError
from backend.queue.warmup import import_engine
from backend.store.store import keep_files_private


def _wait_for_redis(connection, redis_url: str, max_delay: float = 30.0) -> None:
    """Block until Redis answers (a worker may start before Redis, or during an outage)."""
    from redis.exceptions import RedisError

    from backend.queue.runners import redis_location

    delay = 1.0
    while True:
        try:
            connection.ping()
            return
        except RedisError as err:
            logging.getLogger(__name__).warning(
                "waiting for Redis at %s (%s); retrying in %.0f s",
                redis_location(redis_url),
                type(err).__name__,
                delay,
            )
            time.sleep(delay)
            delay = min(2 * delay, max_delay)


def main(argv: list[str] | None = None) -> int:
    import argparse

    from redis import Redis
    from rq import Queue, Worker

    parser = argparse.ArgumentParser(
        prog="python -m backend.queue.worker",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--burst", action="store_true", help="exit when the queue is empty")
    args = parser.parse_args(argv)
    configure_logging()
    try:
        settings = Settings.from_env()
    except SettingsError as err:
        print(f"backend.queue.worker: {err}", file=sys.stderr)
        return 2
    logs.install(settings)
    keep_files_private()
    if not settings.redis_url:
        print(
            "backend.queue.worker: set REDIS_URL (or REDIS_HOST) to the Redis the server queues on",
            file=sys.stderr,
        )
        return 2
    connection = Redis.from_url(settings.redis_url)
    _wait_for_redis(connection, settings.redis_url)
    queue = Queue(settings.queue_name, connection=connection)
    logging.getLogger(__name__).info(
        "worker for queue %r, models in %s, Label Studio at %s (each job brings the server's "
        "training settings)",
        settings.queue_name,
        settings.model_dir,
        redact.redact(settings.label_studio_url) or "(LABEL_STUDIO_URL unset)",
    )
    import_engine(settings)  # the forked jobs inherit it
    Worker([queue], connection=connection).work(
        burst=args.burst, logging_level=os.environ.get("LOG_LEVEL", "INFO").upper()
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
