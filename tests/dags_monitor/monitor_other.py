"""Another DAG with a zeta job: the one the DAG-scoped test user may read (and only this one)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from airflow.sdk import DAG

from airflow_provider_zeta import ZetaSparkJobOperator

with DAG(
    dag_id="monitor_other",
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    tags=["zeta-test"],
):
    ZetaSparkJobOperator(
        task_id="job",
        application=str(Path(__file__).resolve().parent.parent / "jobs" / "counting_job.py"),
        job_params={"launch_log": "{{ dag_run.conf['launch_log'] }}", "seconds": "1"},
    )
