"""Liveness across observers whose clocks disagree (liveness is judged "by the observer's own clock").

A driver is lost when no heartbeat *change* has been seen for ``lost_after`` by the observer's own
clock. The observers are the deploy task's tries (worker hosts) and its trigger (the triggerer
host). These tests run the real adapters "on" hosts whose clocks are set apart by injecting every
clock they read (wall clock and observer clock); nothing sleeps.

Reproduced defect: the adapters handed one another the *moment* they first saw the heartbeat mark
and subtracted it from their own clock — a 10-minute skew between two Airflow hosts turned into 10
minutes of silence (a live driver judged lost and stopped), or hid a real silence.
"""

from __future__ import annotations

import json
import time
from types import SimpleNamespace

import pytest

from airflow_provider_zeta.core.deploy import Action, Timing, decide
from airflow_provider_zeta.core.ledger import Ledger, LedgerStatus, LedgerView, Phase, attempt_record_key
from airflow_provider_zeta.core.paths import CANCEL_MARKER, LEDGER_FILE, attempt_dir
from airflow_provider_zeta.operators import spark_job
from airflow_provider_zeta.operators.spark_job import HEARTBEAT_SEEN_KEY, ZetaSparkJobOperator
from airflow_provider_zeta.triggers import driver as trigger_module
from airflow_provider_zeta.triggers.driver import ZetaDriverTrigger

TIMING = Timing(lost_after=60, launch_grace=20)
TEN_MINUTES = 600.0


class World:
    """True time, advanced by the test; each host reads it through its own skewed clocks."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def enter(self, monkeypatch, module, host: str, skew: float) -> None:
        """Run ``module``'s adapter code on ``host``, whose clocks read true time + ``skew``."""
        wall = SimpleNamespace(time=lambda: self.now + skew, monotonic=lambda: self.now + skew, sleep=time.sleep)
        monkeypatch.setattr(module, "time", wall)
        # A host's monotonic clock has an arbitrary origin; only the host itself may subtract it.
        monkeypatch.setattr(module, "observer_clock", lambda: (f"{host}-clock", self.now + skew + 77.0), raising=False)


class Store(dict):
    def set(self, key, value):
        self[key] = json.loads(json.dumps(value))


def _context(store, try_number=1):
    ti = SimpleNamespace(
        dag_id="d", run_id="r", task_id="job", map_index=-1, try_number=try_number, max_tries=3, executor=None,
        xcom_push=lambda key, value: None,
    )
    return {"ti": ti, "dag_run": SimpleNamespace(clear_number=0, conf={}), "task_state_store": store, "logical_date": None, "ds": None}


@pytest.fixture
def state_root(tmp_path, monkeypatch):
    root = tmp_path / "state"
    monkeypatch.setenv("AIRFLOW__ZETA__STATE_ROOT", str(root))
    return root


def _running_driver(root, world: World, beat: int = 1) -> Ledger:
    # The driver's own clock plays no part: its heartbeat timestamp is only part of the mark.
    ledger = Ledger(token="tok", status=LedgerStatus.RUNNING, started_at=1.0, heartbeat_at=12345.0 + beat, beat=beat)
    attempt = root / attempt_dir("d", "r", "job", -1, "tok")
    attempt.mkdir(parents=True, exist_ok=True)
    (attempt / LEDGER_FILE).write_bytes(ledger.to_json())
    return ledger


def _store_with_launch(world: World) -> Store:
    from airflow_provider_zeta.core.ledger import AttemptRecord

    store = Store()
    record = AttemptRecord(token="tok", incarnation=0, try_number=1, phase=Phase.LAUNCHED, intent_at=world.now - 30, launch_try=1)
    store.set(attempt_record_key(1), record.to_value())
    return store


def _observe(operator, store, state_root, try_number, event=None):
    storage = spark_job.open_state_storage(str(state_root))
    return operator._observe(_context(store, try_number), storage, TIMING, event)


# -- reproductions: a skew between Airflow hosts must not count as silence -------------------------


@pytest.mark.parametrize("skew", [TEN_MINUTES, -TEN_MINUTES])
def test_a_retry_on_a_worker_with_a_skewed_clock_does_not_judge_a_live_driver_lost(state_root, monkeypatch, skew):
    world = World()
    _running_driver(state_root, world)
    store = _store_with_launch(world)
    operator = ZetaSparkJobOperator(task_id="job", application="/x.py")

    world.enter(monkeypatch, spark_job, "worker-a", 0.0)
    _observe(operator, store, state_root, try_number=1)  # try 1 sees the mark, then its worker dies
    assert HEARTBEAT_SEEN_KEY in store

    world.advance(5)  # 5 s later try 2 runs on worker B, whose clock is 10 min off; same mark
    world.enter(monkeypatch, spark_job, "worker-b", skew)
    observation = _observe(operator, store, state_root, try_number=2)
    # Old code: B's clock minus A's first-seen moment = 605 s of "silence" -> driver_failed (the
    # live driver is stopped) when B runs ahead.
    assert observation.heartbeat_unchanged_for < TIMING.lost_after
    assert decide(observation).action is Action.REATTACH
    assert not (state_root / attempt_dir("d", "r", "job", -1, "tok") / CANCEL_MARKER).exists()


def _trigger_from(store, state_root, world, monkeypatch, operator) -> ZetaDriverTrigger:
    """The trigger the task defers on, as the triggerer re-creates it from its kwargs."""
    from airflow.sdk.exceptions import TaskDeferred

    with pytest.raises(TaskDeferred) as deferred:
        operator.execute(_context(store, try_number=1))
    path, kwargs = deferred.value.trigger.serialize()
    return ZetaDriverTrigger(**kwargs)


def test_a_trigger_on_a_host_ten_minutes_ahead_keeps_waiting_on_a_live_driver(state_root, monkeypatch):
    world = World()
    _running_driver(state_root, world)
    store = _store_with_launch(world)
    operator = ZetaSparkJobOperator(task_id="job", application="/x.py", deferrable=True)
    world.enter(monkeypatch, spark_job, "worker-a", 0.0)
    trigger = _trigger_from(store, state_root, world, monkeypatch, operator)

    world.advance(2)
    world.enter(monkeypatch, trigger_module, "triggerer", TEN_MINUTES)
    view, _, fire, silent = trigger._look()
    # Old code: the triggerer's clock minus the task's first-seen moment = 602 s -> "lost" at once.
    assert (view, fire) == (LedgerView.RUNNING, False) and silent < TIMING.lost_after


def test_a_trigger_on_a_host_ten_minutes_behind_still_finds_a_dead_driver_lost(state_root, monkeypatch):
    world = World()
    _running_driver(state_root, world)
    store = _store_with_launch(world)
    operator = ZetaSparkJobOperator(task_id="job", application="/x.py", deferrable=True)
    world.enter(monkeypatch, spark_job, "worker-a", 0.0)
    trigger = _trigger_from(store, state_root, world, monkeypatch, operator)

    world.enter(monkeypatch, trigger_module, "triggerer", -TEN_MINUTES)
    assert trigger._look()[0] is LedgerView.RUNNING
    world.advance(TIMING.lost_after + 1)  # the driver died: its mark never changes again
    view, _, fire, silent = trigger._look()
    assert (view, fire) == (LedgerView.LOST, True) and silent >= TIMING.lost_after


def test_the_task_believes_its_triggers_measured_silence_whatever_the_skew(state_root, monkeypatch):
    # The trigger (clock 10 min ahead of the worker's) saw the mark unchanged for 61 s by its own
    # clock and fired "lost"; the task, woken on its worker, must not read that as 0 s (old code:
    # the trigger's first-seen moment lay in the worker's future, so it was pulled to "now").
    world = World()
    _running_driver(state_root, world)
    store = _store_with_launch(world)
    operator = ZetaSparkJobOperator(task_id="job", application="/x.py", deferrable=True)
    world.enter(monkeypatch, spark_job, "worker-a", 0.0)
    trigger = _trigger_from(store, state_root, world, monkeypatch, operator)
    world.enter(monkeypatch, trigger_module, "triggerer", TEN_MINUTES)
    _running_driver(state_root, world, beat=2)  # the heartbeat changes once more, then stops
    world.advance(1)
    trigger._look()
    world.advance(TIMING.lost_after + 1)
    view, detail, fire, _ = trigger._look()
    assert view is LedgerView.LOST and fire
    event = trigger._event(view, detail)

    world.advance(3)  # the task resumes on worker B, clock 10 min behind the triggerer's
    world.enter(monkeypatch, spark_job, "worker-b", 0.0)
    observation = _observe(operator, store, state_root, try_number=1, event=event)
    assert observation.heartbeat_unchanged_for >= TIMING.lost_after
    assert decide(observation).action is Action.REPORT_FAILURE


# -- the rule itself (core.ledger, pure: clocks are inputs) ---------------------------------------

from airflow_provider_zeta.core.ledger import HeartbeatSeen, continue_observation, observe_heartbeat  # noqa: E402

MARK = "7/123.5"


def _watch(clock: str, readings, mark=MARK, seen=None, reported=None):
    """An observer on ``clock`` reading the same mark at each of ``readings``; its last observation."""
    for reading in readings:
        seen = continue_observation(seen, reported, "tok", mark, clock, reading)
        reported = None
    return seen


@pytest.mark.parametrize("skew", [TEN_MINUTES, -TEN_MINUTES, 1e6, -1e6])
def test_a_hand_over_between_skewed_hosts_carries_exactly_the_measured_duration(skew):
    # Worker A watched the mark for 20 s (its clock); the trigger's host reads A's clock + skew.
    on_a = _watch("a", [1000.0, 1020.0])
    assert on_a.silent_for == 20.0
    at_trigger = _watch("t", [1000.0 + 25 + skew, 1000.0 + 45 + skew], seen=on_a)
    # 20 s carried (the 5 s between hand-over and take-over are not counted) + 20 s on its clock.
    assert at_trigger.silent_for == 40.0
    # Back on worker A (its own clock again), its stored observation counts on from 1020 on its
    # clock (50 s at 1050) and the trigger's report is a 40 s duration: the longer one carries on.
    assert continue_observation(on_a, at_trigger, "tok", MARK, "a", 1050.0).silent_for == 50.0
    # On worker B (a third clock, any reading) A's stored value and the report are durations only.
    for reading in (-1e9, 0.0, 1e9):
        assert continue_observation(on_a, at_trigger, "tok", MARK, "b", reading).silent_for == 40.0


@pytest.mark.parametrize("skew", [TEN_MINUTES, -TEN_MINUTES])
def test_a_skewed_report_neither_shortens_nor_lengthens_a_silence(skew):
    # A report taken on another clock, with an 'at' far from this clock's readings either way,
    # contributes its duration only.
    reported = HeartbeatSeen("tok", MARK, 61.0, at=1000.0 + skew, clock="triggerer")
    seen = continue_observation(None, reported, "tok", MARK, "worker", 1000.0)
    assert seen.silent_for == 61.0 and seen.clock == "worker" and seen.at == 1000.0


def test_a_heartbeat_change_resets_the_silence_whatever_was_carried():
    long_silent = HeartbeatSeen("tok", MARK, 500.0, at=10.0, clock="worker")
    fresh = continue_observation(long_silent, long_silent, "tok", "8/130.0", "worker", 20.0)
    assert fresh.silent_for == 0.0 and fresh.mark == "8/130.0"
    assert observe_heartbeat(fresh, "tok", "8/130.0", "worker", 29.0).silent_for == 9.0


def test_an_observer_with_nothing_carried_over_starts_afresh_and_never_judges_lost_sooner():
    lost_after = 60.0
    readings = [5000.0 + step for step in range(0, 70, 2)]
    silences = [seen.silent_for for seen in _iterate("restarted", readings)]
    first_lost = next(reading for reading, silent in zip(readings, silences, strict=True) if silent > lost_after)
    assert silences[0] == 0.0 and first_lost - readings[0] > lost_after


def _iterate(clock, readings):
    seen = None
    for reading in readings:
        seen = observe_heartbeat(seen, "tok", MARK, clock, reading)
        yield seen


@pytest.mark.parametrize(
    "value",
    [
        None,
        "garbage",
        {"token": "tok", "mark": MARK, "since": 1000.0},  # the older shape: a wall-clock moment
        {"token": "tok", "mark": MARK, "silent_for": "NaN", "at": 1.0, "clock": "a"},
        {"token": "tok", "mark": MARK, "silent_for": float("inf"), "at": 1.0, "clock": "a"},
        {"token": "tok", "mark": MARK, "silent_for": -5.0, "at": 1.0, "clock": "a"},
        {"token": "tok", "mark": MARK, "silent_for": 5.0, "at": 1.0, "clock": "a" * 10_000},
        {"token": ["tok"], "mark": MARK, "silent_for": 5.0, "at": 1.0, "clock": "a"},
    ],
)
def test_an_old_or_malformed_stored_value_starts_a_fresh_observation(value):
    assert HeartbeatSeen.from_value(value) is None
    assert continue_observation(HeartbeatSeen.from_value(value), None, "tok", MARK, "a", 2000.0).silent_for == 0.0


def test_the_stored_value_stays_small_and_fixed_in_shape():
    seen = _watch("a", [float(n) for n in range(1000)])
    assert set(seen.to_value()) == {"token", "mark", "silent_for", "at", "clock"}
    assert len(json.dumps(seen.to_value())) < 200


def test_an_operator_restarted_on_an_old_stored_value_starts_afresh(state_root, monkeypatch):
    world = World()
    _running_driver(state_root, world)
    store = _store_with_launch(world)
    store.set(HEARTBEAT_SEEN_KEY, {"token": "tok", "mark": "1/12346.0", "since": 0.0})  # older shape
    world.enter(monkeypatch, spark_job, "worker-a", 0.0)
    observation = _observe(ZetaSparkJobOperator(task_id="job", application="/x.py"), store, state_root, 2)
    assert observation.heartbeat_unchanged_for == 0.0
    assert HeartbeatSeen.from_value(store[HEARTBEAT_SEEN_KEY]).clock == "worker-a-clock"


def test_the_observer_clock_names_a_clock_that_only_moves_forward():
    from airflow_provider_zeta.processes import observer_clock

    (clock, first), (again, second) = observer_clock(), observer_clock()
    assert clock == again and second >= first and len(clock) < 200
