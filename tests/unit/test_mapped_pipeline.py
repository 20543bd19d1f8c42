"""``zeta_pipeline(sources=XComArg)``: what it builds, what each map index gets, and what the
ready-to-close sensor expects of a run's mapped source list (no Airflow components)."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from airflow.sdk import DAG, task
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from airflow_provider_zeta import ReadyToCloseSensor, ZetaSparkJobOperator, zeta_pipeline

JOB = "/opt/jobs/job.py"


def _mapped_dag(**kwargs):
    with DAG(dag_id="mapped_unit", schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC)) as dag:

        @task
        def discover() -> list[str]:
            return ["north", "south"]

        zeta_pipeline("p", sources=discover(), output="/tmp/out", **{"application": JOB, **kwargs})
    return dag


def _entry_kwargs(dag, entry):
    """What the mapped deploy task's map index of ``entry`` is expanded with."""
    mapped = dag.get_task("p.deploy").expand_input.value
    (function,) = mapped.callables
    return function(entry)


def test_a_mapped_source_list_builds_one_mapped_deploy_task_waited_for_by_the_sensor():
    dag = _mapped_dag()
    assert sorted(dag.task_ids) == ["discover", "p.cleanup", "p.completed_point", "p.deploy", "p.ready_to_close"]
    deploy = dag.get_task("p.deploy")
    assert type(deploy).__name__ == "MappedOperator" and deploy.operator_class is ZetaSparkJobOperator
    assert deploy.partial_kwargs["require_logical_date"] is True
    sensor = dag.get_task("p.ready_to_close")
    assert sensor.mapped_task_id == "p.deploy" and sensor.sources == {}
    assert sensor.waits_on("p.deploy") and not sensor.waits_on("p.other")
    # The sensor renders the list, so it waits for the discovery task; not for the deploys.
    assert sensor.upstream_task_ids == {"discover"}
    assert dag.get_task("p.cleanup").task_ids == ["p.deploy"]


def test_each_entry_gets_its_source_application_and_options():
    dag = _mapped_dag(
        application_args={"south": ["--region", "s"]},
        spark_options={"south": {"driver_memory": "2g"}},
        deploy_kwargs={"retries": 2, "executor_memory": "1g"},
    )
    assert _entry_kwargs(dag, "north") == {"source": "north", "application": JOB, "application_args": [], "executor_memory": "1g"}
    assert _entry_kwargs(dag, "south") == {
        "source": "south",
        "application": JOB,
        "application_args": ["--region", "s"],
        "executor_memory": "1g",
        "driver_memory": "2g",
    }
    own = {"source": "east", "application": "/other.py", "application_args": ["x"], "executor_memory": "4g"}
    assert _entry_kwargs(dag, own) == {"source": "east", "application": "/other.py", "application_args": ["x"], "executor_memory": "4g"}
    # Options every source has are expanded per map index, never also given to partial().
    deploy = dag.get_task("p.deploy")
    assert "executor_memory" not in deploy.partial_kwargs and deploy.partial_kwargs["retries"] == 2


def test_bad_mapped_pipelines_are_refused_when_parsed():
    with pytest.raises(ValueError, match="'application' is for a mapped 'sources'"):
        with DAG(dag_id="x", schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC)):
            zeta_pipeline("p", sources={"a": JOB}, output="/tmp/out", application=JOB)
    with pytest.raises(ValueError, match=r"deploy_kwargs may not hold \['source'\]"):
        _mapped_dag(deploy_kwargs={"source": "x"})


def _sensor(value):
    sensor = ReadyToCloseSensor(task_id="ready", mapped_task_id="p.deploy", mapped_sources=["placeholder"])
    sensor.mapped_sources = value  # as rendered at the start of a try
    return sensor


def test_the_sensor_expects_exactly_the_rendered_list_one_map_index_each():
    assert _sensor(["north", "south"])._expected() == {"north": "p.deploy[0]", "south": "p.deploy[1]"}


def test_an_empty_list_skips_the_sensor_saying_there_is_nothing_to_publish():
    with pytest.raises(AirflowSkipException, match="no_sources"):
        _sensor([])._expected()


def test_a_bad_list_fails_the_sensor_naming_the_entry():
    with pytest.raises(AirflowFailException, match=r"bad_source_list.*'north' is twice"):
        _sensor(["north", "north"])._expected()


def test_a_sensor_needs_its_list_with_a_mapped_task():
    with pytest.raises(ValueError, match="needs 'mapped_sources'"):
        ReadyToCloseSensor(task_id="ready", mapped_task_id="p.deploy")
    with pytest.raises(ValueError, match="at least one source"):
        ReadyToCloseSensor(task_id="ready", sources={})


def test_a_mapped_deploy_instance_without_a_source_fails_before_it_launches(monkeypatch):
    operator = ZetaSparkJobOperator(task_id="deploy", application=JOB)
    ti = SimpleNamespace(dag_id="d", run_id="r", task_id="deploy", map_index=3)
    monkeypatch.setattr("airflow_provider_zeta.operators.spark_job._executor_of", lambda *_: None)
    monkeypatch.setattr(operator, "_drive", lambda context: pytest.fail("must not drive"))
    with pytest.raises(AirflowFailException, match=r"mapped_without_source.*d\.deploy\[3\]"):
        operator.execute({"ti": ti})
