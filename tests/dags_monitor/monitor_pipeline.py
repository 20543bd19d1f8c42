"""A three-source zeta_pipeline on fake drivers, watched by the monitoring page and a freshness sensor.

Each source's counting job checkpoints every half second until its release file
(``<release_dir>/<source>``) exists, then reports; each prints the password of the ``zeta_secret`` connection into its driver log (which
the plugin must serve redacted). ``freshness_alpha`` watches source alpha.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from airflow.sdk import DAG

from airflow_provider_zeta import CheckpointFreshnessSensor, zeta_pipeline

JOB = str(Path(__file__).resolve().parent.parent / "jobs" / "counting_job.py")

with DAG(
    dag_id="monitor_pipeline",
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    tags=["zeta-test"],
):
    zeta_pipeline(
        "sales",
        sources={name: JOB for name in ("alpha", "beta", "gamma")},
        output=os.path.join(os.environ.get("AIRFLOW_HOME", "/tmp"), "monitor-output"),
        job_params={
            "launch_log": "{{ dag_run.conf['launch_log'] }}",
            "release_dir": "{{ dag_run.conf['release_dir'] }}",
            "rows": "",
            "leak_connection_env": "AIRFLOW_CONN_ZETA_SECRET",  # see tests/test_monitoring.py
        },
        deploy_kwargs={"retries": 1, "retry_delay": 1},
        ready_timeout=900,
    )
    CheckpointFreshnessSensor(
        task_id="freshness_alpha", job_task_id="sales.deploy_alpha", threshold=20, poll_interval=3
    )
