"""Every row of the deploy decision table, and the failure windows named in the deploy issue."""

from __future__ import annotations

import json

import pytest

from airflow_provider_zeta.core.deploy import (
    DEPLOY_TABLE,
    TASK_INSTANCE_GONE,
    Action,
    DeployObservation,
    ProcessView,
    Timing,
    cancel_on_trigger_kill,
    cancel_on_worker_kill,
    decide,
    latest_record,
    launch_wait_deadline,
    success_report,
    trigger_may_end_task,
    trigger_reports_success,
)
from airflow_provider_zeta.core.ledger import (
    AttemptRecord,
    CorruptState,
    Ledger,
    LedgerStatus,
    LedgerView,
    Phase,
    classify_ledger,
    parse_attempt_record,
    parse_ledger,
)

NOW = 10_000.0
TIMING = Timing(lost_after=60, launch_grace=90)
TIMED = Timing(lost_after=60, launch_grace=90, job_timeout=30)  # with a job_timeout of 30 s


def record(phase=Phase.INTENT, incarnation=0, try_number=1, intent_at=NOW - 5, **kw) -> AttemptRecord:
    return AttemptRecord(
        token="tok-a",
        incarnation=incarnation,
        try_number=try_number,
        phase=phase,
        intent_at=intent_at,
        launch_try=kw.pop("launch_try", try_number),
        **kw,
    )


def ledger(status=LedgerStatus.RUNNING, heartbeat_age=2.0, token="tok-a", **kw) -> Ledger:
    return Ledger(token=token, status=status, started_at=NOW - 100, heartbeat_at=NOW - heartbeat_age, **kw)


def observe(
    rec=None, led=None, process=ProcessView.UNKNOWN, incarnation=0, try_number=2, max_tries=None,
    unchanged_for=0.0, intent_visible=None, trigger_saw_nothing=False, timing=TIMING, state_root_id=None,
    deleted_for=0.0, end_reported_downstream=False, claimed_without_record=(),
) -> DeployObservation:
    return DeployObservation(
        now=NOW, incarnation=incarnation, try_number=try_number, record=rec, ledger=led, process=process,
        timing=timing, max_tries=max_tries, heartbeat_unchanged_for=unchanged_for, intent_visible=intent_visible,
        trigger_saw_nothing=trigger_saw_nothing, state_root_id=state_root_id, deleted_for=deleted_for,
        end_reported_downstream=end_reported_downstream, claimed_without_record=claimed_without_record,
    )


# (rule, observation, expected action) — one line per row of DEPLOY_TABLE, plus the windows below.
ROWS = [
    ("corrupt_record", observe(rec=CorruptState("bad record")), Action.FAIL),
    ("record_missing", observe(claimed_without_record=("tok-old",)), Action.FAIL),
    ("fresh_submit", observe(), Action.FRESH_LAUNCH),
    ("future_incarnation", observe(rec=record(incarnation=3), incarnation=2), Action.FAIL),
    (
        "state_root_not_shared",
        observe(rec=record(Phase.LAUNCHED, intent_on_storage=True, host_id="boot-a:pidns-1"), intent_visible=False),
        Action.FAIL,
    ),
    (
        "triggerer_cannot_see_state_root",
        observe(rec=record(Phase.LAUNCHED, intent_on_storage=True), led=ledger(), trigger_saw_nothing=True),
        Action.FAIL,
    ),
    (
        "earlier_incarnation_ended",
        observe(rec=record(Phase.LAUNCHED, incarnation=0, driver_ended=True), incarnation=1),
        Action.FRESH_LAUNCH,
    ),
    (
        "earlier_incarnation_cleaned_up",
        observe(rec=record(Phase.LAUNCHED, incarnation=0, intent_on_storage=True, state_root_id="root-1"), incarnation=1,
                intent_visible=False, process=ProcessView.GONE, state_root_id="root-1"),
        Action.FRESH_LAUNCH,
    ),
    (
        "earlier_incarnation_cleaned_up_elsewhere",
        observe(rec=record(Phase.LAUNCHED, incarnation=0, intent_on_storage=True, state_root_id="root-1"), incarnation=1,
                intent_visible=False, state_root_id="root-1", deleted_for=TIMING.stopped_after),
        Action.FRESH_LAUNCH,
    ),
    (
        "earlier_incarnation_cleanup_wait",
        observe(rec=record(Phase.LAUNCHED, incarnation=0, intent_on_storage=True, state_root_id="root-1"), incarnation=1,
                intent_visible=False, state_root_id="root-1", deleted_for=TIMING.stopped_after - 1),
        Action.WAIT_FOR_SELF_STOP,
    ),
    ("new_incarnation", observe(rec=record(incarnation=0), led=ledger(), incarnation=1), Action.FENCE),
    ("corrupt_ledger", observe(rec=record(Phase.LAUNCHED), led=CorruptState("bad ledger")), Action.FAIL),
    ("already_succeeded", observe(rec=record(Phase.LAUNCHED), led=ledger(LedgerStatus.SUCCEEDED)), Action.REUSE_RESULT),
    ("fenced_driver_stopped", observe(rec=record(Phase.ABANDONED), led=ledger(LedgerStatus.CANCELLED)), Action.FRESH_LAUNCH),
    ("fenced_never_started", observe(rec=record(Phase.ABANDONED)), Action.FRESH_LAUNCH),
    ("fenced_still_running", observe(rec=record(Phase.ABANDONED), led=ledger()), Action.WAIT_FOR_STOP),
    (
        "terminal_resubmit",
        observe(rec=record(Phase.LAUNCHED, failure_reported_try=1), led=ledger(LedgerStatus.FAILED)),
        Action.FRESH_LAUNCH,
    ),
    (
        "lost_driver_not_yet_stopped",
        observe(rec=record(Phase.LAUNCHED, failure_reported_try=1), led=ledger(), unchanged_for=TIMING.lost_after + 1),
        Action.WAIT_FOR_STOP,
    ),
    ("driver_failed", observe(rec=record(Phase.LAUNCHED), led=ledger(LedgerStatus.FAILED, error="boom")), Action.REPORT_FAILURE),
    (
        "job_timeout",
        observe(rec=record(Phase.LAUNCHED, intent_at=NOW - 31), led=ledger(), timing=TIMED),
        Action.REPORT_FAILURE,
    ),
    (
        "job_timeout_reported",
        observe(rec=record(Phase.LAUNCHED, intent_at=NOW - 31, failure_reported_try=1), led=ledger(), timing=TIMED),
        Action.FENCE,
    ),
    ("reconnect", observe(rec=record(Phase.LAUNCHED), led=ledger()), Action.REATTACH),
    ("launch_stuck", observe(rec=record(intent_at=NOW - 5 * 90 - 1), process=ProcessView.ALIVE), Action.FENCE),
    ("launch_in_progress", observe(rec=record(intent_at=NOW - 300), process=ProcessView.ALIVE), Action.WAIT_FOR_LAUNCH),
    (
        "driver_exited_before_start",
        observe(rec=record(Phase.LAUNCHED, host="h", pid=1), process=ProcessView.GONE),
        Action.REPORT_FAILURE,
    ),
    ("intent_recent", observe(rec=record(intent_at=NOW - 10)), Action.WAIT_FOR_LAUNCH),
    ("launch_never_started", observe(rec=record(intent_at=NOW - 500)), Action.FENCE),
]


def test_every_row_of_the_table_is_exercised():
    assert [rule for rule, _, _ in ROWS] == [row.rule for row in DEPLOY_TABLE]


@pytest.mark.parametrize("rule,observation,action", ROWS, ids=[r[0] for r in ROWS])
def test_row(rule, observation, action):
    decision = decide(observation)
    assert (decision.rule, decision.action) == (rule, action)
    assert decision.reason


# -- the failure windows of the deploy issue -------------------------------------------------


def test_death_before_intent_launches_fresh():
    assert decide(observe(rec=None)).action is Action.FRESH_LAUNCH


def test_death_between_intent_and_launch_waits_then_fences_then_launches():
    young = decide(observe(rec=record(intent_at=NOW - 10)))
    assert young.action is Action.WAIT_FOR_LAUNCH and young.token == "tok-a"
    old = decide(observe(rec=record(intent_at=NOW - TIMING.launch_grace - 1)))
    assert old.action is Action.FENCE
    # After the cancel marker is written and the ledger re-read (still none): a fresh token.
    after_fence = decide(observe(rec=record(Phase.ABANDONED, intent_at=NOW - 200)))
    assert after_fence.action is Action.FRESH_LAUNCH and after_fence.rule == "fenced_never_started"


def test_death_between_launch_and_handle_record_finds_the_driver_by_token():
    # Intent only (no handle stored), but the driver has claimed its ledger: re-attach.
    assert decide(observe(rec=record(intent_at=NOW - 500), led=ledger())).action is Action.REATTACH
    # Intent only, ledger not yet written, but a process with the token runs here: wait, no launch.
    assert decide(observe(rec=record(intent_at=NOW - 300), process=ProcessView.ALIVE)).action is Action.WAIT_FOR_LAUNCH


def test_fence_race_driver_claimed_just_before_the_marker_is_waited_for():
    # The coordinator wrote the cancel marker, then re-read the ledger and found a claim: wait for
    # that driver to stop instead of launching beside it.
    decision = decide(observe(rec=record(Phase.ABANDONED, intent_at=NOW - 500), led=ledger()))
    assert decision.action is Action.WAIT_FOR_STOP and decision.rule == "fenced_still_running"
    # A fenced driver that finished anyway is reused, not re-run.
    done = decide(observe(rec=record(Phase.ABANDONED), led=ledger(LedgerStatus.SUCCEEDED)))
    assert done.action is Action.REUSE_RESULT


def test_death_while_running_reattaches():
    assert decide(observe(rec=record(Phase.LAUNCHED), led=ledger(heartbeat_age=30))).action is Action.REATTACH


def test_death_after_finish_before_xcom_reuses_result_without_launch():
    led = ledger(LedgerStatus.SUCCEEDED, output_path="/x", rows=42)
    decision = decide(observe(rec=record(Phase.LAUNCHED), led=led))
    assert decision.action is Action.REUSE_RESULT
    # The result reused is that driver's: the decision names the token whose ledger holds it.
    assert decision.token == led.token and decision.rule == "already_succeeded"


def test_orphaned_earlier_try_alive_beside_new_try_never_gets_a_second_launch():
    # Try 1 (orphaned, still alive) wrote its intent; try 2 must not launch while try 1 may.
    for age in (0, 30, TIMING.launch_grace - 1):
        assert decide(observe(rec=record(intent_at=NOW - age), try_number=2)).action is Action.WAIT_FOR_LAUNCH
    # Try 1's driver then claims: try 2 re-attaches to it.
    assert decide(observe(rec=record(intent_at=NOW - 40), led=ledger(), try_number=2)).action is Action.REATTACH


def test_lost_driver_is_never_running_and_is_redeployed_only_by_a_later_try_once_certainly_stopped():
    silent = TIMING.lost_after + 1
    first = decide(observe(rec=record(Phase.LAUNCHED), led=ledger(), unchanged_for=silent, try_number=1))
    assert first.action is Action.REPORT_FAILURE and "lost" in first.reason and first.token == "tok-a"
    reported = record(Phase.LAUNCHED, failure_reported_try=1)
    again_same_try = decide(observe(rec=reported, led=ledger(), unchanged_for=silent, try_number=1))
    assert again_same_try.action is Action.REPORT_FAILURE
    # "Lost" is not "stopped": a later try waits until the driver's lease has certainly ended.
    waiting = decide(observe(rec=reported, led=ledger(), unchanged_for=silent, try_number=2))
    assert waiting.action is Action.WAIT_FOR_STOP and waiting.rule == "lost_driver_not_yet_stopped"
    later = decide(observe(rec=reported, led=ledger(), unchanged_for=TIMING.stopped_after, try_number=2))
    assert later.action is Action.FRESH_LAUNCH and later.cancel_token == "tok-a"


def test_process_gone_with_running_ledger_is_lost_at_once():
    decision = decide(observe(rec=record(Phase.LAUNCHED), led=ledger(heartbeat_age=1), process=ProcessView.GONE))
    assert decision.action is Action.REPORT_FAILURE and "process is gone" in decision.reason


def test_terminal_ledger_is_never_resumed_as_running_even_with_fresh_heartbeat():
    for status in (LedgerStatus.FAILED, LedgerStatus.CANCELLED):
        decision = decide(observe(rec=record(Phase.LAUNCHED), led=ledger(status, heartbeat_age=0), process=ProcessView.ALIVE))
        assert decision.action is Action.REPORT_FAILURE


def test_higher_incarnation_never_reuses_an_older_result():
    # The cleared task launches anew at once: the old driver ended (its ledger is terminal), so
    # nothing is fenced (a cancel marker could re-create an attempt the cleanup is deleting).
    decision = decide(observe(rec=record(incarnation=0), led=ledger(LedgerStatus.SUCCEEDED, incarnation=0), incarnation=1))
    assert (decision.rule, decision.action, decision.cancel_token) == ("earlier_incarnation_ended", Action.FRESH_LAUNCH, None)
    # A running one is fenced first ...
    decision = decide(observe(rec=record(incarnation=0), led=ledger(incarnation=0), incarnation=1))
    assert decision.action is Action.FENCE and decision.token == "tok-a"
    # ... then, with its own abandoned record of the new incarnation, launches anew: the old
    # driver's success (its ledger says incarnation 0) is not reused.
    fenced = record(Phase.ABANDONED, incarnation=1, try_number=2)
    after = decide(observe(rec=fenced, led=ledger(LedgerStatus.SUCCEEDED, incarnation=0), incarnation=1))
    assert after.action is Action.FRESH_LAUNCH and after.rule == "fenced_driver_stopped"
    # ... and waits while the old driver still runs.
    still = decide(observe(rec=fenced, led=ledger(incarnation=0), incarnation=1))
    assert still.action is Action.WAIT_FOR_STOP


def test_a_cleared_task_reruns_however_its_previous_try_ended():
    # Airflow raises max_tries to try_number + retries on every clear of a task that is not
    # RUNNING (deferred, succeeded, failed, up for retry): the previous driver is never reused.
    rec = record(Phase.LAUNCHED, incarnation=0, try_number=1, max_tries=3)
    for led in (ledger(LedgerStatus.SUCCEEDED), ledger(LedgerStatus.FAILED), ledger(LedgerStatus.CANCELLED)):
        cleared = decide(observe(rec=rec, led=led, incarnation=1, try_number=2, max_tries=4))
        assert cleared.rule == "earlier_incarnation_ended" and cleared.action is Action.FRESH_LAUNCH, led.status
        assert "its ledger is" in cleared.reason
    running = decide(observe(rec=rec, led=ledger(LedgerStatus.RUNNING), incarnation=1, try_number=2, max_tries=4))
    assert running.rule == "new_incarnation" and running.action is Action.FENCE


def test_a_retry_after_a_clear_of_another_task_reuses_the_finished_driver():
    # deploy_b was cleared (the run's clear_number rose to 1); later deploy_a's try 1 is reset as
    # an orphan, or its worker dies after the driver succeeded. Try 2 must not run the job again.
    rec = record(Phase.LAUNCHED, incarnation=0, try_number=1, max_tries=3)
    done = decide(observe(rec=rec, led=ledger(LedgerStatus.SUCCEEDED, incarnation=0), incarnation=1, try_number=2, max_tries=3))
    assert done.rule == "already_succeeded" and done.action is Action.REUSE_RESULT
    running = decide(observe(rec=rec, led=ledger(incarnation=0), incarnation=1, try_number=2, max_tries=3))
    assert running.rule == "reconnect" and running.action is Action.REATTACH


def test_reprocessing_a_run_whose_attempts_were_cleaned_is_not_an_unshared_state_root():
    # The run ended (try 1 took the driver's result and said so in its record), its cleanup deleted
    # the attempt directory (intent file included); a week later the run is cleared or backfilled
    # with reprocessing. Every decision the new try takes, until it launches, must stay clear of
    # state_root_not_shared: a backfill reprocessing a date after its retention window once
    # failed every source there, on the decision taken after the fence.
    rec = record(Phase.LAUNCHED, incarnation=0, try_number=1, max_tries=2, intent_on_storage=True, driver_ended=True)
    decision = decide(observe(rec=rec, led=None, incarnation=1, try_number=2, max_tries=3, intent_visible=False))
    assert decision.rule == "earlier_incarnation_ended" and decision.action is Action.FRESH_LAUNCH
    assert decision.cancel_token is None  # no cancel marker: it would recreate the deleted directory
    # The same invisible intent within one incarnation is still the unshared state root.
    same = decide(observe(rec=rec, led=None, incarnation=0, try_number=2, max_tries=2, intent_visible=False))
    assert same.rule == "state_root_not_shared" and same.action is Action.FAIL


def test_a_clear_after_the_cleanup_of_a_driver_no_try_saw_end_relaunches_on_its_host_at_once_elsewhere_after_the_lease():
    # No try saw the driver end (its task was marked failed while it ran), then the run's cleanup
    # deleted its attempt. On the launching host the process check is reliable (pid and start
    # time) and the files are the same: the new incarnation launches, writing no cancel marker.
    rec = record(Phase.LAUNCHED, incarnation=0, try_number=1, max_tries=2, intent_on_storage=True, host="worker-a",
                 state_root_id="root-1")
    here = decide(observe(rec=rec, led=None, incarnation=1, try_number=2, max_tries=3, intent_visible=False,
                          process=ProcessView.GONE, state_root_id="root-1"))
    assert here.rule == "earlier_incarnation_cleaned_up" and here.action is Action.FRESH_LAUNCH
    assert here.cancel_token is None
    # The same host but another root behind the path (an NFS mountpoint left unmounted: no
    # identity file, or another one), or a record of a version that did not note the root: no
    # positive evidence of a cleanup, so no launch on the strength of "nothing is there".
    for seen, recorded in (("root-2", "root-1"), (None, "root-1"), (None, None)):
        elsewhere = decide(observe(rec=rec.with_changes(state_root_id=recorded), led=None, incarnation=1, try_number=2,
                                   max_tries=3, intent_visible=False, process=ProcessView.GONE, state_root_id=seen))
        assert elsewhere.rule == "new_incarnation", (seen, recorded)
    # From another host (no process view) on the same root: the attempt was deleted, and a driver
    # whose attempt is deleted stops itself within its lease. Wait, writing nothing (no fence: its
    # marker would re-create the directory), until it has been seen deleted for stopped_after;
    # then launch. The wait is the one for a silent heartbeat.
    waiting = decide(observe(rec=rec, led=None, incarnation=1, try_number=2, max_tries=3, intent_visible=False,
                             state_root_id="root-1", deleted_for=TIMING.stopped_after - 0.1))
    assert waiting.rule == "earlier_incarnation_cleanup_wait" and waiting.action is Action.WAIT_FOR_SELF_STOP
    assert waiting.token == rec.token and "worker-a" in waiting.reason
    done = decide(observe(rec=rec, led=None, incarnation=1, try_number=2, max_tries=3, intent_visible=False,
                          state_root_id="root-1", deleted_for=TIMING.stopped_after))
    assert done.rule == "earlier_incarnation_cleaned_up_elsewhere" and done.action is Action.FRESH_LAUNCH
    assert done.cancel_token is None
    # Not cleared (the same incarnation): an invisible attempt is the unshared root, whatever the identity.
    same = decide(observe(rec=rec, led=None, incarnation=0, try_number=2, max_tries=2, intent_visible=False,
                          state_root_id="root-1", deleted_for=10 * TIMING.stopped_after))
    assert same.rule == "state_root_not_shared"
    # From another host on a root that reads another identity (or none): the same sight may be a
    # state root this host does not share while the driver still runs there: fence, then fail and
    # launch nothing — and say how to get past it once the driver is known to be stopped.
    for seen in ("root-2", None):
        first = decide(observe(rec=rec, led=None, incarnation=1, try_number=2, max_tries=3, intent_visible=False,
                               state_root_id=seen, deleted_for=10 * TIMING.stopped_after))
        assert first.rule == "new_incarnation" and first.action is Action.FENCE
    fenced = rec.with_changes(phase=Phase.ABANDONED, incarnation=1, try_number=2)  # what _fence records
    second = decide(observe(rec=fenced, led=None, incarnation=1, try_number=2, max_tries=3, intent_visible=False))
    assert second.rule == "state_root_not_shared" and second.action is Action.FAIL
    assert "state-store" in second.reason and "clear the task again" in second.reason and "worker-a" in second.reason
    # A process alive on this host is never taken as cleaned up.
    alive = decide(observe(rec=rec, led=None, incarnation=1, try_number=2, max_tries=3, intent_visible=False,
                           process=ProcessView.ALIVE))
    assert alive.rule == "new_incarnation"


def test_an_ended_driver_is_recorded_with_its_flag_and_an_old_record_reads_as_not_ended():
    value = record(Phase.LAUNCHED, driver_ended=True).to_value()
    assert parse_attempt_record(value, "k").driver_ended is True
    del value["driver_ended"]  # a record written before the flag existed
    assert parse_attempt_record(value, "k").driver_ended is False


def test_a_clear_of_another_task_while_this_try_is_deferred_does_not_rerun_it():
    # This very try wrote the record and deferred; another task of the run was cleared meanwhile
    # (the run's clear_number rose). A clear of *this* task would have ended this try.
    rec = record(Phase.LAUNCHED, incarnation=0, try_number=2)
    running = decide(observe(rec=rec, led=ledger(incarnation=0), incarnation=1, try_number=2))
    assert running.rule == "reconnect"
    done = decide(observe(rec=rec, led=ledger(LedgerStatus.SUCCEEDED, incarnation=0), incarnation=1, try_number=2))
    assert done.rule == "already_succeeded" and done.action is Action.REUSE_RESULT


# -- parsing: missing, truncated, not JSON, foreign ---------------------------------------------


def test_missing_ledger_is_none():
    assert parse_ledger(None, "tok-a", "x") is None


@pytest.mark.parametrize(
    "raw,needle",
    [
        (b'{"token": "tok-a", "status": "run', "not valid JSON"),
        (b"\x00\xff garbage", "not valid JSON"),
        (b"[1, 2]", "not an object"),
        (json.dumps({"token": "tok-a", "status": "running"}).encode(), "lacks the field"),
        (json.dumps({"token": "tok-a", "status": "exploded", "started_at": 1, "heartbeat_at": 1}).encode(), "invalid value"),
        (json.dumps({"token": "tok-b", "status": "running", "started_at": 1, "heartbeat_at": 1}).encode(), "belongs to attempt"),
    ],
)
def test_bad_ledger_is_a_clear_error_naming_the_path(raw, needle):
    with pytest.raises(CorruptState, match=needle) as error:
        parse_ledger(raw, "tok-a", "/state/ledger.json")
    assert "/state/ledger.json" in str(error.value)
    # ... and the table turns it into a failure that launches nothing.
    decision = decide(observe(rec=record(Phase.LAUNCHED), led=error.value))
    assert decision.action is Action.FAIL


def test_ledger_round_trip():
    led = ledger(LedgerStatus.SUCCEEDED, output_path="/o", rows=3, metrics={"a": 1})
    assert parse_ledger(led.to_json(), "tok-a", "x") == led


@pytest.mark.parametrize("value,needle", [("text", "not an attempt record"), ({"token": "t"}, "lacks the field"), ({"token": "t", "incarnation": "x", "try_number": 1, "phase": "intent", "intent_at": 1, "launch_try": 1}, "invalid value")])
def test_bad_attempt_record_is_a_clear_error(value, needle):
    with pytest.raises(CorruptState, match=needle):
        parse_attempt_record(value, "zeta_attempt_try_1")


def test_attempt_record_round_trip_and_latest():
    rec = record(Phase.LAUNCHED, host="h", pid=12, pid_start=1.5)
    assert parse_attempt_record(rec.to_value(), "k") == rec
    newer = rec.with_changes(try_number=3, failure_reported_try=3)
    assert latest_record({1: rec, 2: None, 3: newer}) == newer
    assert latest_record({1: None}) is None


def test_classify_ledger():
    assert classify_ledger(None, NOW, 60) is LedgerView.MISSING
    assert classify_ledger(ledger(), NOW, 60) is LedgerView.RUNNING
    assert classify_ledger(ledger(heartbeat_age=61), NOW, 60) is LedgerView.LOST
    assert classify_ledger(ledger(), NOW, 60, process_gone=True) is LedgerView.LOST
    assert classify_ledger(ledger(LedgerStatus.SUCCEEDED, heartbeat_age=999), NOW, 60) is LedgerView.SUCCEEDED


def test_trigger_kill_stops_the_driver_only_when_the_task_no_longer_waits_on_it():
    assert not cancel_on_trigger_kill("deferred")  # trigger moved to another triggerer
    assert not cancel_on_trigger_kill(None)  # unknown: a wrong cancel would re-run the job
    for state in ("failed", "success", "none", "scheduled", "up_for_retry", "queued", "restarting", TASK_INSTANCE_GONE):
        assert cancel_on_trigger_kill(state), state


def test_worker_kill_stops_the_driver_only_after_a_user_ended_the_task():
    """deferrable=False: the task process's SIGTERM comes from a user's mark-failed/success, but also
    from a worker shutting down, a clear while running, or a zombie reset; in those the next try must
    re-attach to the driver, so they keep it running."""
    for state in ("failed", "success", "skipped", "removed", TASK_INSTANCE_GONE):
        assert cancel_on_worker_kill(state), state
    for state in ("running", "restarting", "up_for_retry", "none", "queued", "scheduled", "deferred", None):
        assert not cancel_on_worker_kill(state), state


def test_launch_wait_deadline_counts_from_the_intent_but_never_spins():
    assert launch_wait_deadline(intent_at=100, launch_grace=60, now=110, poll_interval=5) == 160
    assert launch_wait_deadline(intent_at=100, launch_grace=60, now=500, poll_interval=5) == 505


def test_the_state_root_identity_is_written_once_and_read_back(tmp_path):
    from airflow_provider_zeta.storage import ROOT_ID_FILE, StateStorage, state_root_identity

    root = StateStorage.from_url(str(tmp_path / "root"))
    assert state_root_identity(root, create=False) is None
    first = state_root_identity(root, create=True)
    assert first and state_root_identity(root, create=True) == first == state_root_identity(root, create=False)
    assert [p.name for p in (tmp_path / "root").iterdir()] == [ROOT_ID_FILE], "no temporary file left"
    other = StateStorage.from_url(str(tmp_path / "unmounted"))
    assert state_root_identity(other, create=True) != first


def test_a_cleared_task_whose_trigger_ended_it_relaunches_at_once_after_the_cleanup_from_any_host():
    # The driver trigger ended try 1 from the triggerer (TaskSuccessEvent), which cannot
    # write driver_ended into the task state store. The run's ready set, which names the token,
    # stands in: a clear after the run's cleanup launches at once on any host, instead of waiting
    # stopped_after for a driver that may still run (earlier_incarnation_cleanup_wait).
    rec = record(Phase.LAUNCHED, incarnation=0, try_number=1, max_tries=2, intent_on_storage=True, state_root_id="root-1")
    deleted = dict(rec=rec, led=None, incarnation=1, try_number=2, max_tries=3, intent_visible=False, state_root_id="root-1")
    decision = decide(observe(**deleted, end_reported_downstream=True))
    assert (decision.rule, decision.action, decision.cancel_token) == ("earlier_incarnation_ended", Action.FRESH_LAUNCH, None)
    assert "completed point or ready set" in decision.reason
    # Without that evidence, the wait stays.
    assert decide(observe(**deleted)).rule == "earlier_incarnation_cleanup_wait"
    # The evidence does not lift anything within one incarnation (no clear: the same try's task).
    same = decide(observe(**{**deleted, "incarnation": 0, "max_tries": 2}, end_reported_downstream=True))
    assert same.rule == "state_root_not_shared"


@pytest.mark.parametrize(
    "view, ledger_incarnation, changes, expected",
    [
        (LedgerView.SUCCEEDED, 0, {}, True),
        (LedgerView.SUCCEEDED, None, {}, True),  # a driver of an older version names no incarnation
        (LedgerView.SUCCEEDED, 1, {}, False),  # another incarnation's driver: the task decides
        (LedgerView.FAILED, 0, {}, False),
        (LedgerView.LOST, 0, {}, False),
        (LedgerView.SUCCEEDED, 0, {"wait_for_stop": True}, False),  # a fenced token: the task decides
        (LedgerView.SUCCEEDED, 0, {"attempt_deleted": True}, False),
        (LedgerView.SUCCEEDED, 0, {"output_complete": False}, False),  # the worker logs the rest
    ],
)
def test_the_trigger_reports_success_only_where_the_task_would_reuse_the_result(view, ledger_incarnation, changes, expected):
    kwargs = {"wait_for_stop": False, "attempt_deleted": False, "output_complete": True, **changes}
    assert trigger_reports_success(view, ledger_incarnation, 0, **kwargs) is expected
    if view is LedgerView.SUCCEEDED and not changes:  # the table agrees on the same observation
        led = ledger(LedgerStatus.SUCCEEDED, incarnation=ledger_incarnation, output_path="/out", rows=3)
        decision = decide(observe(rec=record(Phase.LAUNCHED), led=led, try_number=1, max_tries=1))
        assert (decision.action is Action.REUSE_RESULT) is expected


def test_the_success_report_is_the_ledgers_result_with_the_source():
    led = ledger(LedgerStatus.SUCCEEDED, output_path="/out", rows=3, spark_app_id="app-1")
    assert success_report(led.result(), "alpha", "p.deploy_alpha", 2) == {
        "token": "tok-a", "output_path": "/out", "rows": 3, "spark_app_id": "app-1", "metrics": {},
        "source": "alpha", "task_id": "p.deploy_alpha", "incarnation": 2,
    }
    # Stored by the driver trigger: the deferral it was stored under, too (core.ready reads it).
    assert success_report(led.result(), "alpha", "p.deploy_alpha", 2, "m1")["deferral_mark"] == "m1"


def test_only_a_deferral_on_the_tasks_own_driver_and_nothing_left_for_the_worker_may_be_ended_by_its_trigger():
    wait = decide(observe(rec=record(Phase.LAUNCHED), led=ledger(), try_number=1, max_tries=1))
    assert wait.action is Action.REATTACH
    plain = dict(deferrable=True, has_outlets=False, lineage_listener=False)
    assert trigger_may_end_task(wait, "tok-a", **plain)
    assert not trigger_may_end_task(wait, "tok-b", **plain)  # a deferral on another token
    for change in ({"deferrable": False}, {"has_outlets": True}, {"lineage_listener": True}):
        assert not trigger_may_end_task(wait, "tok-a", **{**plain, **change}), change
    stop = decide(observe(rec=record(Phase.ABANDONED), led=ledger(heartbeat_age=70), unchanged_for=70, try_number=1, max_tries=1))
    assert stop.action is Action.WAIT_FOR_STOP and not trigger_may_end_task(stop, "tok-a", **plain)
