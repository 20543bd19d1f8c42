"""core/events.py and its adapters: an event reaches the task it was meant for, or wakes another
one that then looks for itself (Airflow runs an old trigger under a reused id on SQLite).

Seen in the suite: a run's deploy task woken by another run's driver trigger (view "invisible",
that run's token) and its ready-to-close sensor failed by another run's verdict ("source(s) failed
with no retries left: alpha, beta, gamma"), although all three of its own sources succeeded.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from airflow_provider_zeta.core.events import event_is_for, may_end_task_from_trigger, task_key, trigger_is_stale

OWN = task_key("pipeline", "run_b", "counting.ready_to_close")


@pytest.mark.parametrize(
    "event, expected",
    [
        ({"verdict": "source_failed", "task_key": OWN}, True),
        ({"verdict": "source_failed", "task_key": {**OWN, "run_id": "run_a"}}, False),
        ({"verdict": "source_failed", "task_key": {**OWN, "task_id": "other"}}, False),
        ({"verdict": "source_failed", "task_key": {**OWN, "map_index": 2}}, False),
        ({"verdict": "source_failed", "task_key": {**OWN, "map_index": None}}, True),
        ({"verdict": "source_failed"}, True),  # a trigger deferred by an earlier version
        (None, True),
    ],
    ids=["own", "other-run", "other-task", "other-map-index", "map-index-default", "no-key", "no-event"],
)
def test_an_event_is_acted_on_only_by_the_task_it_names(event, expected):
    assert event_is_for(event, OWN) is expected


@pytest.mark.parametrize(
    "state, latest_mark, own_mark, expected",
    [
        ("deferred", "m1", "m1", True),
        ("deferred", "m2", "m1", False),  # cleared or resumed, deferred again on a newer trigger
        ("deferred", None, "m1", False),  # mark unreadable: no proof
        ("deferred", "m1", None, False),  # a trigger deferred by an earlier version has no mark
        ("failed", "m1", "m1", False),
        ("none", None, "m1", False),
        (None, "m1", "m1", False),
    ],
)
def test_a_trigger_ends_its_task_only_when_it_is_proven_the_one_the_task_waits_on(state, latest_mark, own_mark, expected):
    assert may_end_task_from_trigger(state, latest_mark, own_mark) is expected


@pytest.mark.parametrize(
    "state, latest_mark, own_mark, stale",
    [
        ("deferred", "m1", "m1", False),
        ("deferred", None, "m1", False),
        (None, "m2", None, False),
        ("failed", None, None, True),
        ("running", None, None, True),
        ("none", None, None, True),
        ("deferred", "m2", "m1", True),
    ],
)
def test_a_trigger_is_stale_once_its_task_no_longer_waits_on_it(state, latest_mark, own_mark, stale):
    assert trigger_is_stale(state, latest_mark, own_mark) is stale


def test_events_that_are_not_mappings_or_lack_the_triggers_fields_are_foreign():
    import datetime as dt

    assert not event_is_for(dt.datetime(2026, 1, 1), OWN)  # a DateTimeTrigger's payload
    assert not event_is_for({"verdict": "stale", "rule": "x"}, OWN, required=("token", "view"))
    assert event_is_for({"token": "t", "view": "succeeded"}, OWN, required=("token", "view"))
    assert task_key("d", "r", "t", None)["map_index"] == -1


class Sensor:
    """Builds the real sensor with a stubbed ``_evaluate``: what execute_complete does with an event."""

    @staticmethod
    def make():
        from airflow_provider_zeta.sensors.ready_to_close import ReadyToCloseSensor

        sensor = ReadyToCloseSensor(task_id="counting.ready_to_close", sources={"alpha": "counting.deploy_alpha"})
        sensor._evaluate = lambda context: "evaluated again"
        return sensor


def _context(run_id="run_b"):
    ti = SimpleNamespace(dag_id="pipeline", run_id=run_id, task_id="counting.ready_to_close", map_index=-1)
    return {"ti": ti}


def test_a_sensor_woken_by_another_runs_verdict_evaluates_itself_instead_of_failing():
    foreign = {"verdict": "source_failed", "message": "source(s) failed with no retries left: alpha", "task_key": {**OWN, "run_id": "run_a"}}
    assert Sensor.make().execute_complete(_context(), foreign) == "evaluated again"


def test_a_sensor_still_fails_with_its_own_verdict():
    from airflow.sdk.exceptions import AirflowFailException

    own = {"verdict": "source_failed", "message": "source(s) failed with no retries left: alpha", "task_key": OWN}
    with pytest.raises(AirflowFailException, match="source_failed"):
        Sensor.make().execute_complete(_context(), own)


def test_a_deploy_task_woken_by_another_runs_driver_event_decides_from_its_own_state(monkeypatch):
    from airflow_provider_zeta.operators.spark_job import ZetaSparkJobOperator

    op = ZetaSparkJobOperator(task_id="deploy", application="job.py")
    seen = []
    monkeypatch.setattr(op, "_drive", lambda context, event=None: seen.append(event) or "driven")
    monkeypatch.setattr(op, "_log_rest_of_driver_output", lambda context, event: seen.append("read output"))
    ti = SimpleNamespace(dag_id="pipeline", run_id="run_b", task_id="deploy", map_index=-1)
    foreign = {"token": "t-of-run-a", "view": "invisible", "task_key": task_key("pipeline", "run_a", "deploy")}
    assert op.execute_complete({"ti": ti, "dag_run": SimpleNamespace(clear_number=0)}, foreign) == "driven"
    assert seen == [None]  # neither the foreign token's output nor its event was used
    own = {**foreign, "task_key": task_key("pipeline", "run_b", "deploy")}
    op.execute_complete({"ti": ti, "dag_run": SimpleNamespace(clear_number=0)}, own)
    assert seen[1:] == ["read output", own]


def observe_always(monkeypatch, evaluation) -> None:
    """The ready trigger's RunObserver replaced by one that always sees ``evaluation``."""

    class Observer:
        seen_ending: set = set()

        def __init__(self, *args, **kwargs):
            pass

        def observe(self, incarnation, deadline, ended=None):
            return evaluation

        def ledgers_watchable(self):
            return False

    monkeypatch.setattr("airflow_provider_zeta.observers.RunObserver", Observer)


async def first_ready_event(tmp_path, state, latest_mark, timeout=5.0):
    """The first event of a ready trigger (deferral mark "m1") whose sensor reads ``state`` with
    latest mark ``latest_mark``."""
    from airflow_provider_zeta.triggers import ready_to_close as module

    trigger = module.ReadyToCloseTrigger(
        dag_id="pipeline", run_id="run_a", sources={"alpha": "deploy_alpha"}, incarnation=0, deadline=1e12,
        poll_interval=0.05, state_root=str(tmp_path), task_id="counting.ready_to_close", deferral_mark="m1",
    )

    async def own_wait():
        return state, latest_mark, trigger.deferral_mark

    trigger._own_wait = own_wait

    async def first():
        async for event in trigger.run():
            return event

    return await asyncio.wait_for(first(), timeout)


def test_a_ready_trigger_whose_sensor_no_longer_waits_wakes_instead_of_ending_a_task(monkeypatch, tmp_path):
    """A stale trigger under a reused id must not end another task with its ready set: it only
    wakes whoever holds the id, and names itself in the event."""
    from airflow.triggers.base import TaskSuccessEvent

    from airflow_provider_zeta.core.ready import Verdict

    evaluation = SimpleNamespace(
        verdict=Verdict.ALL_READY, message="all ready", ready_set=lambda incarnation: {"incarnation": incarnation, "sources": {}},
        progress_from=lambda previous: None, ready={},
    )

    observe_always(monkeypatch, evaluation)
    # the sensor's decision record (core.incarnation.SENSOR_DECISION_XCOM), written before it ends
    monkeypatch.setattr("airflow.sdk.execution_time.xcom.XCom.set", lambda **kwargs: None)

    def first_event(state, latest_mark="m1"):
        return asyncio.run(first_ready_event(tmp_path, state, latest_mark))

    assert isinstance(first_event("deferred"), TaskSuccessEvent)
    for state, latest_mark in (("failed", "m1"), ("none", None), (None, "m1"), ("deferred", "m2")):
        event = first_event(state, latest_mark)
        assert not isinstance(event, TaskSuccessEvent)
        assert event.payload["task_key"] == task_key("pipeline", "run_a", "counting.ready_to_close")
        assert event.payload["verdict"] == "all_ready" and event.payload["ready_set"] == {"incarnation": 0, "sources": {}}


def test_a_driver_trigger_whose_task_no_longer_waits_wakes_the_holder_of_its_id(monkeypatch, tmp_path):
    """docs/operators/ready_to_close.md: a trigger run only because its id was reused wakes whoever
    holds the id, with its own key, instead of holding that task until its driver ends."""
    import time as clock

    from airflow_provider_zeta.core.ledger import Ledger, LedgerStatus
    from airflow_provider_zeta.triggers import driver as module

    (tmp_path / "attempt").mkdir()
    ledger = Ledger(token="tok", status=LedgerStatus.RUNNING, started_at=1.0, heartbeat_at=clock.time(), beat=1)
    (tmp_path / "attempt" / "ledger.json").write_bytes(ledger.to_json())
    monkeypatch.setattr(module, "STALE_CHECK_EVERY", 0.0)
    key = task_key("pipeline", "run_a", "deploy")

    async def first_event(state, timeout=3.0):
        trigger = module.ZetaDriverTrigger(
            state_root=str(tmp_path), attempt_dir="attempt", token="tok", lost_after=600, poll_interval=0.05,
            missing_deadline=clock.time() + 3600, task_key=key,
        )

        async def task_state():
            return state

        trigger._task_state = task_state

        async def first():
            async for event in trigger.run():
                return event.payload

        return await asyncio.wait_for(first(), timeout)

    event = asyncio.run(first_event("failed"))
    assert event["view"] == "stale" and event["task_key"] == key
    for state in ("deferred", None):  # its task waits on it, or no proof: keep waiting
        with pytest.raises(asyncio.TimeoutError):
            asyncio.run(first_event(state, timeout=1.0))


def test_a_ready_trigger_whose_sensor_waits_on_a_newer_trigger_wakes_the_holder_of_its_id(monkeypatch, tmp_path):
    from airflow_provider_zeta.core.ready import Verdict
    from airflow_provider_zeta.triggers import ready_to_close as module

    waiting = SimpleNamespace(verdict=Verdict.WAITING, message="0 of 1 ready", progress_from=lambda previous: None)

    observe_always(monkeypatch, waiting)
    monkeypatch.setattr(module, "STALE_CHECK_EVERY", 0.0)

    for state, latest_mark in (("failed", "m1"), ("deferred", "m2")):
        event = asyncio.run(first_ready_event(tmp_path, state, latest_mark, timeout=3.0)).payload
        assert event["verdict"] == "waiting" and event["task_key"] == task_key("pipeline", "run_a", "counting.ready_to_close")
    with pytest.raises(asyncio.TimeoutError):
        asyncio.run(first_ready_event(tmp_path, "deferred", "m1", timeout=1.0))


def test_only_a_ready_to_close_verdict_for_this_sensor_is_acted_on():
    from airflow_provider_zeta.core.ready import sensor_event_is_for

    assert sensor_event_is_for({"verdict": "source_failed", "task_key": OWN}, OWN)
    assert sensor_event_is_for(None, OWN)
    assert not sensor_event_is_for({"verdict": "stale", "rule": "no_checkpoint"}, OWN)  # a freshness trigger's event
    assert not sensor_event_is_for({"verdict": "source_failed", "task_key": {**OWN, "run_id": "run_a"}}, OWN)
