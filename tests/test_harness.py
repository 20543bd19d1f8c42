"""Self-tests of the real-Airflow harness (SQLite; every other PostgreSQL test exercises it there too).

A trivial deferrable DAG (``tests/dags/harness_selftest.py``) runs on real components. While its
``wait`` task is deferred, the scheduler is killed with SIGKILL and restarted, then the triggerer
is; the run must still complete, the trigger must have moved to the new triggerer, and the task
after the wait must have been scheduled by the new scheduler.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from zeta_harness.cluster import COMPONENTS

DAGS = Path(__file__).parent / "dags"
DAG_ID = "harness_selftest"


def _job_ids(cluster, job_type: str) -> list[int]:
    return [row["id"] for row in cluster.db_query("SELECT id FROM job WHERE job_type = :t ORDER BY id", t=job_type)]


@pytest.mark.sqlite_only
def test_deferrable_run_survives_scheduler_and_triggerer_kill(airflow_cluster, db_kind):
    cluster = airflow_cluster(DAGS, db_kind)
    cluster.wait_for_dag(DAG_ID)
    release_at = datetime.now(UTC) + timedelta(seconds=45)
    run_id = cluster.trigger_run(DAG_ID, conf={"release_at": release_at.isoformat()})
    cluster.wait_for_task(DAG_ID, run_id, "wait", {"deferred"}, timeout=120)

    # The scheduler dies while the task waits on the triggerer; its LocalExecutor workers survive.
    old_schedulers = _job_ids(cluster, "SchedulerJob")
    assert old_schedulers, "the first scheduler must have registered its job"
    old_scheduler_pid = cluster.kill("scheduler")
    assert not _pid_alive(old_scheduler_pid)
    cluster.start_component("scheduler")

    # The triggerer dies while it runs the trigger; a new one must take the trigger over.
    trigger = cluster.wait_for(
        lambda: cluster.db_query("SELECT id, triggerer_id FROM trigger WHERE triggerer_id IS NOT NULL"),
        60,
        "the trigger assigned to a triggerer",
    )[0]
    old_triggerer_pid = cluster.kill("triggerer")
    assert not _pid_alive(old_triggerer_pid)
    cluster.start_component("triggerer")
    cluster.wait_healthy()
    assert datetime.now(UTC) < release_at, "the kills must happen while the task is still deferred"
    cluster.wait_for(
        lambda: [
            row
            for row in cluster.db_query("SELECT triggerer_id FROM trigger WHERE id = :i", i=trigger["id"])
            if row["triggerer_id"] not in (None, trigger["triggerer_id"])
        ],
        120,
        "the trigger taken over by the restarted triggerer",
    )

    run = cluster.wait_for_run(DAG_ID, run_id, timeout=240)
    assert run["state"] == "success"
    states = {ti["task_id"]: ti["state"] for ti in cluster.task_instances(DAG_ID, run_id)}
    assert states == {"start": "success", "wait": "success", "finish": "success"}
    assert cluster.xcom(DAG_ID, run_id, "finish") == {"started": run_id, "finished": run_id}
    finish = cluster.task_instance(DAG_ID, run_id, "finish")
    queued_by = cluster.db_query(
        "SELECT queued_by_job_id FROM task_instance WHERE run_id = :r AND task_id = 'finish'", r=run_id
    )[0]["queued_by_job_id"]
    new_schedulers = set(_job_ids(cluster, "SchedulerJob")) - set(old_schedulers)
    assert queued_by in new_schedulers, f"finish was queued by job {queued_by}, not the restarted scheduler"
    assert finish["try_number"] == 1

    # Teardown kills everything the cluster started, including the orphaned workers of the dead
    # scheduler, and nothing else.
    assert any("LocalExecutor" in p["cmdline"] for p in cluster.harness_processes())
    cluster.stop_processes()
    assert cluster.harness_processes() == []
    assert all(not component.alive() for component in cluster.component_history)
    assert {c.name for c in cluster.component_history} == set(COMPONENTS)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").exists() and " Z " not in Path(f"/proc/{pid}/stat").read_text()
