"""The jobs' queue, not the jobs: the runners, threads or rq, at most one running and one
pending job per project and kind (:mod:`backend.queue.runners`); the rq worker process
(:mod:`~backend.queue.worker`, ``python -m backend.queue.worker``) and what it imports at
start-up (:mod:`~backend.queue.warmup`); and a job's budget of time and memory, one training
slot per process (:mod:`~backend.queue.budget`).

A runner runs whatever callable it is given (the web layer binds the jobs to it): this package
may import :mod:`backend.config` and :mod:`backend.store`, never the jobs.
"""
