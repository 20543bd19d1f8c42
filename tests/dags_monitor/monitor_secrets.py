"""A job that prints credentials (tests/dags_monitor/jobs/leaky_job.py): its output must reach the
deploy task's log masked, and nothing of it any page or endpoint of the plugin."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from airflow.sdk import DAG

from airflow_provider_zeta import ZetaSparkJobOperator

with DAG(
    dag_id="monitor_secrets",
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    tags=["zeta-test"],
):
    ZetaSparkJobOperator(
        task_id="leaky",
        application=str(Path(__file__).resolve().parent / "jobs" / "leaky_job.py"),
        job_params={"lines_file": "{{ dag_run.conf['lines_file'] }}", "release_file": "{{ dag_run.conf['release_file'] }}"},
        # Secrets only the worker knows (the triggerer cannot look them up): the job prints them
        # bare; the deploy task hands them to the trigger sealed (tests/test_monitoring.py).
        env_vars={
            "LEAKY_API_TOKEN": "{{ dag_run.conf['worker_only_token'] }}",
            "AIRFLOW_CONN_ZETA_WORKER_ONLY": '{"conn_type": "generic", "login": "w", "password": "{{ dag_run.conf["worker_only_password"] }}"}',
        },
    )
