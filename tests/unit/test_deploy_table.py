"""Every row of the deploy decision table, and the failure windows named in the deploy issue."""

from __future__ import annotations

import json

import pytest

from airflow_provider_zeta.core.deploy import (
    DEPLOY_TABLE,
    cancel_on_trigger_kill,
    launch_wait_deadline,
    Action,
    DeployObservation,
    ProcessView,
    Timing,
    decide,
    latest_record,
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


def observe(rec=None, led=None, process=ProcessView.UNKNOWN, incarnation=0, try_number=2, max_tries=None) -> DeployObservation:
    return DeployObservation(
        now=NOW, incarnation=incarnation, try_number=try_number, record=rec, ledger=led, process=process,
        timing=TIMING, max_tries=max_tries,
    )


# (rule, observation, expected action) — one line per row of DEPLOY_TABLE, plus the windows below.
ROWS = [
    ("corrupt_record", observe(rec=CorruptState("bad record")), Action.FAIL),
    ("fresh_submit", observe(), Action.FRESH_LAUNCH),
    ("future_incarnation", observe(rec=record(incarnation=3), incarnation=2), Action.FAIL),
    ("new_incarnation", observe(rec=record(incarnation=0), led=ledger(LedgerStatus.SUCCEEDED), incarnation=1), Action.FRESH_LAUNCH),
    ("corrupt_ledger", observe(rec=record(Phase.LAUNCHED), led=CorruptState("bad ledger")), Action.FAIL),
    ("already_succeeded", observe(rec=record(Phase.LAUNCHED), led=ledger(LedgerStatus.SUCCEEDED)), Action.REUSE_RESULT),
    ("fenced_driver_stopped", observe(rec=record(Phase.ABANDONED), led=ledger(LedgerStatus.CANCELLED)), Action.FRESH_LAUNCH),
    ("fenced_never_started", observe(rec=record(Phase.ABANDONED)), Action.FRESH_LAUNCH),
    ("fenced_still_running", observe(rec=record(Phase.ABANDONED), led=ledger()), Action.REATTACH),
    (
        "terminal_resubmit",
        observe(rec=record(Phase.LAUNCHED, failure_reported_try=1), led=ledger(LedgerStatus.FAILED)),
        Action.FRESH_LAUNCH,
    ),
    ("driver_failed", observe(rec=record(Phase.LAUNCHED), led=ledger(LedgerStatus.FAILED, error="boom")), Action.REPORT_FAILURE),
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
    assert decision.action is Action.REATTACH and decision.rule == "fenced_still_running"
    # A fenced driver that finished anyway is reused, not re-run.
    done = decide(observe(rec=record(Phase.ABANDONED), led=ledger(LedgerStatus.SUCCEEDED)))
    assert done.action is Action.REUSE_RESULT


def test_death_while_running_reattaches():
    assert decide(observe(rec=record(Phase.LAUNCHED), led=ledger(heartbeat_age=30))).action is Action.REATTACH


def test_death_after_finish_before_xcom_reuses_result_without_launch():
    led = ledger(LedgerStatus.SUCCEEDED, output_path="/x", rows=42)
    decision = decide(observe(rec=record(Phase.LAUNCHED), led=led))
    assert decision.action is Action.REUSE_RESULT
    assert led.result()["rows"] == 42


def test_orphaned_earlier_try_alive_beside_new_try_never_gets_a_second_launch():
    # Try 1 (orphaned, still alive) wrote its intent; try 2 must not launch while try 1 may.
    for age in (0, 30, TIMING.launch_grace - 1):
        assert decide(observe(rec=record(intent_at=NOW - age), try_number=2)).action is Action.WAIT_FOR_LAUNCH
    # Try 1's driver then claims: try 2 re-attaches to it.
    assert decide(observe(rec=record(intent_at=NOW - 40), led=ledger(), try_number=2)).action is Action.REATTACH


def test_lost_driver_is_never_running_and_is_redeployed_only_by_a_later_try():
    stale = ledger(heartbeat_age=TIMING.lost_after + 1)
    first = decide(observe(rec=record(Phase.LAUNCHED), led=stale, try_number=1))
    assert first.action is Action.REPORT_FAILURE and "lost" in first.reason
    again_same_try = decide(observe(rec=record(Phase.LAUNCHED, failure_reported_try=1), led=stale, try_number=1))
    assert again_same_try.action is Action.REPORT_FAILURE
    later = decide(observe(rec=record(Phase.LAUNCHED, failure_reported_try=1), led=stale, try_number=2))
    assert later.action is Action.FRESH_LAUNCH and later.cancel_token == "tok-a"


def test_process_gone_with_running_ledger_is_lost_at_once():
    decision = decide(observe(rec=record(Phase.LAUNCHED), led=ledger(heartbeat_age=1), process=ProcessView.GONE))
    assert decision.action is Action.REPORT_FAILURE and "process is gone" in decision.reason


def test_terminal_ledger_is_never_resumed_as_running_even_with_fresh_heartbeat():
    for status in (LedgerStatus.FAILED, LedgerStatus.CANCELLED):
        decision = decide(observe(rec=record(Phase.LAUNCHED), led=ledger(status, heartbeat_age=0), process=ProcessView.ALIVE))
        assert decision.action is Action.REPORT_FAILURE


def test_higher_incarnation_never_reuses_an_older_result():
    decision = decide(observe(rec=record(incarnation=0), led=ledger(LedgerStatus.SUCCEEDED), incarnation=1))
    assert decision.action is Action.FRESH_LAUNCH and decision.cancel_token == "tok-a"


def test_clearing_this_task_is_told_by_its_own_max_tries():
    rec = record(Phase.LAUNCHED, incarnation=0, max_tries=3)
    cleared = decide(observe(rec=rec, led=ledger(LedgerStatus.SUCCEEDED), incarnation=1, max_tries=5))
    assert cleared.rule == "new_incarnation" and cleared.action is Action.FRESH_LAUNCH


def test_clearing_another_task_of_the_run_does_not_rerun_this_one():
    # deploy_b was cleared: the run's clear_number rose, deploy_a's max_tries did not.
    rec = record(Phase.LAUNCHED, incarnation=0, max_tries=3)
    running = decide(observe(rec=rec, led=ledger(), incarnation=1, max_tries=3))
    assert running.rule == "reconnect"
    done = decide(observe(rec=rec, led=ledger(LedgerStatus.SUCCEEDED), incarnation=1, max_tries=3))
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
    for state in ("failed", "success", "none", "scheduled", "up_for_retry", "queued", "restarting"):
        assert cancel_on_trigger_kill(state), state


def test_launch_wait_deadline_counts_from_the_intent_but_never_spins():
    assert launch_wait_deadline(intent_at=100, launch_grace=60, now=110, poll_interval=5) == 160
    assert launch_wait_deadline(intent_at=100, launch_grace=60, now=500, poll_interval=5) == 505
