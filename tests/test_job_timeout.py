"""A driver running past ``job_timeout`` is stopped and its try fails, on real components.

Fake driver cluster (real scheduler, triggerer, workers; the real driver bootstrap through the fake
spark-submit). The oracle is independent of the provider's bookkeeping: the driver's pid, as the
job itself logged it, must be gone from the process table; the task log must name the task and the
timeout.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.dags.deploy_timeout import JOB_TIMEOUT
from tests.test_deploy_windows import launches

pytestmark = pytest.mark.sqlite_only

DAG_ID = "deploy_timeout"


def _log(cluster, run_id: str) -> str:
    folder = cluster.home / "logs" / f"dag_id={DAG_ID}" / f"run_id={run_id}" / "task_id=job"
    return "\n".join(p.read_text(errors="replace") for p in sorted(folder.glob("attempt=*")))


def test_a_driver_past_its_job_timeout_is_stopped_and_the_try_fails_naming_task_and_timeout(fake_driver_cluster, tmp_path):
    cluster = fake_driver_cluster
    cluster.wait_for_dag(DAG_ID)
    log = tmp_path / "launches.jsonl"
    started = time.time()
    run_id = cluster.trigger_run(DAG_ID, conf={"launch_log": str(log), "seconds": 300})
    cluster.wait_for(lambda: launches(log), 120, "the driver started")
    driver_pid = launches(log)[0]["pid"]
    assert Path(f"/proc/{driver_pid}").exists()  # running, well within its 300 s of work
    run = cluster.wait_for_run(DAG_ID, run_id, states={"failed", "success"}, timeout=240)
    assert run["state"] == "failed"
    # The job wanted 300 s; it was stopped soon after the timeout (the trigger polls every few s,
    # the driver gets a heartbeat to stop on its own, then a signal).
    assert time.time() - started < 150
    cluster.wait_for(lambda: not Path(f"/proc/{driver_pid}").exists(), 30, "the driver process is gone")
    ti = cluster.task_instance(DAG_ID, run_id, "job")
    assert ti["state"] == "failed" and ti["try_number"] == 1
    text = _log(cluster, run_id)
    assert "zeta.deploy.job_timeout" in text, text[-3000:]
    assert f"task {DAG_ID}.job: driver" in text and f"exceeded its job_timeout of {JOB_TIMEOUT}s" in text, text[-3000:]
    assert len(launches(log)) == 1  # stopped, not redeployed
