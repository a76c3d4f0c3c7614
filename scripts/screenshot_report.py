"""Screenshot of the backend's project report (docs/report.png), from a real training.

Starts a real Label Studio 1.23.2 and our backend on 127.0.0.1 in a temp dir, creates the team
NER project of testbed/projects.py (30 CoNLL sentences; alice and bob annotate 15 each, carol 10
of them again, retyping a recurring entity in 5), trains the backend through Label Studio, runs
a self-test (sentence-level noise), and photographs ``/report?project=ID`` in headless
Chromium, the whole page. The same project and settings as tests/labelstudio/test_e2e_report.py.

Run from the repository root (3 to 4 minutes on 2 CPU cores)::

    python -m scripts.screenshot_report [--out docs/report.png] [--top 6] [--keep]

Prerequisites: the test servers and Chromium (``bash scripts/install-test-servers.sh``).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from testbed.browser import (
    Page,
    require_screenshot_tools,
    screenshot_file,
    screenshot_servers,
)
from testbed.projects import TEAM_ENV, team_project, wait_selftest

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "report.png")
    parser.add_argument("--top", type=int, default=6, help="doubtful tasks shown (default 6)")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir with server logs")
    args = parser.parse_args()
    require_screenshot_tools("screenshot_report")

    started = time.monotonic()
    with screenshot_servers("srw-report-", TEAM_ENV, args.keep) as (ls_server, backend):
        project, _, _, status = team_project(ls_server, backend)
        print(f"project {project}: {status['message']}")
        code, body = backend.post(f"/selftest?project={project}&noise=sentence", {})
        assert code == 202, body
        print(f"self-test: {wait_selftest(backend, project)['message']}")

        with screenshot_file(args.out) as partial, Page(width=1100, height=900) as page:
            page.goto(f"{backend.url}/report?project={project}&top={args.top}")
            page.screenshot(partial)
        print(f"wrote {args.out} in {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
