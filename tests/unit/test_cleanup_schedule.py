"""What the cleanup DAG's task looks at, and when (``core.cleanup.schedule_carry_out``), and what one
look of ``CarryOutCleanupsOperator`` costs in storage calls over a real local state root.

The cost test counts calls, it does not time them: one look lists the pending records once and
reads, beyond that listing, only the runs of the records that are due.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from unittest import mock

import pytest

from airflow_provider_zeta import janitor
from airflow_provider_zeta.core.cleanup import Leftovers, RunStatus, new_record, schedule_carry_out
from airflow_provider_zeta.core.paths import attempt_dir, cleanup_records_dir, run_dir
from airflow_provider_zeta.storage import StateStorage, register_run

NOW = 1_800_000_000.0
RESCAN = 600.0
DAG, OWNER = "sales", "p.cleanup"


def key(i: int, incarnation: int = 0) -> tuple[str, str, str, int]:
    return (DAG, f"run-{i:04d}", OWNER, incarnation)


# -- the rule --------------------------------------------------------------------------------------


def test_only_the_due_records_are_looked_at_soonest_first():
    pending = {key(i): NOW + 3600 + i for i in range(1000)}
    pending[key(7)] = NOW - 5
    pending[key(3)] = NOW - 50
    pending[key(9)] = NOW
    plan = schedule_carry_out(pending, set(pending), NOW, RESCAN)
    assert plan.due == (key(3), key(7), key(9))
    assert plan.look_again_at == NOW  # something was due: look again once it is done
    assert len(plan.wanted) == 1000


def test_with_nothing_due_the_next_look_is_the_soonest_due_time_bounded_by_the_rescan_interval():
    soon = {key(1): NOW + 30, key(2): NOW + 7200}
    assert schedule_carry_out(soon, set(soon), NOW, RESCAN).look_again_at == NOW + 30
    late = {key(1): NOW + 3600, key(2): NOW + 7200}
    plan = schedule_carry_out(late, set(late), NOW, RESCAN)
    assert plan.due == () and plan.look_again_at == NOW + RESCAN


def test_the_first_look_takes_every_pending_record_later_looks_only_the_wanted_and_the_past_due():
    pending = {key(1): NOW + 60, key(2): NOW + 120, key(3): NOW - 1}
    first = schedule_carry_out(pending, set(), NOW, RESCAN, first_look=True)
    assert first.wanted == frozenset(pending) and first.due == (key(3),)
    # Not the first look: a record nobody named is taken only once it is past due (no run may be
    # waiting for it); one not due yet is left to the run its event named.
    later = schedule_carry_out(pending, {key(2)}, NOW, RESCAN)
    assert later.wanted == frozenset({key(2), key(3)}) and later.due == (key(3),)


def test_a_wanted_record_no_longer_pending_is_done_and_a_run_with_nothing_wanted_ends():
    plan = schedule_carry_out({key(2): NOW + 3600}, {key(1)}, NOW, RESCAN)
    assert plan.wanted == frozenset() and plan.due == () and plan.look_again_at is None


def test_a_record_left_for_later_is_due_at_its_not_before_moment():
    pending = {key(1): NOW - 10, key(2): NOW + 3600}
    plan = schedule_carry_out(pending, set(pending), NOW, RESCAN, not_before={key(1): NOW + 15})
    assert plan.due == () and plan.look_again_at == NOW + 15
    again = schedule_carry_out(pending, set(pending), NOW + 15, RESCAN, not_before={key(1): NOW + 15})
    assert again.due == (key(1),)


# -- one look of the operator: storage calls ----------------------------------------------------------


class CountingStorage(StateStorage):
    """The provider's storage class, counting listings and reads and naming what was read."""

    calls: Counter = Counter()
    touched: list[str] = []

    def list_dir(self, relative: str) -> list[str]:
        self.calls["list"] += 1
        self.touched.append(relative)
        return super().list_dir(relative)

    def read_bytes(self, relative: str) -> bytes | None:
        self.calls["read"] += 1
        self.touched.append(relative)
        return super().read_bytes(relative)


class Deferred(Exception):
    pass


def build(root: str, records: int, due: int) -> tuple[StateStorage, float]:
    import time

    now = time.time()
    state = StateStorage.from_url(root)
    for i in range(records):
        run_id = f"run-{i:04d}"
        register_run(state, DAG, run_id)
        attempt = attempt_dir(DAG, run_id, "p.deploy_a", -1, f"tok{i:08d}")
        state.write_atomic(f"{attempt}/output/part-0.json", b"[]")
        record = new_record(DAG, run_id, 0, OWNER, now - 3600, 3600, Leftovers((attempt,), {}), tasks=["p.deploy_a"])
        janitor.write_record_file(state, record.with_changes(due_at=now - 60 if i < due else now + 3600))
    return state, now


@contextlib.contextmanager
def patched(root: str):
    from airflow_provider_zeta.operators import cleanup as operator_module

    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(operator_module, "open_state_storage", CountingStorage.from_url))
        stack.enter_context(
            mock.patch.object(operator_module.ZetaSettings, "load", return_value=mock.Mock(state_root=root))
        )
        stack.enter_context(
            mock.patch("airflow_provider_zeta.operators.sweep.run_status", return_value=RunStatus("success", 0))
        )
        yield


def one_look(tmp_path, records: int, due: int):
    """Build the state root, count one listing alone, then one look of the task (until it defers)."""
    from airflow_provider_zeta.operators.cleanup import CarryOutCleanupsOperator

    state, now = build(str(tmp_path), records, due)
    operator = CarryOutCleanupsOperator(task_id="carry_out")
    deferred: dict = {}

    def defer(*, trigger, method_name, kwargs=None, **_):
        deferred.update(moment=trigger.moment.timestamp(), kwargs=kwargs)
        raise Deferred()

    operator.defer = defer
    CountingStorage.calls.clear()
    CountingStorage.touched.clear()
    operator._pending(CountingStorage.from_url(str(tmp_path)))
    listing = Counter(CountingStorage.calls)
    CountingStorage.calls.clear()
    CountingStorage.touched.clear()
    context = {"ti": mock.Mock(), "triggering_asset_events": {}}
    with patched(str(tmp_path)), pytest.raises(Deferred):
        operator.execute(context)
    return state, now, listing, Counter(CountingStorage.calls), list(CountingStorage.touched), deferred


def test_one_look_reads_one_listing_plus_a_bounded_number_per_due_record(tmp_path):
    records, due = 120, 3
    state, now, listing, look, touched, deferred = one_look(tmp_path, records, due)
    # Beyond its one listing, a look reads and lists only for the due records: their run's records
    # before and after carrying one out, its attempts, its output registrations, its bookkeeping.
    per_due = 10
    assert look["read"] <= listing["read"] + per_due * due, (look, listing)
    assert look["list"] <= listing["list"] + per_due * due, (look, listing)
    # A record that is not due costs its place in the listing and nothing else: its run's record
    # folder is listed once, its record read once, its attempts never.
    for i in range(due, records):
        records_dir = cleanup_records_dir(DAG, f"run-{i:04d}")
        assert touched.count(records_dir) == 1, (i, touched.count(records_dir))
        assert not [p for p in touched if p.startswith(f"{run_dir(DAG, f'run-{i:04d}')}/attempts")], i
    # The due records are carried out; the task then waits for the next due time, at most the
    # rescan interval away.
    assert len(pending_keys(state)) == records - due
    assert now + 3600 - 1 > deferred["moment"] >= now + 600 - 5, deferred["moment"] - now


def pending_keys(state: StateStorage):
    from airflow_provider_zeta.operators.cleanup import CarryOutCleanupsOperator

    return CarryOutCleanupsOperator._pending(state)
