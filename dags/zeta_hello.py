"""A minimal example DAG: a task, a deferrable wait on the triggerer, a task.

It exists so that ``make demo`` exercises the scheduler, the triggerer and the workers until the
multi-source PySpark pipeline lands.
"""

from __future__ import annotations

from airflow.providers.standard.sensors.time_delta import TimeDeltaSensor
from airflow.sdk import dag, task
from datetime import timedelta


@dag(dag_id="zeta_hello", schedule=None, catchup=False, tags=["zeta", "example"])
def zeta_hello():
    @task
    def say_hello(**context):
        return f"hello from {context['run_id']}"

    wait = TimeDeltaSensor(task_id="wait_on_triggerer", delta=timedelta(seconds=5), deferrable=True)

    @task
    def say_done(greeting: str):
        return f"{greeting}: done"

    greeting = say_hello()
    greeting >> wait >> say_done(greeting)


zeta_hello()
