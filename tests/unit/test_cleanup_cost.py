"""What carrying out one record costs the cleanup DAG's task, and who waits for a record.

Records are written by the pipeline's real cleanup task (``DelayedCleanupOperator``) over a real
local state root; the cleanup DAG's task (``CarryOutCleanupsOperator``) then runs on it, with
Airflow answered in-process (the pipeline runs ended ``success``; the runs of the cleanup DAG are
running unless a test ends one). Storage calls are counted through the provider's ``StateStorage``,
not timed. The oracles are the record files and attempt directories on disk and whether a run of
the cleanup DAG defers (waits) or ends.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections import Counter, defaultdict
from types import SimpleNamespace
from unittest import mock

from airflow_provider_zeta.core.cleanup import CLEANUP_DAG_ID, RunStatus
from airflow_provider_zeta.core.paths import attempt_dir, cleanup_records_dir
from airflow_provider_zeta.operators import cleanup as operator_module
from airflow_provider_zeta.operators.cleanup import CarryOutCleanupsOperator, DelayedCleanupOperator
from airflow_provider_zeta.storage import StateStorage, register_run
from zeta_harness.counting_storage import CountingStorage

DAG, OWNER, DEPLOY = "sales", "p.cleanup", "p.deploy_a"


class Deferred(Exception):
    pass


class World:
    """A state root, the pipeline runs whose cleanup tasks recorded, and the runs of the cleanup DAG."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.state = StateStorage.from_url(root)
        self.settings = mock.Mock(state_root=root, cleanup_retention=600.0)
        self.now = time.time()
        self.ended_waiters: set[str] = set()  # runs of the cleanup DAG marked success by hand
        self.deferred: dict[str, dict] = {}  # cleanup DAG run id -> its last deferral

    # -- the pipeline side: a run whose cleanup task records its staging, due after ``retention`` --

    def pipeline_run(self, run_id: str, retention: float) -> str:
        register_run(self.state, DAG, run_id)
        attempt = attempt_dir(DAG, run_id, DEPLOY, -1, f"tok-{run_id}")
        self.state.write_atomic(f"{attempt}/output/part-0.json", b"[]")
        ledger = {"token": f"tok-{run_id}", "status": "succeeded", "started_at": 1, "heartbeat_at": 2}
        self.state.write_atomic(f"{attempt}/ledger.json", json.dumps(ledger).encode())
        store: dict = {}
        context = {
            "ti": SimpleNamespace(dag_id=DAG, run_id=run_id, get_dag=lambda d: SimpleNamespace(is_paused=False)),
            "dag_run": SimpleNamespace(clear_number=0),
            "task_state_store": SimpleNamespace(get=store.get, set=store.__setitem__),
            "outlet_events": defaultdict(SimpleNamespace),
        }
        task = DelayedCleanupOperator(task_id=OWNER, task_ids=[DEPLOY], output_roots=[], retention=retention)
        with mock.patch.object(operator_module.ZetaSettings, "load", return_value=self.settings):
            task.execute(context)
        return attempt

    def pending(self) -> list[str]:
        return [
            run_id
            for run_id in self.state.list_dir(f"runs/{DAG}")
            if any(n.endswith(".json") for n in self.state.list_dir(cleanup_records_dir(DAG, run_id)))
        ]

    # -- the cleanup DAG side ------------------------------------------------------------------------

    def status(self, ti, dag_id, run_id):
        if dag_id == CLEANUP_DAG_ID:
            return RunStatus("success" if run_id in self.ended_waiters else "running", 0)
        return RunStatus("success", 0)

    def count_live(self, dag_id, run_ids, states):
        """``ti.get_dr_count`` for the runs of the cleanup DAG in ``states``."""
        return sum(1 for r in set(run_ids) if self.status(None, dag_id, r).state in states)

    @contextlib.contextmanager
    def airflow(self, clock: float | None = None):
        moment = [clock]

        def sleep(seconds: float) -> None:
            moment[0] += max(seconds, 0.0)

        fake_time = SimpleNamespace(time=lambda: moment[0], sleep=sleep)
        with contextlib.ExitStack() as stack:
            stack.enter_context(mock.patch.object(operator_module, "open_state_storage", CountingStorage.from_url))
            stack.enter_context(
                mock.patch.object(operator_module.ZetaSettings, "load", return_value=self.settings)
            )
            stack.enter_context(mock.patch("airflow_provider_zeta.operators.sweep.run_status", side_effect=self.status))
            if clock is not None:
                stack.enter_context(mock.patch.object(operator_module, "time", fake_time))
            yield

    def waiter(self, run_id: str, resume: bool = False, clock: float | None = None) -> tuple[bool, Counter]:
        """Run the cleanup DAG's task of run ``run_id`` (its first look, or a resume from its last
        deferral) until it defers (True) or ends (False); with the storage calls it made."""
        operator = CarryOutCleanupsOperator(task_id="carry_out")

        def defer(*, trigger, method_name, kwargs=None, **_):
            moment = trigger.moment  # a datetime for Airflow's DateTimeTrigger, epoch seconds for the provider's
            moment = moment.timestamp() if hasattr(moment, "timestamp") else float(moment)
            self.deferred[run_id] = {"moment": moment, "kwargs": kwargs or {}}
            raise Deferred()

        operator.defer = defer
        ti = SimpleNamespace(dag_id=CLEANUP_DAG_ID, run_id=run_id, get_dr_count=self.count_live)
        context = {"ti": ti, "triggering_asset_events": {}}
        CountingStorage.calls.clear()
        with self.airflow(clock):
            try:
                if resume:
                    operator.resume(context, None, **self.deferred[run_id]["kwargs"])
                else:
                    operator.execute(context)
            except Deferred:
                return True, Counter(CountingStorage.calls)
        return False, Counter(CountingStorage.calls)


def calls(counter: Counter) -> int:
    return sum(counter.values())


# -- cost: carrying out one record does not grow with the records pending elsewhere -----------------


def one_record_carried_out_among(tmp_path, pending: int) -> tuple[int, int]:
    """``pending`` records held by a waiting run of the cleanup DAG; then one more record, due at
    once, carried out by a new run; then the waiting run's wake at its soonest record's due time.
    Returns the storage calls of the new run and of the wake, and how far ahead the waiting run
    had deferred to."""
    world = World(str(tmp_path / f"state-{pending}"))
    for i in range(pending):
        world.pipeline_run(f"run-{i:04d}", retention=3600 + 60 * i)
    assert world.waiter("a")[0], "the first run of the cleanup DAG waits for the pending records"
    staging = world.pipeline_run("due-now", retention=0)
    _, new_run = world.waiter("b")  # whether b then waits is the next tests' subject
    assert not (tmp_path / f"state-{pending}" / staging).exists()
    assert "due-now" not in world.pending() and len(world.pending()) == pending
    # The waiting run wakes at its soonest record's due time: that one is carried out, no other.
    wake_at = world.deferred["a"]["moment"]
    deferred, wake = world.waiter("a", resume=True, clock=world.now + 3600.5)
    assert deferred and len(world.pending()) == pending - 1
    return calls(new_run), calls(wake), wake_at - world.now


def test_carrying_out_one_record_costs_the_same_with_20_or_200_records_pending_elsewhere(tmp_path):
    *small, small_wake_in = one_record_carried_out_among(tmp_path, 20)
    *large, large_wake_in = one_record_carried_out_among(tmp_path, 200)
    # Counted, not timed: the new run's look and the wake each touch the record carried out (its
    # run's records, attempts and bookkeeping), its waiter entry and the waiters' folder, and the
    # same number of calls whatever else is pending.
    print({"20 pending": small, "200 pending": large})
    assert large == small, {"20 pending": small, "200 pending": large}
    assert max(small) <= 40, small
    # And it woke for nothing before that due time (no periodic wake of the task).
    assert 3600 <= small_wake_in <= 3605 and 3600 <= large_wake_in <= 3605, (small_wake_in, large_wake_in)


# -- at most one waiter per record ---------------------------------------------------------------


def test_a_record_has_one_waiter_a_second_run_does_not_wait_for_it(tmp_path):
    world = World(str(tmp_path / "state"))
    staging = world.pipeline_run("run-0001", retention=3600)
    assert world.waiter("a")[0], "run a waits for the record"
    # Run b starts while a waits (another pipeline's event, or the same record announced again by a
    # retry of its cleanup task): the record is a's; b has nothing to wait for and ends.
    deferred, _ = world.waiter("b")
    assert not deferred, "a second run of the cleanup DAG waits for a record that run a waits for"
    assert world.pending() == ["run-0001"] and (tmp_path / "state" / staging).exists()
    # A retry of a (a killed worker) is still its waiter.
    assert world.waiter("a")[0]


def test_a_record_whose_waiter_ended_is_taken_over_by_the_next_run(tmp_path):
    world = World(str(tmp_path / "state"))
    staging = world.pipeline_run("run-0001", retention=3600)
    assert world.waiter("a")[0]
    world.ended_waiters.add("a")  # run a of the cleanup DAG is marked success by hand while it waits
    assert world.waiter("c")[0], "run c waits for the record its waiter left"
    assert not world.waiter("b")[0], "c is the one waiter now"
    # At the due time c carries it out, and it is gone for good.
    deferred, _ = world.waiter("c", resume=True, clock=world.now + 3600 + 5)
    assert not deferred and world.pending() == [] and not (tmp_path / "state" / staging).exists()


# -- the wait: the trigger wakes its run for its due time, or for a record nobody waits for ----------


def test_the_wait_fires_at_its_moment_or_early_for_an_unclaimed_entry_only(tmp_path):
    import asyncio

    from airflow_provider_zeta.triggers import cleanup_wait
    from airflow_provider_zeta.triggers.cleanup_wait import CleanupWaitTrigger

    world = World(str(tmp_path / "state"))
    world.pipeline_run("run-0001", retention=3600)
    assert world.waiter("a")[0]
    trigger = CleanupWaitTrigger(world.deferred["a"]["moment"], world.root, 600.0, created_at=world.now)
    assert CleanupWaitTrigger(**trigger.serialize()[1]).serialize() == trigger.serialize()  # absolute moment

    clock = [world.now]

    async def sleep_until(moment):
        clock[0] = max(clock[0], moment)

    def first_event(t):
        async def run():
            async for event in t.run():
                return event.payload

        with mock.patch.object(cleanup_wait, "sleep_until", sleep_until), mock.patch.object(
            cleanup_wait.time, "time", lambda: clock[0]
        ):
            return asyncio.run(run())

    looks = []
    unclaimed = CleanupWaitTrigger.unclaimed
    with mock.patch.object(CleanupWaitTrigger, "unclaimed", lambda self: looks.append(clock[0]) or unclaimed(self)):
        # Nothing unclaimed: it fires at its moment, having listed the unclaimed entries every 600 s.
        assert first_event(trigger) == {"woke_for": "due"}
        assert clock[0] >= trigger.moment and 5 <= len(looks) <= 6, looks
        # A record nobody waits for appears: the next look wakes the run, which takes it.
        clock[0], looks[:] = world.now, []
        world.pipeline_run("run-0002", retention=7200)
        assert first_event(trigger) == {"woke_for": "unclaimed", "entries": 1}
        assert looks == [world.now + 600]
    world.deferred["a"]["kwargs"]  # the run resumes for it
    operator = CarryOutCleanupsOperator(task_id="carry_out")
    operator.defer = lambda **kw: (_ for _ in ()).throw(Deferred())
    ti = SimpleNamespace(dag_id=CLEANUP_DAG_ID, run_id="a", get_dr_count=world.count_live)
    with world.airflow(), contextlib.suppress(Deferred):
        operator.resume({"ti": ti}, {"woke_for": "unclaimed"}, **world.deferred["a"]["kwargs"])
    assert not world.waiter("b")[0], "run a took the new record: b has nothing to wait for"
