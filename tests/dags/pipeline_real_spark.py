"""``pipeline_real_spark``: the counting pipeline (three sources) with real PySpark drivers.

The fake-driver clusters put the fake spark-submit (``tests/fake_spark``) first on PATH. This DAG's
deploy tasks give their drivers a PATH that starts with the interpreter's own directory, where
pip's pyspark installs the real spark-submit: the launch runs it (a real JVM, ``--master`` from
``spark_default``), and the job writes real Parquet through Spark, each row carrying its launch's
token (``token_column``). So a real-Spark test runs on the session's shared cluster instead of
starting its own. The test drives it through ``dag_run.conf`` (``launch_log``, ``cleanup_delay``).

Output: ``$AIRFLOW_HOME/pipeline-output-real-spark``, Asset ``pipeline_real_spark.counting``.
"""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime
from pathlib import Path

from airflow.sdk import DAG, Asset

from airflow_provider_zeta import zeta_pipeline

DAG_ID = "pipeline_real_spark"
JOB = str(Path(__file__).resolve().parent.parent / "jobs" / "counting_job.py")
OUTPUT = os.path.join(os.environ.get("AIRFLOW_HOME", "/tmp"), "pipeline-output-real-spark")
SOURCES = ("alpha", "beta", "gamma")
# The real spark-submit, ahead of the fake one.
DRIVER_PATH = f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"

with DAG(
    dag_id=DAG_ID,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    schedule=None,
    catchup=False,
    tags=["zeta-test"],
):
    zeta_pipeline(
        "counting",
        sources={name: JOB for name in SOURCES},
        output=OUTPUT,
        asset=Asset(name=f"{DAG_ID}.counting", uri=f"file://{OUTPUT}"),
        job_params={
            "launch_log": "{{ dag_run.conf['launch_log'] }}",
            "seconds": "{{ dag_run.conf.get('seconds', 1) }}",
            "spark": "true",
            "token_column": "true",
            "rows": "",
        },
        conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"},
        deploy_kwargs={
            "retries": 2,
            "retry_delay": 1,
            # Three JVMs start at once on a small machine: time for each driver to claim its ledger.
            "launch_grace": 90,
            "env_vars": {"PATH": DRIVER_PATH},
        },
        ready_timeout=900,
        cleanup_delay="{{ dag_run.conf.get('cleanup_delay', 1) }}",
    )
