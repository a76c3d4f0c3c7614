"""Reviewers' decisions through a real Label Studio 1.23 (backend.review.reviews).

A reviewer confirms an annotation by saving it with its labels unchanged and fixes it by saving
other labels; Label Studio sends ANNOTATION_UPDATED either way. Through the API: flag, confirm
one task and fix another, retrain: the confirmed task serves score 1 and is no longer among the
most doubtful, across the retrain, until its annotation changes; the fixed one is rescored; the
report counts both. Through the UI, in headless Chromium: Update is disabled until something
changes, and a note on a region (its meta) then Update confirms.
"""

from __future__ import annotations

import json
import time
from urllib.parse import quote

import pytest

from backend.review import copies
from backend.review.served import slips as fixed_slips
from subregweigh.review import convention_pairs
from testbed.browser import Page, require_chromium
from testbed.projects import (
    retyped,
    serving_prediction,
    serving_score,
    trained_ner_module,
    wait_trained,
)
from testbed.servers import LS_PASSWORD, LS_USERNAME

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A real Label Studio with a 30-task NER project (3 wrong), our backend connected and
    trained once."""
    yield from trained_ner_module(tmp_path_factory, "review decisions", seed=29, n_wrong=3)


def queue(ctx) -> list[int]:
    """The project's tasks, most doubtful first, as Label Studio orders them by score."""
    query = quote(json.dumps({"ordering": ["tasks:predictions_score"]}))
    page = ctx.label_studio.api(
        "GET", f"/api/tasks?project={ctx.project}&fields=all&page_size=100&query={query}"
    )
    return [t["id"] for t in page["tasks"]]


def served(ctx, task_id: int) -> float:
    """The score of the task's prediction of the serving version."""
    return serving_prediction(ctx.backend, ctx.label_studio, ctx.project, task_id)["score"]


def stored(ctx, task_id: int) -> float:
    """The scout's own score of the task, as the serving version stores it."""
    return serving_score(ctx.backend, ctx.root, ctx.project, task_id)


def annotation(ctx, task_id: int) -> dict:
    (only,) = ctx.label_studio.api("GET", f"/api/tasks/{task_id}")["annotations"]
    return only


def update(ctx, task_id: int, result: list) -> None:
    """What Update sends."""
    path = f"/api/annotations/{annotation(ctx, task_id)['id']}"
    ctx.label_studio.api("PATCH", path, {"result": result})


def decisions(ctx) -> set[tuple[str, str]]:
    path = ctx.root / "reviews.json"
    kept = json.loads(path.read_text())["decisions"].values() if path.exists() else ()
    return {(d["task"], d["decision"]) for d in kept}


def wait(ctx, condition, what: str, timeout: float = 120):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what}\n{ctx.backend.log(80)}"
        time.sleep(0.5)


def slip_repeats(ctx, fixed: int, skip: set[int]) -> dict[int, int]:
    """Task -> how often its stored annotation repeats the slips of the fix of ``fixed``, each
    as often as its weight (the fixes less the decisions that held it unchanged)."""
    kept = json.loads((ctx.root / "reviews.json").read_text())
    (fix,) = [
        d
        for d in kept["decisions"].values()
        if d["task"] == str(fixed) and d["decision"] == "fixed"
    ]
    weights = fixed_slips(kept).counts
    slips = {tuple(s) for s in fix["slips"]} & set(weights)
    version = ctx.backend.get(f"/status?project={ctx.project}")[1]["current_version"]
    scores = json.loads((ctx.root / "versions" / version / "scores.json").read_text())
    out = {}
    for task, entry in scores.items():
        (record,) = entry["annotations"]
        pairs = convention_pairs(record["words"], record["tags"])
        if int(task) not in skip and pairs & slips:
            out[int(task)] = sum(weights[pair] for pair in pairs & slips)
    return out


def contradicted(ctx, task_id: int) -> int:
    """How many decided copies label the task otherwise (the same text, or an entity string:
    backend.review.copies), each of which halves its served score too."""
    kept = json.loads((ctx.root / "reviews.json").read_text())
    version = ctx.backend.get(f"/status?project={ctx.project}")[1]["current_version"]
    scores = json.loads((ctx.root / "versions" / version / "scores.json").read_text())
    state = copies.state(copies.index(scores), scores, kept)
    return state.contradicted.get(str(task_id), 0)


def first_entity_recurs(ctx, task_id: int, confirmed: int) -> bool:
    """Whether the task's first entity, its words as its type, is in another task's annotation
    but not in the ``confirmed`` one's (which would weigh against the fix's slip)."""
    first = annotation(ctx, task_id)["result"][0]["value"]
    text = ctx.label_studio.api("GET", f"/api/tasks/{task_id}")["data"]["text"]
    pairs = {(" ".join(text[first["start"] : first["end"]].split()), first["labels"][0])}
    version = ctx.backend.get(f"/status?project={ctx.project}")[1]["current_version"]
    scores = json.loads((ctx.root / "versions" / version / "scores.json").read_text())
    held = {
        task: set().union(*(convention_pairs(r["words"], r["tags"]) for r in entry["annotations"]))
        for task, entry in scores.items()
    }
    return not pairs & held[str(confirmed)] and any(
        pairs & held[task] for task in held if int(task) not in {task_id, confirmed}
    )


def doubtful_undecided(ctx, n: int) -> list[int]:
    decided = {int(task) for task, _ in decisions(ctx)}
    return [t for t in queue(ctx) if t not in decided and annotation(ctx, t)["result"]][:n]


def test_confirm_and_fix_through_the_api_stick_across_a_retrain(trained):
    ctx = trained
    confirmed, *others = doubtful_undecided(ctx, 30)
    # fixed: a doubtful task whose first entity recurs elsewhere with its type, so that the fix's
    # slip has repeats to move up
    fixed = next(t for t in others if first_entity_recurs(ctx, t, confirmed))
    raw = {task: served(ctx, task) for task in (confirmed, fixed)}
    assert raw[confirmed] < 1.0

    update(ctx, confirmed, annotation(ctx, confirmed)["result"])  # as it is
    update(ctx, fixed, retyped(annotation(ctx, fixed)["result"]))  # an entity retyped
    wait(ctx, lambda: served(ctx, confirmed) == pytest.approx(1.0), "confirmed not served 1")
    # Each decision is read from Label Studio by the rescore its event queued.
    want = {(str(confirmed), "confirmed"), (str(fixed), "fixed")}
    wait(ctx, lambda: decisions(ctx) == want, "the two decisions were not kept")
    wait(
        ctx,
        lambda: (
            served(ctx, fixed) == pytest.approx(stored(ctx, fixed))
            and served(ctx, fixed) != pytest.approx(raw[fixed])
        ),
        "the fixed task was not rescored",
    )
    assert confirmed not in queue(ctx)[:5]
    # The fix's slip moves up where it recurs: each repeat's prediction in Label Studio is its
    # stored score halved once per repeated convention (an entity's words and type).
    repeats = slip_repeats(ctx, fixed, skip={confirmed, fixed})
    assert repeats, "the retyped entity recurs nowhere: the project cannot show the move-up"
    for task, n in repeats.items():  # stored: as the refresh after the fixes left it
        wait(  # and halved again per decided copy that labels it otherwise
            ctx,
            lambda: (
                served(ctx, task)
                == pytest.approx(stored(ctx, task) * 0.5 ** (n + contradicted(ctx, task)))
            ),
            f"task {task} not moved up",
        )

    # A retrain: the confirmation holds (the annotation did not change).
    before = ctx.backend.get(f"/status?project={ctx.project}")[1]["current_version"]
    ctx.ls.ml.train(id=ctx.ml.id)
    wait_trained(ctx.backend, ctx.project, previous=before)
    # Eventually: the new version's predictions are written to Label Studio task by task.
    wait(
        ctx,
        lambda: served(ctx, fixed) == pytest.approx(stored(ctx, fixed)),
        "the fixed task not served its new score",
    )
    assert served(ctx, confirmed) == pytest.approx(1.0)
    assert stored(ctx, confirmed) < 1.0  # the scout's own score stays stored
    assert confirmed not in queue(ctx)[:5]

    code, report = ctx.backend.get(f"/report.json?project={ctx.project}&threshold=1.0")
    assert code == 200, report
    reviews = report["reviews"]
    assert (reviews["reviewed"], reviews["confirmed"], reviews["fixed"]) == (2, 1, 1)
    assert reviews["precision"] == pytest.approx(0.5)
    assert confirmed not in [int(d["task"]) for d in report["doubtful"][:5]]
    code, page = ctx.backend.get(f"/report?project={ctx.project}")
    assert code == 200 and 'id="flag-precision"' in page

    # An edit undoes the confirmation: the task is served the scout's score again.
    update(ctx, confirmed, retyped(annotation(ctx, confirmed)["result"]))
    wait(ctx, lambda: served(ctx, confirmed) < 1.0, "the edit did not undo the confirmation")
    assert served(ctx, confirmed) == pytest.approx(stored(ctx, confirmed))


def _click(page: Page, element: str) -> None:
    """A real mouse click (Label Studio's controls ignore element.click()) on a JS element,
    once it is there: the editor re-renders its text while a task loads, so an element found a
    moment ago may be replaced (seen once in CI: found, then gone before its box was read)."""
    where = (
        f"(() => {{ const e = ({element}); if (!e) return null; "
        "const r = e.getBoundingClientRect(); "
        "return r.width ? [r.x + r.width / 2, r.y + r.height / 2] : null; })()"
    )
    deadline = time.monotonic() + 20
    while (box := page.evaluate(where)) is None:
        assert time.monotonic() < deadline, f"no element to click: {element}"
        time.sleep(0.25)
    x, y = box
    for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
        page.cdp.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)


UPDATE = "document.querySelector('[data-testid=bottombar-update-button]')"


def test_a_note_on_a_region_then_update_confirms_in_the_ui(trained):
    """The documented UI steps, in headless Chromium: open the most doubtful task, select a
    region, add a note to its meta, Update."""
    require_chromium()
    ctx = trained
    (task,) = doubtful_undecided(ctx, 1)
    before = annotation(ctx, task)
    url = ctx.label_studio.url
    with Page(1400, 900) as page:
        page.goto(f"{url}/user/login")
        page.wait_for("!!document.querySelector('#login-form')")
        page.evaluate(
            f"document.querySelector('#email').value = {json.dumps(LS_USERNAME)};"
            f"document.querySelector('#password').value = {json.dumps(LS_PASSWORD)};"
            "document.getElementById('login-form').submit()"
        )
        page.wait_for("!location.pathname.startsWith('/user/login')")
        page.cdp.call("Page.navigate", url=f"{url}/projects/{ctx.project}/data?task={task}")
        page.wait_for(f"!!{UPDATE}", 90)
        # Update needs a change in 1.23 (waited for: the button re-renders while the task loads)
        page.wait_for(f"{UPDATE} && {UPDATE}.disabled === true", 30)
        first = before["result"][0]["value"]
        words = ctx.label_studio.api("GET", f"/api/tasks/{task}")["data"]["text"]
        region = (  # the first region's words, where the text shows them
            "[...document.querySelectorAll('body *')].filter(e => e.children.length === 0 && "
            f"e.textContent.trim() === {json.dumps(words[first['start'] : first['end']])}).pop()"
        )
        page.wait_for(f"!!{region}", 20)
        _click(page, region)  # select the region
        meta = "document.querySelector('button[aria-label=\"Edit region\\'s meta\"]')"
        page.wait_for(f"!!{meta}", 20)
        _click(page, meta)
        page.wait_for("document.activeElement.tagName === 'TEXTAREA'", 20)
        page.cdp.call("Input.insertText", text="checked: correct")
        for kind in ("keyDown", "keyUp"):
            page.cdp.call(
                "Input.dispatchKeyEvent",
                type=kind,
                key="Enter",
                code="Enter",
                windowsVirtualKeyCode=13,
            )
        page.wait_for(f"!{UPDATE}.disabled", 20)
        _click(page, UPDATE)
        wait(ctx, lambda: (str(task), "confirmed") in decisions(ctx), "the UI did not confirm")
    after = annotation(ctx, task)
    assert any(r.get("meta") for r in after["result"])  # the note was saved with it
    labels = [r["value"]["labels"] for r in before["result"]]
    assert [r["value"]["labels"] for r in after["result"]] == labels
    wait(ctx, lambda: served(ctx, task) == pytest.approx(1.0), "confirmed not served 1")
