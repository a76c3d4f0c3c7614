"""Label Studio, as the backend talks to it and reads it: the client of its API, with retries
and one deadline per request (:mod:`backend.labelstudio.client`,
:mod:`~backend.labelstudio.deadline`), labeling configs and tasks read into the engine's
examples and its results written back as regions (:mod:`~backend.labelstudio.tasks`,
:mod:`~backend.labelstudio.convert`), what proves a project is this backend's
(:mod:`~backend.labelstudio.membership`), the webhook's own credential and the one request to an
address a project gives (:mod:`~backend.labelstudio.webhook_auth`,
:mod:`~backend.labelstudio.outbound`), and the review control command
(:mod:`~backend.labelstudio.review_control`).

May import :mod:`backend.config` and :mod:`backend.store`, no other backend package.
"""
