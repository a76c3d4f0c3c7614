"""Label Studio JSON exports (Project > Export > JSON) read without their labeling config: the
command line's way in.

:func:`infer_spec` finds the export's :class:`~subregweigh.io.labelstudio.LabelingSpec` in its
own regions; :func:`read_label_studio` reads the file into examples with
:func:`~subregweigh.io.labelstudio.parse_tasks`, the parser the ML backend uses on tasks from
the API. Regions of the review control (:data:`~subregweigh.io.labelstudio.REVIEW_CONTROL`)
are reviewers' decisions, never labels: both skip them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from subregweigh.example import DataError, Example, Task
from subregweigh.io.atomic import PathLike
from subregweigh.io.labelstudio import (
    _KIND_NAMES,
    KINDS,
    REVIEW_CONTROL,
    Annotations,
    LabelingSpec,
    _check_annotations,
    _identify,
    _text,
    _used,
    parse_tasks,
)
from subregweigh.io.readers import read_text

logger = logging.getLogger(__name__)


def infer_spec(
    tasks: Sequence[Any],
    *,
    annotations: Annotations = "latest",
    text_field: str | None = None,
    source: str = "",
) -> LabelingSpec:
    """The :class:`LabelingSpec` of an export read without its labeling config.

    The task kind and the control come from the ``labels`` or ``choices`` regions of the
    annotations that ``annotations`` uses; any label is allowed, several choices make a
    multi-label example; the review control's regions are skipped. ``text_field`` is the spec's
    ``data_key``.

    Raises
    ------
    DataError
        For a task that :func:`parse_tasks` would refuse for its id, annotations or text,
        for labels and choices (or two controls) in one export, and for an export with neither.
    """
    _check_annotations(annotations)
    kind: tuple[Task, str] | None = None  # (task, where first seen)
    control: tuple[str, str, str] | None = None  # (from_name, to_name, where first seen)
    seen: set[str] = set()
    n_used = 0
    for index, item in enumerate(tasks):
        task_id, where = _identify(item, index, source, seen)
        used = _used(item, where, annotations, True, [])
        if not used:
            continue
        n_used += 1
        _text(item, text_field, where)
        for annotation in used:
            regions = annotation.get("result")
            for region in regions if isinstance(regions, list) else ():
                rtype = region.get("type") if isinstance(region, dict) else None
                task = KINDS.get(rtype) if isinstance(rtype, str) else None
                if task is None or region.get("from_name") == REVIEW_CONTROL:
                    continue  # another control's region (a decision), or malformed
                if kind is None:
                    kind = (task, where)
                elif task != kind[0]:
                    raise DataError(
                        f"{where}: has {_KIND_NAMES[task]} regions, but {kind[1]} has "
                        f"{_KIND_NAMES[kind[0]]}; an export must hold one of the two"
                    )
                from_name = region.get("from_name")
                if not isinstance(from_name, str):
                    raise DataError(f"{where}: a {rtype} region without a control ('from_name')")
                if control is None:
                    to_name = region.get("to_name")
                    control = (from_name, to_name if isinstance(to_name, str) else "", where)
                elif from_name != control[0]:
                    raise DataError(
                        f"{where}: {rtype} from the control {from_name!r}, but "
                        f"{control[2]} has them from {control[0]!r}; subregweigh reads one "
                        "<Labels> or <Choices> control per export"
                    )
    if kind is None or control is None:
        prefix = f"{source}: " if source else ""
        raise DataError(
            f"{prefix}no annotation has labels (NER) or choices (classification) "
            f"regions ({n_used} annotated tasks of {len(tasks)})"
        )
    return LabelingSpec(task=kind[0], from_name=control[0], to_name=control[1], data_key=text_field)


# ----------------------------------------------------------------------------- export files

_LOGGED = 10  # warnings logged one by one; the rest at debug level


def read_label_studio(
    path: PathLike, text_field: str | None = None, annotations: Annotations = "latest"
) -> tuple[list[Example], Task]:
    """Read a Label Studio JSON export (Project > Export > JSON).

    Parameters
    ----------
    path : str or path-like
        A JSON array of tasks. Its task kind and control come from its regions
        (:func:`infer_spec`): NER from ``labels`` regions, ``{"value": {"start", "end",
        "labels": [...]}}`` with end-exclusive character offsets, which become IOB2 word tags
        (an annotation without regions is all ``O``); classification from ``choices``, the
        sorted tuple of the chosen classes (several for a multi-label project, as
        :func:`~subregweigh.io.readers.read_jsonl` has them). Predictions are ignored.
    text_field : str, optional
        Key of the text in each task's ``data``. Default: the only string field of ``data``.
    annotations : {"latest", "all"}, default "latest"
        Per task, the latest (by ``updated_at``, else ``created_at``, then id) non-cancelled
        annotation, example id = task id; or every non-cancelled one, id ``"task/annotation"``,
        as the ML backend weighs them.

    Returns
    -------
    examples : list of Example
        In export order; ``source`` is ``"{path}:task {id}"``. Words: :func:`task_words`.
    task : {"ner", "classification"}

    Tasks without a non-cancelled annotation, and annotations without a choice, are skipped
    with a logged warning; so are span problems that IOB2 cannot hold (a span that cuts a word
    is widened to the whole word; a span overlapping another is dropped).

    Raises
    ------
    DataError
        ``"{path}:{line}: ..."`` for invalid JSON; ``"{path}:task {id}: ..."`` for a task
        without text or with several text fields, a region outside the text or with malformed
        offsets or labels, both labels and choices in one export, a duplicate task id, ...
    """
    name = str(path)
    try:
        tasks = json.loads(read_text(path))
    except json.JSONDecodeError as e:
        raise DataError(f"{name}:{e.lineno}: invalid JSON ({e.msg} at column {e.colno})") from None
    except RecursionError:
        raise DataError(f"{name}: invalid JSON (nested too deeply)") from None
    if not isinstance(tasks, list):
        raise DataError(
            f"{name}:1: expected a JSON array of Label Studio tasks, got {type(tasks).__name__}"
        )
    if not tasks:
        raise DataError(f"{name}:1: the export holds no tasks")
    spec = infer_spec(tasks, annotations=annotations, text_field=text_field, source=name)
    parsed = parse_tasks(tasks, spec, annotations=annotations, strict=True, source=name)
    if parsed.unannotated:
        logger.warning(
            "%s: %d of %d tasks have no annotation (or only cancelled ones); skipped",
            name,
            parsed.unannotated,
            len(tasks),
        )
    for warning in parsed.warnings[:_LOGGED]:
        logger.warning("%s", warning)
    if len(parsed.warnings) > _LOGGED:
        logger.warning(
            "%s: %d more problems like these (-v lists them)",
            name,
            len(parsed.warnings) - _LOGGED,
        )
        for warning in parsed.warnings[_LOGGED:]:
            logger.debug("%s", warning)
    examples = [ex for task in parsed.tasks if task is not None for ex in task.examples]
    if not examples:
        raise DataError(f"{name}: none of the {len(tasks)} tasks has a usable annotation")
    return examples, spec.task
