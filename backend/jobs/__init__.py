"""The jobs, side by side: a project's training (:mod:`backend.jobs.training`), the rescore of
its changed tasks (:mod:`~backend.jobs.rescore`), the refresh of its serving version after them
(:mod:`~backend.jobs.refresh`) and its self-test (:mod:`~backend.jobs.selftest`). None imports
another: a rescore refreshes through the ``refresh`` it is given by whoever binds it to its
runner (:func:`backend.web.server.create_app`). What they share lives beside them and imports
no job: a job's clock (:mod:`~backend.jobs.phases`) and a project's annotations as a training
or a self-test reads them (:mod:`~backend.jobs.annotations`).

May import :mod:`backend.queue` (a job's budget), :mod:`backend.serving`,
:mod:`backend.review`, :mod:`backend.labelstudio`, :mod:`backend.config` and
:mod:`backend.store`; never the web layer.
"""
