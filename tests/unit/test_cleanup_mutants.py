"""Rules of core/cleanup.py that the other cleanup tests left open (each kills mutants that survived
them, docs/mutation-survivors.md): every decision of ``decide_start`` and ``decide_due`` whole, a
record in a task state store and each refusal to rebuild one, which pipeline's cleanup takes an
output entry, the waiter entry's and folder's names and bytes on storage, the order a cleanup run
looks at its due records, why no cleanup DAG will carry a record out, and the overdue summary with
its hint word for word. Pure, no I/O."""

from __future__ import annotations

import hashlib

import pytest

from airflow_provider_zeta.core.cleanup import (
    CleanupRecord,
    DueAction,
    DueDecision,
    Leftovers,
    Overdue,
    RecordSeen,
    RecordStatus,
    RunStatus,
    StartAction,
    StartDecision,
    cleanup_dag_problem,
    decide_due,
    decide_start,
    overdue_cleanups,
    overdue_summary,
    owned_output_entry,
    record_from_store,
    record_store_values,
    schedule_carry_out,
    waiter_entry,
    waiter_entry_name,
    waiter_folder_name,
)
from airflow_provider_zeta.core.ledger import CorruptState

NOW = 1_800_000_000.0
HOUR = 3600.0


def pending(dag: str = "d", run: str = "r", due: float = NOW - HOUR, incarnation: int | None = 0) -> CleanupRecord:
    owner = "p.cleanup" if incarnation is not None else "sweep"
    return CleanupRecord(dag, run, incarnation, owner, due - 600, due)


# -- how a cleanup task starts: every decision whole --------------------------------------------------

ATTEMPT = "runs/d/r/attempts/p.deploy_a/-1/t1"
TOMBSTONE = "_zeta_tombstones/d/r/ds=2026-11-01-c0"


def own(incarnation: int | None = 1, status: RecordStatus = RecordStatus.PENDING, nonce: str | None = "n1") -> CleanupRecord:
    return CleanupRecord(
        "d", "r", incarnation, "p.cleanup", NOW, NOW + 600.4, (ATTEMPT,), {"/data/out": (TOMBSTONE,)}, status, run_nonce=nonce
    )


BAD_STORE, BAD_FILE = CorruptState("store unreadable"), CorruptState("file unreadable")


@pytest.mark.parametrize(
    "stored, on_file, nonce, decision",
    [
        (BAD_STORE, None, None, StartDecision(StartAction.FAIL, "corrupt_record", "store unreadable")),
        (BAD_STORE, own(0), None, StartDecision(StartAction.FAIL, "corrupt_record", "store unreadable")),
        (None, BAD_FILE, None, StartDecision(StartAction.FAIL, "corrupt_record", "file unreadable")),
        (
            own(2),
            None,
            None,
            StartDecision(
                StartAction.FAIL,
                "future_record",
                "the task state store holds the record of incarnation 2, newer than this try's 1: this try is stale. "
                "Nothing was deleted.",
            ),
        ),
        (
            own(1, RecordStatus.CLEANED),
            own(1),
            None,
            StartDecision(
                StartAction.ALREADY_CLEANED,
                "already_cleaned",
                "this incarnation's cleanup already ran",
                own(1, RecordStatus.CLEANED),
            ),
        ),
        (own(1), None, None, StartDecision(StartAction.RESUME, "resume_window", "keeps the due time 1800000600", own(1))),
        (
            None,
            own(1),
            "n2",
            StartDecision(
                StartAction.NEW,
                "foreign_record_file",
                "the record file of incarnation 1 was written by another run of this id (deleted and created again): "
                "a new record of this run adopts its 2 paths",
            ),
        ),
        (
            None,
            own(1, RecordStatus.CLEANED),
            "n1",
            StartDecision(
                StartAction.ALREADY_CLEANED,
                "already_cleaned",
                "the record file says this cleanup ran",
                own(1, RecordStatus.CLEANED),
            ),
        ),
        (
            BAD_STORE,
            own(1),
            None,
            StartDecision(StartAction.RESUME, "resume_from_file", "keeps the due time 1800000600 of the record file", own(1)),
        ),
        (own(0), own(0), None, StartDecision(StartAction.NEW, "open_window", "no record of this incarnation yet")),
        (own(None), None, None, StartDecision(StartAction.NEW, "open_window", "no record of this incarnation yet")),
        (None, None, "n1", StartDecision(StartAction.NEW, "open_window", "no record of this incarnation yet")),
    ],
    ids=[
        "corrupt-store",
        "corrupt-store-file-of-another-incarnation",
        "corrupt-file",
        "future-record",
        "cleaned-in-store",
        "resume-from-store",
        "file-of-another-run",
        "cleaned-on-file",
        "torn-store-resumes-from-file",
        "older-incarnation",
        "sweep-record-in-store",
        "nothing-yet",
    ],
)
def test_a_cleanup_task_starts_with_exactly_the_action_rule_reason_and_record_of_the_first_rule_that_applies(
    stored, on_file, nonce, decision
):
    assert decide_start(1, stored, on_file, run_nonce=nonce) == decision


# -- a record at its due time: every decision whole ------------------------------------------------------


def task_record(incarnation: int | None, created: float, due: float, token: str, owner: str = "p.cleanup", **changes):
    return CleanupRecord("d", "r", incarnation, owner, created, due, (f"runs/d/r/attempts/p.deploy_a/-1/{token}",)).with_changes(
        **changes
    )


@pytest.mark.parametrize(
    "record, run, others, decision",
    [
        (
            task_record(1, NOW, NOW + 600.4, "t1"),
            RunStatus("success", 1),
            [],
            DueDecision(DueAction.WAIT, "not_due", "due at 1800000600", until=NOW + 600.4),
        ),
        (
            task_record(1, NOW - 600, NOW, "t1"),
            None,
            [],
            DueDecision(DueAction.CARRY_OUT, "run_gone", "the run no longer exists"),
        ),
        (
            task_record(1, NOW - 600, NOW, "t1"),
            RunStatus("failed", 1),
            [],
            DueDecision(DueAction.CARRY_OUT, "due", "incarnation 1 is the run's current one (1)"),
        ),
        (
            task_record(2, NOW - 600, NOW, "t1"),
            RunStatus("success", 1),
            [],
            DueDecision(DueAction.CARRY_OUT, "due", "incarnation 2 is the run's current one (1)"),
        ),
        (
            task_record(None, NOW - 600, NOW, "t1", owner="sweep"),
            RunStatus("success", 3),
            [],
            DueDecision(DueAction.CARRY_OUT, "due", "incarnation None is the run's current one (3)"),
        ),
        (
            task_record(None, NOW - 600, NOW, "t1", owner="sweep"),
            RunStatus("queued", 3),
            [],
            DueDecision(
                DueAction.RECHECK,
                "run_active",
                "the run is queued: its attempts may still be read; looked at again later",
                until=NOW + 15,
            ),
        ),
        (
            task_record(1, NOW - 600, NOW, "t1"),
            RunStatus("success", 3),
            [
                task_record(3, NOW, NOW + 600, "t3", owner="q.cleanup", adopted=(1,)),  # another owner's
                task_record(1, NOW, NOW + 600, "t3", adopted=(1,)),  # not newer
                task_record(2, NOW, NOW + 600, "t2", adopted=(0,)),  # adopted another incarnation
                task_record(3, NOW, NOW + 600, "t3", adopted=(0, 1)),
            ],
            DueDecision(DueAction.DROP, "adopted", "incarnation 3's record took over these paths"),
        ),
        (
            task_record(1, NOW - 600, NOW, "t1"),
            RunStatus("running", 2),
            [task_record(None, NOW, NOW + 600, "t3", owner="p.cleanup", adopted=(1,))],  # no incarnation: adopts nothing
            DueDecision(
                DueAction.RECHECK,
                "newer_incarnation_active",
                "incarnation 2 is running and may read these attempts; looked at again later",
                until=NOW + 15,
            ),
        ),
    ],
    ids=["not-due", "run-gone", "due", "record-newer-than-run", "sweep-record-due", "run-active", "adopted", "newer-active"],
)
def test_a_record_at_its_due_time_gets_exactly_the_action_rule_reason_and_moment_of_the_first_rule_that_applies(
    record, run, others, decision
):
    assert decide_due(record, run, others, Leftovers(), NOW, recheck_after=15) == decision


def test_a_renewal_takes_every_pending_record_of_its_owner_up_to_the_current_incarnation_and_the_runs_leftovers():
    record = task_record(
        1,
        NOW - 1000,
        NOW - 400,
        "a1",
        outputs={"/o": ("_zeta_tombstones/d/r/t1",)},
        run_nonce="n1",
        pipeline_id="p",
        tasks=("p.deploy_a",),
    )
    others = [
        task_record(0, NOW - 3000, NOW - 2000, "c0", status=RecordStatus.CLEANED),  # carried out: not taken
        task_record(0, NOW - 3000, NOW - 2000, "a0"),
        task_record(2, NOW - 100, NOW + 900, "a2", adopted=(5,)),  # the current incarnation's: merged
        task_record(3, NOW - 100, NOW + 5000, "a3"),  # newer than the run's incarnation: not taken
        task_record(0, NOW - 3000, NOW - 2000, "q0", owner="q.cleanup"),  # another owner's: not taken
    ]
    uncovered = Leftovers(("runs/d/r/attempts/p.deploy_a/-1/b2",), {"/o": ("_zeta_tombstones/d/r/t2",)})
    decision = decide_due(record, RunStatus("success", 2), others, uncovered, NOW, recheck_after=15)
    renewed = CleanupRecord(
        "d",
        "r",
        2,
        "p.cleanup",
        created_at=NOW,
        due_at=NOW + 900,
        state_paths=tuple(f"runs/d/r/attempts/p.deploy_a/-1/{t}" for t in ("a0", "a1", "a2", "b2")),
        outputs={"/o": ("_zeta_tombstones/d/r/t1", "_zeta_tombstones/d/r/t2")},
        adopted=(0, 1),
        run_nonce="n1",
        pipeline_id="p",
        tasks=("p.deploy_a",),
    )
    assert decision == DueDecision(
        DueAction.RENEW,
        "newer_incarnation_ended",
        "incarnation 2 read the run's attempts and ended without a cleanup of its own: 6 paths kept for another "
        "window, until 1800000900",
        until=NOW + 900,
        record=renewed,
    )


def test_a_renewal_gives_the_records_own_window_from_now_never_a_negative_one():
    week = task_record(0, NOW - 8 * 86400, NOW - 86400, "a0")
    renewed = decide_due(week, RunStatus("failed", 1), [], Leftovers(), NOW, recheck_after=15).record
    assert renewed is not None and (renewed.created_at, renewed.due_at) == (NOW, NOW + 7 * 86400)
    # A record written by a host whose clock was behind: due before it was created.
    skewed = task_record(0, NOW - 10, NOW - 20, "a0")
    renewed = decide_due(skewed, RunStatus("failed", 1), [], Leftovers(), NOW, recheck_after=15).record
    assert renewed is not None and renewed.due_at == NOW


# -- the record in a task state store -----------------------------------------------------------------


def test_a_small_record_is_stored_as_one_chunk_of_its_lists_in_sorted_json_then_its_header():
    record = own(1).with_changes(adopted=(0,), stopped_drivers=("t9",), tasks=("p.deploy_a",))
    values = record_store_values(record)
    assert [key for key, _ in values] == ["zeta_cleanup_paths_0", "zeta_cleanup"]
    chunk, header = values[0][1], values[1][1]
    assert chunk == {
        "data": '{"adopted": [0], "outputs": {"/data/out": ["_zeta_tombstones/d/r/ds=2026-11-01-c0"]}, '
        '"state_paths": ["runs/d/r/attempts/p.deploy_a/-1/t1"], "stopped_drivers": ["t9"], "tasks": ["p.deploy_a"]}'
    }
    assert header["paths_chunks"] == 1
    assert header["paths_digest"] == hashlib.sha256(chunk["data"].encode()).hexdigest()
    assert record_from_store(header, dict(values).get, "store") == record


def stored_header(payload: str, chunks: int = 1) -> dict:
    return {**own(1).to_value(), "paths_chunks": chunks, "paths_digest": hashlib.sha256(payload.encode()).hexdigest()}


@pytest.mark.parametrize(
    "header, chunks, says",
    [
        ({}, {}, " has no path index (paths_chunks)"),
        (7, {}, " has no path index (paths_chunks)"),
        ([1], {}, " has no path index (paths_chunks)"),
        ({"paths_chunks": "two"}, {}, ": a path chunk is missing or unreadable"),
        ({"paths_chunks": 1}, {}, ": a path chunk is missing or unreadable"),
        ({"paths_chunks": 1}, {"zeta_cleanup_paths_0": {"text": "{}"}}, ": a path chunk is missing or unreadable"),
        (
            stored_header("{}"),
            {"zeta_cleanup_paths_0": {"data": '{"x": 1}'}},
            ": its path chunks do not match the header's digest (a torn write)",
        ),
        (stored_header("{not json"), {"zeta_cleanup_paths_0": {"data": "{not json"}}, ": its paths are not valid JSON"),
    ],
    ids=["no-index", "a-number", "a-list", "index-not-a-number", "chunk-missing", "chunk-without-data", "torn", "not-json"],
)
def test_a_stored_record_that_cannot_be_rebuilt_is_refused_naming_where_and_why_and_that_nothing_was_deleted(
    header, chunks, says
):
    with pytest.raises(CorruptState) as caught:
        record_from_store(header, chunks.get, "in the store of p.cleanup")
    assert str(caught.value) == f"cleanup record in the store of p.cleanup{says}. Nothing was deleted."


def test_a_stored_record_naming_another_runs_attempt_is_refused_naming_where_it_is_stored():
    foreign = own(1).with_changes(state_paths=("runs/d/other/attempts/p.deploy_a/-1/t1",))
    values = dict(record_store_values(foreign))
    with pytest.raises(CorruptState) as caught:
        record_from_store(values["zeta_cleanup"], values.get, "in the store of p.cleanup")
    assert str(caught.value).startswith("in the store of p.cleanup names 'runs/d/other/attempts/p.deploy_a/-1/t1', ")


# -- which cleanup takes an output entry -------------------------------------------------------------


@pytest.mark.parametrize(
    "entry_pipeline, pipeline_id, owned",
    [
        ("p", None, True),  # a cleanup of the whole run takes every entry, whoever's marker it has
        (None, None, True),
        (None, "p", True),  # an entry without a readable marker is taken by every cleanup of the run
        ("", "p", True),
        ("p", "p", True),  # the entry of this cleanup's own pipeline
        ("q", "p", False),  # another pipeline's entry is left to that pipeline's cleanup
    ],
)
def test_an_output_entry_is_owned_by_its_pipelines_cleanup_by_a_whole_run_cleanup_or_by_all_without_a_marker(
    entry_pipeline, pipeline_id, owned
):
    assert owned_output_entry(entry_pipeline, pipeline_id) is owned


# -- the waiter folder ---------------------------------------------------------------------------------


def test_a_waiter_folder_name_is_stable_on_storage_w_and_32_hex_digits_of_the_runs_digest():
    # A retried run of the cleanup DAG finds its own entries by this name, also across an upgrade of
    # the provider: the name is an on-storage format, pinned here by its value.
    name = waiter_folder_name("zeta_cleanup", "scheduled__2026-11-01T00:00:00+00:00")
    assert name == "w-ade67c779fc1435d4b22bca1e2d506eb"
    other = waiter_folder_name("zeta_cleanup", "manual__1")
    assert other.startswith("w-") and len(other) == 34 and set(other[2:]) <= set("0123456789abcdef")


def test_a_waiter_entrys_name_and_bytes_are_stable_on_storage():
    # The cleanup task writes the entry under this name and a run of the cleanup DAG (perhaps of a
    # newer provider) looks for it by the same name: 32 hex digits of the key's digest. Its bytes
    # are JSON with sorted keys.
    key = ("sales", "manual__1", "p.cleanup", 2)
    assert waiter_entry_name(key) == "d7291ef4e4f567ad1e66d2504fc23321.json"
    assert waiter_entry(key, NOW + 600) == (
        b'{"dag_id": "sales", "due_at": 1800000600.0, "incarnation": 2, "owner": "p.cleanup", "run_id": "manual__1"}'
    )


# -- the order of a look -------------------------------------------------------------------------------


def test_due_records_are_looked_at_soonest_due_first_whatever_their_names():
    late_name_early_due = ("z_dag", "run-9", "p.cleanup", 0)
    early_name_late_due = ("a_dag", "run-1", "p.cleanup", 0)
    middle = ("m_dag", "run-5", "p.cleanup", 0)
    waiting = {early_name_late_due: NOW - 5, middle: NOW - 30, late_name_early_due: NOW - 60}
    assert schedule_carry_out(waiting, NOW).due == (late_name_early_due, middle, early_name_late_due)
    # Records due at the same moment are looked at in the order of their keys.
    tied = {early_name_late_due: NOW - 5, late_name_early_due: NOW - 5}
    assert schedule_carry_out(tied, NOW).due == (early_name_late_due, late_name_early_due)


# -- the overview's hint -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "found, paused, problem",
    [
        (None, None, ("cleanup_dag_unknown", "could not ask Airflow whether the cleanup DAG 'zeta_cleanup' is deployed")),
        (
            False,
            None,
            (
                "cleanup_dag_missing",
                "no DAG 'zeta_cleanup' is deployed: nothing deletes this run's staging data, driver logs and tombstones "
                "at their due time (only a sweep, if one runs); deploy dags/zeta_maintenance.py beside your pipelines "
                "(or call airflow_provider_zeta.maintenance.zeta_cleanup_dag() and zeta_sweep_dag() in a DAG file of "
                "yours)",
            ),
        ),
        (
            True,
            True,
            (
                "cleanup_dag_paused",
                "the cleanup DAG 'zeta_cleanup' is paused: this run's data is not deleted at its due time until it is "
                "unpaused (only a sweep, if one runs, deletes it meanwhile)",
            ),
        ),
        (True, False, None),
        (True, None, None),
    ],
    ids=["unknown", "missing", "paused", "deployed", "deployed-pause-unknown"],
)
def test_a_cleanup_task_says_word_for_word_why_no_cleanup_dag_will_carry_its_record_out(found, paused, problem):
    assert cleanup_dag_problem("zeta_cleanup", found, paused) == problem


@pytest.mark.parametrize("created", [float("nan"), float("inf"), float("-inf")])
def test_a_record_whose_creation_time_is_not_a_finite_moment_is_unreadable_and_never_counted(created):
    broken = pending(run="broken").with_changes(created_at=created)
    summary = overdue_summary([RecordSeen("d", "success", broken, "w"), RecordSeen("d", "success", pending())], NOW)
    assert summary.unreadable == (("d", "w"),)
    assert (summary.total.count, summary.total.most_late_s) == (1, HOUR)


def test_with_nothing_overdue_the_total_is_zero_records_zero_seconds_late():
    summary = overdue_summary([RecordSeen("d", "success", pending(due=NOW + HOUR))], NOW)
    assert summary.total == Overdue(0, 0.0) and summary.dags == () and summary.hint is None


def test_a_sweep_record_within_the_grace_is_not_overdue():
    sweep = pending(due=NOW - 300, incarnation=None)
    summary = overdue_summary([RecordSeen("d", "success", sweep)], NOW)
    assert (summary.total, summary.sweep_records, summary.hint) == (Overdue(0, 0.0), 0, None)


def test_the_hint_says_word_for_word_what_to_do_about_pipeline_records_sweep_records_and_unreadable_ones():
    entries = [
        RecordSeen("a", "success", pending("a", "r1")),
        RecordSeen("b", "failed", pending("b", "r2")),
        RecordSeen("b", None, pending("b", "r3", incarnation=None)),
        RecordSeen("c", "success", CorruptState("bad"), "runs/c/r/cleanup/p.cleanup-0.json"),
    ]
    summary = overdue_summary(entries, NOW, cleanup_dag=(True, False))
    assert (summary.total.count, summary.sweep_records) == (3, 1)
    assert summary.hint == (
        "2 cleanup record(s) are pending past their due time: the cleanup DAG 'zeta_cleanup' is deployed and not "
        "paused: look at its failed runs; the sweep ('zeta_sweep') carries overdue records out on its next run. "
        "1 of the sweep's own record(s) are past due: only the sweep ('zeta_sweep') carries them out, so it is "
        "missing, paused or failing. 1 cleanup record(s) cannot be read: nothing of their runs is deleted until each "
        "is fixed or deleted (the sweep then gives the run's leftovers a record of its own)."
    )


def test_a_record_is_overdue_only_more_than_the_grace_a_minute_by_default_past_its_due_time():
    assert overdue_cleanups([pending(due=NOW - 60)], NOW) == Overdue(0, 0.0)
    assert overdue_cleanups([pending(due=NOW - 60.5)], NOW) == Overdue(1, 60.5)
    summary = overdue_summary([RecordSeen("d", "success", pending(due=NOW - 121))], NOW, grace=120)
    assert (summary.grace, summary.total) == (120, Overdue(1, 121))


def test_the_hint_counts_the_pipeline_records_past_due():
    summary = overdue_summary([RecordSeen("d", "success", pending(run=f"r{i}")) for i in range(2)], NOW)
    assert summary.hint is not None
    assert summary.hint.startswith("2 cleanup record(s) are pending past their due time: ")


def test_when_airflow_could_not_say_whether_the_cleanup_dag_is_deployed_the_hint_names_every_cause():
    # (None, ...): Airflow was asked and could not answer; the hint is the one for "not asked".
    unknown = overdue_summary([RecordSeen("d", "success", pending())], NOW, cleanup_dag=(None, None))
    not_asked = overdue_summary([RecordSeen("d", "success", pending())], NOW, cleanup_dag=None)
    assert unknown.hint == not_asked.hint
    assert unknown.hint == (
        "1 cleanup record(s) are pending past their due time: the cleanup DAG 'zeta_cleanup' is missing, "
        "paused or failing. Deploy dags/zeta_maintenance.py, unpause it or look at its failed runs; "
        "the sweep ('zeta_sweep') carries overdue records out on its next run."
    )
