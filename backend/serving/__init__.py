"""What a project is served: the weighers of its settings and its published versions, loaded
once per process (:mod:`backend.serving.weighers`); a task's prediction from the version
serving now (:mod:`~backend.serving.predictions`), and the changed tasks' scored again and
written (:mod:`~backend.serving.changed`); a version published, in the store and in Label
Studio (:mod:`~backend.serving.publish`), with the scouts' distributions it keeps
(:mod:`~backend.serving.scout_proba`); the reference corpus a scout trains beside
(:mod:`~backend.serving.reference`); and the project's report from its stored scores
(:mod:`~backend.serving.report`).

May import :mod:`backend.review`, :mod:`backend.labelstudio`, :mod:`backend.config` and
:mod:`backend.store`; not the jobs, the queue or the web layer.
"""
