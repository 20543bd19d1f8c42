"""One deploy task whose state root is an S3 bucket (tests/test_object_store.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from airflow.sdk import DAG

from airflow_provider_zeta import ZetaSparkJobOperator

with DAG(
    dag_id="object_store_output",
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    tags=["zeta-test"],
):
    ZetaSparkJobOperator(
        task_id="chatty",
        application=str(Path(__file__).resolve().parent / "jobs" / "chatty_job.py"),
        job_params={
            "lines": "{{ dag_run.conf['lines'] }}",
            "release_file": "{{ dag_run.conf['release_file'] }}",
            "leak_connection_env": "AIRFLOW_CONN_ZETA_SECRET",
        },
    )
