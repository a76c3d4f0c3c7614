"""The files of the projects under MODEL_DIR: the project store (:mod:`backend.store.store`),
the job inbox (:mod:`~backend.store.inbox`) and the ledger of written versions
(:mod:`~backend.store.ledger`) beside its status, as state-key files
(:mod:`~backend.store.keyfile`), its version directories (:mod:`~backend.store.versions`), the
disk under them (:mod:`~backend.store.disk`), the tasks a refresh reads
(:mod:`~backend.store.snapshot`), what a full disk keeps in memory
(:mod:`~backend.store.unwritten`) and the per-process cache of views of stored scores
(:mod:`~backend.store.scores_view`).

The lowest of the backend's packages: it imports no other (only the engine).
"""
