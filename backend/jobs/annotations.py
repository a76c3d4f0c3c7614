"""What a training and a self-test read of a project before they start: its labeling config
and every task with its annotations, from Label Studio, and whether there are enough of them.
Shared by the jobs (:mod:`backend.jobs.training`, :mod:`backend.jobs.selftest`), which never
import one another."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from backend.config.settings import Settings
from backend.labelstudio.client import LabelStudioAPI, annotator_names
from backend.labelstudio.tasks import TaskRead, name_annotators, parse_label_config, read_tasks
from backend.review import reviews
from backend.serving.controls import read_each
from backend.serving.predictions import log_warnings
from subregweigh.io.labelstudio import LabelingSpec

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProjectRead:
    """A project as a job read it from Label Studio, once.

    Attributes
    ----------
    api : LabelStudioAPI
        The client it was read with (the job writes back through it).
    spec : LabelingSpec
        The labeling config, parsed.
    items : list of LabelStudioTask
        Every task that could be read, with its annotations.
    n_annotated : int
        How many of them are annotated.
    refusal : str or None
        Why the job cannot start yet (too few annotations); None when it can.
    saved : dict
        When each annotation was saved (:func:`backend.review.reviews.saved_times`).
    reads : list of TaskRead, default []
        For a project weighing several controls, the tasks (annotators named) as each control
        of ``spec.each()`` reads them, each parsed once (the first control's reading is the one
        ``items`` come from); ``[]`` for a project of one control.
    """

    api: LabelStudioAPI
    spec: LabelingSpec
    items: list
    n_annotated: int
    refusal: str | None
    saved: dict
    reads: list = field(default_factory=list)


def read_annotations(project: str, settings: Settings, what: str) -> ProjectRead:
    """The project's tasks read from Label Studio (read only), and why ``what`` cannot start
    yet, if it cannot; ``settings`` are the project's (its ``weigh_controls`` chooses the
    labeling control weighed)."""
    api = LabelStudioAPI(settings.label_studio_url, settings.label_studio_api_key)
    spec = parse_label_config(api.label_config(int(project)), settings.controls_to_weigh)
    tasks = name_annotators(api.tasks(int(project)), annotator_names(api, project))
    parsed = read_tasks(tasks, spec)
    log_warnings(project, parsed.warnings)
    items = [item for item in parsed.tasks if item is not None]
    n_annotated = sum(bool(item.examples) for item in items)
    reads = read_each(tasks, spec, first=TaskRead(list(tasks), parsed)) if spec.several else []
    if reads:  # annotated in any control
        n_annotated = sum(
            any(item is not None and item.examples for item in readings)
            for readings in zip(*(read.parsed.tasks for read in reads), strict=True)
        )
    refusal = None
    if n_annotated < settings.min_annotations:
        refusal = (
            f"only {n_annotated} annotated tasks; {what} starts at "
            f"{settings.min_annotations} (SRW_MIN_ANNOTATIONS, or the project's min_annotations)"
        )
        logger.info("project %s: %s", project, refusal)
    return ProjectRead(
        api,
        spec,
        items,
        n_annotated,
        refusal,
        reviews.saved_times(tasks),
        reads,
    )
