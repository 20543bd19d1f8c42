"""A trivial deferrable DAG for the harness self-tests.

``start`` -> ``wait`` (deferred on the triggerer until ``conf["release_at"]``, an absolute time) ->
``finish``. The tests kill the scheduler and the triggerer while ``wait`` is deferred.
"""

from __future__ import annotations

from airflow.providers.standard.sensors.date_time import DateTimeSensorAsync
from airflow.sdk import dag, task


@dag(dag_id="harness_selftest", schedule=None, catchup=False, tags=["zeta-test"])
def harness_selftest():
    @task
    def start(**context):
        return {"run_id": context["run_id"]}

    wait = DateTimeSensorAsync(
        task_id="wait",
        target_time="{{ dag_run.conf.get('release_at') or dag_run.run_after.isoformat() }}",
    )

    @task
    def finish(started: dict, **context):
        return {"started": started["run_id"], "finished": context["run_id"]}

    started = start()
    started >> wait >> finish(started)


harness_selftest()
