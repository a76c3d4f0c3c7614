"""The Label Studio ML backend over the engine (:mod:`subregweigh`).

``server`` (HTTP, webhook events) -> ``service`` (training, predictions, the scout cache) ->
``store``, ``jobs``, ``tasks``, ``convert``, ``labelstudio``, ``settings``; ``worker`` runs
queued trainings. Nothing here imports ``model.py``, label-studio-ml's entry point, which is a
thin adapter over ``service``.
"""
