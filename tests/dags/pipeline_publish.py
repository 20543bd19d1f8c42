"""DAGs for the completed point's real-component tests (tests/test_publish_windows.py).

* ``pipeline_counting_twin``: a second DAG writing the *same* table as ``pipeline_counting``
  (``$AIRFLOW_HOME/pipeline-output``) with the same pipeline id and the same Asset: two DAGs, one
  table, one date.
* ``publish_windows``: the counting pipeline (three sources) wired by hand so that its completed
  point is ``WindowedCompletedPoint``: ``conf["crash_at"] = <window>`` kills the completed point's
  task process with SIGKILL the first time it reaches that named window (``conf["crash_marker"]``
  records it); so is its cleanup, ``WindowedDelayedCleanup`` (window ``after_record_file``).
  ``conf["hold_at"] = <window>`` instead holds the completed point there the first time (until its
  task process is killed, e.g. by a clear; ``conf["hold_marker"]`` records it). Output:
  ``$AIRFLOW_HOME/pipeline-output-windows``, Asset ``publish_windows.counting``.
* ``publish_windows_consumer``: scheduled on that Asset; each of its runs is one event consumed
  (one event per new commit, none for a no-op re-execution).
"""

from __future__ import annotations

import os
import signal
import time
from datetime import UTC, datetime
from pathlib import Path

from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, Asset, TaskGroup

from airflow_provider_zeta import zeta_pipeline
from airflow_provider_zeta.operators.cleanup import DelayedCleanupOperator
from airflow_provider_zeta.operators.completed_point import CompletedPointOperator
from airflow_provider_zeta.operators.spark_job import ZetaSparkJobOperator
from airflow_provider_zeta.sensors.ready_to_close import ReadyToCloseSensor

JOB = str(Path(__file__).resolve().parent.parent / "jobs" / "counting_job.py")
HOME = os.environ.get("AIRFLOW_HOME", "/tmp")
SOURCES = ("alpha", "beta", "gamma")
START = datetime(2026, 1, 1, tzinfo=UTC)
JOB_PARAMS = {
    "launch_log": "{{ dag_run.conf['launch_log'] }}",
    "release_dir": "{{ dag_run.conf.get('release_dir', '') }}",
    "seconds": "{{ dag_run.conf.get('seconds', 2) }}",
    "fail_first_of": "",
    "fail_source": "",
    "rows": "",
}

# -- two DAGs, one table ----------------------------------------------------------------------
TABLE = os.path.join(HOME, "pipeline-output")
with DAG(dag_id="pipeline_counting_twin", start_date=START, schedule=None, catchup=False, tags=["zeta-test"]):
    zeta_pipeline(
        "counting",
        sources={name: JOB for name in SOURCES},
        output=TABLE,
        asset=Asset(name="pipeline_counting.counting", uri=f"file://{TABLE}"),  # the same table's Asset
        job_params=JOB_PARAMS,
        deploy_kwargs={"retries": 2, "retry_delay": 1, "launch_grace": 20},
        ready_timeout=600,
        cleanup_delay="{{ dag_run.conf.get('cleanup_delay', 1) }}",
    )


# -- the crash windows of the completed point and the cleanup ---------------------------------
def first_time_at(name, context, window_key, marker_key):
    """Whether this is the first time the task reaches window ``name`` that ``conf[window_key]``
    arms (try numbers count across clears, so ``conf[marker_key]``, a file, records it)."""
    conf = context["dag_run"].conf or {}
    if conf.get(window_key) != name:
        return False
    marker = Path(conf[marker_key])
    if marker.exists():
        return False
    marker.write_text(str(os.getpid()))
    return True


def crash_once_at(operator, name, context):
    if first_time_at(name, context, "crash_at", "crash_marker"):
        operator.log.warning("test: killing the task process at window %s", name)
        os.kill(os.getpid(), signal.SIGKILL)


def hold_once_at(operator, name, context):
    if not first_time_at(name, context, "hold_at", "hold_marker"):
        return
    operator.log.warning("test: holding the task at window %s", name)
    # Long enough for the test to act; a clear kills the task process well before.
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        time.sleep(0.5)


class WindowedCompletedPoint(CompletedPointOperator):
    def failure_window(self, name, context):
        crash_once_at(self, name, context)
        hold_once_at(self, name, context)


class WindowedDelayedCleanup(DelayedCleanupOperator):
    def failure_window(self, name, context):
        crash_once_at(self, name, context)


WINDOWS_OUTPUT = os.path.join(HOME, "pipeline-output-windows")
WINDOWS_ASSET = Asset(name="publish_windows.counting", uri=f"file://{WINDOWS_OUTPUT}")

with DAG(dag_id="publish_windows", start_date=START, schedule=None, catchup=False, max_active_runs=4, tags=["zeta-test"]):
    with TaskGroup(group_id="counting"):
        deploys = [
            ZetaSparkJobOperator(
                task_id=f"deploy_{name}",
                application=JOB,
                source=name,
                job_params=JOB_PARAMS,
                require_logical_date=True,
                retries=2,
                retry_delay=1,
                launch_grace=20,
            )
            for name in SOURCES
        ]
        ready = ReadyToCloseSensor(
            task_id="ready_to_close", sources={name: f"counting.deploy_{name}" for name in SOURCES}, timeout=600
        )
        publish = WindowedCompletedPoint(
            task_id="completed_point",
            output_root=WINDOWS_OUTPUT,
            ready_task_id=ready.task_id,
            asset=WINDOWS_ASSET,
            retry_delay=1,
        )
        ready >> publish
        cleanup = WindowedDelayedCleanup(
            task_id="cleanup",
            retention="{{ dag_run.conf.get('cleanup_delay', 1) }}",
            task_ids=[task.task_id for task in deploys],
            output_roots=[WINDOWS_OUTPUT],
        )
        [*deploys, ready, publish] >> cleanup

with DAG(dag_id="publish_windows_consumer", start_date=START, schedule=[WINDOWS_ASSET], catchup=False, tags=["zeta-test"]):
    EmptyOperator(task_id="consume")
