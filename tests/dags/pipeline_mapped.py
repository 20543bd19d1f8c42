"""zeta_pipeline over sources decided at run time: an upstream task returns the source names (from
``dag_run.conf``), the deploy task is mapped over them (one map index per source), and the
counting job runs for each. The tests drive it through dag_run.conf as ``pipeline_counting``'s do.

Output: ``$AIRFLOW_HOME/pipeline-mapped-output``; the daily variant for backfills writes
``$AIRFLOW_HOME/pipeline-mapped-output-daily``.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from airflow.sdk import DAG, Asset, get_current_context, task

from airflow_provider_zeta import zeta_pipeline

JOB = str(Path(__file__).resolve().parent.parent / "jobs" / "counting_job.py")
OUTPUT = os.path.join(os.environ.get("AIRFLOW_HOME", "/tmp"), "pipeline-mapped-output")
DEFAULT_SOURCES = ("north", "south", "east")


def mapped_dag(dag_id: str, output: str, **schedule):
    with DAG(
        dag_id=dag_id,
        start_date=datetime(2026, 1, 1, tzinfo=UTC),
        catchup=False,
        max_active_runs=4,
        tags=["zeta-test"],
        **schedule,
    ) as dag:

        @task
        def list_sources() -> list[str]:
            """The sources of this run, as a discovery step (tenants, regions, files) would return them:
            ``sources_by_ds[ds]``, else ``sources``, else the default three."""
            context = get_current_context()
            conf = context["dag_run"].conf or {}
            by_ds = conf.get("sources_by_ds") or {}
            return list(by_ds.get(context["ds"], conf.get("sources", DEFAULT_SOURCES)))

        zeta_pipeline(
            "mapped",
            sources=list_sources(),
            application=JOB,
            output=output,
            asset=Asset(name=f"{dag_id}.mapped", uri=f"file://{output}"),
            job_params={
                "launch_log": "{{ dag_run.conf['launch_log'] }}",
                "release_dir": "{{ dag_run.conf.get('release_dir', '') }}",
                "seconds": "{{ dag_run.conf.get('seconds', 2) }}",
                "fail_first_of": "",
                "fail_source": "",
                "rows": "",
            },
            deploy_kwargs={"retries": 2, "retry_delay": 1, "launch_grace": 20},
            ready_timeout=180,  # a source that never reports fails the run within the tests' waits
            cleanup_delay="{{ dag_run.conf.get('cleanup_delay', 1) }}",
        )
    return dag


mapped_dag("pipeline_mapped", OUTPUT, schedule=None)
# For backfills: daily, but ending before today, so the scheduler creates no run by itself.
mapped_dag("pipeline_mapped_daily", OUTPUT + "-daily", schedule="@daily", end_date=datetime(2026, 3, 31, tzinfo=UTC))
