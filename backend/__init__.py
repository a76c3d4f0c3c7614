"""The Label Studio ML backend over the engine (:mod:`subregweigh`).

``server`` (HTTP, webhook events) -> ``training`` (a training's stages), ``rescore``,
``selftest``, ``predictions``, ``publish`` and ``weighers`` (the scout cache), and ``report``
(a project's report from its stored scores) -> ``store``, ``jobs``,
``tasks``, ``convert``, ``labelstudio``, ``settings``; ``worker`` runs queued trainings and
self-tests. Nothing here imports ``model.py``, label-studio-ml's entry point, which is a
thin adapter over ``predictions`` and ``training``.
"""
