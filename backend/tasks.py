"""Label Studio projects and tasks <-> the engine's examples and results.

Supported labeling configs: one ``<Text>`` with either ``<Labels>`` (NER, character spans) or
``<Choices>`` (classification; ``choice="multiple"`` for multi-label). Problems with a single
task or annotation never stop the rest: they come back as warnings naming the task.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from backend.convert import choices_result, labels_result, spans_to_tags, words_with_offsets
from subregweigh.example import Example
from subregweigh.weigh import entity_agreement

SUPPORTED = "one <Text> with <Labels> (NER) or <Choices> (classification)"


class ConfigError(ValueError):
    """A labeling config the backend cannot work with; the message says why."""


@dataclass(frozen=True)
class LabelingSpec:
    """What the backend needs from a labeling config."""

    task: str  # "ner" or "classification"
    from_name: str
    to_name: str
    data_key: str
    labels: tuple[str, ...]
    multi_label: bool = False


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


@dataclass
class TaskExamples:
    """One task's words and its examples: one per usable annotation, or one unlabeled."""

    task_id: int
    text: str
    words: list[tuple[str, int, int]]
    examples: list[Example]
    annotated: bool


def task_text(task: dict, spec: LabelingSpec) -> str:
    data = task.get("data")
    if not isinstance(data, dict) or spec.data_key not in data:
        have = ", ".join(sorted(data)) if isinstance(data, dict) else "no data"
        raise ValueError(
            f"task {task.get('id')}: no {spec.data_key!r} field in its data (has: {have})"
        )
    text = data[spec.data_key]
    if not isinstance(text, str):
        raise ValueError(f"task {task.get('id')}: {spec.data_key!r} is not text")
    try:  # JSON may carry lone surrogates ("\ud800"), which the tokenizer cannot encode
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"task {task.get('id')}: {spec.data_key!r} is not valid Unicode") from None
    return text


def _well_formed(region, key: str) -> bool:
    """``region`` is an object whose ``value`` (if any) holds a list of strings at ``key``."""
    if not isinstance(region, dict):
        return False
    value = region.get("value") or {}
    items = (value.get(key) or []) if isinstance(value, dict) else None
    return isinstance(items, list) and all(isinstance(item, str) for item in items)


def _annotation_label(annotation: dict, spec: LabelingSpec, text: str, where: str, warnings: list):
    """The engine label of one annotation, or None if it cannot be used."""
    regions = annotation.get("result") or []
    key = "labels" if spec.task == "ner" else "choices"
    if not isinstance(regions, list) or not all(_well_formed(r, key) for r in regions):
        warnings.append(
            f"{where}: a malformed result (expected a list of regions whose value "
            f"holds a list of {key}); annotation skipped"
        )
        return None
    results = [r for r in regions if r.get("from_name") == spec.from_name]
    known = set(spec.labels)
    if spec.task == "ner":
        spans = []
        for r in results:
            value = r.get("value") or {}
            for label in value.get("labels") or []:
                if label not in known:
                    warnings.append(
                        f"{where}: label {label!r} is not in the labeling config; annotation "
                        f"skipped"
                    )
                    return None
                try:
                    spans.append((int(value["start"]), int(value["end"]), label))
                except (KeyError, TypeError, ValueError, OverflowError):  # OverflowError: int(inf)
                    warnings.append(
                        f"{where}: a region without valid start/end; annotation skipped"
                    )
                    return None
        _, tags, span_warnings = spans_to_tags(text, spans, where)
        warnings.extend(span_warnings)
        return tuple(tags)
    chosen = sorted({c for r in results for c in (r.get("value") or {}).get("choices") or []})
    unknown = [c for c in chosen if c not in known]
    if unknown:
        warnings.append(
            f"{where}: choice {unknown[0]!r} is not in the labeling config; annotation skipped"
        )
        return None
    if not chosen:
        warnings.append(f"{where}: no choice made; annotation skipped")
        return None
    if len(chosen) > 1 and not spec.multi_label:
        warnings.append(
            f"{where}: {len(chosen)} choices for a single-choice config; annotation skipped"
        )
        return None
    return tuple(chosen)


def task_examples(task: dict, spec: LabelingSpec, warnings: list) -> TaskExamples | None:
    """The examples of one task; None (with a warning) if the task itself is unusable."""
    task_id = task.get("id")
    try:
        text = task_text(task, spec)
    except ValueError as err:
        warnings.append(f"{err}; task skipped")
        return None
    words = words_with_offsets(text)
    if not words:
        warnings.append(f"task {task_id}: empty text; task skipped")
        return None
    word_strings = tuple(w for w, _, _ in words)
    examples = []
    annotations = task.get("annotations") or []
    if not isinstance(annotations, list):
        warnings.append(f"task {task_id}: 'annotations' is not a list; annotations skipped")
        annotations = []
    for annotation in annotations:
        if not isinstance(annotation, dict):
            warnings.append(f"task {task_id}: an annotation is not an object; skipped")
            continue
        if annotation.get("was_cancelled"):
            continue
        where = f"task {task_id} annotation {annotation.get('id')}"
        label = _annotation_label(annotation, spec, text, where, warnings)
        if label is not None:
            examples.append(
                Example(id=f"{task_id}/{annotation.get('id')}", words=word_strings, label=label)
            )
    annotated = bool(examples)
    if not annotated:  # unlabeled: weighed for its majority prediction and self-consistency
        examples.append(Example(id=f"{task_id}", words=word_strings, label=()))
    return TaskExamples(task_id, text, words, examples, annotated)


def fingerprint(item: TaskExamples) -> str:
    """Changes whenever the task's text or any usable annotation's label changes."""
    payload = [item.text, sorted((ex.id, ex.label) for ex in item.examples)]
    return hashlib.sha1(json.dumps(payload).encode()).hexdigest()


def stored_prediction(
    item: TaskExamples, spec: LabelingSpec, result, first: int, count: int
) -> dict:
    """What the backend stores and serves for one task, from a :class:`WeighResult`.

    Annotated: score = the lowest reliability c/K among its annotations, result = the scout's
    majority prediction for the least reliable one. Unannotated: score = the share of the K
    predictions agreeing with the majority prediction (self-consistency).
    """
    rows = range(first, first + count)
    if item.annotated:
        row = min(rows, key=lambda r: result.reliability[r])
        score = float(result.reliability[row])
    else:
        row = first
        score = float(result.majority_share[row])
    majority = result.majority[row]
    if spec.task == "ner":
        ones = np.ones(len(result.predictions[row]), dtype=np.int64)
        agreement = entity_agreement(result.predictions[row], ones, majority)
        spans = [(item.words[s][1], item.words[e - 1][2], t) for t, s, e, _ in agreement]
        regions = labels_result(
            item.text, spans, spec.from_name, spec.to_name, [a for *_, a in agreement]
        )
    else:
        regions = choices_result(list(majority), spec.from_name, spec.to_name)
    return {
        "result": regions,
        "score": score,
        "fingerprint": fingerprint(item),
        "reliability": {result.ids[r]: float(result.reliability[r]) for r in rows}
        if item.annotated
        else {},
    }


def score_tasks(srw, spec: LabelingSpec, items: Sequence[TaskExamples]) -> dict[str, dict]:
    """Weigh converted tasks (:func:`task_examples`) with a fitted :class:`SubRegWeigh`.

    Returns task id (str) -> stored prediction.
    """
    examples = [ex for item in items for ex in item.examples]
    if not examples:
        return {}
    result = srw.weigh(examples)
    out, first = {}, 0
    for item in items:
        out[str(item.task_id)] = stored_prediction(item, spec, result, first, len(item.examples))
        first += len(item.examples)
    return out
