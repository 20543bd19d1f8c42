"""ZetaSparkJobOperator on the counting job; the test drives everything through dag_run.conf.

``conf["crash_at"] = <window>`` kills the task process with SIGKILL at that failure window on the
first try; ``conf["pause_at"] = <window>`` makes the first try sleep there so the test can kill the
worker from outside. Windows are named by ``ZetaSparkJobOperator.failure_window``.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from airflow.sdk import dag

from airflow_provider_zeta import ZetaSparkJobOperator

JOB = str(Path(__file__).resolve().parent.parent / "jobs" / "counting_job.py")


class WindowedZetaSparkJobOperator(ZetaSparkJobOperator):
    def failure_window(self, name, context):
        conf = context["dag_run"].conf or {}
        if context["ti"].try_number != 1:
            return
        if conf.get("crash_at") == name:
            self.log.warning("test: killing the task process at window %s", name)
            os.kill(os.getpid(), signal.SIGKILL)
        if conf.get("pause_at") == name:
            marker = conf.get("pause_marker")
            if marker:
                Path(marker).write_text(str(os.getpid()))
            self.log.warning("test: pausing at window %s", name)
            time.sleep(float(conf.get("pause_seconds", 120)))


def counting_job(**kwargs) -> WindowedZetaSparkJobOperator:
    return WindowedZetaSparkJobOperator(
        task_id="job",
        application=JOB,
        retries=3,
        retry_delay=1,
        job_params={
            "launch_log": "{{ dag_run.conf['launch_log'] }}",
            "seconds": "{{ dag_run.conf.get('seconds', 3) }}",
            "release_file": "{{ dag_run.conf.get('release_file', '') }}",
            "rows": "{{ dag_run.conf.get('rows', 7) }}",
            "spark": "{{ dag_run.conf.get('spark', '') }}",
            "fail": "{{ dag_run.conf.get('fail', '') }}",
        },
        conf={
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            # Read by tests/fake_spark/spark-submit: the JVM start-up window before the claim.
            "spark.zeta.fakeStartupDelay": "{{ dag_run.conf.get('startup_delay', 0) }}",
        },
        launch_grace=20,
        **kwargs,
    )


@dag(dag_id="deploy_counting", schedule=None, catchup=False, tags=["zeta-test"])
def deploy_counting():
    counting_job()


@dag(dag_id="deploy_counting_in_worker", schedule=None, catchup=False, tags=["zeta-test"])
def deploy_counting_in_worker():
    """The same task with ``deferrable=False``: it waits for its driver in its worker."""
    counting_job(deferrable=False)


deploy_counting()
deploy_counting_in_worker()
