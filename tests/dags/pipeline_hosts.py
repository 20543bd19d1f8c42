"""zeta_pipeline over the counting job, two sources, for the multi-host test (tests/test_multi_host.py).

Real PySpark in client mode against the Spark connection of the cluster (the standalone master):
each driver runs on the Celery worker host that launched it, its executor on a Spark worker.
``conf["spark"] = ""`` runs the job without a SparkSession (the misconfigured-deployment check uses
the fake spark-submit). Output: ``$AIRFLOW_HOME/pipeline-output-hosts`` (shared by every host).

``pipeline_hosts_long_lease`` is the same pipeline with ``lost_after`` of its own, three times the
cluster's: its deploy tasks wait out a silence bound (1.25 x ``lost_after``) long enough that a
replacement launched early — as soon as the driver is judged lost, or on a host that only shares
the old host's name — starts seconds before the bound, clear of Airflow's retry overhead.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from airflow.sdk import DAG, Asset

from airflow_provider_zeta import zeta_pipeline

JOB = str(Path(__file__).resolve().parent.parent / "jobs" / "counting_job.py")
HOME = os.environ.get("AIRFLOW_HOME", "/tmp")
SOURCES = ("north", "south")
#: ``lost_after`` of ``pipeline_hosts_long_lease`` (tests/test_multi_host.py reads it from here).
LONG_LEASE_LOST_AFTER_S = 45


def hosts_pipeline(dag_id: str, output: str, **deploy_kwargs) -> DAG:
    with DAG(
        dag_id=dag_id,
        schedule=None,
        start_date=datetime(2026, 1, 1, tzinfo=UTC),
        catchup=False,
        max_active_runs=4,
        tags=["zeta-test"],
    ) as dag:
        zeta_pipeline(
            "hosts",
            sources={name: JOB for name in SOURCES},
            output=output,
            asset=Asset(name=f"{dag_id}.hosts", uri=f"file://{output}"),
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
            deploy_kwargs={"retries": 2, "retry_delay": 1, "launch_grace": 20, **deploy_kwargs},
            ready_timeout=600,
            cleanup_delay="{{ dag_run.conf.get('cleanup_delay', 5) }}",
        )
    return dag


pipeline_hosts = hosts_pipeline("pipeline_hosts", os.path.join(HOME, "pipeline-output-hosts"))
pipeline_hosts_long_lease = hosts_pipeline(
    "pipeline_hosts_long_lease", os.path.join(HOME, "pipeline-output-hosts-long-lease"), lost_after=LONG_LEASE_LOST_AFTER_S
)
