"""What Airflow clears when a user reprocesses one source of a zeta_pipeline (the DAG's own
relations, as the REST clear, the UI and ``airflow tasks clear`` compute them)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from airflow.sdk import DAG, TriggerRule

from airflow_provider_zeta import zeta_pipeline

SOURCES = ("alpha", "beta", "gamma")


@pytest.fixture(scope="module")
def serialized():
    from airflow.serialization.serialized_objects import DagSerialization

    with DAG(dag_id="reprocess_wiring", start_date=datetime(2026, 1, 1, tzinfo=timezone.utc), schedule=None) as dag:
        zeta_pipeline("p", sources={name: "/jobs/job.py" for name in SOURCES}, output="/tmp/out")
    return DagSerialization.deserialize_dag(DagSerialization.serialize_dag(dag))


@pytest.mark.parametrize("source", SOURCES)
def test_clearing_a_source_with_downstream_clears_the_sensor_the_completed_point_and_the_cleanup(serialized, source):
    # REST clearTaskInstances with include_downstream (and the UI's "Downstream") for one run, and
    # `airflow tasks clear -d`, all take the DAG's partial_subset with include_downstream.
    cleared = set(serialized.partial_subset(task_ids={f"p.deploy_{source}"}, include_downstream=True, include_upstream=False).task_dict)
    assert cleared == {f"p.deploy_{source}", "p.ready_to_close", "p.completed_point", "p.cleanup"}


def test_the_sensor_still_starts_beside_the_sources():
    # Downstream of the deploys only so that a clear with downstream reaches it: its trigger rule
    # lets it start at once, wait deferred beside them and fail fast when one fails for good.
    with DAG(dag_id="reprocess_wiring_rule", start_date=datetime(2026, 1, 1, tzinfo=timezone.utc), schedule=None):
        group = zeta_pipeline("p", sources={name: "/jobs/job.py" for name in SOURCES}, output="/tmp/out")
    ready = group.children["p.ready_to_close"]
    assert ready.trigger_rule == TriggerRule.ALWAYS
    assert ready.upstream_task_ids == {f"p.deploy_{name}" for name in SOURCES}
    assert group.children["p.completed_point"].upstream_task_ids == {"p.ready_to_close"}
    assert group.children["p.completed_point"].trigger_rule == TriggerRule.ALL_SUCCESS
