"""Reviewers' decisions: what a save decides, pure (:mod:`backend.review.decisions`), how the
decisions change what is served (:mod:`~backend.review.served`, over the engine's policy
:mod:`subregweigh.served`), and the decisions read from Label Studio and kept in
``reviews.json`` (:mod:`~backend.review.reviews`).

May import :mod:`backend.labelstudio` (its tasks' parser), :mod:`backend.config` and
:mod:`backend.store`, no other backend package.
"""
