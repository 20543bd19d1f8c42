"""Example: regional sources decided at run time, one output table, published once per day.

A discovery task (``regions``) returns the regions to load for the day — a fixed three here, where a
real pipeline would list its landing zone or a tenant table — and the pipeline maps its deploy task
over them (``zeta_pipeline(sources=regions())``: one map index per region). Each region's PySpark job (``jobs/regional_sales_job.py``) writes that day's sales to its own
staging directory; when every region of the run has reported ready-to-close, the completed point publishes
``{output}/ds={ds}/source={region}/`` at once. ``spark.read.parquet(output)`` then sees every region
of a day or none of them, and only after every region passed its audit (at least one row). A run's
``conf`` may name its regions (``{"regions": ["emea"]}``).

The output root is ``$ZETA_EXAMPLE_OUTPUT`` or ``$AIRFLOW_HOME/zeta-output/regional_sales``; the
schedule is ``@daily`` unless ``$ZETA_EXAMPLE_SCHEDULE`` says otherwise (empty: manual runs only,
as ``make demo`` uses it). ``$ZETA_EXAMPLE_END_DATE`` (``YYYY-MM-DD``) ends the schedule: the chaos
soak backfills past dates without the scheduler adding a run for today beside them.
``$ZETA_EXAMPLE_MAX_ACTIVE_RUNS`` (default 3; the baseline DAG reads it too) and
``$ZETA_EXAMPLE_CLEANUP_DELAY`` (seconds; default ``[zeta] cleanup_retention``) are for the backfill
benchmark (``benchmarks/backfill_bench.py``).
The run needs a logical date (it is the partition key): scheduled runs have one; trigger manual
runs with one. A run without a logical date fails at once with a message saying so.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

from airflow.sdk import DAG, get_current_context, task

from airflow_provider_zeta import rows_within, zeta_pipeline

JOB = str(Path(__file__).resolve().parent / "jobs" / "regional_sales_job.py")
REGIONS = ("emea", "amer", "apac")
OUTPUT = os.environ.get("ZETA_EXAMPLE_OUTPUT") or os.path.join(
    os.environ.get("AIRFLOW_HOME", os.path.expanduser("~/airflow")), "zeta-output", "regional_sales"
)

with DAG(
    dag_id="zeta_regional_sales",
    schedule=os.environ.get("ZETA_EXAMPLE_SCHEDULE", "@daily") or None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    end_date=datetime.fromisoformat(os.environ["ZETA_EXAMPLE_END_DATE"]).replace(tzinfo=UTC)
    if os.environ.get("ZETA_EXAMPLE_END_DATE")
    else None,
    catchup=False,
    max_active_runs=int(os.environ.get("ZETA_EXAMPLE_MAX_ACTIVE_RUNS") or 3),
    tags=["zeta", "example"],
    params={"work_seconds": 0},
):

    @task
    def regions() -> list[str]:
        """The regions to load for this run: the run's ``conf["regions"]``, else all three."""
        conf = get_current_context()["dag_run"].conf or {}
        return list(conf.get("regions") or REGIONS)

    zeta_pipeline(
        "regional_sales",
        sources=regions(),  # decided at run time: one mapped deploy task, a map index per region
        application=JOB,
        output=OUTPUT,
        cleanup_delay=float(os.environ["ZETA_EXAMPLE_CLEANUP_DELAY"]) if os.environ.get("ZETA_EXAMPLE_CLEANUP_DELAY") else None,
        conn_id="spark_default",
        job_params={
            "launch_log": "{{ dag_run.conf.get('launch_log', '') }}",
            "work_seconds": "{{ dag_run.conf.get('work_seconds', params.work_seconds) }}",
            "checkpoint_seconds": "{{ dag_run.conf.get('checkpoint_seconds', 1) }}",
        },
        conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2", "spark.driver.memory": "512m"},
        deploy_kwargs={"retries": 3, "retry_delay": timedelta(seconds=5)},
        ready_timeout=timedelta(hours=1),  # any duration: a timedelta or seconds
        # Audited before anything is published: every region delivered at least one sale (the
        # count its driver reported; no Spark job needed). A failed audit leaves the table as it was.
        audits=[rows_within(min=1)],
    )
