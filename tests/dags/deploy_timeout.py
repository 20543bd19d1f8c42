"""ZetaSparkJobOperator with a job_timeout: the counting job runs longer than allowed."""

from __future__ import annotations

from pathlib import Path

from airflow.sdk import dag

from airflow_provider_zeta import ZetaSparkJobOperator

JOB = str(Path(__file__).resolve().parent.parent / "jobs" / "counting_job.py")

#: The job_timeout of the task (seconds); tests/test_job_timeout.py reads it.
JOB_TIMEOUT = 8


@dag(dag_id="deploy_timeout", schedule=None, catchup=False, tags=["zeta-test"])
def deploy_timeout():
    ZetaSparkJobOperator(
        task_id="job",
        application=JOB,
        retries=0,
        job_timeout=JOB_TIMEOUT,
        job_params={
            "launch_log": "{{ dag_run.conf['launch_log'] }}",
            "seconds": "{{ dag_run.conf.get('seconds', 300) }}",
        },
        conf={"spark.ui.enabled": "false"},
        launch_grace=20,
    )


deploy_timeout()
