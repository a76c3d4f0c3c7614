"""The web layer: the Flask app and its wiring of the jobs to their runners
(:mod:`backend.web.server`), the endpoints and the policy on Label Studio's webhook events
(:mod:`~backend.web.routes`), who may call and what a reply may carry
(:mod:`~backend.web.auth`), what a request carries, read defensively
(:mod:`~backend.web.inputs`), the map from exception to HTTP reply
(:mod:`~backend.web.errors`), and gunicorn's front: its worker and its access log
(:mod:`~backend.web.waitress_worker`, :mod:`~backend.web.access_log`).

The top of the backend: may import every other backend package; none imports it.
"""
