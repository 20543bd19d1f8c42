"""G1/G6/G8 with real PySpark under real Airflow components.

The job counts its own launches in a launch log (the provider's bookkeeping is not trusted for
the count). Local mode on SQLite: the scheduler is killed mid-job, then — in a second run — the
task's worker (the LocalExecutor worker, which supervises the task, and the task process) is
killed mid-job. A real
Spark standalone cluster (master + worker on 127.0.0.1) runs a driver in client mode on PostgreSQL
while the triggerer is killed.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from airflow_provider_zeta.core.paths import LEDGER_FILE, attempt_dir
from tests.conftest import PROJECT_ROOT, spark_env
from tests.test_deploy_windows import DAG_ID, current_token, launches, task_log
from zeta_harness.spark_standalone import SparkStandaloneCluster

pytestmark = pytest.mark.spark
DAGS = PROJECT_ROOT / "tests" / "dags"


def parquet_rows(output_url: str) -> int:
    return pq.read_table(output_url.removeprefix("file://")).num_rows


def _ppid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_real_spark_survives_a_worker_kill(airflow_cluster, tmp_path):
    """The task's worker dies while a real Spark job runs: one launch, the job's result reused.
    (A scheduler killed while real Spark jobs run is the demo's test, tests/test_demo.py, with the
    whole pipeline: one launch per source and the published rows.)"""
    cluster = airflow_cluster(DAGS, "sqlite", extra_env=spark_env(fake=False))
    cluster.wait_for_dag(DAG_ID)

    # The first try pauses right after it recorded the driver's handle, and the test kills the task
    # process, its supervisor and the LocalExecutor worker that ran it.
    log, marker = tmp_path / "launches-2.jsonl", tmp_path / "task-pid"
    run_id = cluster.trigger_run(
        DAG_ID,
        conf={
            "launch_log": str(log),
            "seconds": 30,
            "spark": "true",
            "pause_at": "after_handle",
            "pause_marker": str(marker),
        },
    )
    task_pid = int(cluster.wait_for(lambda: marker.exists() and marker.read_text(), 120, "the first try paused"))
    cluster.wait_for(lambda: launches(log), 180, "the Spark job started")
    # In Airflow 3 the LocalExecutor worker process is the task's supervisor; the task runs in its child.
    worker = _ppid(task_pid)
    assert "LocalExecutor" in Path(f"/proc/{worker}/cmdline").read_bytes().decode(errors="replace")
    for pid in (task_pid, worker):
        os.kill(pid, signal.SIGKILL)
    cluster.wait_for_run(DAG_ID, run_id, timeout=400)
    assert len(launches(log)) == 1, launches(log)
    ti = cluster.task_instance(DAG_ID, run_id, "job")
    assert ti["try_number"] >= 2
    second_try = task_log(cluster, run_id)
    assert "zeta.deploy.reconnect" in second_try or "zeta.deploy.already_succeeded" in second_try
    result = cluster.xcom(DAG_ID, run_id, "job")
    assert result["token"] == launches(log)[0]["token"] and parquet_rows(result["output_path"]) == 7


def test_real_spark_standalone_cluster_client_mode(airflow_cluster, tmp_path):
    with SparkStandaloneCluster(cores=1, memory="1g") as spark_cluster:
        env = spark_env(fake=False)
        env["AIRFLOW_CONN_SPARK_DEFAULT"] = spark_cluster.connection_json()
        cluster = airflow_cluster(DAGS, "postgres", extra_env=env)
        cluster.wait_for_dag(DAG_ID)
        log = tmp_path / "launches.jsonl"
        run_id = cluster.trigger_run(DAG_ID, conf={"launch_log": str(log), "seconds": 15, "spark": "true"})
        cluster.wait_for(lambda: launches(log), 180, "the Spark job started")
        cluster.wait_for_task(DAG_ID, run_id, "job", {"deferred"}, timeout=60)
        cluster.kill("triggerer")
        cluster.start_component("triggerer")
        cluster.wait_for_run(DAG_ID, run_id, timeout=400)
        assert len(launches(log)) == 1
        result = cluster.xcom(DAG_ID, run_id, "job")
        assert result["spark_app_id"].startswith("app-"), result  # a standalone application, not local
        assert parquet_rows(result["output_path"]) == 7
        token = current_token(cluster, run_id)
        ledger = json.loads(
            (cluster.home / "zeta-state" / attempt_dir(DAG_ID, run_id, "job", -1, token) / LEDGER_FILE).read_text()
        )
        assert ledger["status"] == "succeeded" and ledger["checkpoints"] > 0
        assert "Spark-Submit cmd" in task_log(cluster, run_id, 1) and spark_cluster.master_url in task_log(cluster, run_id, 1)
