"""Label Studio tasks -> examples: the one reading of the command line and of the ML backend.

A task is ``{"id", "data": {...}, "annotations": [{"id", "result": [region, ...],
"was_cancelled", "updated_at", ...}], ...}``, as Label Studio exports it (Project > Export >
JSON) and as its API returns it. What a project labels is a :class:`LabelingSpec`: the backend
reads it from the project's labeling config, :func:`~subregweigh.io.labelstudio_export.infer_spec`
from an export's own regions. :func:`parse_tasks` turns tasks into examples;
:func:`~subregweigh.io.labelstudio_export.read_label_studio` reads an export file.

A project may also hold the review control (:data:`REVIEW_CONTROL`, :func:`review_control_xml`):
a ``<Choices>`` a reviewer clicks to decide a flagged task. Its regions are decisions, read by
the backend (``backend.review.decisions``), never labels: :func:`parse_tasks` skips them, as
it skips the regions of every other control the spec does not weigh (a comment box, a quality
flag: :attr:`LabelingSpec.ignored`).

Two options, the only differences between the callers:

* ``annotations="latest"``: per task its most recently saved non-cancelled annotation, example
  id = task id (the command line's default: one example, one weight per task).
  ``"all"``: every non-cancelled annotation, example id ``"task/annotation"`` (the backend's:
  each annotator's annotation is weighed, the task scored by its least reliable one).
* ``strict=True``: a problem in what would become an example raises
  :class:`~subregweigh.example.DataError` naming the task, annotation and region (the command
  line's: bad input stops with one clear line). ``strict=False``: the task, annotation or span
  at fault is skipped with a warning (the backend's: one bad task must not stop a project).

Either way the same task gives the same examples. Words come from :func:`task_words`.
Pure: no I/O, no Label Studio packages; warnings come back as strings that name the task, and
whoever reads the tasks logs them.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, Literal
from xml.sax.saxutils import quoteattr

from subregweigh.example import DataError, Example, Task
from subregweigh.spans import spans_to_tags, utf16_to_char_offset, words_with_offsets

Annotations = Literal["latest", "all"]

# Label Studio result types -> the task they annotate.
KINDS: dict[str, Task] = {"labels": "ner", "choices": "classification"}
_KIND_NAMES = {"ner": "labels (NER)", "classification": "choices (classification)"}
_NON_SPACE = re.compile(r"\S+")  # the words of str.split(), with their offsets

# The review control's reserved name and its choices: a reviewer's decision on a task, never a
# label (parse_tasks and infer_spec skip its regions).
REVIEW_CONTROL = "srw_review"
REVIEW_CHOICES = ("correct", "wrong (fixed)", "unsure")
# The task data field where the backend writes why a task is flagged (its ``write_reason``
# setting; off by default): the review control's header shows it on the labeling view. Never a
# task's text: reading a task's only string field leaves it out.
REASON_FIELD = "srw_reason"


def review_control_xml(to_name: str) -> str:
    """The config snippet of the review control, for the ``<Text name=to_name>`` it sits by: a
    ``<Header>`` showing the task's :data:`REASON_FIELD` (empty where the backend writes none;
    it has no ``name``, so Label Studio asks no task for the field), then the ``<Choices>``."""
    choices = "".join(f'<Choice value="{value}"/>' for value in REVIEW_CHOICES)
    return (
        f'<Header value="${REASON_FIELD}" size="5"/>'
        f'<Choices name="{REVIEW_CONTROL}" toName={quoteattr(to_name)} choice="single" '
        f'showInline="true">{choices}</Choices>'
    )


@dataclass(frozen=True)
class Control:
    """One control of a labeling config, as messages, ``/status`` and the report name it.

    Attributes
    ----------
    name : str
        Its ``name`` (what its regions carry as ``from_name``).
    tag : str
        Label Studio's tag: ``"Labels"``, ``"Choices"``, ``"TextArea"``, ...
    to_name : tuple of str, default ()
        The objects it labels (its ``toName``).
    """

    name: str
    tag: str
    to_name: tuple[str, ...] = ()

    def __str__(self) -> str:  # in words, no <Tags>: Label Studio strips those from messages
        return f"{self.name!r} ({self.tag})"

    def as_dict(self) -> dict:
        """``{"name", "type", "to_name"}``, for JSON (``/status``, the report)."""
        return {"name": self.name, "type": self.tag, "to_name": list(self.to_name)}


@dataclass(frozen=True)
class LabelingSpec:
    """What a project labels, as far as reading its tasks goes.

    Attributes
    ----------
    task : {"ner", "classification"}
        ``<Labels>`` (character spans) or ``<Choices>``.
    from_name : str
        The control's name; regions of other controls are ignored.
    to_name : str, default ""
        The ``<Text>`` it labels (the backend writes predictions to it).
    data_key : str or None, default None
        The text's key in each task's ``data``; None: each task's only string field.
    labels : tuple of str or None, default None
        The labels the config allows (others skip or stop, see ``strict``); None: any.
    multi_label : bool, default True
        Whether several choices make one multi-label example; if not, such an annotation is a
        problem like an unknown label.
    review : str or None, default None
        The review control's name (:data:`REVIEW_CONTROL`) where the config has it; None
        where it has none. Its regions are never labels, whether or not it is declared.
    ignored : tuple of Control, default ()
        The config's other controls (a comment box, a quality flag, a second labeling control
        not chosen), left alone: their regions are skipped without a warning. Regions of a
        control neither weighed nor listed here are skipped too, with one warning naming
        their types (an export read without its config lists none).
    others : tuple of LabelingSpec, default ()
        Where the project weighs several labeling controls (issue 62): the other controls
        weighed, each its own spec (with this one among its ``ignored``); this spec is the
        first. ``()``: this control alone is weighed. :meth:`each` gives every control's spec.
    """

    task: Task
    from_name: str
    to_name: str = ""
    data_key: str | None = None
    labels: tuple[str, ...] | None = None
    multi_label: bool = True
    review: str | None = None
    ignored: tuple[Control, ...] = ()
    others: tuple[LabelingSpec, ...] = ()

    @property
    def control(self) -> Control:
        """The control weighed, as :class:`Control` (its tag from :attr:`task`)."""
        tag = "Labels" if self.task == "ner" else "Choices"
        return Control(self.from_name, tag, (self.to_name,) if self.to_name else ())

    def each(self) -> tuple[LabelingSpec, ...]:
        """Every control weighed, each as a spec of its own (without :attr:`others`): this
        one alone for a project weighing one control."""
        if not self.others:
            return (self,)
        return (replace(self, others=()), *self.others)

    @property
    def several(self) -> bool:
        """Whether the project weighs several labeling controls (:attr:`others`)."""
        return bool(self.others)

    def controls(self) -> dict:
        """Which controls are weighed and which are left alone, for JSON (``/status``, the
        report): ``{"weighed": [control], "ignored": [control, ...], "review": name or None,
        "summary": words}``, each control :meth:`Control.as_dict`; ``weighed`` lists every control
        :meth:`each` weighs, ``summary`` says it all in one line."""
        weighed = [spec.control for spec in self.each()]
        ignored = [c for c in self.ignored if c not in weighed]

        def on(spec: LabelingSpec) -> str:
            return f"{spec.control} on {spec.to_name!r}" if spec.to_name else str(spec.control)

        summary = f"weighed: {', '.join(on(spec) for spec in self.each())}; left alone: " + (
            ", ".join(map(str, ignored)) or "no other control"
        )
        if self.review:
            summary += f"; the review control: {self.review!r}"
        return {
            "weighed": [c.as_dict() for c in weighed],
            "ignored": [c.as_dict() for c in ignored],
            "review": self.review,
            "summary": summary,
        }


@dataclass(frozen=True)
class LabelStudioTask:
    """One task read by :func:`parse_tasks`.

    Attributes
    ----------
    id : str
        The task id.
    text : str
    words : tuple of (word, start, end)
        :func:`task_words` of the text; end-exclusive character offsets.
    examples : tuple of Example
        One per usable annotation (see ``annotations``), with its :func:`annotator`; empty if
        it has none.
    """

    id: str
    text: str
    words: tuple[tuple[str, int, int], ...]
    examples: tuple[Example, ...]


@dataclass
class ParsedTasks:
    """What :func:`parse_tasks` read.

    Attributes
    ----------
    tasks : list of LabelStudioTask or None, one per input task
        None for a task skipped with a warning (``strict=False``, or a task without annotations
        whose text is unusable).
    warnings : list of str
        Every problem skipped or repaired, each naming its task (and annotation, region).
    unannotated : int
        Tasks without a non-cancelled annotation.
    """

    tasks: list[LabelStudioTask | None]
    warnings: list[str] = field(default_factory=list)
    unannotated: int = 0


def task_words(text: str, task: Task) -> list[tuple[str, int, int]]:
    """``(word, start, end)`` of every word of a task's text: the one word splitter.

    NER: :func:`~subregweigh.spans.words_with_offsets` (punctuation split off), so that
    character spans fall on word boundaries. Classification: the whitespace-separated words of
    ``text.split()``, as :func:`~subregweigh.io.readers.read_tsv` and ``read_jsonl`` make them,
    so a data set gives the same examples whether it comes as TSV, JSONL or a Label Studio
    project, and the scout sees the text as written (no space inserted before punctuation).
    """
    if task == "ner":
        return words_with_offsets(text)
    return [(m.group(), m.start(), m.end()) for m in _NON_SPACE.finditer(text)]


# ----------------------------------------------------------------------------- one task


def _where(source: str, task_id: str) -> str:
    return f"{source}:task {task_id}" if source else f"task {task_id}"


def _identify(item: Any, index: int, source: str, seen: set[str]) -> tuple[str, str]:
    """``(task id, where)`` of the ``index``-th item; DataError if it is no task or a repeat."""
    prefix = f"{source}: " if source else ""
    if not isinstance(item, dict):
        raise DataError(
            f"{prefix}item {index} of the array is {type(item).__name__}, not a task object"
        )
    raw_id = item.get("id")
    if isinstance(raw_id, bool) or not isinstance(raw_id, (int, str)) or raw_id == "":
        hint = ""
        if "data" not in item and ({"words", "text"} & set(item)):
            hint = (
                "; this looks like an array of examples, not a Label Studio export: "
                "write one JSON object per line (.jsonl)"
            )
        raise DataError(
            f"{prefix}item {index} of the array has no valid task 'id' (got {raw_id!r}){hint}"
        )
    task_id = str(raw_id)
    where = _where(source, task_id)
    if task_id in seen:
        raise DataError(f"{where}: duplicate task id")
    seen.add(task_id)
    return task_id, where


def _saved_at(annotation: dict) -> float:
    """When an annotation was last saved (``updated_at``, else ``created_at``); -inf if unknown."""
    for key in ("updated_at", "created_at"):
        value = annotation.get(key)
        if isinstance(value, str):
            try:  # Python 3.10's fromisoformat does not read a trailing "Z"
                stamp = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
            except ValueError:
                continue
            if stamp.tzinfo is None:
                stamp = stamp.replace(tzinfo=timezone.utc)
            return stamp.timestamp()
    return -math.inf


def _used(
    item: dict, where: str, annotations: Annotations, strict: bool, warnings: list[str]
) -> list[dict]:
    """The annotations of a task that become examples: its latest non-cancelled one (ties:
    higher id, then later in the list), or all non-cancelled ones."""
    raw = item.get("annotations") or []
    if not isinstance(raw, list):
        problem = f"{where}: 'annotations' must be a list of objects"
        if strict:
            raise DataError(problem)
        warnings.append(f"{problem}; annotations skipped")
        return []
    live = []
    for annotation in raw:
        if not isinstance(annotation, dict):
            problem = f"{where}: 'annotations' must be a list of objects"
            if strict:
                raise DataError(problem)
            warnings.append(f"{where}: an annotation is not an object; skipped")
        elif not annotation.get("was_cancelled"):
            live.append(annotation)
    if annotations == "all" or not live:
        return live

    def recency(pos: int) -> tuple:
        ann_id = live[pos].get("id")
        return (_saved_at(live[pos]), ann_id if type(ann_id) is int else -1, pos)

    return [live[max(range(len(live)), key=recency)]]


def annotator(annotation: dict) -> str:
    """Who made ``annotation``, from its ``completed_by``: the user's email where the task
    carries it (an object ``{"id", "email", ...}``, as older exports and the backend have it),
    else ``"user <id>"`` (an export of Label Studio 1.23 holds the id alone); ``""`` if unknown."""
    who = annotation.get("completed_by")
    if isinstance(who, dict):
        email = who.get("email")
        if isinstance(email, str) and email.strip():
            return email.strip()
        who = who.get("id")
    if isinstance(who, bool) or not isinstance(who, (int, str)) or who == "":
        return ""
    return f"user {who}"


def _text(item: dict, data_key: str | None, where: str) -> str:
    """The task's text: ``data[data_key]``, or its only string field."""
    data = item.get("data")
    if not isinstance(data, dict):
        raise DataError(f"{where}: 'data' must be an object holding the task's text")
    if data_key is not None:
        if data_key not in data:
            raise DataError(
                f"{where}: no {data_key!r} in data (fields: {', '.join(map(repr, data)) or 'none'})"
            )
        text = data[data_key]
        if not isinstance(text, str):
            raise DataError(f"{where}: data[{data_key!r}] is {type(text).__name__}, not text")
    else:
        fields = [
            key for key, value in data.items() if isinstance(value, str) and key != REASON_FIELD
        ]
        if len(fields) > 1:
            raise DataError(
                f"{where}: data has several text fields ({', '.join(map(repr, fields))}); pass "
                f"--text-field"
            )
        if not fields:
            raise DataError(
                f"{where}: data has no text field (fields: {', '.join(map(repr, data)) or 'none'})"
            )
        text = data[fields[0]]
    try:  # JSON may carry lone surrogates ("\ud800"), which no tokenizer can encode
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise DataError(f"{where}: the text is not valid Unicode (a lone surrogate)") from None
    return text


def _offset(value: dict, key: str, where: str) -> int:
    raw = value.get(key)
    if isinstance(raw, float) and raw.is_integer():
        raw = int(raw)
    if type(raw) is not int:
        raise DataError(f"{where}: '{key}' must be an integer character offset, got {raw!r}")
    return raw


@functools.lru_cache(maxsize=4)
def _word_edges(text: str) -> tuple[frozenset[int], frozenset[int]]:
    """The character offsets where ``text``'s words start, and where they end: found once per
    text, however many of its regions ask (a task's regions are read one after another)."""
    words = words_with_offsets(text)
    return frozenset(ws for _, ws, _ in words), frozenset(we for _, _, we in words)


def _span(text: str, value: dict, where: str, strict: bool, warnings: list[str]) -> tuple[int, int]:
    """Character ``(start, end)`` of a ``labels`` region, repaired if Label Studio counted in
    UTF-16. Outside the text: DataError if ``strict``, else :func:`spans_to_tags` drops it."""
    start, end = _offset(value, "start", where), _offset(value, "end", where)
    quoted = value.get("text")  # the span's own text, as Label Studio saw it ("": not given)
    if isinstance(quoted, str) and quoted and start >= 0 and end >= 0 and text[start:end] != quoted:
        # Older Label Studio versions counted UTF-16 code units (an emoji counts twice).
        s16, e16 = utf16_to_char_offset(text, start), utf16_to_char_offset(text, end)
        if s16 is not None and e16 is not None and text[s16:e16] == quoted:
            start, end = s16, e16
        elif 0 <= start < end <= len(text):
            warnings.append(
                f"{where}: the region's text {quoted!r} differs from "
                f"{text[start:end]!r} at {start}-{end} in the task; offsets used"
            )
    elif not quoted and 0 <= start < end and any(ord(ch) > 0xFFFF for ch in text):
        # No text to check against: UTF-16 offsets where they, and not the characters', fall
        # on word edges (past an emoji, characters' offsets cut words or overrun the text).
        s16, e16 = utf16_to_char_offset(text, start), utf16_to_char_offset(text, end)
        if s16 is not None and e16 is not None and (s16, e16) != (start, end):
            starts, ends = _word_edges(text)
            if (start not in starts or end not in ends) and s16 in starts and e16 in ends:
                start, end = s16, e16
    if strict and not 0 <= start < end <= len(text):
        raise DataError(
            f"{where}: span {start}-{end} lies outside the text of {len(text)} characters"
        )
    return start, end


def _strings(value: dict, key: str, where: str, spec: LabelingSpec) -> list[str]:
    items = value.get(key)
    if not isinstance(items, list) or not items or not all(isinstance(v, str) and v for v in items):
        raise DataError(
            f"{where}: '{key}' must be a non-empty list of non-empty strings, got {items!r}"
        )
    if spec.labels is not None:
        unknown = [v for v in items if v not in spec.labels]
        if unknown:
            kind = "label" if key == "labels" else "choice"
            raise DataError(f"{where}: {kind} {unknown[0]!r} is not in the labeling config")
    return items


def _label(
    annotation: dict,
    spec: LabelingSpec,
    text: str,
    where: str,
    strict: bool,
    warnings: list[str],
    ignored: set[str],
) -> tuple[str, ...] | None:
    """The example label of one annotation; None (with a warning) if it chose nothing.

    Raises DataError for a malformed annotation (the caller skips it unless ``strict``).
    """
    regions = annotation.get("result") or []
    if not isinstance(regions, list):
        raise DataError(f"{where}: 'result' must be a list of regions")
    spans: list[tuple[int, int, str]] = []
    choices: list[str] = []
    # a decision, or a control the config declares and the spec leaves alone, is expected; any
    # other control's regions are worth one warning
    left_alone = {REVIEW_CONTROL, *(c.name for c in spec.ignored)}
    for region in regions:
        if not isinstance(region, dict):
            raise DataError(f"{where}: a region is {type(region).__name__}, not an object")
        if region.get("from_name") != spec.from_name:
            name = region.get("from_name")  # anything JSON holds: a list is no set member
            if not isinstance(name, str) or name not in left_alone:
                ignored.add(str(region.get("type")))
            continue
        region_where = f"{where}: region {region.get('id')}"
        value = region.get("value")
        if not isinstance(value, dict):
            raise DataError(f"{region_where}: 'value' must be an object")
        if spec.task == "ner":
            labels = _strings(value, "labels", region_where, spec)
            start, end = _span(text, value, region_where, strict, warnings)
            spans.extend((start, end, label) for label in labels)
        else:
            choices.extend(_strings(value, "choices", region_where, spec))
    if spec.task == "ner":  # an annotation without regions says: no entity here
        _, tags, span_warnings = spans_to_tags(text, spans, where)
        warnings.extend(span_warnings)
        return tuple(tags)
    label = tuple(sorted(set(choices)))
    if not label:  # not malformed: the annotator chose nothing (or skipped the question)
        warnings.append(f"{where}: no choice made; annotation skipped")
        return None
    if len(label) > 1 and not spec.multi_label:
        raise DataError(f"{where}: {len(label)} choices for a single-choice config")
    return label


# ----------------------------------------------------------------------------- tasks


def _check_annotations(annotations: str) -> None:
    if annotations not in ("latest", "all"):
        raise ValueError(f"annotations must be 'latest' or 'all', got {annotations!r}")


def _within(
    text: str, used: Sequence[dict], where: str, max_chars: int | None, max_regions: int | None
) -> None:
    """DataError when the task is longer than ``max_chars`` characters, or its annotations
    ``used`` hold more than ``max_regions`` result regions in all."""
    if max_chars is not None and len(text) > max_chars:
        raise DataError(
            f"{where}: its text is {len(text):,} characters, more than the {max_chars:,} "
            "weighed per task (split it into shorter tasks)"
        )
    if max_regions is not None:
        regions = sum(len(a.get("result") or ()) for a in used if isinstance(a, dict))
        if regions > max_regions:
            raise DataError(
                f"{where}: its annotations hold {regions:,} regions, more than the "
                f"{max_regions:,} weighed per task"
            )


def parse_tasks(
    tasks: Sequence[Any],
    spec: LabelingSpec,
    *,
    annotations: Annotations = "latest",
    strict: bool = True,
    source: str = "",
    max_chars: int | None = None,
    max_regions: int | None = None,
) -> ParsedTasks:
    """Read Label Studio tasks into examples.

    Parameters
    ----------
    tasks : sequence of task dicts
        Anything JSON may hold; what is not a task is a problem like any other.
    spec : LabelingSpec
    annotations : {"latest", "all"}, default "latest"
        See the module docstring; example ids are the task id, or ``"task/annotation"``.
    strict : bool, default True
        Raise on the first problem in what would become an example, else skip the task,
        annotation or span at fault with a warning. Either way a span that cuts a word is
        widened to it, an overlapping span dropped, and an annotation with no choice skipped,
        with a warning; a task without annotations is never an error (its text problems, if
        any, are warnings).
    source : str, default ""
        Names the file in messages: ``"{source}:task {id}: ..."`` (else ``"task {id}: ..."``).
    max_chars, max_regions : int, optional
        A task whose text is longer, or whose annotations hold more result regions in all, is
        skipped with a warning that says so (an error if ``strict``), before its words are
        found: what one task may cost to read (None: no bound).

    Returns
    -------
    ParsedTasks

    Raises
    ------
    DataError
        ``strict`` only: ``"[{source}:]task {id}: [annotation {id}: [region {id}: ]]..."``.
    """
    _check_annotations(annotations)
    out: list[LabelStudioTask | None] = []
    warnings: list[str] = []
    seen: set[str] = set()
    ignored: set[str] = set()
    unannotated = 0
    for index, item in enumerate(tasks):
        try:
            task_id, where = _identify(item, index, source, seen)
        except DataError as problem:
            if strict:
                raise
            warnings.append(f"{problem}; task skipped")
            out.append(None)
            continue
        used = _used(item, where, annotations, strict, warnings)
        unannotated += not used
        try:
            text = _text(item, spec.data_key, where)
            _within(text, used, where, max_chars, max_regions)
            words = task_words(text, spec.task)
            if not words:
                raise DataError(f"{where}: empty text")
        except DataError as problem:
            if strict and used:
                raise
            warnings.append(f"{problem}; task skipped")
            out.append(None)
            continue
        word_strings = tuple(word for word, _, _ in words)
        examples = []
        for annotation in used:
            ann_where = f"{where}: annotation {annotation.get('id')}"
            try:
                label = _label(annotation, spec, text, ann_where, strict, warnings, ignored)
            except DataError as problem:
                if strict:
                    raise
                warnings.append(f"{problem}; annotation skipped")
                continue
            if label is not None:
                ex_id = task_id if annotations == "latest" else f"{task_id}/{annotation.get('id')}"
                examples.append(
                    Example(ex_id, word_strings, label, where, annotator=annotator(annotation))
                )
        out.append(LabelStudioTask(task_id, text, tuple(words), tuple(examples)))
    if ignored:
        prefix = f"{source}: " if source else ""
        warnings.append(
            f"{prefix}ignored result regions of other controls than {spec.from_name!r} "
            f"(type {', '.join(sorted(ignored))})"
        )
    return ParsedTasks(out, warnings, unannotated)
