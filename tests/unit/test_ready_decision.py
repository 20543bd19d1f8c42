"""The ready-to-close sensor's decision record (``core.incarnation.SENSOR_DECISION_XCOM``) is
written before the sensor ends with its ready set, and the sources are looked at once more after it:
a deploy task cleared alone before that look is not counted ready (the sensor waits for its new
attempt), one cleared after it reads the record and refuses to re-run (test_incarnation.py). Both
ways the sensor ends: on its worker (``_evaluate``, ``_trigger_ready_set``) and from its trigger."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from airflow.sdk.exceptions import TaskDeferred
from airflow.triggers.base import TaskSuccessEvent

from airflow_provider_zeta.core.incarnation import SENSOR_DECISION_XCOM, decision_names, sensor_decision
from airflow_provider_zeta.core.ready import Evaluation, Report, Verdict

SOURCES = {"eu": "p.deploy_eu", "us": "p.deploy_us"}


def _report(source: str, token: str) -> Report:
    return Report(source, SOURCES[source], 0, token, f"/attempts/{token}/output", 5)


ALL_READY = Evaluation(Verdict.ALL_READY, {"eu": _report("eu", "tok-eu-1"), "us": _report("us", "tok-us-1")})
EU_CLEARED = Evaluation(Verdict.WAITING, {"us": _report("us", "tok-us-1")}, missing=("eu",))


class _Store(dict):
    def set(self, key, value):
        self[key] = value


def _observer(monkeypatch, module_path: str, looks: list[Evaluation], journal: list):
    """RunObserver replaced by one whose looks are ``looks`` in turn (the last one repeated)."""

    class Observer:
        seen_ending: set = set()

        def __init__(self, *args, **kwargs):
            pass

        def observe(self, incarnation, deadline, ended=None):
            journal.append(("look",))
            return looks.pop(0) if len(looks) > 1 else looks[0]

        def ledgers_watchable(self):
            return False

        def verified_reports(self, limit):
            return {}

    monkeypatch.setattr(module_path, Observer)


def _sensor_context(journal: list):
    ti = SimpleNamespace(dag_id="d", run_id="r", task_id="p.ready_to_close", map_index=-1, max_tries=3, try_number=1)
    ti.xcom_push = lambda key, value: journal.append(("xcom", key, value))
    return {"ti": ti, "dag_run": SimpleNamespace(clear_number=0), "task_state_store": _Store()}


def _decisions(journal: list) -> list[tuple[int, object]]:
    return [(i, entry[2]) for i, entry in enumerate(journal) if entry[0] == "xcom" and entry[1] == SENSOR_DECISION_XCOM]


def _sensor(monkeypatch):
    import airflow_provider_zeta.sensors.ready_to_close as sensor_module

    monkeypatch.setattr(
        sensor_module.ZetaSettings, "load", staticmethod(lambda: SimpleNamespace(state_root="/nowhere", poll_interval=1.0))
    )
    return sensor_module.ReadyToCloseSensor(task_id="p.ready_to_close", sources=SOURCES)


def test_the_sensor_writes_its_decision_before_its_last_look_and_ends_with_it(monkeypatch):
    journal: list = []
    _observer(monkeypatch, "airflow_provider_zeta.sensors.ready_to_close.RunObserver", [ALL_READY, ALL_READY], journal)
    ready_set = _sensor(monkeypatch).execute(_sensor_context(journal))
    assert ready_set["sources"]["eu"]["token"] == "tok-eu-1"
    decisions = _decisions(journal)
    assert len(decisions) == 1 and decision_names(decisions[0][1], "p.deploy_eu", "tok-eu-1"), journal
    looks = [i for i, entry in enumerate(journal) if entry == ("look",)]
    assert len(looks) == 2 and looks[0] < decisions[0][0] < looks[1], journal


def test_a_source_cleared_while_the_sensor_decides_is_waited_for_and_the_decision_taken_back(monkeypatch):
    journal: list = []
    _observer(monkeypatch, "airflow_provider_zeta.sensors.ready_to_close.RunObserver", [ALL_READY, EU_CLEARED], journal)
    with pytest.raises(TaskDeferred):  # waits for eu's new attempt instead of ending with the old one
        _sensor(monkeypatch).execute(_sensor_context(journal))
    (named, first), (_, taken_back), *_ = _decisions(journal)
    assert decision_names(first, "p.deploy_eu", "tok-eu-1")
    assert taken_back == sensor_decision({})
    assert journal.index(("look",), 1) > named
    # it defers with an empty record stored (a deploy task cleared while it waits reads one)
    assert _decisions(journal)[-1][1] == sensor_decision({})


def test_the_sensor_woken_with_all_ready_writes_its_decision_before_it_looks_at_the_sources(monkeypatch):
    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

    journal: list = []
    states = {"p.deploy_eu": "success", "p.deploy_us": "success"}

    def get_task_states(**kwargs):
        journal.append(("look",))
        return {"r": dict(states)}

    monkeypatch.setattr(RuntimeTaskInstance, "get_task_states", staticmethod(get_task_states))
    sensor = _sensor(monkeypatch)
    context = _sensor_context(journal)
    ready_set = ALL_READY.ready_set(0)
    assert sensor._trigger_ready_set(context, {"ready_set": ready_set, "message": "all ready"}) == ready_set
    (named, decision), = _decisions(journal)
    assert decision_names(decision, "p.deploy_eu", "tok-eu-1") and named < journal.index(("look",))
    # eu was cleared before that look: the decision is taken back and the sensor judges again
    journal.clear()
    states["p.deploy_eu"] = None
    monkeypatch.setattr(sensor, "_evaluate", lambda context: "evaluated again")
    assert sensor._trigger_ready_set(context, {"ready_set": ready_set, "message": "all ready"}) == "evaluated again"
    assert [d for _, d in _decisions(journal)][-1] == sensor_decision({})


def _trigger_events(monkeypatch, looks: list[Evaluation], journal: list, timeout: float = 10.0, own_mark="m1", **kw):
    from airflow_provider_zeta.triggers.ready_to_close import ReadyToCloseTrigger

    _observer(monkeypatch, "airflow_provider_zeta.observers.RunObserver", looks, journal)
    monkeypatch.setattr(
        "airflow.sdk.execution_time.xcom.XCom.set", lambda **kwargs: journal.append(("xcom", kwargs["key"], kwargs["value"]))
    )
    trigger = ReadyToCloseTrigger(
        dag_id="d", run_id="r", sources=SOURCES, incarnation=0, deadline=1e12, poll_interval=0.05,
        state_root="/nowhere", task_id="p.ready_to_close", deferral_mark="m1", **kw,
    )

    async def own_wait():
        return "deferred", own_mark, "m1"

    trigger._own_wait = own_wait

    async def first():
        async for event in trigger.run():
            return event

    return asyncio.run(asyncio.wait_for(first(), timeout))


def test_the_trigger_writes_the_decision_before_its_last_look_and_ends_the_sensor_with_it(monkeypatch):
    journal: list = []
    event = _trigger_events(monkeypatch, [ALL_READY, ALL_READY], journal)
    assert isinstance(event, TaskSuccessEvent)
    (named, decision), = _decisions(journal)
    assert decision_names(decision, "p.deploy_eu", "tok-eu-1")
    assert journal[named + 1] == ("look",), journal  # the look after the record, then the event


def test_the_trigger_seeing_a_source_cleared_while_it_decides_takes_the_decision_back_and_waits(monkeypatch):
    journal: list = []
    later = Evaluation(Verdict.ALL_READY, {"eu": _report("eu", "tok-eu-2"), "us": _report("us", "tok-us-1")})
    event = _trigger_events(monkeypatch, [ALL_READY, EU_CLEARED, later, later], journal)
    assert isinstance(event, TaskSuccessEvent)
    assert "tok-eu-2" in str(event.xcoms["return_value"]) and "tok-eu-1" not in str(event.xcoms["return_value"])
    decisions = [d for _, d in _decisions(journal)]
    assert decision_names(decisions[0], "p.deploy_eu", "tok-eu-1") and decisions[1] == sensor_decision({})
    assert decision_names(decisions[-1], "p.deploy_eu", "tok-eu-2")


def test_the_trigger_ends_the_sensor_without_waiting_out_the_minimum_deferral(monkeypatch):
    """The minimum deferral only guards a wake-up (Airflow turns a task resumed before the scheduler
    processed its deferring worker's exit into a spurious retry); the event that ends the sensor
    sets it to success, which that exit cannot contradict."""
    import time

    monkeypatch.setenv("AIRFLOW__ZETA__MIN_DEFERRAL", "30")  # [zeta] min_deferral
    started = time.monotonic()
    event = _trigger_events(monkeypatch, [ALL_READY, ALL_READY], [], not_before=time.time() + 30.0, timeout=40.0)
    assert isinstance(event, TaskSuccessEvent)
    assert time.monotonic() - started < 20.0  # well below the floor (over 8 s was seen with 2 cores loaded)


def test_the_trigger_that_wakes_the_sensor_waits_out_the_minimum_deferral_and_looks_again(monkeypatch):
    """Not proven to be the trigger the sensor waits on: the sensor is woken with the ready set,
    not before ``not_before``, and with the sources as they are after that wait."""
    import time

    monkeypatch.setenv("AIRFLOW__ZETA__MIN_DEFERRAL", "12")  # [zeta] min_deferral
    journal: list = []
    later = Evaluation(Verdict.ALL_READY, {"eu": _report("eu", "tok-eu-2"), "us": _report("us", "tok-us-1")})
    started = time.monotonic()
    event = _trigger_events(monkeypatch, [ALL_READY, later], journal, own_mark="m2", not_before=time.time() + 12.0, timeout=25.0)
    assert not isinstance(event, TaskSuccessEvent)
    assert time.monotonic() - started >= 11.5
    assert "tok-eu-2" in str(event.payload["ready_set"]) and "tok-eu-1" not in str(event.payload["ready_set"])
