"""Screenshot of Label Studio's Data Manager sorted by subregweigh's prediction score.

Starts a real Label Studio 1.23.2 and our backend on 127.0.0.1 in a temp dir, creates the NER
test project of testbed/projects.py (50 CoNLL sentences, 5 deliberately wrong annotations),
trains the backend through Label Studio, sets the project's default Data Manager tab to a few
columns ordered by prediction score ascending (doubtful annotations first), and photographs
that tab in headless Chromium. Prints the lowest scores and whether they are the wrong ones.

Run from the repository root (1 to 2 minutes on 2 CPU cores)::

    python -m scripts.screenshot_data_manager [--out docs/data-manager.png] [--keep]

``--keep`` keeps the temp dir (server data dirs and logs) and prints its path.

Prerequisites:
  - the test servers: ``bash scripts/install-test-servers.sh`` (Label Studio in .ls-venv);
  - Chromium: ``apt-get install -y chromium`` (used as /usr/bin/chromium);
  - Playwright for Python: ``pip install playwright`` (drives that Chromium; no
    ``playwright install`` needed). Without it the script falls back to Chromium's DevTools
    protocol over a pipe, with the standard library only.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from testbed.browser import (
    CHROMIUM,
    CHROMIUM_ARGS,
    PipeCDP,
    require_screenshot_tools,
    screenshot_file,
    screenshot_servers,
)
from testbed.projects import ENGINE_ENV, trained_ner_project
from testbed.servers import (
    LS_PASSWORD,
    LS_USERNAME,
    LabelStudioServer,
)

REPO = Path(__file__).resolve().parents[1]
VIEWPORT = {"width": 1400, "height": 800}
SCORE = "tasks:predictions_score"
# Data Manager column keys ("tasks:" + column id, "data." for task data) shown; all else hidden.
SHOWN = ["tasks:id", SCORE, "tasks:data.text", "tasks:annotations_results"]
COLUMN_WIDTHS = {"tasks:id": 80, "tasks:data.text": 620, "tasks:annotations_results": 480}
# Column order and row density are browser-side preferences (localStorage), not view data;
# "select" and "show-source" are the checkbox and {} columns the table adds at either end.
COLUMN_ORDER = {c: i for i, c in enumerate(["select", *SHOWN, "show-source"])}
UI_PREFS = {"dm:table:density": "compact", "dm:columnorder": json.dumps(COLUMN_ORDER)}
INIT_SCRIPT = "".join(
    f"localStorage.setItem({json.dumps(k)}, {json.dumps(v)});" for k, v in UI_PREFS.items()
)
ROW_SELECTOR = ".lsf-table__row-wrapper"  # a rendered task row of the Data Manager table


def column_key(column: dict) -> str:
    return "tasks:" + ("data." if column.get("parent") == "data" else "") + column["id"]


def configure_view(ls_server: LabelStudioServer, project: int) -> int:
    """Make the project's first tab show SHOWN only, ordered by score ascending; its id."""
    columns = ls_server.api("GET", f"/api/dm/columns?project={project}")["columns"]
    # Hide every leaf column not in SHOWN ("data" is only the parent of the task data columns).
    hidden = sorted(
        {
            column_key(c)
            for c in columns
            if c.get("target", "tasks") == "tasks" and c["id"] != "data"
        }
        - set(SHOWN)
    )
    data = {
        "title": "Default",
        "type": "list",
        "target": "tasks",
        "ordering": [SCORE],
        "hiddenColumns": {"explore": hidden, "labeling": hidden},
        "columnsWidth": COLUMN_WIDTHS,
        "filters": {"conjunction": "and", "items": []},
    }
    views = ls_server.api("GET", f"/api/dm/views?project={project}")
    # The UI creates a "Default" tab on first visit; a project made through the API has none yet,
    # so we create it and the UI opens that one instead.
    if views:
        view = ls_server.api(
            "PATCH", f"/api/dm/views/{views[0]['id']}", {"project": project, "data": data}
        )
    else:
        view = ls_server.api("POST", "/api/dm/views", {"project": project, "data": data})
    return view["id"]


def screenshot_playwright(base_url: str, project: int, out: Path) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.add_init_script(INIT_SCRIPT)
            page.goto(f"{base_url}/user/login")
            page.fill("input[name=email]", LS_USERNAME)
            page.fill("input[name=password]", LS_PASSWORD)
            with page.expect_navigation():
                page.click("button[type=submit]")
            page.goto(f"{base_url}/projects/{project}/data")
            page.wait_for_selector(ROW_SELECTOR, timeout=60_000)
            page.wait_for_load_state("networkidle")
            page.screenshot(path=str(out))
        finally:
            browser.close()


def screenshot_cdp(base_url: str, project: int, out: Path) -> None:
    import base64

    cdp = PipeCDP()
    try:
        target = cdp.call("Target.createTarget", url="about:blank")["targetId"]
        cdp.session = cdp.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        cdp.call(
            "Emulation.setDeviceMetricsOverride",
            width=VIEWPORT["width"],
            height=VIEWPORT["height"],
            deviceScaleFactor=1,
            mobile=False,
        )
        cdp.call("Page.enable")  # without it the init script does not run
        cdp.call("Page.addScriptToEvaluateOnNewDocument", source=INIT_SCRIPT)

        def wait_for(expression: str, timeout: float = 60.0) -> None:
            deadline = time.monotonic() + timeout
            while not cdp.evaluate(expression):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"timed out waiting for {expression}")
                time.sleep(0.5)

        cdp.call("Page.navigate", url=f"{base_url}/user/login")
        wait_for("!!document.querySelector('input[name=password]')")
        cdp.evaluate(
            f"document.querySelector('#email').value = {json.dumps(LS_USERNAME)};"
            f"document.querySelector('#password').value = {json.dumps(LS_PASSWORD)};"
            "document.getElementById('login-form').submit()"
        )
        wait_for("!location.pathname.startsWith('/user/login')")
        cdp.call("Page.navigate", url=f"{base_url}/projects/{project}/data")
        wait_for(f"!!document.querySelector({json.dumps(ROW_SELECTOR)})")
        time.sleep(2)  # let the remaining cells and fonts settle
        png = cdp.call("Page.captureScreenshot", format="png")["data"]
        out.write_bytes(base64.b64decode(png))
    finally:
        cdp.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "data-manager.png")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir with server logs")
    args = parser.parse_args()

    require_screenshot_tools("screenshot_data_manager")
    try:
        import playwright.sync_api  # noqa: F401

        shoot = screenshot_playwright
    except ImportError:
        print("playwright not importable (pip install playwright): using the DevTools protocol")
        shoot = screenshot_cdp
    started = time.monotonic()
    env = {**ENGINE_ENV, "SRW_EPOCHS": "15"}
    with screenshot_servers("srw-screenshot-", env, args.keep) as (ls_server, backend):
        title = "CoNLL-2003 NER: review queue"
        project, task_ids, wrong, status = trained_ner_project(ls_server, backend, title)
        wrong_ids = {task_ids[i] for i in wrong}
        print(
            f"project {project}: {len(task_ids)} tasks, wrong annotations on tasks "
            f"{sorted(wrong_ids)}; model version {status['current_version']}"
        )

        view = configure_view(ls_server, project)
        # The view's own ordering, read back through the API: what the screenshot must show.
        top = ls_server.api("GET", f"/api/tasks?view={view}&page_size={2 * len(wrong)}")["tasks"]
        print(f"view {view}: ordered by {SCORE} ascending; the 5 lowest scores:")
        for task in top[:5]:
            mark = "deliberately wrong" if task["id"] in wrong_ids else "correct"
            print(f"  task {task['id']}: score {task['predictions_score']:.2f}  {mark}")
        found = sum(t["id"] in wrong_ids for t in top)
        print(f"{found} of {len(wrong)} wrong annotations among the {len(top)} lowest scores")

        with screenshot_file(args.out) as partial:
            shoot(ls_server.url, project, partial)
        print(f"wrote {args.out} in {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
