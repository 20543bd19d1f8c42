"""ZetaDriverTrigger without a triggerer: liveness by observation, storage errors, hosts, on_kill.

Each test reproduces an issue-13 defect of the trigger (a transient storage error failed the
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
    real_signature = StatBatch.signature

    async def signature(self, path):
        result = await real_signature(self, path)
        answered[0] += 1
        if answered[0] == 5:
            waiting["task"].cancel()  # the triggerer's cancel, in the very pass the answer arrives
        return result

    monkeypatch.setattr(StatBatch, "signature", signature)

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
