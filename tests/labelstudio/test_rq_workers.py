"""Two rq workers, separate processes, share one queue through a real redis-server without
double work (issue 30, item 4): a storm of Start Training on two real Label Studio projects is
shared between them, each job runs on one worker once, one project's trainings never overlap,
and each training publishes one version whose predictions land once per task."""

from __future__ import annotations

import pytest

from benchmarks import workers
from testbed.servers import LabelStudioServer, require_label_studio, require_redis

# small enough for 2 CPU cores: 2 projects of 30 tasks, each sent Start Training 3 times at once
TINY = ["--projects", "2", "--size", "30", "--triggers", "3", "--epochs", "1", "-k", "3"]
TINY += ["--n-samples", "6", "--timeout", "600", "--worker-threads", "1"]


@pytest.mark.slow
def test_two_workers_share_a_storm_of_trainings_without_double_work(tmp_path):
    require_label_studio()
    require_redis()
    args = workers.parse_args(TINY)
    with LabelStudioServer() as ls:
        row = workers.run_round(ls, 2, args, tmp_path)
    jobs = row["jobs"]
    assert row["failed"] == [] and row["double_work"] == [] and row["overlaps"] == []
    assert row["versions_match_trainings"]
    assert len(row["jobs_by_worker"]) == 2, row["jobs_by_worker"]  # both workers took jobs
    for project, versions in row["versions"].items():
        mine = [job for job in jobs if job["project"] == int(project)]
        # a storm collapses to one running and at most one waiting training a project
        assert 1 <= len(mine) <= 2 and len(versions) == len(mine), (project, mine, versions)
        assert {job["version"] for job in mine} == set(versions)
