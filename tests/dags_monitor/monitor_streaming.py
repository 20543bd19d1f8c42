"""A real Structured Streaming job (real PySpark, local mode) watched by CheckpointFreshnessSensor.

The cluster of the test puts a fake spark-submit first on PATH for the other DAGs; this job's driver
gets a PATH without it, so the real spark-submit beside the interpreter runs (``env_vars``).
Its checkpoints come only from the driver bootstrap's StreamingQueryListener: the job never calls
``zeta_context().checkpoint()``.
"""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime
from pathlib import Path

from airflow.sdk import DAG

from airflow_provider_zeta import CheckpointFreshnessSensor, ZetaSparkJobOperator

REAL_PATH = os.pathsep.join(
    [os.path.dirname(sys.executable)]
    + [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and not p.rstrip("/").endswith("fake_spark")]
)
THRESHOLD = 20
FIRST_CHECKPOINT_THRESHOLD = 180  # Spark start-up and the first micro-batch on a loaded 2-core machine
POLL = 5

with DAG(
    dag_id="monitor_streaming",
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    tags=["zeta-test"],
):
    ZetaSparkJobOperator(
        task_id="stream",
        application=str(Path(__file__).resolve().parent.parent / "jobs" / "streaming_job.py"),
        env_vars={"PATH": REAL_PATH},
        conf={"spark.sql.shuffle.partitions": "1", "spark.driver.memory": "512m"},
        job_params={"stall_file": "{{ dag_run.conf['stall_file'] }}", "stop_file": "{{ dag_run.conf['stop_file'] }}"},
    )
    CheckpointFreshnessSensor(
        task_id="freshness",
        job_task_id="stream",
        threshold=THRESHOLD,
        first_checkpoint_threshold=FIRST_CHECKPOINT_THRESHOLD,
        poll_interval=POLL,
    )
