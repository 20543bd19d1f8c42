"""What Airflow clears when a user reprocesses one source of a zeta_pipeline (the DAG's own
relations, as the REST clear, the UI and ``airflow tasks clear`` compute them), and which of its
tasks decide the run's state."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from airflow.sdk import DAG, TriggerRule

from airflow_provider_zeta import zeta_pipeline

SOURCES = ("alpha", "beta", "gamma")


@pytest.fixture(scope="module")
def serialized():
    from airflow.serialization.serialized_objects import DagSerialization

    with DAG(dag_id="reprocess_wiring", start_date=datetime(2026, 1, 1, tzinfo=UTC), schedule=None) as dag:
        zeta_pipeline("p", sources={name: "/jobs/job.py" for name in SOURCES}, output="/tmp/out")
    return DagSerialization.deserialize_dag(DagSerialization.serialize_dag(dag))


@pytest.mark.parametrize("source", SOURCES)
def test_clearing_a_source_with_the_sensor_and_downstream_clears_the_wait_the_publish_and_the_cleanup(serialized, source):
    # REST clearTaskInstances with both task ids and include_downstream (the UI's "Downstream" on
    # both selected tasks) takes the DAG's partial_subset with include_downstream.
    cleared = set(
        serialized.partial_subset(task_ids={f"p.deploy_{source}", "p.ready_to_close"}, include_downstream=True, include_upstream=False).task_dict
    )
    assert cleared == {f"p.deploy_{source}", "p.ready_to_close", "p.completed_point", "p.cleanup"}


def test_the_deploys_stay_the_runs_last_tasks_so_a_failed_or_marked_failed_run_ends_failed(serialized):
    """Airflow decides a run's state from the task instances ``DagRun._tis_for_dagrun_state`` picks
    (the effective leaves, teardowns aside). The deploys must be among them: were they upstream of
    the sensor, a run marked failed by hand would end success once its teardown ran (its completed
    point, then the only one left, is skipped)."""
    from dataclasses import dataclass

    from airflow.models.dagrun import DagRun

    @dataclass(frozen=True)
    class TI:
        task_id: str
        state: str | None = None

    tis = [TI(task_id) for task_id in serialized.task_dict]
    counted = {ti.task_id for ti in DagRun._tis_for_dagrun_state(DagRun(), dag=serialized, tis=tis)}
    assert counted == {*(f"p.deploy_{name}" for name in SOURCES), "p.completed_point"}, counted


def test_the_sensor_starts_beside_the_sources():
    with DAG(dag_id="reprocess_wiring_rule", start_date=datetime(2026, 1, 1, tzinfo=UTC), schedule=None):
        group = zeta_pipeline("p", sources={name: "/jobs/job.py" for name in SOURCES}, output="/tmp/out")
    ready = group.children["p.ready_to_close"]
    assert ready.upstream_task_ids == set()
    assert group.children["p.completed_point"].upstream_task_ids == {"p.ready_to_close"}
    assert group.children["p.completed_point"].trigger_rule == TriggerRule.ALL_SUCCESS
