"""Label Studio projects and tasks <-> the engine's examples and results.

A labeling config is read with label-studio-sdk (:func:`parse_label_config`) into the engine's
:class:`~subregweigh.io.labelstudio.LabelingSpec` of the controls weighed: each a ``Labels``
(NER, character spans) or a ``Choices`` (classification; ``choice="multiple"`` for multi-label)
on a ``Text``, every one of the config's or those the project's ``weigh_controls`` names (with
several, each is weighed on its own: ``LabelingSpec.each``). Every
other control (a comment box, a rating, a quality flag, ...) is left alone, and the review
control (``Choices name="srw_review"``) holds decisions, never labels. Tasks are read by the
engine's Label Studio parser, the one the command line uses on exports, so a task gives the same
examples in both; problems with a single task or annotation never stop the rest: they come back
as warnings naming the task.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from backend.labelstudio.convert import choices_result, class_note, doubt_regions, labels_result
from subregweigh.example import Example
from subregweigh.io.dataset import example_record
from subregweigh.io.labelstudio import (
    REVIEW_CHOICES,
    REVIEW_CONTROL,
    Annotations,
    Control,
    LabelingSpec,
    LabelStudioTask,
    ParsedTasks,
    parse_tasks,
)
from subregweigh.io.weights import to_json
from subregweigh.options import DEFAULT_SCORE
from subregweigh.scale import disagreements
from subregweigh.suggest import class_suggestion, span_suggestions

# The controls subregweigh weighs, Label Studio's tag -> the task; each must label one Text.
WEIGHABLE = {"Labels": "ner", "Choices": "classification"}
# What a project may weigh, in words that survive Label Studio's display of a message (it strips
# whatever looks like a <tag>).
SUPPORTED = (
    "a Labels (NER) or Choices (classification) control on a Text object, and leaves other "
    "controls alone"
)
SETTING = "weigh_controls"  # backend.config.settings' field: which control a project weighs
_COUNTS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
_SHOWN = 10  # controls a message names one by one


class ConfigError(ValueError):
    """A labeling config the backend cannot work with; the message says why, in words (no
    ``<tags>``: Label Studio strips them from what it shows)."""


def _count(n: int, noun: str) -> str:
    return f"{_COUNTS[n] if n < len(_COUNTS) else n} {noun}{'' if n == 1 else 's'}"


def _listed(items) -> str:
    """``'a' (Labels), 'b' (Choices) and 'c' (TextArea)``; the first :data:`_SHOWN`."""
    words = [str(item) for item in items]
    if len(words) > _SHOWN:
        words = [*words[:_SHOWN], f"{len(words) - _SHOWN} more"]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _control(control) -> Control:
    return Control(control.name, control.tag, tuple(control.to_name or ()))


def _xml_problem(err: Exception) -> str:
    """The parser's message in words Label Studio shows whole: without lxml's ``(<string>,
    line 1)`` and with no angle bracket (Label Studio strips what looks like a tag)."""
    text = re.sub(r"\s*\(<string>, line \d+\)\s*$", "", str(err))
    return text.replace("'<'", "an opening angle bracket").replace("<", "(").replace(">", ")")


def _off_text(control: Control, kinds: Mapping[str, str]) -> str:
    """Why ``control`` labels no one Text, in words (``""`` when it labels one); ``kinds``:
    the config's objects, name -> tag."""
    targets = " and ".join(map(repr, control.to_name)) or "nothing"
    if len(control.to_name) > 1:
        return f"{control} labels {targets}, not one Text"
    kind = kinds.get(control.to_name[0]) if control.to_name else None
    if kind == "Text":
        return ""
    where = f"the {kind} {targets}" if kind else f"{targets}, which the config does not have"
    return f"{control} labels {where}, not a Text"


def parse_label_config(config: str, weigh: Sequence[str] = ()) -> LabelingSpec:
    """Parse ``config`` with label-studio-sdk into the spec of the controls it weighs; raise
    :class:`ConfigError` when it has none, or ``weigh`` names one it cannot weigh.

    A weighable control is a ``Labels`` or ``Choices`` (:data:`WEIGHABLE`) that labels one
    ``Text`` object. ``weigh`` (the project's ``weigh_controls``, in order) names those to
    weigh; empty: every weighable control of the config. With several, the spec is the first
    one's and its ``others`` hold the rest, each weighed on its own
    (:meth:`~subregweigh.io.labelstudio.LabelingSpec.each`). Every other control of the config
    (comment boxes, ratings, a flag's ``Choices`` not named, controls on other objects) is left
    alone: the spec's ``ignored`` lists them and reading tasks skips their regions. The review
    control (:data:`~subregweigh.io.labelstudio.REVIEW_CONTROL`, a ``Choices`` on a Text) is
    named by the spec's ``review`` and is never a label."""
    from label_studio_sdk.label_interface import LabelInterface

    if not config or (isinstance(config, str) and not config.strip()):
        raise ConfigError("the project has no labeling config")
    if not isinstance(config, str):
        raise ConfigError(f"the labeling config must be a string, not {type(config).__name__}")
    try:
        interface = LabelInterface(config)
    except Exception as err:
        raise ConfigError(f"the labeling config is not valid XML: {_xml_problem(err)}") from None
    kinds = {o.name: o.tag for o in interface.objects}
    controls = [_control(c) for c in interface.controls]
    review = _review_control(controls, kinds)
    weighable = [
        c
        for c in controls
        if c.tag in WEIGHABLE and c.name != REVIEW_CONTROL and not _off_text(c, kinds)
    ]
    specs = [
        _spec(interface, chosen, controls, review)
        for chosen in _chosen(controls, weighable, tuple(weigh), kinds)
    ]
    first, *others = specs
    return replace(first, others=tuple(others)) if others else first


def _spec(interface, chosen: Control, controls: list[Control], review) -> LabelingSpec:
    """The spec of the one control ``chosen``; every other control but the review control is
    among its ``ignored``."""
    text = next(o for o in interface.objects if o.name == chosen.to_name[0])
    if not text.value or not text.value.startswith("$"):
        raise ConfigError(
            f'the Text {text.name!r} that {chosen} labels needs value="$field", naming the '
            "task's text field"
        )
    labels = next(c.labels for c in interface.controls if c.name == chosen.name)
    if not labels:
        raise ConfigError(f"{chosen} has no labels to choose from")
    is_ner = chosen.tag == "Labels"
    attr = next(c.attr for c in interface.controls if c.name == chosen.name)
    return LabelingSpec(
        task=WEIGHABLE[chosen.tag],
        from_name=chosen.name,
        to_name=text.name,
        data_key=text.value[1:],
        labels=tuple(labels),
        multi_label=not is_ner and attr.get("choice") == "multiple",
        review=REVIEW_CONTROL if review else None,
        ignored=tuple(c for c in controls if c != chosen and c.name != REVIEW_CONTROL),
    )


def _review_control(controls: list[Control], kinds: Mapping[str, str]) -> Control | None:
    """The config's review control, checked: a Choices on a Text (None: it has none)."""
    review = next((c for c in controls if c.name == REVIEW_CONTROL), None)
    if review is None:
        return None
    if review.tag != "Choices":
        raise ConfigError(
            f"{REVIEW_CONTROL!r} is the review control's reserved name: it must be a Choices "
            f"control ({', '.join(REVIEW_CHOICES)}), not a {review.tag} control; rename it"
        )
    where = _off_text(review, kinds)
    if where:
        raise ConfigError(f"the review control {where}")
    return review


def _chosen(
    controls: list[Control],
    weighable: list[Control],
    weigh: tuple[str, ...],
    kinds: Mapping[str, str],
) -> list[Control]:
    """The controls to weigh: those ``weigh`` names, in its order, else every weighable one."""
    if weigh:
        by_name = {c.name: c for c in controls}
        for name in weigh:
            if name == REVIEW_CONTROL:
                raise ConfigError(
                    f"{SETTING} names {name!r}, the review control: its choices are decisions, "
                    "never labels"
                )
            if name not in by_name:
                has = f"its labeling controls: {_listed(weighable)}" if weighable else "it has none"
                raise ConfigError(
                    f"{SETTING} names {name!r}, a control the labeling config does not have ({has})"
                )
            if by_name[name] not in weighable:
                why = _off_text(by_name[name], kinds) or f"{by_name[name]} is not one"
                raise ConfigError(
                    f"{SETTING} names {name!r}: subregweigh weighs {SUPPORTED}; {why}"
                )
        if len(set(weigh)) < len(weigh):
            twice = next(name for name in weigh if weigh.count(name) > 1)
            raise ConfigError(f"{SETTING} names {twice!r} twice: name each control once")
        return [by_name[name] for name in weigh]
    if weighable:
        return weighable
    aside = [_off_text(c, kinds) for c in controls if c.tag in WEIGHABLE]
    has = "; ".join(a for a in aside if a) or (
        f"its controls: {_listed(controls)}" if controls else "it has no controls"
    )
    reserved = (
        f" ({REVIEW_CONTROL!r} is the review control)"
        if any(c.name == REVIEW_CONTROL for c in controls)
        else ""
    )
    raise ConfigError(f"subregweigh weighs {SUPPORTED}; this config has none: {has}{reserved}")


def weighed_controls(spec: LabelingSpec) -> str:
    """The controls ``spec`` weighs, in words that survive Label Studio's display: ``"two
    labeling controls, 'ner' (Labels) and 'topic' (Choices)"``, or ``"'ner' (Labels)"``."""
    weighed = [s.control for s in spec.each()]
    if len(weighed) == 1:
        return str(weighed[0])
    return f"{_count(len(weighed), 'labeling control')}, {_listed(weighed)}"


# What one task may cost the backend to read and weigh (issue 58: a saved annotation of 5,000
# regions on a 1 MB task cost minutes of CPU): beyond either, the task is skipped with a warning
# naming it. 2,000 regions: one every 50 characters of the longest task weighed.
MAX_TASK_CHARS = 100_000
MAX_TASK_REGIONS = 2_000


def read_tasks(
    tasks: Sequence, spec: LabelingSpec, *, annotations: Annotations = "all"
) -> ParsedTasks:
    """The backend's reading of Label Studio tasks (:func:`subregweigh.io.labelstudio.parse_tasks`,
    the command line's parser): every non-cancelled annotation by default, so each annotator's
    work is weighed and a task scores as its least reliable annotation; lenient, since one bad
    task or annotation must not stop a project's training or a /predict call. A task longer than
    :data:`MAX_TASK_CHARS` or with more than :data:`MAX_TASK_REGIONS` regions is skipped."""
    return parse_tasks(
        tasks,
        spec,
        annotations=annotations,
        strict=False,
        max_chars=MAX_TASK_CHARS,
        max_regions=MAX_TASK_REGIONS,
    )


@dataclass(frozen=True)
class TaskRead:
    """Tasks as they came (from Label Studio, or a caller of ``/predict``) and as read by
    :func:`read_tasks`, parsed once: what the steps of a job share (a rescore's snapshot,
    decisions, change check and scores), so that none parses the payload again.

    Attributes
    ----------
    raw : list of dict
        The tasks as given (annotators named, where the job named them).
    parsed : ParsedTasks
        ``read_tasks(raw, spec)``: one entry per task of ``raw``, None where unreadable.
    """

    raw: list
    parsed: ParsedTasks

    @classmethod
    def of(cls, tasks: Sequence, spec: LabelingSpec) -> TaskRead:
        """``tasks`` read with ``spec`` (:func:`read_tasks`)."""
        return cls(list(tasks), read_tasks(tasks, spec))

    @property
    def items(self) -> list[LabelStudioTask]:
        """The readable tasks, in order."""
        return [item for item in self.parsed.tasks if item is not None]

    def pairs(self) -> list[tuple[Mapping, LabelStudioTask | None]]:
        """Each task as given, with its reading (None where unreadable)."""
        return list(zip(self.raw, self.parsed.tasks, strict=True))


def name_annotators(tasks: Sequence, users: Mapping[int, str]) -> list:
    """``tasks`` with each annotation's ``completed_by`` and ``updated_by`` (user ids, from the
    API) replaced by ``{"id", "email"}`` where ``users`` (id -> email) knows them, so that the
    parser names the annotator (:func:`subregweigh.io.labelstudio.annotator`) and a decision
    its reviewer (:func:`backend.review.decisions.reviewer`) by email. Copies; what is not a task or
    an annotation stays as it is, for the parser to judge."""
    out = []
    for task in tasks:
        annotations = task.get("annotations") if isinstance(task, dict) else None
        if isinstance(annotations, list):
            task = {**task, "annotations": [_named(a, users) for a in annotations]}
        out.append(task)
    return out


def _named(annotation, users: Mapping[int, str]):
    if not isinstance(annotation, dict):
        return annotation
    named = {
        key: {"id": who, "email": users[who]}
        for key in ("completed_by", "updated_by")
        if type(who := annotation.get(key)) is int and who in users
    }
    return {**annotation, **named} if named else annotation


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


# A stored annotation keeps these columns of WeighResult.columns(), as `weigh` writes them.
_KEPT = (
    "reliability",
    "probability",
    "deterministic_probability",
    "majority",
    "entity_probability",
)


def annotation_record(
    ex: Example, task: str, score: float, columns: dict, row: int
) -> dict[str, Any]:
    """One annotation as the report reads it: a weights record of ``subregweigh weigh``
    (:func:`~subregweigh.report.AnnotationTable.from_records`) with its annotator."""
    record = {**example_record(ex, task), "annotator": ex.annotator, "score": score}
    record.update((key, to_json(columns[key][row])) for key in _KEPT if key in columns)
    return record


# Columns a quick scoring (SubRegWeigh.weigh_deterministic, K=1) would give meaningless values.
_K_ONLY = ("reliability", "probability")


def stored_prediction(
    item: LabelStudioTask,
    spec: LabelingSpec,
    result,
    first: int,
    count: int,
    score_name: str = DEFAULT_SCORE,
    columns: dict | None = None,
    shown=None,
    resting: bool = False,
) -> dict:
    """What the backend stores and serves for one task, from a :class:`WeighResult`.

    Annotated: score = the lowest quality score ``score_name`` (``WeighResult.score``) among its
    annotations, result = the scout's prediction for that least reliable one with where that
    annotation differs: NER, a note on each region concerned, and a region for each annotated
    entity the scout drops (:func:`~backend.labelstudio.convert.doubt_regions`); classification, the
    scout's probability of its suggestion as the result's score and the annotated labels, the
    suggested ones and the next alternatives in its note
    (:func:`~backend.labelstudio.convert.class_note`; from ``WeighResult.class_probability``, else
    the bare choice); every annotation is kept with its own scores and annotator (``annotations``,
    for the report; ``columns`` is ``result.columns()``, computed once per call of the caller). The
    score and the prediction are read from ``shown`` when given (``(ordinary, row)``: the
    :meth:`SubRegWeigh.weigh_deterministic` holding the task's annotations from ``row`` on, the
    scout's ordinary prediction as the "deterministic" score judges it), else from ``result``
    (the K candidates' majority). ``ordinary`` may be ``result`` itself (a quick scoring): then
    the annotations carry no c/K or K-candidate probability.
    Unannotated: from ``result``, score = the share of the K predictions agreeing with the
    majority prediction (self-consistency). ``resting``: the ordinary pass is the CRF's, the
    scout having learned too little (``SubRegWeigh.rests_on_crf_``): the notes say so.
    """
    rows = range(first, first + count)
    from_ordinary = bool(item.examples) and shown is not None
    view, view_first = shown if from_ordinary else (result, first)
    if item.examples:
        quality = view.score(score_name)[view_first : view_first + count]
        worst = int(np.argmin(quality))  # the first of equals, as min() would
        row, score = view_first + worst, float(quality[worst])
    else:
        row = first
        score = float(view.majority_share[row])
    majority = view.majority[row]
    if spec.task == "ner":
        entities, notes = view.majority_entities[row], None
        if item.examples:
            per = "probability" if from_ordinary else "copies"
            entities, notes = _ner_doubts(
                item, view, row, item.examples[row - view_first], per, resting and from_ordinary
            )
        spans = [(item.words[s][1], item.words[e - 1][2], t) for t, s, e, _ in entities]
        regions = labels_result(
            item.text, spans, spec.from_name, spec.to_name, [a for *_, a in entities], notes
        )
    elif item.examples and len(view.class_probability):
        regions = _class_doubt(spec, view, row, item.examples[row - view_first])
    else:
        regions = choices_result(list(majority), spec.from_name, spec.to_name)
    quick = shown is not None and shown[0] is result
    entry = {
        "result": regions,
        "score": score,
        "fingerprint": fingerprint(item),
        "reliability": {result.ids[r]: float(result.reliability[r]) for r in rows}
        if item.examples and not quick
        else {},
        "probability": {result.ids[r]: float(result.probability[r]) for r in rows}
        if item.examples and not quick
        else {},
    }
    if item.examples:
        columns = columns if columns is not None else result.columns()
        if quick:
            columns = {k: v for k, v in columns.items() if k not in _K_ONLY}
        entry["annotations"] = [
            annotation_record(ex, spec.task, float(q), columns, r)
            for ex, q, r in zip(item.examples, quality, rows)
        ]
        if spec.task == "ner":  # what the version's scale is fitted on (backend.review.served)
            served = view.majority[view_first : view_first + count]
            for record, agrees in zip(
                entry["annotations"], ~disagreements([ex.label for ex in item.examples], served)
            ):
                record["agrees"] = bool(agrees)
    return entry


def _ner_doubts(
    item: LabelStudioTask, view, row: int, annotation: Example, per: str, resting: bool
):
    """An annotated NER task's regions and their notes
    (:func:`~backend.labelstudio.convert.doubt_regions`): the scout's entities on ``view``'s
    ``row``, and where ``annotation`` differs from them."""
    entities = view.majority_entities[row]
    suggestions = span_suggestions(
        annotation.label, view.majority[row], view.entity_probability[row], entities
    )

    def words(start: int, end: int) -> str:
        return item.text[item.words[start][1] : item.words[end - 1][2]]

    return doubt_regions(entities, suggestions, words, per, resting)


def _class_doubt(spec: LabelingSpec, view, row: int, annotation: Example) -> list[dict]:
    """An annotated classification task's result: the scout's suggestion on ``view``'s
    ``row``, its probability as the score, and in its meta the annotated labels, the
    suggested ones and the next alternatives, each with the scout's probability."""
    suggestion = class_suggestion(
        view.class_probability[row], view.labels, annotation.label, spec.multi_label
    )
    return choices_result(
        [label for label, _ in suggestion.suggested],
        spec.from_name,
        spec.to_name,
        suggestion.probability,
        class_note(suggestion),
    )


def annotated_examples(items: Sequence[LabelStudioTask]) -> list[Example]:
    """The annotations of ``items``, in order: what :meth:`SubRegWeigh.weigh_deterministic` scores
    for :func:`score_tasks`."""
    return [ex for item in items for ex in item.examples]


def score_tasks(
    srw,
    spec: LabelingSpec,
    items: Sequence[LabelStudioTask],
    score_name: str = DEFAULT_SCORE,
    *,
    quick: bool = False,
    ordinary=None,
) -> dict[str, dict]:
    """Weigh tasks read by :func:`read_tasks` with a fitted :class:`SubRegWeigh`.

    Returns task id (str) -> stored prediction (:func:`stored_prediction`), scored by
    ``score_name``. With the "deterministic" score, what Label Studio shows of an annotated task
    comes from one pass over the ordinary segmentations (:meth:`SubRegWeigh.weigh_deterministic` of
    :func:`annotated_examples`; pass it as ``ordinary`` when already computed); the K
    candidates add c/K and the K-candidate probability to its annotations (report and export)
    and score the unannotated tasks. ``quick=True`` ("deterministic" only) stops after that
    one pass: annotated tasks only, scored and shown as a full call scores and shows them, for
    about 1/K of the forward passes; a full call completes them.
    """
    if (quick or ordinary is not None) and score_name != "deterministic":
        raise ValueError(f"the ordinary pass ranks by 'deterministic', not {score_name!r}")
    if quick:
        items = [item for item in items if item.examples]
    groups = [weighed(item) for item in items]
    examples = [ex for group in groups for ex in group]
    if not examples:
        return {}
    if score_name == "deterministic" and ordinary is None:
        annotated = annotated_examples(items)  # none: unannotated tasks read no ordinary pass
        ordinary = srw.weigh_deterministic(annotated) if annotated else None
    if quick:
        result = ordinary
    elif ordinary is None:
        result = srw.weigh(examples)
    else:  # the ordinary pass is done: weigh only the candidates
        candidates_only = copy.copy(srw)
        candidates_only.deterministic = False
        result = candidates_only.weigh(examples)
        annotated = np.array([bool(item.examples) for item, g in zip(items, groups) for _ in g])
        result.deterministic_probability[annotated] = ordinary.deterministic_probability
    columns = result.columns()
    resting = srw.rests_on_crf_
    out, first, first_annotated = {}, 0, 0
    for item, group in zip(items, groups):
        shown = (ordinary, first_annotated) if ordinary is not None else None
        out[item.id] = stored_prediction(
            item, spec, result, first, len(group), score_name, columns, shown, resting
        )
        first += len(group)
        first_annotated += len(item.examples)
    return out
