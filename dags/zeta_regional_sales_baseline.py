"""Baseline for the benchmarks and the chaos suite: the example pipeline with the stock operators.

The same PySpark job as ``zeta_regional_sales`` (``jobs/regional_sales_job.py --standalone``), one
``SparkSubmitOperator`` per region from ``apache-airflow-providers-apache-spark``, each writing
straight into ``{output}/ds={ds}/source={region}``. No provider code is involved: this is what the
provider's figures are compared against under the same kills. Output root:
``$ZETA_BASELINE_OUTPUT`` or ``$AIRFLOW_HOME/zeta-output/regional_sales_baseline``; manual runs
only unless ``$ZETA_BASELINE_SCHEDULE`` sets a schedule (the chaos soak backfills it daily);
``$ZETA_EXAMPLE_END_DATE`` (``YYYY-MM-DD``) ends it, and ``$ZETA_EXAMPLE_MAX_ACTIVE_RUNS`` (default 3)
sets ``max_active_runs`` as for the provider's DAG.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import DAG

JOB = str(Path(__file__).resolve().parent / "jobs" / "regional_sales_job.py")
REGIONS = ("emea", "amer", "apac")
OUTPUT = os.environ.get("ZETA_BASELINE_OUTPUT") or os.path.join(
    os.environ.get("AIRFLOW_HOME", os.path.expanduser("~/airflow")), "zeta-output", "regional_sales_baseline"
)

with DAG(
    dag_id="zeta_regional_sales_baseline",
    schedule=os.environ.get("ZETA_BASELINE_SCHEDULE") or None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    end_date=datetime.fromisoformat(os.environ["ZETA_EXAMPLE_END_DATE"]).replace(tzinfo=UTC)
    if os.environ.get("ZETA_EXAMPLE_END_DATE")
    else None,
    catchup=False,
    max_active_runs=int(os.environ.get("ZETA_EXAMPLE_MAX_ACTIVE_RUNS") or 3),
    tags=["zeta", "example", "baseline"],
):
    for region in REGIONS:
        SparkSubmitOperator(
            task_id=f"submit_{region}",
            application=JOB,
            application_args=[
                "--standalone",
                "--region", region,
                "--ds", "{{ ds }}",
                "--output", OUTPUT,
                "--launch-log", "{{ dag_run.conf.get('launch_log', '') }}",
                "--work-seconds", "{{ dag_run.conf.get('work_seconds', 0) }}",
            ],
            conn_id="spark_default",
            conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2", "spark.driver.memory": "512m"},
            retries=3,
            retry_delay=5,
        )
