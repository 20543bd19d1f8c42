"""zeta_pipeline over the counting job, three sources; the test drives it through dag_run.conf.

Output: ``$AIRFLOW_HOME/pipeline-output`` (each test cluster has its own home); the daily variant
for backfills writes ``$AIRFLOW_HOME/pipeline-output-daily``.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from airflow.sdk import DAG, Asset

from airflow_provider_zeta import zeta_pipeline

JOB = str(Path(__file__).resolve().parent.parent / "jobs" / "counting_job.py")
OUTPUT = os.path.join(os.environ.get("AIRFLOW_HOME", "/tmp"), "pipeline-output")
SOURCES = ("alpha", "beta", "gamma")

def counting_dag(dag_id: str, output: str, **schedule):
    with DAG(
        dag_id=dag_id,
        start_date=datetime(2026, 1, 1, tzinfo=UTC),
        catchup=False,
        max_active_runs=4,
        tags=["zeta-test"],
        **schedule,
    ) as dag:
        zeta_pipeline(
            "counting",
            sources={name: JOB for name in SOURCES},
            output=output,
            # One Asset per output table: two DAGs may not give one asset name two URIs.
            asset=Asset(name=f"{dag_id}.counting", uri=f"file://{output}"),
            job_params={
                "launch_log": "{{ dag_run.conf['launch_log'] }}",
                "release_dir": "{{ dag_run.conf.get('release_dir', '') }}",
                "seconds": "{{ dag_run.conf.get('seconds', 2) }}",
                "fail_first_of": "{{ dag_run.conf.get('fail_first_of', '') }}",
                "fail_source": "{{ dag_run.conf.get('fail_source', '') }}",
                "rows": "",
            },
            deploy_kwargs={"retries": 2, "retry_delay": 1, "launch_grace": 20},
            ready_timeout=600,
            # Tests that look at the retention window ask for one; the others get their run's data
            # cleaned one second after the run's other tasks are done.
            cleanup_delay="{{ dag_run.conf.get('cleanup_delay', 1) }}",
        )
    return dag


counting_dag("pipeline_counting", OUTPUT, schedule=None)
# For backfills (the chaos tests): daily, but ending before today, so the scheduler creates no run
# by itself; its own output table.
counting_dag(
    "pipeline_counting_daily",
    OUTPUT + "-daily",
    schedule="@daily",
    end_date=datetime(2026, 3, 31, tzinfo=UTC),
)
