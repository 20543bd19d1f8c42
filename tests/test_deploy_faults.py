"""A failing driver and a user's mark-failed, under real Airflow components (fake driver, SQLite).

These exercise the ledger protocol and the decision table rather than the metadata database, so
they run on SQLite only; the failure windows, kills and ledger faults run on both databases
(``test_deploy_windows.py``).
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pytest

from tests.test_deploy_windows import (
    DAG_ID,
    _ledger_json,
    launches,
    ledger_path,
    start_held_run,
    task_log,
    wait_trigger_running,
)

pytestmark = pytest.mark.sqlite_only


def test_failed_driver_is_reported_then_redeployed_with_a_new_token(fake_driver_cluster, tmp_path):
    cluster = fake_driver_cluster
    cluster.wait_for_dag(DAG_ID)
    log = tmp_path / "launches.jsonl"
    run_id = cluster.trigger_run(DAG_ID, conf={"launch_log": str(log), "seconds": 1, "fail": "true"})
    run = cluster.wait_for_run(DAG_ID, run_id, states={"failed"}, timeout=300)
    assert run["state"] == "failed"
    launched = launches(log)
    ti = cluster.task_instance(DAG_ID, run_id, "job")
    # retries=3: four tries; try 1 launches and reports; each later try redeploys, then reports.
    assert ti["try_number"] == 4
    assert len(launched) == 4 and len({entry["token"] for entry in launched}) == 4
    assert "zeta.deploy.terminal_resubmit" in task_log(cluster, run_id)
    assert "the job failed on purpose" in task_log(cluster, run_id, 1)


def test_marking_the_deferred_task_failed_stops_its_driver(fake_driver_cluster, tmp_path):
    cluster = fake_driver_cluster
    held = start_held_run(cluster, tmp_path)
    run_id, log, driver_pid, token = held.run_id, held.log, held.driver_pid, held.token
    # A user acts on a task that has been waiting a while: its trigger runs in the triggerer.
    wait_trigger_running(cluster, run_id)

    cluster.api("PATCH", f"/dags/{DAG_ID}/dagRuns/{quote(run_id, safe='')}/taskInstances/job", {"new_state": "failed"})
    cluster.wait_for(lambda: not Path(f"/proc/{driver_pid}").exists(), 60, "the driver stopped")
    assert _ledger_json(cluster, run_id, token)["status"] == "cancelled"
    assert (ledger_path(cluster, run_id, token).parent / "cancel").exists()
    assert len(launches(log)) == 1
