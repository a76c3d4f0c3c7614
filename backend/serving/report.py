"""A project's report, from what its current version stored: the engine's report over the
backend's files.

The training stores every annotation's scores with its annotator (``scores.json``, see
:func:`backend.labelstudio.tasks.stored_prediction`) and what it trained on (``meta.json``); a
self-test leaves its outcome in the project's status, reviewers' decisions are kept in
``reviews.json`` (:mod:`backend.review.reviews`), and the project's settings now (what its next
training uses,
:func:`backend.config.project_settings.shown`) sit beside the version's. :func:`project_report`
reads them into the engine's :func:`subregweigh.report.build_report`, with links to the tasks in
Label Studio (an annotation a reviewer confirmed scores 1 there, as in Label Studio);
:func:`render` makes the page (:mod:`subregweigh.report_html`).
"""

from __future__ import annotations

from backend.config import project_settings
from backend.config.settings import Settings
from backend.review import reviews, served
from backend.store.store import ProjectStore
from subregweigh.learned import learned_in
from subregweigh.report import AnnotationTable, build_report


class ReportUnavailable(LookupError):
    """No report yet (no trained version, or one stored before reports); says why."""


def annotation_records(
    scores: dict,
    confirmed: set[str] = frozenset(),
    scales: served.Scales = served.NO_SCALES,
    slips: served.Slips | None = None,
) -> list[dict]:
    """Every stored annotation as a weights record, with its task (from ``scores.json``) and
    its score as the review queue serves it (:func:`backend.review.served.served_score`): 1 once a
    reviewer confirmed its content (``confirmed``, :func:`backend.review.reviews.confirmed_keys`),
    else on its version's scale (``scales``, :func:`backend.review.reviews.version_scales`),
    lowered where it repeats a fixed slip (``slips``,
    :func:`backend.review.reviews.fixed_slips`)."""
    return [
        {
            **record,
            "task": task,
            "score": served.served_score(
                task, record, confirmed, scales, slips, first=served.first_control(entry)
            ),
        }
        for task, entry in scores.items()
        for record in entry.get("annotations") or ()
    ]


def project_report(
    settings: Settings,
    project: str,
    *,
    threshold: float = 0.5,
    top: int = 20,
    expected_error_rate: float | None = None,
) -> dict:
    """The report of ``project``'s current version (:func:`subregweigh.report.build_report`).

    Raises
    ------
    ReportUnavailable
        Before the first training, or for a version trained before reports existed.
    """
    store = ProjectStore(settings.model_dir, project)
    version = store.current_version()
    if version is None:
        raise ReportUnavailable(
            f"project {project} has no trained version yet: start a training first"
        )
    records = annotation_records(store.scores(version), *reviews.serving_state(store, version))
    if not records:
        raise ReportUnavailable(
            f"version {version} of project {project} stored no per-annotation scores (it "
            "predates reports, or has no annotations): train again"
        )
    selftest = store.status().get("selftest") or {}
    base = settings.task_link_base

    def task_url(task: str) -> str:
        return f"{base}/projects/{project}/data?task={task}"

    def table(rows: list[dict]) -> AnnotationTable:
        return AnnotationTable.from_records(rows, [f"task {r['task']}" for r in rows])

    shared = {
        "threshold": threshold,
        "top": top,
        "expected_error_rate": expected_error_rate,
        "task_url": task_url if base else None,
    }
    extras = {
        "meta": {
            "project": project,
            **store.meta(version),
            "version": version,
            "project_settings": project_settings.shown(settings, store),
        },
        "selftest": selftest if selftest.get("results") else None,
        "learned": learned_in(store.versions / version),
    }
    by_control = _by_control(records)
    if not by_control:
        return build_report(
            table(records), **shared, **extras, reviews=reviews.review_inputs(store)
        )
    # several labeling controls: the page is the first control's, its decisions with it, and
    # per_control holds each control's report, per label, per annotator and per reviewer
    weighed = [p["control"] for p in extras["meta"].get("weighers") or ()]
    first = next((name for name in weighed if name in by_control), next(iter(by_control)))
    decided = {name: reviews.review_inputs(store, name, first) for name in by_control}
    report = build_report(table(by_control[first]), **shared, **extras, reviews=decided[first])
    types = {p["control"]: p.get("type") for p in extras["meta"].get("weighers") or ()}
    tested = {t["control"]: t for t in (extras["selftest"] or {}).get("per_control") or ()}
    report["per_control"] = [
        {
            "control": name,
            "type": types.get(name),
            "report": build_report(
                table(rows), **shared, reviews=decided[name], selftest=tested.get(name)
            ),
        }
        for name, rows in by_control.items()
    ]
    return report


def _by_control(records: list[dict]) -> dict[str, list[dict]]:
    """A project of several labeling controls' records, by control, in the order stored
    (``{}`` for a project of one control: its records name none)."""
    out: dict[str, list[dict]] = {}
    for record in records:
        if "control" in record:
            out.setdefault(record["control"], []).append(record)
    return out


def render(report: dict, project: str) -> str:
    """The report's page."""
    from subregweigh.report_html import render_html

    return render_html(report, title=f"Project {project}: annotation report")
