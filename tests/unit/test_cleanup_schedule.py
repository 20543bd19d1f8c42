"""What the cleanup DAG's task looks at, and when (``core.cleanup.schedule_carry_out``), and the
waiter entries that make each record one run's to wait for (``core.cleanup`` "one waiter per
record"). What one look costs on a real state root is in ``test_cleanup_cost.py``.
"""

from __future__ import annotations

from airflow_provider_zeta.core.cleanup import (
    parse_waiter_entry,
    parse_waiter_info,
    schedule_carry_out,
    waiter_entry,
    waiter_entry_name,
    waiter_folder_name,
    waiter_gone,
    waiter_info,
)

NOW = 1_800_000_000.0
DAG, OWNER = "sales", "p.cleanup"


def key(i: int, incarnation: int = 0) -> tuple[str, str, str, int]:
    return (DAG, f"run-{i:04d}", OWNER, incarnation)


def test_only_the_due_records_are_looked_at_soonest_first():
    waiting = {key(i): NOW + 3600 + i for i in range(1000)}
    waiting[key(7)] = NOW - 5
    waiting[key(3)] = NOW - 50
    waiting[key(9)] = NOW
    plan = schedule_carry_out(waiting, NOW)
    assert plan.due == (key(3), key(7), key(9))
    assert plan.look_again_at == NOW  # something was due: look again once it is done


def test_with_nothing_due_the_next_look_is_the_soonest_due_time_however_far():
    soon = {key(1): NOW + 30, key(2): NOW + 7200}
    assert schedule_carry_out(soon, NOW).look_again_at == NOW + 30
    # No periodic wake of the task: records nobody waits for are the trigger's to notice.
    late = {key(1): NOW + 3600, key(2): NOW + 7200}
    assert schedule_carry_out(late, NOW) == (schedule_carry_out(late, NOW).__class__((), NOW + 3600))


def test_a_run_waiting_for_nothing_ends():
    plan = schedule_carry_out({}, NOW)
    assert plan.due == () and plan.look_again_at is None


def test_a_record_left_for_later_is_due_at_its_not_before_moment():
    waiting = {key(1): NOW - 10, key(2): NOW + 3600}
    plan = schedule_carry_out(waiting, NOW, not_before={key(1): NOW + 15})
    assert plan.due == () and plan.look_again_at == NOW + 15
    again = schedule_carry_out(waiting, NOW + 15, not_before={key(1): NOW + 15})
    assert again.due == (key(1),)


def test_a_waiter_entry_has_one_name_in_every_folder_and_round_trips():
    assert waiter_entry_name(key(1)) == waiter_entry_name(key(1)) != waiter_entry_name(key(1, 1))
    assert parse_waiter_entry(waiter_entry(key(1), NOW)) == (key(1), NOW)
    assert parse_waiter_entry(None) is None and parse_waiter_entry(b"{") is None
    assert parse_waiter_entry(waiter_entry(key(1), float("nan"))) is None
    assert waiter_folder_name("zeta_cleanup", "a") != waiter_folder_name("zeta_cleanup", "b")
    assert parse_waiter_info(waiter_info("zeta_cleanup", "a")) == ("zeta_cleanup", "a")
    assert parse_waiter_info(b"[]") is None


def test_a_waiter_is_gone_once_its_run_is_neither_queued_nor_running():
    assert not waiter_gone("running") and not waiter_gone("queued")
    assert waiter_gone("success") and waiter_gone("failed") and waiter_gone(None)
