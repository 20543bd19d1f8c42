"""zeta_pipeline over the counting job, hourly partitions (tests/test_hourly_partitions.py).

Partition spec ``ds={{ ds }}/hour={{ logical_date.strftime('%H') }}``: two runs of one day publish
``ds=<day>/hour=10`` and ``ds=<day>/hour=11`` side by side in ``$AIRFLOW_HOME/pipeline-output-hourly``
(with the default ``ds={{ ds }}`` the second run failed: ``partition_of_another_owner``). Scheduled
hourly, but only within July 2026, so the scheduler creates no run by itself; the test triggers
its runs with their logical dates.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from airflow.sdk import DAG, Asset

from airflow_provider_zeta import zeta_pipeline

JOB = str(Path(__file__).resolve().parent.parent / "jobs" / "counting_job.py")
OUTPUT = os.path.join(os.environ.get("AIRFLOW_HOME", "/tmp"), "pipeline-output-hourly")
SOURCES = ("alpha", "beta", "gamma")
PARTITION = "ds={{ ds }}/hour={{ logical_date.strftime('%H') }}"

with DAG(
    dag_id="pipeline_counting_hourly",
    schedule="@hourly",
    start_date=datetime(2026, 7, 1, tzinfo=UTC),
    end_date=datetime(2026, 7, 31, tzinfo=UTC),
    catchup=False,
    max_active_runs=4,
    tags=["zeta-test"],
):
    zeta_pipeline(
        "counting",
        sources={name: JOB for name in SOURCES},
        output=OUTPUT,
        partition=PARTITION,
        asset=Asset(name="pipeline_counting_hourly.counting", uri=f"file://{OUTPUT}"),
        job_params={
            "launch_log": "{{ dag_run.conf['launch_log'] }}",
            "release_dir": "",
            "seconds": "{{ dag_run.conf.get('seconds', 2) }}",
            "fail_first_of": "",
            "fail_source": "",
            "rows": "",
        },
        deploy_kwargs={"retries": 2, "retry_delay": 1, "launch_grace": 20},
        ready_timeout=600,
        cleanup_delay="{{ dag_run.conf.get('cleanup_delay', 1) }}",
    )
