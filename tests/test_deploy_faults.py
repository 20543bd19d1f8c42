"""A failing driver and a user's mark-failed, under real Airflow components (fake driver, SQLite).

These exercise the ledger protocol and the decision table rather than the metadata database, so
they run on SQLite only; the failure windows, kills and ledger faults run on both databases
(``test_deploy_windows.py``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.test_deploy_windows import (
    DAG_ID,
    _ledger_json,
    _process_alive,
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


def test_marking_a_task_that_waits_in_its_worker_failed_stops_its_driver(fake_driver_cluster, tmp_path):
    """A task marked failed with ``deferrable=False``: no trigger runs, so no trigger's on_kill either;
    before the fix the task's own on_kill left the driver running after the user marked the task
    failed (until a sweep after the run). The oracle is the process table and the job's own
    launch log: the driver, which waits for a release file the test never writes, must be gone."""
    cluster = fake_driver_cluster
    dag_id = "deploy_counting_in_worker"
    cluster.wait_for_dag(dag_id)
    log, release = tmp_path / "launches.jsonl", tmp_path / "release"
    run_id = cluster.trigger_run(dag_id, conf={"launch_log": str(log), "release_file": str(release)})
    driver_pid = cluster.wait_for(lambda: launches(log), 120, "the job started")[0]["pid"]
    assert cluster.task_instance(dag_id, run_id, "job")["state"] == "running"  # waits in its worker
    time.sleep(3)  # past the launch: the task waits in the trigger's loop now

    cluster.api("PATCH", f"/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances/job", {"new_state": "failed"})
    cluster.wait_for(lambda: not _process_alive(driver_pid), 90, "the driver stopped")
    run = cluster.wait_for_run(dag_id, run_id, states={"failed"}, timeout=120)
    assert run["state"] == "failed"
    assert len(launches(log)) == 1 and not release.exists()
    folder = cluster.home / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}" / "task_id=job"
    text = "\n".join(p.read_text(errors="replace") for p in folder.glob("attempt=*.log"))
    assert "task ended by a user action" in text, text[-3000:]


def test_clearing_a_task_that_waits_in_its_worker_reruns_its_job_with_one_driver_at_a_time(fake_driver_cluster, tmp_path):
    """A cleared deploy task always re-runs, also one cleared while RUNNING (with
    ``deferrable=False`` it is RUNNING for its whole job). Airflow sets it RESTARTING, the worker's
    supervisor kills the try when its heartbeat is refused, the executor reports that try as ended,
    and the scheduler raises ``max_tries`` for a RESTARTING task so reported: the next try sees
    this task cleared (``new_incarnation``), fences the old driver and launches anew. The oracles:
    the job's own launch log (a second launch, under a new token, which the task's result names)
    and the process table (the first driver gone before the second started)."""
    cluster = fake_driver_cluster
    dag_id = "deploy_counting_in_worker"
    cluster.wait_for_dag(dag_id)
    log, release = tmp_path / "launches.jsonl", tmp_path / "release"
    run_id = cluster.trigger_run(
        dag_id, "2026-07-01T00:00:00Z", conf={"launch_log": str(log), "release_file": str(release)}
    )
    first = cluster.wait_for(lambda: launches(log), 120, "the job started")[0]
    assert cluster.task_instance(dag_id, run_id, "job")["state"] == "running"  # waits in its worker
    time.sleep(3)  # past the launch: the task waits in the trigger's loop now

    cluster.api(
        "POST",
        f"/dags/{dag_id}/clearTaskInstances",
        {"dry_run": False, "dag_run_id": run_id, "task_ids": ["job"], "only_failed": False},
    )
    second = cluster.wait_for(lambda: launches(log)[1:], 180, "the cleared task launched its job again")[0]
    assert second["token"] != first["token"]
    assert not _process_alive(first["pid"]), "the cleared try's driver still runs beside the new one"
    release.touch()
    cluster.wait_for_task(dag_id, run_id, "job", {"success"}, timeout=180)
    assert [entry["token"] for entry in launches(log)] == [first["token"], second["token"]]
    assert cluster.xcom(dag_id, run_id, "job")["token"] == second["token"]
    folder = cluster.home / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}" / "task_id=job"
    text = "\n".join(p.read_text(errors="replace") for p in sorted(folder.glob("attempt=*.log")))
    assert "zeta.deploy.new_incarnation" in text, text[-3000:]


def test_a_state_root_the_observer_cannot_see_fails_naming_it_and_launches_nothing(fake_driver_cluster, tmp_path):
    """A state root the observer cannot see, on one host: the deferred task's observer finds
    neither the ledger nor the intent file the launching try wrote (what a triggerer or worker on another host sees when
    ``[zeta] state_root`` is not shared). Before the fix this read as "never started": the token
    was fenced and a second driver launched. Now: a clear error naming the option, no second launch."""
    cluster = fake_driver_cluster
    held = start_held_run(cluster, tmp_path)
    os.kill(held.driver_pid, signal.SIGSTOP)  # the driver elsewhere: it cannot rewrite what we hide
    try:
        attempt = held.ledger.parent
        (attempt / "intent.json").unlink()
        held.ledger.unlink()
        run = cluster.wait_for_run(DAG_ID, held.run_id, states={"failed"}, timeout=180)
        assert run["state"] == "failed"
        text = task_log(cluster, held.run_id, 1)
        assert "zeta.deploy.state_root_not_shared" in text and "[zeta] state_root" in text, text[-3000:]
        assert len(launches(held.log)) == 1
        assert cluster.task_instance(DAG_ID, held.run_id, "job")["try_number"] <= 2  # no retry of ours (see the corrupt-ledger test)
    finally:
        for sig in (signal.SIGCONT, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.kill(held.driver_pid, sig)
    assert not _process_alive(held.driver_pid)
