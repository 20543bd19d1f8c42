"""The delayed cleanup's, ownership guard's and sweep's rules (core/cleanup.py): pure, no I/O."""

from __future__ import annotations

import json

import pytest

from airflow_provider_zeta.core.cleanup import (
    CleanupRecord,
    DriverView,
    DueAction,
    Leftovers,
    RecordStatus,
    RunPhase,
    RunStatus,
    RunView,
    StartAction,
    decide_due,
    decide_start,
    new_record,
    parse_cleanup_record,
    plan_sweep,
    record_from_store,
    record_store_values,
)
from airflow_provider_zeta.core.ledger import CorruptState
from airflow_provider_zeta.core.paths import attempt_dir, run_pending_dir, run_tombstones_dir

DAG, RUN = "sales", "manual__2026-11-01T00:00:00+00:00"
T0 = 1_800_000_000.0
RETENTION = 600.0


def attempt(token: str, task: str = "p.deploy_a") -> str:
    return attempt_dir(DAG, RUN, task, -1, token)


def record(incarnation: int | None = 0, due: float = T0 + RETENTION, **changes) -> CleanupRecord:
    base = CleanupRecord(
        dag_id=DAG,
        run_id=RUN,
        incarnation=incarnation,
        owner="p.cleanup" if incarnation is not None else "sweep",
        created_at=due - RETENTION,
        due_at=due,
        state_paths=(attempt("t1"),),
        outputs={"/data/out": (f"{run_tombstones_dir(DAG, RUN)}/ds=2026-11-01-c0",)},
    )
    return base.with_changes(**changes)


# -- the record -----------------------------------------------------------------------------------


def test_record_round_trips_through_file_bytes_and_state_store_values():
    original = record(adopted=(0,), stopped_drivers=("t9",))
    assert parse_cleanup_record(original.to_json(), "f") == original
    assert parse_cleanup_record(original.to_value(), "store") == original
    assert parse_cleanup_record(None, "f") is None


@pytest.mark.parametrize(
    "raw, fragment",
    [
        (b'{"dag_id": "sales", "run_', "unreadable"),
        (b"[1, 2]", "not an object"),
        (json.dumps({"dag_id": DAG}).encode(), "'run_id'"),
        (json.dumps({**record().to_value(), "due_at": "soon"}).encode(), "due_at"),
        (json.dumps({**record().to_value(), "state_paths": "runs/x"}).encode(), "list of strings"),
    ],
)
def test_corrupt_record_is_a_clear_error_naming_where(raw, fragment):
    with pytest.raises(CorruptState, match="cleanup record /state/x.json") as caught:
        parse_cleanup_record(raw, "/state/x.json")
    assert fragment in str(caught.value) and "Nothing was deleted" in str(caught.value)


@pytest.mark.parametrize(
    "state_paths, outputs",
    [
        (("runs/sales/other-run/attempts/t/-1/x",), {}),  # another run's attempt
        ((attempt("t1") + "/../../../../../../etc",), {}),  # climbs out
        (("/etc/passwd",), {}),
        ((), {"/data/out": ("ds=2026-11-01",)}),  # a published partition
        ((), {"/data/out": (f"{run_tombstones_dir(DAG, 'another')}/ds=x-c",)}),  # another run's tombstone
        ((), {"/data/out": ("_zeta_tombstones",)}),  # the whole tombstone area
    ],
)
def test_record_naming_anything_outside_its_run_is_refused(state_paths, outputs):
    bad = record(state_paths=state_paths, outputs=outputs)
    with pytest.raises(CorruptState, match="Nothing was deleted"):
        parse_cleanup_record(bad.to_json(), "f")


def test_pending_and_tombstone_dirs_of_the_run_are_allowed():
    ok = record(outputs={"s3://b/t": (f"{run_pending_dir(DAG, RUN)}/c1-ab", f"{run_tombstones_dir(DAG, RUN)}/ds=d-c0")})
    assert parse_cleanup_record(ok.to_json(), "f") == ok


# -- starting and resuming the window ----------------------------------------------------------------


def test_no_record_opens_the_window():
    assert decide_start(0, None, None).action is StartAction.NEW


def test_restart_in_the_window_keeps_the_original_due_time():
    stored = record(0, due=T0 + 100)
    decision = decide_start(0, stored, stored)
    assert decision.action is StartAction.RESUME and decision.record.due_at == T0 + 100


def test_crash_between_file_and_store_write_resumes_from_the_file():
    on_file = record(0, due=T0 + 100)
    decision = decide_start(0, None, on_file)
    assert (decision.action, decision.rule, decision.record) == (StartAction.RESUME, "resume_from_file", on_file)


def test_cleaned_record_makes_a_rerun_a_no_op():
    cleaned = record(0, status=RecordStatus.CLEANED, cleaned_at=T0)
    assert decide_start(0, cleaned, None).action is StartAction.ALREADY_CLEANED


def test_record_of_an_older_incarnation_opens_a_new_window_that_adopts_it():
    old = record(0, due=T0 + 100)
    decision = decide_start(1, old, None)
    assert decision.action is StartAction.NEW
    leftovers = Leftovers((attempt("t2"),), {})
    adopted = new_record(DAG, RUN, 1, "p.cleanup", T0 + 50, RETENTION, leftovers, [old])
    assert adopted.adopted == (0,)
    assert set(adopted.state_paths) == {attempt("t1"), attempt("t2")}
    assert adopted.outputs == {"/data/out": old.outputs["/data/out"]}
    assert adopted.due_at == T0 + 50 + RETENTION


def test_a_cleaned_older_record_is_adopted_without_its_paths():
    old = record(0, status=RecordStatus.CLEANED)
    adopted = new_record(DAG, RUN, 1, "p.cleanup", T0, RETENTION, Leftovers(), [old])
    assert adopted.adopted == (0,) and adopted.state_paths == () and adopted.outputs == {}


@pytest.mark.parametrize("stored, on_file", [(CorruptState("bad"), None), (None, CorruptState("bad"))])
def test_corrupt_record_fails_the_start(stored, on_file):
    decision = decide_start(0, stored, on_file)
    assert decision.action is StartAction.FAIL and decision.rule == "corrupt_record"


def test_record_of_a_newer_incarnation_means_a_stale_try():
    decision = decide_start(0, record(2), None)
    assert (decision.action, decision.rule) == (StartAction.FAIL, "future_record")


# -- the due time ------------------------------------------------------------------------------------


def test_due_time_in_the_future_is_waited_for_as_written():
    # The due time is absolute: whoever looks (a restarted triggerer, another run of the cleanup
    # DAG) waits for the same moment.
    decision = decide_due(record(due=T0 + 100), RunStatus("success", 0), [], Leftovers(), T0, recheck_after=15)
    assert (decision.action, decision.rule, decision.until) == (DueAction.WAIT, "not_due", T0 + 100)


def test_due_time_in_the_past_at_restore_means_clean_now():
    # A long outage, or this host's clock ahead of the one that wrote the record.
    for due in (T0 - 5, T0):
        decision = decide_due(record(due=due), RunStatus("success", 0), [], Leftovers(), T0, recheck_after=15)
        assert (decision.action, decision.rule) == (DueAction.CARRY_OUT, "due")


def test_a_lowered_retention_never_shortens_an_adopted_records_window():
    # Incarnation 0 recorded a week; the run was cleared and the retention lowered to 10 minutes
    # meanwhile. The new record adopts the week-long paths: they stay due in a week, not in 10 minutes.
    week = record(0, due=T0 + 7 * 86400).with_changes(created_at=T0)
    adopting = new_record(DAG, RUN, 1, "p.cleanup", T0 + 60, RETENTION, Leftovers((attempt("t2"),), {}), older=[week])
    assert adopting.due_at == T0 + 7 * 86400
    assert set(adopting.state_paths) == {attempt("t1"), attempt("t2")}
    # Without such a record the new retention counts as written.
    fresh = new_record(DAG, RUN, 1, "p.cleanup", T0 + 60, RETENTION, Leftovers((attempt("t2"),), {}))
    assert fresh.due_at == T0 + 60 + RETENTION


def test_leftovers_the_sweep_finds_get_the_runs_own_window_not_the_global_one():
    # The pipeline's cleanup_delay is a week, [zeta] cleanup_retention (what the sweep is given) 10
    # minutes: a stray leftover of that run is kept for the run's week.
    week = record(0, due=T0 + 7 * 86400).with_changes(created_at=T0)
    plan = plan_sweep(view("success", [week], leftovers=Leftovers((attempt("t1"), attempt("late")), {})), T0 + 60, RETENTION)
    assert plan.write.state_paths == (attempt("late"),)
    assert plan.write.due_at == T0 + 60 + 7 * 86400


def test_a_record_of_an_older_incarnation_is_never_the_cleanups_own():
    # The run's clear_number rose (deploy_b, ready_to_close and completed_point
    # cleared without their downstream cleanup). The old rule kept the record as "own" because
    # this task's max_tries was unchanged, and at its due time deleted the attempts of deploy_a and
    # deploy_c, which the newer incarnation was publishing. A record of an older incarnation is
    # adopted into a new window instead, whatever max_tries says.
    waiting = record(0, due=T0 + 100).with_changes(task_max_tries=3)
    assert decide_start(1, waiting, None).action is StartAction.NEW
    assert decide_start(0, waiting, None).action is StartAction.RESUME


def test_a_torn_task_state_store_write_falls_back_to_the_record_file():
    on_file = record(1, due=T0 + 100)
    decision = decide_start(1, CorruptState("digest mismatch"), on_file)
    assert (decision.action, decision.record) == (StartAction.RESUME, on_file)


# -- the sweep ---------------------------------------------------------------------------------------


def driver(token: str, live: bool = True, task_state: str | None = None) -> DriverView:
    return DriverView(token, attempt(token), "p.deploy_a", live, task_state)


def view(run_state, records=(), leftovers=None, drivers=()) -> RunView:
    return RunView(DAG, RUN, run_state, tuple(records), leftovers or Leftovers(), tuple(drivers))


def test_active_run_is_left_to_its_own_cleanup_but_drivers_of_finished_tasks_are_stopped():
    plan = plan_sweep(
        view("running", [record(0, due=T0 - 1)], drivers=[driver("a", task_state="failed"), driver("b", task_state="deferred")]),
        T0,
        RETENTION,
    )
    assert plan.rule == "run_active" and plan.carry_out == () and plan.write is None
    assert [d.token for d in plan.stop] == ["a"]
    assert plan.phase is RunPhase.RUNNING  # a driver is still working


def test_active_run_whose_cleanup_waits_is_listed_as_retained():
    plan = plan_sweep(view("running", [record(0)], drivers=[driver("a", live=False)]), T0, RETENTION)
    assert plan.phase is RunPhase.RETAINED and plan.retained_until == T0 + RETENTION


def test_run_marked_failed_before_its_cleanup_gets_a_sweep_record_and_its_drivers_stopped():
    leftovers = Leftovers((attempt("a"),), {})
    plan = plan_sweep(view("failed", leftovers=leftovers, drivers=[driver("a")]), T0, RETENTION)
    assert plan.rule == "record_leftovers" and plan.phase is RunPhase.UNRECORDED
    assert [d.token for d in plan.stop] == ["a"]
    assert plan.write.incarnation is None and plan.write.state_paths == (attempt("a"),)
    assert plan.write.due_at == T0 + RETENTION and plan.carry_out == () and not plan.forget_run


def test_past_due_record_is_carried_out_and_late_leftovers_get_a_window_of_their_own():
    due = record(0, due=T0 - 1)
    stray = Leftovers((attempt("t1"), attempt("late")), {})
    plan = plan_sweep(view("success", [due], leftovers=stray), T0, RETENTION)
    assert plan.rule == "past_due" and plan.phase is RunPhase.CLEANUP_DUE
    assert plan.carry_out == (due,), "a record is carried out as written, nothing added on sight"
    assert plan.write.state_paths == (attempt("late"),) and plan.write.due_at == T0 + RETENTION
    assert not plan.forget_run


def test_past_due_record_with_nothing_else_left_forgets_the_run():
    plan = plan_sweep(view("success", [record(0, due=T0 - 1)], leftovers=Leftovers((attempt("t1"),), {})), T0, RETENTION)
    assert plan.carry_out and plan.write is None and plan.forget_run


def test_record_not_yet_due_is_kept():
    plan = plan_sweep(view("failed", [record(0, due=T0 + 5)], leftovers=Leftovers((attempt("t1"),), {})), T0, RETENTION)
    assert plan.rule == "retained" and plan.carry_out == () and plan.write is None and not plan.forget_run


def test_new_leftovers_joining_the_sweep_record_get_a_window_of_their_own():
    # The merged record once kept the old due time, so a leftover found 5 s before it
    # was deleted 5 s later. One record has one due time: it moves to now + retention (the older
    # paths are kept longer, never shorter).
    sweep_record = record(None, due=T0 + 5)
    plan = plan_sweep(view("failed", [sweep_record], leftovers=Leftovers((attempt("t1"), attempt("x")), {})), T0, RETENTION)
    assert set(plan.write.state_paths) == {attempt("t1"), attempt("x")}
    assert plan.write.due_at == T0 + RETENTION and plan.write.created_at == T0
    later = decide_due(plan.write, RunStatus("failed", 0), [], Leftovers(), T0 + 1, recheck_after=15)
    assert (later.action, later.until) == (DueAction.WAIT, T0 + RETENTION)


def test_corrupt_record_stops_drivers_but_deletes_nothing():
    plan = plan_sweep(view("failed", [CorruptState("bad"), record(0, due=T0 - 1)], drivers=[driver("a")]), T0, RETENTION)
    assert plan.rule == "corrupt_record" and plan.carry_out == () and plan.write is None and not plan.forget_run
    assert [d.token for d in plan.stop] == ["a"]


def test_deleted_run_is_swept_like_an_ended_one():
    plan = plan_sweep(view(None, [record(0, due=T0 - 1)]), T0, RETENTION)
    assert plan.reason.startswith("run_gone") and plan.carry_out


def test_ended_run_with_nothing_left_forgets_its_bookkeeping():
    plan = plan_sweep(view("success", [record(0, status=RecordStatus.CLEANED)]), T0, RETENTION)
    assert plan.rule == "nothing_left" and plan.forget_run and plan.phase is RunPhase.CLEANED


# -- the record in a task state store ----------------------------------------------------------------


def test_a_thousand_source_record_fits_the_task_state_store_in_chunks():
    big = record(0, state_paths=tuple(attempt(f"{i:032d}", f"pipeline.deploy_source_{i:04d}") for i in range(1000)))
    values = record_store_values(big)
    assert all(len(json.dumps(v)) < 65_535 for _, v in values) and len(values) > 2
    assert values[-1][0] == "zeta_cleanup", "the header is written last"
    stored = dict(values)
    assert record_from_store(stored["zeta_cleanup"], stored.get, "store") == big
    assert record_from_store(None, stored.get, "store") is None


def test_chunks_of_another_record_are_detected():
    first, second = dict(record_store_values(record(0))), dict(record_store_values(record(0, state_paths=(attempt("zz"),))))
    with pytest.raises(CorruptState, match="digest"):
        record_from_store(first["zeta_cleanup"], second.get, "store")
    with pytest.raises(CorruptState, match="missing"):
        record_from_store(first["zeta_cleanup"], lambda key: None, "store")


def test_every_stored_value_is_bounded_at_a_thousand_sources_and_many_stopped_drivers():
    """The header once held every stopped driver's token and passed 64 KiB for a wide
    run, after which every retry of the cleanup failed. Every value must stay under the limit."""
    tokens = [f"{i:032x}" for i in range(5000)]
    wide = record(
        0,
        state_paths=tuple(attempt(t, f"pipeline.deploy_source_{i % 1000:04d}") for i, t in enumerate(tokens[:1000])),
        stopped_drivers=tuple(tokens),
        adopted=tuple(range(50)),
    )
    values = record_store_values(wide)
    assert max(len(json.dumps(v)) for _, v in values) < 65_535
    header = dict(values)["zeta_cleanup"]
    assert len(json.dumps(header)) < 4096, "the header must not grow with the run"
    stored = dict(values)
    assert record_from_store(stored["zeta_cleanup"], stored.get, "store") == wide


# -- the due time reached: the ownership guard ----------------------------------------------------


def due_record(incarnation, **changes):
    return record(incarnation, due=T0 - 1, **changes)


def test_a_record_not_yet_due_is_waited_for_at_its_absolute_due_time():
    decision = decide_due(record(0, due=T0 + 30), RunStatus("success", 0), [], Leftovers(), T0, 15)
    assert (decision.action, decision.until) == (DueAction.WAIT, T0 + 30)


@pytest.mark.parametrize("run", [RunStatus("success", 0), RunStatus("failed", 0), None])
def test_a_due_record_of_the_current_incarnation_or_a_deleted_run_is_carried_out(run):
    assert decide_due(due_record(0), run, [], Leftovers(), T0, 15).action is DueAction.CARRY_OUT


@pytest.mark.parametrize("state", ["running", "queued"])
def test_a_due_record_waits_while_its_run_runs_again_in_the_same_incarnation(state):
    # A REST clear with reset_dag_runs=false re-runs tasks without raising clear_number: the
    # record's incarnation still looks current, but the re-running tasks may read its attempts.
    decision = decide_due(due_record(0), RunStatus(state, 0), [], Leftovers(), T0, 15)
    assert (decision.action, decision.rule, decision.until) == (DueAction.RECHECK, "run_active", T0 + 15)


def test_a_due_record_waits_while_a_newer_incarnation_is_active():
    decision = decide_due(due_record(0), RunStatus("running", 1), [], Leftovers(), T0, 15)
    assert (decision.action, decision.until) == (DueAction.RECHECK, T0 + 15)


def test_a_due_record_adopted_by_a_newer_incarnations_cleanup_is_dropped_not_carried_out():
    adopter = record(1, due=T0 + RETENTION, adopted=(0,))
    decision = decide_due(due_record(0), RunStatus("success", 1), [adopter], Leftovers(), T0, 15)
    assert decision.action is DueAction.DROP


def test_partial_clear_without_downstream_renews_the_old_paths_and_records_the_new_incarnations():
    """Deploy_b, ready_to_close and completed_point cleared without the cleanup: incarnation 1
    published from deploy_a's and deploy_c's incarnation-0 attempts and deploy_b's new one, and
    tombstoned incarnation 0's partition. Nothing is deleted at the old due time; every path (old
    and new) is recorded with a full window from now."""
    old = due_record(0, state_paths=(attempt("a0"), attempt("b0", "p.deploy_b"), attempt("c0", "p.deploy_c")), outputs={})
    new_leftovers = Leftovers(
        (attempt("b1", "p.deploy_b"),), {"/data/out": (f"{run_tombstones_dir(DAG, RUN)}/ds=2026-11-01-c0",)}
    )
    decision = decide_due(old, RunStatus("success", 1), [old], new_leftovers, T0, 15)
    assert decision.action is DueAction.RENEW
    renewed = decision.record
    assert renewed.incarnation == 1 and renewed.owner == old.owner and renewed.adopted == (0,)
    assert set(renewed.state_paths) == set(old.state_paths) | {attempt("b1", "p.deploy_b")}
    assert renewed.outputs == new_leftovers.outputs
    assert renewed.due_at == T0 + RETENTION and decision.until == renewed.due_at
    # ... and that new record is carried out at its own due time, the run being at incarnation 1.
    later = decide_due(renewed, RunStatus("success", 1), [renewed], Leftovers(), renewed.due_at, 15)
    assert later.action is DueAction.CARRY_OUT


def test_renewing_one_record_keeps_the_paths_of_every_other_older_record():
    zero, one = due_record(0, state_paths=(attempt("a0"),)), due_record(1, state_paths=(attempt("a1"),))
    earlier_renewal = record(2, due=T0 + 5, state_paths=(attempt("a2"),), adopted=(0,))
    decision = decide_due(one, RunStatus("success", 2), [zero, one, earlier_renewal], Leftovers(), T0, 15)
    assert decision.action is DueAction.RENEW
    assert set(decision.record.state_paths) == {attempt("a0"), attempt("a1"), attempt("a2")}
    assert decision.record.adopted == (0, 1) and decision.record.due_at == T0 + RETENTION


def test_the_sweep_applies_the_ownership_guard_to_past_due_records():
    old = due_record(0)
    plan = plan_sweep(
        RunView(DAG, RUN, "success", (old,), Leftovers((attempt("t1"), attempt("b1")), {}), (), clear_number=1), T0, RETENTION
    )
    assert plan.carry_out == () and plan.write is None
    assert len(plan.renew) == 1 and set(plan.renew[0].state_paths) == {attempt("t1"), attempt("b1")}
    assert old in plan.drop and plan.phase is RunPhase.RETAINED and not plan.forget_run
