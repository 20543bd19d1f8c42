"""zeta_pipeline over the counting job, two sources, for the multi-host test (tests/test_multi_host.py).

Real PySpark in client mode against the Spark connection of the cluster (the standalone master):
each driver runs on the Celery worker host that launched it, its executor on a Spark worker.
``conf["spark"] = ""`` runs the job without a SparkSession (the misconfigured-deployment check uses
the fake spark-submit). Output: ``$AIRFLOW_HOME/pipeline-output-hosts`` (shared by every host).
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

from airflow.sdk import DAG, Asset

from airflow_provider_zeta import zeta_pipeline

JOB = str(Path(__file__).resolve().parent.parent / "jobs" / "counting_job.py")
OUTPUT = os.path.join(os.environ.get("AIRFLOW_HOME", "/tmp"), "pipeline-output-hosts")
SOURCES = ("north", "south")

with DAG(
    dag_id="pipeline_hosts",
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=timezone.utc),
    catchup=False,
    max_active_runs=4,
    tags=["zeta-test"],
) as dag:
    zeta_pipeline(
        "hosts",
        sources={name: JOB for name in SOURCES},
        output=OUTPUT,
        asset=Asset(name="pipeline_hosts.hosts", uri=f"file://{OUTPUT}"),
        job_params={
            "launch_log": "{{ dag_run.conf['launch_log'] }}",
            "release_dir": "{{ dag_run.conf.get('release_dir', '') }}",
            "seconds": "{{ dag_run.conf.get('seconds', 2) }}",
            "spark": "{{ dag_run.conf.get('spark', 'true') }}",
            "rows": "",
            # The frozen-host test's own oracle files (tests/jobs/counting_job.py); empty: off.
            "progress_log": "{{ dag_run.conf.get('progress_log', '') }}",
            "token_column": "{{ dag_run.conf.get('token_column', '') }}",
        },
        # One core and a small executor per application: both drivers get an executor on the two
        # one-core Spark workers.
        conf={
            "spark.ui.enabled": "false",
            "spark.cores.max": "1",
            "spark.executor.memory": "512m",
            "spark.driver.memory": "512m",
            "spark.sql.shuffle.partitions": "1",
            "spark.driver.host": "127.0.0.1",
        },
        deploy_kwargs={"retries": 2, "retry_delay": 1, "launch_grace": 20},
        ready_timeout=600,
        cleanup_delay="{{ dag_run.conf.get('cleanup_delay', 5) }}",
    )
