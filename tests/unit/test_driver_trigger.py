"""ZetaDriverTrigger without a triggerer: liveness by observation, storage errors, hosts, on_kill.

Each test reproduces a defect the trigger once had (a transient storage error failed the
trigger — and so the task — without stopping the driver; the driver's clock was compared with the
triggerer's; an unshared state root read as "missing"; a deleted run kept its driver).
"""

from __future__ import annotations

import asyncio
import time

import pytest

from airflow_provider_zeta.core.ledger import ATTEMPT_DELETED_MARK, Ledger, LedgerStatus
from airflow_provider_zeta.triggers import driver as trigger_module
from airflow_provider_zeta.triggers.driver import ZetaDriverTrigger


def _trigger(tmp_path, **kw) -> ZetaDriverTrigger:
    defaults = dict(
        state_root=str(tmp_path),
        attempt_dir="attempt",
        token="tok",
        lost_after=60,
        poll_interval=0.05,
        missing_deadline=time.time() + 3600,
    )
    defaults.update(kw)
    return ZetaDriverTrigger(**defaults)


def _write_ledger(tmp_path, status=LedgerStatus.RUNNING, heartbeat_at=None, beat=1) -> Ledger:
    ledger = Ledger(token="tok", status=status, started_at=1.0, heartbeat_at=heartbeat_at or time.time(), beat=beat)
    (tmp_path / "attempt").mkdir(exist_ok=True)
    (tmp_path / "attempt" / "ledger.json").write_bytes(ledger.to_json())
    return ledger


async def _first(trigger, timeout=5.0):
    async def first():
        async for event in trigger.run():
            return event.payload

    return await asyncio.wait_for(first(), timeout)


def test_a_transient_storage_error_is_retried_not_raised(tmp_path, monkeypatch):
    _write_ledger(tmp_path, LedgerStatus.SUCCEEDED)
    real = trigger_module.open_state_storage
    failures = [2]

    class Flaky:
        def __init__(self, storage):
            self.storage = storage

        def child(self, relative):
            child = self.storage.child(relative)
            if failures[0] > 0:
                failures[0] -= 1

                class Broken:
                    def __getattr__(self, name):
                        def fail(*args, **kwargs):
                            raise OSError("NFS server not responding")

                        return fail

                return Broken()
            return child

    monkeypatch.setattr(trigger_module, "open_state_storage", lambda root: Flaky(real(root)))
    monkeypatch.setattr(trigger_module.asyncio, "sleep", _fast_sleep)
    event = asyncio.run(_first(_trigger(tmp_path)))
    assert event["view"] == "succeeded"


_real_sleep = asyncio.sleep


async def _fast_sleep(delay, *args):
    await _real_sleep(0.01)


def test_a_driver_with_a_clock_far_behind_but_a_changing_heartbeat_keeps_the_trigger_waiting(tmp_path, monkeypatch):
    monkeypatch.setattr(trigger_module.asyncio, "sleep", _fast_sleep)
    _write_ledger(tmp_path, heartbeat_at=time.time() - 3600)  # the driver host's clock is an hour behind
    with pytest.raises(asyncio.TimeoutError):
        asyncio.run(_first(_trigger(tmp_path), timeout=1.0))


def _handed_over(ledger, silent_for):
    # What a task on another host hands over: a duration, and a moment on *its* clock.
    return {"token": "tok", "mark": ledger.heartbeat_mark, "silent_for": silent_for, "at": 1e12, "clock": "worker-x"}


def test_a_restarted_trigger_continues_the_persisted_observation(tmp_path):
    ledger = _write_ledger(tmp_path)
    event = asyncio.run(_first(_trigger(tmp_path, seen=_handed_over(ledger, 61))))
    assert event["view"] == "lost" and event["seen"]["silent_for"] >= 61


def test_kwargs_of_an_older_version_start_the_observation_afresh(tmp_path, monkeypatch):
    # The older shape carried the task host's first-seen *moment*: never subtracted here.
    monkeypatch.setattr(trigger_module.asyncio, "sleep", _fast_sleep)
    ledger = _write_ledger(tmp_path)
    old = {"token": "tok", "mark": ledger.heartbeat_mark, "since": time.time() - 3600}
    with pytest.raises(asyncio.TimeoutError):
        asyncio.run(_first(_trigger(tmp_path, seen=old), timeout=1.0))


def test_waiting_for_stop_a_lost_driver_wakes_only_past_the_margin(tmp_path, monkeypatch):
    monkeypatch.setattr(trigger_module.asyncio, "sleep", _fast_sleep)
    ledger = _write_ledger(tmp_path)
    lost_not_stopped = _handed_over(ledger, 65)
    with pytest.raises(asyncio.TimeoutError):
        asyncio.run(_first(_trigger(tmp_path, seen=lost_not_stopped, wait_for_stop=True), timeout=1.0))
    stopped = _handed_over(ledger, 76)
    assert asyncio.run(_first(_trigger(tmp_path, seen=stopped, wait_for_stop=True)))["view"] == "lost"


def test_an_invisible_launch_wakes_the_task_at_once(tmp_path):
    event = asyncio.run(_first(_trigger(tmp_path, intent_expected=True)))
    assert event["view"] == "invisible" and "intent.json" in event["detail"]


def test_the_kwargs_round_trip_keeps_the_observation(tmp_path):
    seen = {"token": "tok", "mark": "1/2.0", "silent_for": 3.0, "at": 123.0, "clock": "worker-x"}
    path, kwargs = _trigger(tmp_path, seen=seen, wait_for_stop=True, intent_expected=True).serialize()
    again = ZetaDriverTrigger(**kwargs)
    assert (again.seen, again.wait_for_stop, again.intent_expected) == (seen, True, True)
    assert ZetaDriverTrigger(**_trigger(tmp_path, attempt_deleted=True).serialize()[1]).attempt_deleted is True


def _deleted_for(seconds: float) -> dict:
    # What a task on another host hands over when it found the attempt deleted (its clock's moment).
    mark = f"{ATTEMPT_DELETED_MARK} incarnation 1"
    return {"token": "tok", "mark": mark, "silent_for": seconds, "at": 1e12, "clock": "worker-x"}


def test_a_deleted_attempt_is_waited_on_writing_nothing_until_the_triggers_own_count_reaches_the_wait(tmp_path):
    # core.deploy's earlier_incarnation_cleanup_wait: the attempt of an earlier incarnation was
    # deleted by its run's cleanup. The task handed over 10 s of its count; the wait is 1.25 x
    # lost_after = 12.5 s. The trigger counts on, on its own clock (not the hand-over gap), and
    # wakes the task once its count reaches 12.5 s — not at the far fallback deadline — handing the
    # count back. It never re-creates the directory: not while it waits, nor when killed (on_kill).
    trigger = _trigger(
        tmp_path, lost_after=10, seen=_deleted_for(10.0), attempt_deleted=True, missing_deadline=time.time() + 3600
    )
    started = time.monotonic()
    event = asyncio.run(_first(trigger, timeout=15.0))
    assert event["view"] == "missing" and time.monotonic() - started >= 2.4
    assert event["seen"]["mark"] == _deleted_for(0)["mark"] and event["seen"]["silent_for"] >= 12.5
    assert event["seen"]["clock"] != "worker-x"  # re-based on the triggerer's own clock
    trigger.cancel_driver()
    assert not (tmp_path / "attempt").exists()


def test_a_deleted_attempt_that_gets_files_again_wakes_the_task_at_once(tmp_path, monkeypatch):
    # A driver claimed the deleted attempt after all (it re-created it): the task decides anew
    # (it then fences that driver and waits until it has stopped), not at the deadline.
    monkeypatch.setattr(trigger_module.asyncio, "sleep", _fast_sleep)
    _write_ledger(tmp_path)
    event = asyncio.run(_first(_trigger(tmp_path, seen=_deleted_for(3.0), attempt_deleted=True)))
    assert event["view"] == "running"


def test_on_kill_stops_the_driver_when_its_task_instance_no_longer_exists(tmp_path, monkeypatch):
    from airflow.sdk.execution_time import task_runner

    monkeypatch.setattr(task_runner.RuntimeTaskInstance, "get_task_states", staticmethod(lambda **kw: {}), raising=False)
    cancelled = []
    trigger = _trigger(tmp_path, task_key={"dag_id": "d", "run_id": "r", "task_id": "job", "map_index": -1})
    monkeypatch.setattr(trigger, "cancel_driver", lambda: cancelled.append(True))
    asyncio.run(trigger.on_kill())
    assert cancelled == [True]


def test_a_cancel_that_arrives_with_a_stat_answer_stops_the_trigger(tmp_path, monkeypatch):
    # The triggerer cancels a trigger it removes or hands to another triggerer. On Python 3.11 an
    # asyncio.wait_for around the ledger's stat returned the stat instead of raising when the
    # cancel arrived in the loop pass that answered it (CPython gh-86296): the trigger ran on, here
    # until it judged the driver lost (this file's tests that expect a timeout failed so, now and
    # then, after a minute). The cancel is delivered exactly then.
    from airflow_provider_zeta.triggers.file_watch import StatBatch

    monkeypatch.setattr(trigger_module.asyncio, "sleep", _fast_sleep)
    _write_ledger(tmp_path)
    trigger = _trigger(tmp_path, lost_after=3)
    answered, waiting = [0], {}
    real_changed = StatBatch.changed

    async def changed(self, path, known, timeout):
        result = await real_changed(self, path, known, timeout)
        answered[0] += 1
        if answered[0] == 2:
            waiting["task"].cancel()  # the triggerer's cancel, in the very pass the answer arrives
        return result

    monkeypatch.setattr(StatBatch, "changed", changed)

    async def first():
        async for event in trigger.run():
            return event.payload

    async def main():
        waiting["task"] = asyncio.ensure_future(first())
        started = time.monotonic()
        with pytest.raises(asyncio.CancelledError):
            await waiting["task"]
        return time.monotonic() - started

    assert asyncio.run(main()) < 2.0


def _succeeded(tmp_path, incarnation=0) -> Ledger:
    ledger = Ledger(
        token="tok", status=LedgerStatus.SUCCEEDED, started_at=1.0, heartbeat_at=time.time(), beat=3,
        ended_at=time.time(), output_path="/out", rows=7, incarnation=incarnation,
    )
    (tmp_path / "attempt").mkdir(exist_ok=True)
    (tmp_path / "attempt" / "ledger.json").write_bytes(ledger.to_json())
    return ledger


def _ending_trigger(tmp_path, monkeypatch, state="deferred", latest_mark="m1", **kw):
    """A trigger that may end its task, with the task's state and deferral mark as given and the
    XComs it stores recorded."""
    key = {"dag_id": "pipeline", "run_id": "run_a", "task_id": "p.deploy_alpha", "map_index": -1}
    kw = {"deferral_mark": "m1", "report": {"source": "alpha", "task_id": "p.deploy_alpha", "incarnation": 0}, **kw}
    trigger = _trigger(tmp_path, task_key=key, **kw)
    stored: list[tuple] = []

    async def task_state():
        return state

    trigger._task_state = task_state
    monkeypatch.setattr(trigger, "_latest_mark", lambda: latest_mark)

    class XCom:
        @staticmethod
        def set(key, value, **where):
            stored.append((key, value, where))

    import airflow.sdk.execution_time.xcom as xcom_module

    monkeypatch.setattr(xcom_module, "XCom", XCom)
    return trigger, stored


async def _first_event(trigger, timeout=5.0):
    async def first():
        async for event in trigger.run():
            return event

    return await asyncio.wait_for(first(), timeout)


def test_a_succeeded_driver_ends_its_task_from_the_triggerer_with_its_report(tmp_path, monkeypatch):
    """No worker resumes for a succeeded driver. The report (the task's return value, naming the
    deferral it was proven under) goes with the event that ends the task: Airflow stores it with
    the end of the task, and only while the task still waits on this trigger, so a trigger that
    froze after its proof cannot store it over a newer try's. The trigger itself stores only an
    early copy under a key of its own, which a ready-to-close wait may count a beat sooner."""
    from airflow.triggers.base import TaskSuccessEvent

    _succeeded(tmp_path)
    trigger, stored = _ending_trigger(tmp_path, monkeypatch)
    event = asyncio.run(_first_event(trigger))
    report = {"token": "tok", "output_path": "/out", "rows": 7, "spark_app_id": None, "metrics": {},
              "source": "alpha", "task_id": "p.deploy_alpha", "incarnation": 0, "deferral_mark": "m1"}
    assert isinstance(event, TaskSuccessEvent) and event.xcoms == {"return_value": report}
    where = {"dag_id": "pipeline", "task_id": "p.deploy_alpha", "run_id": "run_a", "map_index": -1}
    assert stored == [("zeta_deploy_report_while_deferred", report, where)]


@pytest.mark.parametrize(
    "state, latest_mark, ledger_incarnation, kw",
    [
        ("failed", "m1", 0, {}),  # the task no longer waits: maybe a stale trigger under a reused id
        ("deferred", "m2", 0, {}),  # the task deferred again since: a newer trigger is its own
        ("deferred", None, 0, {}),  # the mark cannot be read: no proof
        ("deferred", "m1", 1, {}),  # another incarnation's driver
        ("deferred", "m1", 0, {"wait_for_stop": True}),  # a fenced token: the task decides
        ("deferred", "m1", 0, {"deferral_mark": None}),  # deferred by an earlier version, or not deferrable
    ],
)
def test_a_trigger_not_proven_its_tasks_current_one_wakes_the_task_instead(tmp_path, monkeypatch, state, latest_mark, ledger_incarnation, kw):
    from airflow.triggers.base import TaskSuccessEvent

    _succeeded(tmp_path, incarnation=ledger_incarnation)
    trigger, stored = _ending_trigger(tmp_path, monkeypatch, state=state, latest_mark=latest_mark, **kw)
    event = asyncio.run(_first_event(trigger))
    assert not isinstance(event, TaskSuccessEvent) and event.payload["view"] == "succeeded"
    assert stored == []


def test_a_driver_whose_output_is_not_all_logged_wakes_the_task_to_log_the_rest(tmp_path, monkeypatch):
    from airflow.triggers.base import TaskSuccessEvent

    from airflow_provider_zeta.triggers import driver_output

    _succeeded(tmp_path)
    # More than the trigger's final drain reads (16 slices of 64 KiB).
    line = b"x" * 1023 + b"\n"
    (tmp_path / "attempt" / "driver.log").write_bytes(line * (17 * driver_output.MAX_BYTES_PER_POLL // len(line)))
    trigger, stored = _ending_trigger(tmp_path, monkeypatch, driver_output={"offset": 0, "conn_ids": []})
    monkeypatch.setattr(driver_output.DriverOutput, "register_secrets", lambda self, log: asyncio.sleep(0))
    event = asyncio.run(_first_event(trigger, timeout=30))
    assert not isinstance(event, TaskSuccessEvent) and event.payload["driver_output_offset"] > 0
    assert stored == []


def test_an_error_while_ending_the_task_wakes_it_instead_of_failing_the_trigger(tmp_path, monkeypatch):
    """A storage or API error on the way must not fail the trigger (and so the task): the task
    is woken and takes the result in its worker."""
    from airflow.triggers.base import TaskSuccessEvent

    _succeeded(tmp_path)
    trigger, stored = _ending_trigger(tmp_path, monkeypatch)

    async def refused():
        raise RuntimeError("the API server answered 500")

    trigger._task_state = refused
    event = asyncio.run(_first_event(trigger))
    assert not isinstance(event, TaskSuccessEvent) and event.payload["view"] == "succeeded"


@pytest.mark.parametrize(
    "document",
    [
        b'{"token": "tok", "status": "running", "started_at": 1, "heartbeat_at": "pw=Zq9x7Wv3Kp2Rt8Yb"}',
        b'{"token": "tok", "status": "pw=Zq9x7Wv3Kp2Rt8Yb"}',
        b"pw=Zq9x7Wv3Kp2Rt8Yb is not JSON",
    ],
)
def test_an_unreadable_ledger_wakes_the_task_with_no_job_written_text_in_the_event(tmp_path, document):
    """The event is stored in the metadata database (the task's next_kwargs): it names the problem,
    never a fragment of what the job wrote into its ledger."""
    (tmp_path / "attempt").mkdir()
    (tmp_path / "attempt" / "ledger.json").write_bytes(document)
    event = asyncio.run(_first(_trigger(tmp_path)))
    assert event["view"] == "lost" and "unreadable ledger" in event["detail"]
    text = repr(event)
    secret = "Zq9x7Wv3Kp2Rt8Yb"
    assert not any(secret[i : i + 6] in text for i in range(len(secret) - 5)), text  # no 6-character fragment


@pytest.mark.parametrize("worker_ahead_s", [420.0, -420.0])
def test_a_deferring_worker_whose_clock_is_minutes_off_never_holds_the_event_longer_than_the_minimum_deferral(
    tmp_path, monkeypatch, worker_ahead_s
):
    """``not_before`` is a moment on the deferring worker's wall clock; the triggerer may run on a
    host whose clock differs by minutes. The trigger waits by the rule of
    ``core.pacing.min_deferral_wait`` (tested on its own in ``test_pacing_min_deferral.py``): with
    a worker ahead, never longer than the minimum deferral on the triggerer's own clock."""
    monkeypatch.setenv("AIRFLOW__ZETA__MIN_DEFERRAL", "0.3")  # [zeta] min_deferral
    _write_ledger(tmp_path, status=LedgerStatus.SUCCEEDED)
    trigger = _trigger(tmp_path, not_before=time.time() + worker_ahead_s)
    started = time.monotonic()
    payload = asyncio.run(_first(trigger, timeout=5.0))
    assert payload["view"] == "succeeded"
    assert time.monotonic() - started < 3.0


def test_a_proven_trigger_ends_its_task_without_waiting_out_the_minimum_deferral(tmp_path, monkeypatch):
    """The minimum deferral only guards a wake-up: Airflow turns a task resumed before the
    scheduler processed its deferring worker's exit into a spurious retry. An event that ends the
    task sets it to success, which that exit cannot contradict, so it goes at once."""
    from airflow.triggers.base import TaskSuccessEvent

    monkeypatch.setenv("AIRFLOW__ZETA__MIN_DEFERRAL", "30")  # [zeta] min_deferral
    _succeeded(tmp_path)
    trigger, _ = _ending_trigger(tmp_path, monkeypatch, not_before=time.time() + 30.0)
    started = time.monotonic()
    event = asyncio.run(_first_event(trigger, timeout=40.0))
    assert isinstance(event, TaskSuccessEvent)
    assert time.monotonic() - started < 20.0  # well below the floor (over 8 s was seen with 2 cores loaded)


def test_a_trigger_that_wakes_its_task_waits_out_the_minimum_deferral(tmp_path, monkeypatch):
    """The same succeeded driver, but the trigger is not proven to be its task's current one: the
    task is woken, and not before ``not_before``."""
    from airflow.triggers.base import TaskSuccessEvent

    monkeypatch.setenv("AIRFLOW__ZETA__MIN_DEFERRAL", "12")  # [zeta] min_deferral
    _succeeded(tmp_path)
    trigger, _ = _ending_trigger(tmp_path, monkeypatch, latest_mark="m2", not_before=time.time() + 12.0)
    started = time.monotonic()
    event = asyncio.run(_first_event(trigger, timeout=25.0))
    assert not isinstance(event, TaskSuccessEvent)
    assert time.monotonic() - started >= 11.5
