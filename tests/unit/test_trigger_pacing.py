"""Triggers notice a finished driver within about a tick, without reading more.

The pacing rule (``core.pacing.Pacer``) on its own; the shared stat batch (``triggers.file_watch``)
with real files; and both triggers run for real (``run()`` in an event loop, real sleeps) against
real ledgers on a local state root, with ``poll_interval`` at 60 s so that only the change can
explain a quick wake: before this change the driver trigger looked at 0, 1, 3, 7, 15 s and the
ready-to-close trigger likewise, so a driver that ended at 3.5 s was noticed at 7 s.
"""

from __future__ import annotations

import asyncio
import os
import time
from unittest import mock

import pytest
from airflow.triggers.base import TaskSuccessEvent

from airflow_provider_zeta.core.ledger import Ledger, LedgerStatus
from airflow_provider_zeta.core.pacing import Pacer
from airflow_provider_zeta.core.paths import LEDGER_FILE, attempt_dir
from airflow_provider_zeta.storage import ABSENT, StateStorage, stat_signature
from airflow_provider_zeta.triggers.file_watch import StatBatch

# ---------------------------------------------------------------- the rule


def _full_looks(pacer: Pacer, signatures, until: float, has_signature: bool = True) -> list[float]:
    """Simulated time: the moments of the full looks, ``signatures(t)`` giving the cheap look."""
    now, looks = 0.0, []
    while now < until:
        signature = signatures(now) if has_signature else None
        if pacer.full_look_due(now, signature):
            looks.append(now)
            pacer.looked(now, signature)
        now = round(now + pacer.sleep_for(now, has_signature) if not has_signature else now + pacer.tick, 6)
    return looks


def test_without_a_signature_the_backoff_alone_paces_the_full_looks():
    pacer = Pacer(tick=0.5, first=1.0, slowest=5.0, after_change=0.5)
    assert _full_looks(pacer, lambda t: None, 20, has_signature=False) == [0, 1, 3, 7, 12, 17]


def test_an_unchanged_signature_reads_no_more_than_the_backoff():
    pacer = Pacer(tick=0.5, first=1.0, slowest=5.0, after_change=5.0)
    assert _full_looks(pacer, lambda t: "same", 20) == [0, 1, 3, 7, 12, 17]


def test_a_changed_signature_is_looked_at_within_a_tick():
    pacer = Pacer(tick=0.5, first=1.0, slowest=60.0, after_change=60.0)
    looks = _full_looks(pacer, lambda t: "running" if t < 9.2 else "ended", 12)
    assert looks == [0, 1, 3, 7, 9.5], looks  # the backoff alone would look next at 15


def test_a_heartbeat_every_5s_costs_one_full_look_per_heartbeat_for_the_driver_trigger():
    pacer = Pacer(tick=0.5, first=1.0, slowest=5.0, after_change=5.0)
    looks = _full_looks(pacer, lambda t: int(t // 5), 60)
    assert len(looks) <= 60 / 5 + 3, looks  # the backoff's first looks, then one per heartbeat


def test_after_a_change_the_ready_trigger_keeps_asking_for_a_while_then_backs_off():
    pacer = Pacer(tick=0.5, first=1.0, slowest=30.0, after_change=0.5, chase_for=10.0)
    looks = _full_looks(pacer, lambda t: "ended" if t >= 20.2 else "running", 45)
    chase = [20.5 + 0.5 * k for k in range(21)]  # every 0.5 s from the change seen until 10 s later
    assert looks == [0, 1, 3, 7, 15, *chase, 31.5, 33.5, 37.5], looks


def test_no_signature_this_time_is_no_change():
    # A cheap look that failed or timed out gives None: neither a change nor a new baseline.
    pacer = Pacer(tick=0.5, first=1.0, slowest=5.0, after_change=5.0)
    looks = _full_looks(pacer, lambda t: None if 2 <= t < 4 else "same", 20)
    assert looks == [0, 1, 3, 7, 12, 17], looks


def test_pacing_intervals_must_be_positive():
    with pytest.raises(ValueError):
        Pacer(tick=0, first=1.0, slowest=5.0, after_change=1.0)


# ---------------------------------------------------------------- the shared stat batch


def test_one_thread_hop_per_tick_answers_every_waiter(tmp_path):
    paths = [str(tmp_path / f"ledger{i}.json") for i in range(200)]
    for path in paths[:100]:
        open(path, "wb").write(b"{}")

    async def main():
        batch = StatBatch(tick=0.05)
        first = await asyncio.gather(*(batch.signature(p) for p in paths))
        os.replace(_written(tmp_path / "new.json", b"{}"), paths[0])  # an atomic rewrite, equal size
        second = await asyncio.gather(*(batch.signature(p) for p in paths))
        return batch.hops, first, second

    hops, first, second = asyncio.run(main())
    assert hops == 2
    assert first[150] == ABSENT and first[1] == second[1] != ABSENT
    assert first[0] != second[0], "an atomic rewrite of equal size changes the signature"


def test_a_cancelled_waiter_does_not_break_the_batch(tmp_path):
    path = str(tmp_path / "ledger.json")
    open(path, "wb").write(b"{}")

    async def main():
        batch = StatBatch(tick=0.05)
        doomed = asyncio.ensure_future(batch.signature(path))
        kept = asyncio.ensure_future(batch.signature(path))
        await asyncio.sleep(0)
        doomed.cancel()
        return await asyncio.wait_for(kept, 5)

    assert asyncio.run(main()) == stat_signature(path)


def test_a_watcher_sleeps_until_its_file_changes_or_its_timeout(tmp_path):
    """``changed``: 100 watchers of unchanged files cost one thread hop per tick and wake no one;
    a rewrite wakes only its own watcher, within a tick or two; a timeout wakes with the same
    signature (the backoff's full look is due)."""
    paths = [str(tmp_path / f"ledger{i}.json") for i in range(100)]
    for path in paths:
        open(path, "wb").write(b"{}")

    async def main():
        batch = StatBatch(tick=0.05)
        known = dict(zip(paths, await asyncio.gather(*(batch.signature(p) for p in paths)), strict=True))
        hops_before = batch.hops
        watchers = {p: asyncio.ensure_future(batch.changed(p, known[p], 60)) for p in paths}
        await asyncio.sleep(0.5)  # about ten ticks
        woken_while_unchanged = [p for p, w in watchers.items() if w.done()]
        hops = batch.hops - hops_before
        os.replace(_written(tmp_path / "new.json", b"{}"), paths[7])
        started = time.monotonic()
        changed = await asyncio.wait_for(watchers[paths[7]], 5)
        noticed = time.monotonic() - started
        still_asleep = sum(1 for p, w in watchers.items() if p != paths[7] and not w.done())
        timed = await asyncio.wait_for(batch.changed(paths[3], known[paths[3]], 0.2), 5)
        for w in watchers.values():
            w.cancel()
        return woken_while_unchanged, hops, changed, noticed, still_asleep, timed, known

    woken, hops, changed, noticed, asleep, timed, known = asyncio.run(main())
    assert woken == [] and 5 <= hops <= 12  # one hop per tick for all 100
    assert changed != known[paths[7]] and noticed < 1.0
    assert asleep == 99
    assert timed == known[paths[3]]


def _written(path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


# ---------------------------------------------------------------- the driver trigger, for real


def _ledger(status: LedgerStatus, beat: int) -> bytes:
    return Ledger(token="tok", status=status, started_at=1.0, heartbeat_at=time.time(), beat=beat).to_json()


def test_the_driver_trigger_notices_a_finished_driver_within_a_second_not_at_its_backoff(tmp_path):
    from airflow_provider_zeta.triggers.driver import ZetaDriverTrigger

    storage = StateStorage.from_url(str(tmp_path))
    storage.write_atomic(f"attempt/{LEDGER_FILE}", _ledger(LedgerStatus.RUNNING, 1))
    trigger = ZetaDriverTrigger(
        state_root=str(tmp_path), attempt_dir="attempt", token="tok", lost_after=600, poll_interval=60,
        missing_deadline=time.time() + 3600,
    )
    looks = []
    real_look = trigger._look

    def counted_look():
        looks.append(time.monotonic())
        return real_look()

    trigger._look = counted_look  # type: ignore[method-assign]

    async def main():
        async def finish_later():
            await asyncio.sleep(3.5)
            storage.write_atomic(f"attempt/{LEDGER_FILE}", _ledger(LedgerStatus.SUCCEEDED, 2))
            return time.monotonic()

        finisher = asyncio.ensure_future(finish_later())
        async for event in trigger.run():
            return event.payload, time.monotonic() - await finisher

    payload, noticed_after = asyncio.run(asyncio.wait_for(main(), 30))
    assert payload["view"] == "succeeded"
    assert noticed_after < 1.5, f"noticed {noticed_after:.1f}s after the driver finished"
    assert len(looks) <= 4, "the unchanged ledger is read only at the backoff's moments (0, 1, 3 s), then once"


# ---------------------------------------------------------------- the ready-to-close trigger, for real

DAG, RUN = "pacing", "scheduled__2026-01-01T00:00:00+00:00"


def test_ended_drivers_lists_terminal_ledgers_of_sources_not_yet_reported(tmp_path):
    from airflow_provider_zeta.observers import RunObserver

    storage = StateStorage.from_url(str(tmp_path))
    for task_id, token, status in [("d_a", "t1", LedgerStatus.FAILED), ("d_a", "t2", LedgerStatus.RUNNING),
                                   ("d_b", "t3", LedgerStatus.SUCCEEDED), ("d_c", "t4", LedgerStatus.SUCCEEDED)]:
        ledger = Ledger(token=token, status=status, started_at=1.0, heartbeat_at=2.0)
        storage.write_atomic(f"{attempt_dir(DAG, RUN, task_id, -1, token)}/{LEDGER_FILE}", ledger.to_json())
    observer = RunObserver(DAG, RUN, {"a": "d_a", "b": "d_b", "c": "d_c", "d": "d_d"}, str(tmp_path),
                           verified={"d_c": {"token": "t4"}})
    assert observer.ended_drivers() == {("d_a", "t1"), ("d_b", "t3")}  # d_c is reported, d_d not launched
    ledger = Ledger(token="t2", status=LedgerStatus.SUCCEEDED, started_at=1.0, heartbeat_at=3.0)
    storage.write_atomic(f"{attempt_dir(DAG, RUN, 'd_a', -1, 't2')}/{LEDGER_FILE}", ledger.to_json())
    assert observer.ended_drivers() == {("d_a", "t1"), ("d_a", "t2"), ("d_b", "t3")}
    # Only t2 was seen turning terminal; t1 and t3 were terminal when first seen.
    assert observer.seen_ending == {("d_a", "t2")}
    with mock.patch.object(RunObserver, "_ledger_terminal", side_effect=AssertionError("read again")):
        assert len(observer.ended_drivers()) == 3, "an unchanged ledger is not read again"


def _succeeded(tmp_path) -> Ledger:
    return Ledger(token="tok", status=LedgerStatus.SUCCEEDED, started_at=1, heartbeat_at=2, output_path=f"file://{tmp_path}/out", rows=5)


def _ready_trigger_until_its_event(tmp_path, task_states, xcom_get_one):
    """Run a ReadyToCloseTrigger over one source, d_a, whose driver's ledger (token "tok") reads
    running and turns ``_succeeded`` at 3.5 s. ``task_states`` and ``xcom_get_one`` answer for
    Airflow's API, given the seconds since the start. Returns (first event, seconds to it)."""
    from airflow_provider_zeta.triggers.ready_to_close import ReadyToCloseTrigger

    storage = StateStorage.from_url(str(tmp_path))
    relative = f"{attempt_dir(DAG, RUN, 'd_a', -1, 'tok')}/{LEDGER_FILE}"
    running = Ledger(token="tok", status=LedgerStatus.RUNNING, started_at=1, heartbeat_at=2)
    done = _succeeded(tmp_path)
    storage.write_atomic(relative, running.to_json())
    start = time.monotonic()
    trigger = ReadyToCloseTrigger(dag_id=DAG, run_id=RUN, sources={"a": "d_a"}, incarnation=0, deadline=4e9,
                                  poll_interval=60, state_root=str(tmp_path))

    async def main():
        async def finish_later():
            await asyncio.sleep(3.5)
            storage.write_atomic(relative, done.to_json())

        finisher = asyncio.ensure_future(finish_later())
        async for event in trigger.run():
            await finisher
            return event, time.monotonic() - start

    def since(answer):
        return lambda **kwargs: answer(time.monotonic() - start, **kwargs)

    with mock.patch("airflow.sdk.execution_time.task_runner.RuntimeTaskInstance.get_task_states", side_effect=since(task_states)), \
         mock.patch("airflow.sdk.execution_time.xcom.XCom.get_one", side_effect=since(xcom_get_one)):
        event, ended_at = asyncio.run(asyncio.wait_for(main(), 30))
    return event, ended_at


def test_the_ready_trigger_asks_soon_after_a_driver_ends_not_at_its_backoff(tmp_path):
    """The last driver ends at 3.5 s, its deploy task reports at 4.0 s: the trigger must end well
    before the backoff's next look (7 s)."""
    calls = []

    def task_states(at, **kwargs):
        calls.append(at)
        return {RUN: {"d_a": "success" if at >= 4.0 else "running"}}

    def report(at, **kwargs):
        return {**_succeeded(tmp_path).result(), "source": "a", "task_id": "d_a", "incarnation": 0}

    event, ended_at = _ready_trigger_until_its_event(tmp_path, task_states, report)
    assert isinstance(event, TaskSuccessEvent) and event.xcoms["return_value"]["sources"]["a"]["token"] == "tok"
    assert ended_at < 6.0, f"ended at {ended_at:.1f}s; API calls at {calls}"
    assert len(calls) <= 8, f"API calls at {calls}"


def test_the_ready_trigger_ends_on_a_report_stored_while_the_deploy_task_is_still_deferred(tmp_path):
    """The deploy trigger stores its report at 3.7 s and ends its task a beat later (the
    task stays 'deferred' here for good). The ready trigger must end on the stored report, with the
    same ready set, without waiting for the task's success; and it reads no XCom of a deferred
    task whose driver has not ended."""
    xcom_reads = []

    def stored_report(at, **kwargs):
        xcom_reads.append(at)
        if kwargs["key"] == "zeta_deploy_deferral":
            return "m1"
        stored = {**_succeeded(tmp_path).result(), "source": "a", "task_id": "d_a", "incarnation": 0, "deferral_mark": "m1"}
        return stored if at >= 3.7 else None

    event, ended_at = _ready_trigger_until_its_event(tmp_path, lambda at, **kwargs: {RUN: {"d_a": "deferred"}}, stored_report)
    assert isinstance(event, TaskSuccessEvent) and event.xcoms["return_value"]["sources"]["a"]["token"] == "tok"
    assert min(xcom_reads) >= 3.5, f"read the XCom of a deferred task whose driver had not ended: {xcom_reads}"
    # Noticed within a watch tick, then asked every chase step until the report is there (without
    # the rule the task never ends here, and the wait runs into the 30 s bound).
    assert ended_at < 10.0, f"ended at {ended_at:.2f}s; XCom reads at {xcom_reads}"


def test_the_ready_trigger_reads_no_report_of_a_deferred_task_whose_ledgers_ended_before_it_looked(tmp_path):
    """A cleared run: deploy d_a re-runs (deferred), its earlier attempt's ledger is terminal from
    before the trigger started. That ledger is no sign of a report: no XCom read of d_a at each look
    (at 1000 sources that would be 1000 reads a look), only the task-state calls."""
    from airflow_provider_zeta.triggers.ready_to_close import ReadyToCloseTrigger

    storage = StateStorage.from_url(str(tmp_path))
    old = Ledger(token="old", status=LedgerStatus.SUCCEEDED, started_at=1, heartbeat_at=2, output_path=f"file://{tmp_path}/o", rows=5)
    storage.write_atomic(f"{attempt_dir(DAG, RUN, 'd_a', -1, 'old')}/{LEDGER_FILE}", old.to_json())
    calls = {"states": 0, "xcom": 0}

    def task_states(**kwargs):
        calls["states"] += 1
        return {RUN: {"d_a": "deferred"}}

    def xcom(**kwargs):
        calls["xcom"] += 1
        return None

    trigger = ReadyToCloseTrigger(dag_id=DAG, run_id=RUN, sources={"a": "d_a"}, incarnation=1, deadline=4e9,
                                  poll_interval=0.5, state_root=str(tmp_path))

    async def main():
        async for event in trigger.run():
            return event

    with mock.patch("airflow.sdk.execution_time.task_runner.RuntimeTaskInstance.get_task_states", side_effect=task_states), \
         mock.patch("airflow.sdk.execution_time.xcom.XCom.get_one", side_effect=xcom):
        with pytest.raises(asyncio.TimeoutError):
            asyncio.run(asyncio.wait_for(main(), 3))
    assert calls["states"] >= 3 and calls["xcom"] == 0, calls


def test_sleep_for_is_a_tick_while_signatures_can_be_taken_else_the_wait_for_the_next_full_look():
    pacer = Pacer(tick=0.5, first=4.0, slowest=10.0, after_change=2.0)
    # Before the first full look, the look is due now: no sleep either way.
    assert pacer.sleep_for(100.0, True) == 0.0 and pacer.sleep_for(100.0, False) == 0.0
    pacer.looked(100.0, "running")  # the next full look at 104
    assert pacer.sleep_for(101.0, True) == 0.5  # a tick, the full look being 3 s away
    assert pacer.sleep_for(101.0, False) == 3.0  # no signature to take: sleep until the full look
    assert pacer.sleep_for(103.75, True) == 0.25  # less than a tick left: only that
    assert pacer.sleep_for(105.0, True) == 0.0 and pacer.sleep_for(105.0, False) == 0.0  # overdue: never negative
