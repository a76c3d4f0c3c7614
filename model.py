"""label-studio-ml's entry point: the backend as a ``LabelStudioMLBase``.

A thin adapter over :mod:`backend.jobs.training` and :mod:`backend.serving.predictions`, which do
the work (and which ``backend.web.server`` serves without this class): ``fit()`` trains a scout on
the project's current annotations and publishes a new version; ``predict(tasks)`` serves, per
task, its reliability (lower: review first): for an annotated task, the soft minimum over
entities and words of the scouts' and the CRF's p(gold) on the deterministic tokenization of
its least reliable annotation; for an unannotated task, the share of the K candidates agreeing
with the majority prediction.
Nothing in ``backend`` or ``subregweigh`` imports this module.
"""

from __future__ import annotations

from label_studio_ml.model import LabelStudioMLBase

from backend.config import project_settings
from backend.config.settings import Settings
from backend.jobs import training
from backend.labelstudio.tasks import ConfigError, TaskRead, parse_label_config
from backend.serving import predictions
from backend.store.store import ProjectStore, project_id
from backend.web.routes import TRAIN_EVENTS


class SubRegWeighModel(LabelStudioMLBase):
    """One instance per request; construction is cheap (Label Studio allows /setup 3 s)."""

    TRAIN_EVENTS = tuple(sorted(TRAIN_EVENTS))

    def __init__(self, project=None, label_config=None, settings: Settings | None = None, **kwargs):
        # The base class would parse the config with label-studio-tools; we parse it ourselves
        # with label-studio-sdk, lazily, so an unsupported config fails with a clear message.
        super().__init__(label_config=None, **kwargs)
        self.label_config = label_config
        self.settings = settings or Settings.from_env()
        self.project = project_id(project) if project is not None else None

    @property
    def model_version(self) -> str:
        return predictions.model_version(self.settings, self.project)

    def predict(self, tasks, **kwargs) -> list[dict]:
        store = ProjectStore(self.settings.model_dir, self.project)
        settings = project_settings.effective(self.settings, store)
        spec = parse_label_config(self.label_config, settings.controls_to_weigh)
        return predictions.predict(settings, self.project, spec, TaskRead.of(tasks, spec))

    def fit(self, tasks=(), workdir=None, **kwargs) -> dict:
        """Train on the project's current annotations (fetched from Label Studio, not
        ``tasks``), with this model's settings."""
        return training.train_project(self.project, self.settings)


__all__ = ["ConfigError", "SubRegWeighModel"]
