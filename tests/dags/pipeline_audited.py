"""zeta_pipeline over the counting job with a write-audit-publish gate: ``rows_within(min=3, max=100)``.

Each source's row count is read, when its deploy task renders its templates, from the file
``<dag_run.conf['rows_dir']>/<source>`` (absent: the counting job's own count, 3 to 12 rows), so a
test can give one source too few rows and later "fix its input" before clearing it.
Output: ``$AIRFLOW_HOME/pipeline-audited-output``.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from airflow.sdk import DAG, Asset

from airflow_provider_zeta import zeta_pipeline
from airflow_provider_zeta.core.audits import rows_within

JOB = str(Path(__file__).resolve().parent.parent / "jobs" / "counting_job.py")
OUTPUT = os.path.join(os.environ.get("AIRFLOW_HOME", "/tmp"), "pipeline-audited-output")
SOURCES = ("alpha", "beta", "gamma")


def rows_for(conf: dict, task_id: str) -> str:
    """The row count the test set for the deploy task's source ("" when none)."""
    source = task_id.rpartition("deploy_")[2]
    path = Path(conf.get("rows_dir") or "/nonexistent") / source
    return path.read_text().strip() if path.is_file() else ""


with DAG(
    dag_id="pipeline_audited",
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    schedule=None,
    catchup=False,
    max_active_runs=4,
    tags=["zeta-test"],
    user_defined_macros={"rows_for": rows_for},
):
    zeta_pipeline(
        "audited",
        sources={name: JOB for name in SOURCES},
        output=OUTPUT,
        asset=Asset(name="pipeline_audited.audited", uri=f"file://{OUTPUT}"),
        audits=[rows_within(min=3, max=100)],
        job_params={
            "launch_log": "{{ dag_run.conf['launch_log'] }}",
            "release_dir": "{{ dag_run.conf.get('release_dir', '') }}",
            "seconds": "{{ dag_run.conf.get('seconds', 2) }}",
            "rows": "{{ rows_for(dag_run.conf, task.task_id) }}",
        },
        deploy_kwargs={"retries": 2, "retry_delay": 1, "launch_grace": 20},
        ready_timeout=600,
        cleanup_delay="{{ dag_run.conf.get('cleanup_delay', 1) }}",
    )
