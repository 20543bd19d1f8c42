"""README example: daily order totals from two sales channels, published as one partition.

Copy this file and ``jobs/orders_by_channel_job.py`` into your DAGs folder (keep ``jobs/`` out of
parsing with the ``.airflowignore`` beside them). Each channel's PySpark job writes that day's
totals to its own staging directory; once both have reported, the completed point publishes
``{OUTPUT}/ds={ds}/source=web/`` and ``.../source=stores/`` together, exactly once. Staging data and
replaced partitions are kept ten minutes, then deleted.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

from airflow.sdk import DAG

from airflow_provider_zeta import zeta_pipeline

JOB = str(Path(__file__).resolve().parent / "jobs" / "orders_by_channel_job.py")
OUTPUT = os.environ.get("ORDERS_OUTPUT", "/tmp/zeta-example/orders_by_channel")

with DAG(
    dag_id="orders_by_channel",
    schedule="@daily",
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    tags=["zeta", "example"],
):
    zeta_pipeline(
        "orders",
        sources={"web": JOB, "stores": JOB},
        output=OUTPUT,
        cleanup_delay=timedelta(minutes=10),  # a timedelta or seconds
        conn_id="spark_default",
        job_params={"orders_per_day": 500},
        conf={"spark.sql.shuffle.partitions": "4"},
        deploy_kwargs={"retries": 2, "retry_delay": timedelta(seconds=30)},
        ready_timeout=timedelta(hours=2),
    )
