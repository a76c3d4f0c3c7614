"""Screenshot of the one-click review control in Label Studio's labeling view
(docs/img/review-control.png).

Starts a real Label Studio 1.23.2 and our backend on 127.0.0.1 in a temp dir, creates the NER
test project of testbed/projects.py (50 CoNLL sentences, 5 deliberately wrong annotations),
connects it with ``write_reason`` on (why each task is flagged, in its data) and trains the
backend through Label Studio, adds the review control to the project's config as a
lead does (``python -m backend.labelstudio.review_control PROJECT --apply``), sorts the Data Manager
by prediction score, and in headless Chromium opens the first task of the queue whose annotation is
right (the scouts doubt it all the same) and clicks *correct*: the photograph is of that moment,
before *Update* (so nothing is decided). The control's header shows the task's reason.

Run from the repository root (1 to 2 minutes on 2 CPU cores)::

    python -m scripts.screenshot_review_control [--out docs/img/review-control.png] [--keep]

Prerequisites: the test servers and Chromium (``bash scripts/install-test-servers.sh``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from unittest import mock

import numpy as np

from backend.labelstudio import review_control
from scripts.screenshot_data_manager import configure_view
from subregweigh.io.labelstudio import REASON_FIELD
from testbed.browser import (
    CHROMIUM,
    Page,
    chromium_available,
    screenshot_file,
    screenshot_servers,
)
from testbed.projects import (
    ENGINE_ENV,
    NER_CONFIG,
    connect_and_train,
    import_tasks,
    ner_tasks,
    wait_trained,
)
from testbed.servers import INSTALL_HINT, LS_PASSWORD, LS_USERNAME, ls_available

REPO = Path(__file__).resolve().parents[1]
VIEWPORT = (1400, 620)
ROW = ".lsf-table__row-wrapper"  # a task row of the Data Manager
UPDATE = "document.querySelector('[data-testid=bottombar-update-button]')"
CORRECT = "document.querySelector('input[name=\"correct\"]')"


def add_control(ls_server, project: int) -> None:
    """``python -m backend.labelstudio.review_control PROJECT --apply``, with this Label Studio."""
    with mock.patch.dict(os.environ, ls_server.backend_env):
        status = review_control.main([str(project), "--apply"])
    if status != 0:
        sys.exit(f"screenshot_review_control: the review control was not added ({status})")


def shoot(base_url: str, project: int, task: int, out: Path) -> None:
    """Open ``task`` from the sorted Data Manager, click *correct*, photograph."""
    with Page(*VIEWPORT) as page:
        page.log_in_to_label_studio(base_url, LS_USERNAME, LS_PASSWORD)
        page.goto(f"{base_url}/projects/{project}/data")
        page.wait_for(f"!!document.querySelector('{ROW}')", 60)
        time.sleep(1)  # the rows settle
        row = (
            f"[...document.querySelectorAll('{ROW}')].find(r => r.querySelector("
            f"'input[aria-label=\"Select Task {task}\"]'))"
        )
        page.click(f"{row}.querySelector('.lsf-table__cell:nth-child(2)')")
        page.wait_for(f"new URLSearchParams(location.search).get('task') === '{task}'", 30)
        page.wait_for(f"!!{CORRECT} && !!{UPDATE} && {UPDATE}.disabled === true", 90)
        page.click(CORRECT)
        page.wait_for(f"{CORRECT}.checked && !{UPDATE}.disabled", 10)
        page.evaluate("document.activeElement && document.activeElement.blur()")
        page.cdp.call("Input.dispatchMouseEvent", type="mouseMoved", x=1, y=1)  # no hover
        time.sleep(1)
        page.screenshot(out, full_page=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "img" / "review-control.png")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir with server logs")
    args = parser.parse_args()
    if not chromium_available():
        sys.exit(f"screenshot_review_control: {CHROMIUM} not found; {INSTALL_HINT}")
    if not ls_available():
        sys.exit(f"screenshot_review_control: Label Studio is not installed; {INSTALL_HINT}")

    started = time.monotonic()
    env = {**ENGINE_ENV, "SRW_EPOCHS": "15"}
    with screenshot_servers("srw-review-control-", env, args.keep) as (ls_server, backend):
        ls = ls_server.sdk()
        tasks, wrong = ner_tasks(np.random.default_rng(7))
        project = ls.projects.create(title="CoNLL-2003 NER: review", label_config=NER_CONFIG)
        task_ids = import_tasks(ls, project.id, tasks)
        connect_and_train(ls, project.id, backend.url, extra_params={"write_reason": True})
        status = wait_trained(backend, project.id)
        print(f"project {project.id}: model version {status['current_version']}")
        add_control(ls_server, project.id)
        view = configure_view(ls_server, project.id)  # sorted by score, lowest first
        queue = [t["id"] for t in ls_server.api("GET", f"/api/tasks?view={view}")["tasks"]]
        wrong_ids = {task_ids[i] for i in wrong}
        task = next(t for t in queue if t not in wrong_ids)
        print(f"task {task}, right as annotated, is number {queue.index(task) + 1} of the queue")
        deadline = time.monotonic() + 120
        while REASON_FIELD not in (data := ls_server.api("GET", f"/api/tasks/{task}")["data"]):
            if time.monotonic() > deadline:
                sys.exit(f"screenshot_review_control: task {task} has no {REASON_FIELD} in data")
            time.sleep(1)
        print(f"its reason: {data[REASON_FIELD]}")

        with screenshot_file(args.out) as partial:
            shoot(ls_server.url, project.id, task, partial)
        print(f"wrote {args.out} in {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
