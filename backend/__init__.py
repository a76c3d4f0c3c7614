"""The Label Studio ML backend over the engine (:mod:`subregweigh`), in role packages; each may
import only those below it (tests/repository/test_layers.py holds the map, ``ALLOWED``):

* :mod:`backend.web`: the Flask app, the endpoints and the webhook policy, auth, the error
  map, gunicorn's worker and access log; it binds the jobs to the queue's runners.
* :mod:`backend.jobs`: the training, the rescore, the refresh and the self-test, side by side
  (none imports another), with what they share (a job's clock, a project's annotations read).
* :mod:`backend.queue`: the job runners (threads or rq), the rq worker, a job's budget, the
  start-up warm-up; it runs what it is given and imports no job.
* :mod:`backend.serving`: the weighers and their cache, predictions, the changed tasks'
  rescore, publishing a version (the scouts' distributions it keeps included), the reference
  corpus, the report.
* :mod:`backend.review`: reviewers' decisions, what they change in what is served (over the
  engine's :mod:`subregweigh.served`), and ``reviews.json``.
* :mod:`backend.labelstudio`: the client of Label Studio's API, tasks and labeling configs
  read and results written, membership, the webhook's credential, the review control command.
* :mod:`backend.config`: the settings, declared once, a project's own, redaction, logging.
* :mod:`backend.store`: the projects' files under MODEL_DIR (versions, status, the job inbox,
  the ledger of written versions, scores, the tasks a refresh reads, what a full disk keeps in
  memory).

Nothing here imports ``model.py``, label-studio-ml's entry point, a thin adapter over
:mod:`backend.serving.predictions` and :mod:`backend.jobs.training`; docs/design.md draws the
packages and each job's path from a Label Studio event to a served score.
"""
