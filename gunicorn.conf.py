"""gunicorn settings for the backend: ``gunicorn -c gunicorn.conf.py _wsgi:app``.

Every value comes from the environment (the Docker image's defaults are the ones below):

    PORT                 9090   listen on 0.0.0.0:PORT
    WORKERS              2      processes; each loads a project's scout once per model version
    THREADS              4      threads per process (requests waiting on a computation overlap)
    GUNICORN_TIMEOUT     300    seconds a worker may miss its heartbeat before it is restarted
    MAX_REQUESTS         0      recycle a worker after this many requests (0: never)
    IDLE_TIMEOUT         30     close a connection that sends (or reads) nothing this long
    OMP_NUM_THREADS      1      torch threads per request; workers x threads requests share the CPUs

The workers read requests with waitress's event loop and hand only complete ones to their threads
(backend/web/waitress_worker.py): slow clients cost a connection each, up to 1000 per worker
(docs/deploying.md). Memory is bounded by WORKERS x (~0.5 GB + 4 cached versions x a version's
scouts) (backend.serving.weighers.CACHED_MODELS).
"""

import os

bind = f"0.0.0.0:{int(os.environ.get('PORT', '9090'))}"
workers = int(os.environ.get("WORKERS", "2"))
threads = int(os.environ.get("THREADS", "4"))
worker_class = "backend.web.waitress_worker.WaitressWorker"
worker_connections = 1000
# The worker closes a connection silent this long, whether kept alive or in mid-request.
keepalive = int(os.environ.get("IDLE_TIMEOUT", "30"))
timeout = int(os.environ.get("GUNICORN_TIMEOUT", "300"))
graceful_timeout = 30
max_requests = int(os.environ.get("MAX_REQUESTS", "0"))
max_requests_jitter = max_requests // 10
accesslog = "-"  # stdout; the app logs to stderr
logger_class = "backend.web.access_log.AccessLogger"  # each value escaped and bounded
# gunicorn's control socket defaults to one path per user: two servers of one user share it and
# one unlinks the other's. The backend is run by its environment (PORT, WORKERS, signals), so
# none is made.
control_socket_disable = True
access_log_format = '%(h)s "%(r)s" %(s)s %(b)s %(L)ss pid=%(p)s'
# Several torch threads per request, times workers x threads requests, thrash 2-core machines.
os.environ.setdefault("OMP_NUM_THREADS", "1")
