"""Label Studio projects and tasks <-> the engine's examples and results.

Supported labeling configs: one ``<Text>`` with either ``<Labels>`` (NER, character spans) or
``<Choices>`` (classification; ``choice="multiple"`` for multi-label), read with
label-studio-sdk into the engine's :class:`~subregweigh.io.labelstudio.LabelingSpec`. Tasks
are read by the engine's Label Studio parser, the one the command line uses on exports, so a
task gives the same examples in both; problems with a single task or annotation never stop the
rest: they come back as warnings naming the task.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from backend.convert import choices_result, labels_result
from subregweigh.example import Example
from subregweigh.io.labelstudio import (
    Annotations,
    LabelingSpec,
    LabelStudioTask,
    ParsedTasks,
    parse_tasks,
)

SUPPORTED = "one <Text> with <Labels> (NER) or <Choices> (classification)"


class ConfigError(ValueError):
    """A labeling config the backend cannot work with; the message says why."""


def parse_label_config(config: str) -> LabelingSpec:
    """Parse ``config`` with label-studio-sdk; raise :class:`ConfigError` if unsupported."""
    from label_studio_sdk.label_interface import LabelInterface

    if not config or (isinstance(config, str) and not config.strip()):
        raise ConfigError("the project has no labeling config")
    if not isinstance(config, str):
        raise ConfigError(f"the labeling config must be a string, not {type(config).__name__}")
    try:
        interface = LabelInterface(config)
    except Exception as err:
        raise ConfigError(f"the labeling config is not valid XML: {err}") from None
    controls = [c for c in interface.controls if c.tag in ("Labels", "Choices")]
    others = sorted({c.tag for c in interface.controls} - {"Labels", "Choices"})
    texts = [o for o in interface.objects if o.tag == "Text"]
    if len(controls) != 1 or len(texts) != 1:
        found = ", ".join(
            sorted({c.tag for c in interface.controls} | {o.tag for o in interface.objects})
        )
        raise ConfigError(
            f"subregweigh supports {SUPPORTED}; this config has: {found or 'nothing'}"
        )
    control, text = controls[0], texts[0]
    if text.name not in control.to_name:
        raise ConfigError(
            f"<{control.tag} name={control.name!r}> does not point to <Text name={text.name!r}>"
        )
    if not text.value or not text.value.startswith("$"):
        raise ConfigError(
            f'<Text name={text.name!r}> needs value="$field" naming the task\'s text field'
        )
    if not control.labels:
        raise ConfigError(f"<{control.tag} name={control.name!r}> has no labels")
    if others:
        raise ConfigError(
            f"subregweigh supports {SUPPORTED}; this config also has: {', '.join(others)}"
        )
    is_ner = control.tag == "Labels"
    return LabelingSpec(
        task="ner" if is_ner else "classification",
        from_name=control.name,
        to_name=text.name,
        data_key=text.value[1:],
        labels=tuple(control.labels),
        multi_label=not is_ner and control.attr.get("choice") == "multiple",
    )


def read_tasks(
    tasks: Sequence, spec: LabelingSpec, *, annotations: Annotations = "all"
) -> ParsedTasks:
    """The backend's reading of Label Studio tasks (:func:`subregweigh.io.labelstudio.parse_tasks`,
    the command line's parser): every non-cancelled annotation by default, so each annotator's
    work is weighed and a task scores as its least reliable annotation; lenient, since one bad
    task or annotation must not stop a project's training or a /predict call."""
    return parse_tasks(tasks, spec, annotations=annotations, strict=False)


def weighed(item: LabelStudioTask) -> tuple[Example, ...]:
    """The examples the backend weighs for a task: its annotations', or, unannotated, one
    without a label (``()``), weighed for its majority prediction and self-consistency."""
    if item.examples:
        return item.examples
    return (Example(item.id, tuple(word for word, _, _ in item.words), ()),)


def fingerprint(item: LabelStudioTask) -> str:
    """Changes whenever the task's text or any usable annotation's label changes."""
    payload = [item.text, sorted((ex.id, ex.label) for ex in weighed(item))]
    return hashlib.sha1(json.dumps(payload).encode()).hexdigest()


def stored_prediction(
    item: LabelStudioTask,
    spec: LabelingSpec,
    result,
    first: int,
    count: int,
    score_name: str = "probability",
) -> dict:
    """What the backend stores and serves for one task, from a :class:`WeighResult`.

    Annotated: score = the lowest quality score ``score_name`` (``WeighResult.score``) among its
    annotations, result = the scout's majority prediction for that least reliable one; every
    annotation's c/K and probability are kept too. Unannotated: score = the share of the K
    predictions agreeing with the majority prediction (self-consistency).
    """
    rows = range(first, first + count)
    if item.examples:
        quality = result.score(score_name)
        row = min(rows, key=lambda r: quality[r])
        score = float(quality[row])
    else:
        row = first
        score = float(result.majority_share[row])
    majority = result.majority[row]
    if spec.task == "ner":
        entities = result.majority_entities[row]
        spans = [(item.words[s][1], item.words[e - 1][2], t) for t, s, e, _ in entities]
        regions = labels_result(
            item.text, spans, spec.from_name, spec.to_name, [a for *_, a in entities]
        )
    else:
        regions = choices_result(list(majority), spec.from_name, spec.to_name)
    return {
        "result": regions,
        "score": score,
        "fingerprint": fingerprint(item),
        "reliability": {result.ids[r]: float(result.reliability[r]) for r in rows}
        if item.examples
        else {},
        "probability": {result.ids[r]: float(result.probability[r]) for r in rows}
        if item.examples
        else {},
    }


def score_tasks(
    srw, spec: LabelingSpec, items: Sequence[LabelStudioTask], score_name: str = "probability"
) -> dict[str, dict]:
    """Weigh tasks read by :func:`read_tasks` with a fitted :class:`SubRegWeigh`.

    Returns task id (str) -> stored prediction, scored by ``score_name``.
    """
    groups = [weighed(item) for item in items]
    examples = [ex for group in groups for ex in group]
    if not examples:
        return {}
    result = srw.weigh(examples)
    out, first = {}, 0
    for item, group in zip(items, groups):
        out[item.id] = stored_prediction(item, spec, result, first, len(group), score_name)
        first += len(group)
    return out
