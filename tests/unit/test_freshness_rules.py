"""Boundaries, defaults and messages of checkpoint freshness (core/freshness.py).

The verdict table itself is covered in test_monitor_rules.py; these tests pin what a sensor's log
and failure message say, the exact edges of each threshold, and the clock rules (ages never
negative, the next look never in the past).
"""

from __future__ import annotations

import re

import pytest

from airflow_provider_zeta.core.freshness import (
    Freshness,
    FreshnessJudgement,
    checkpoint_age,
    describe_age,
    judge_freshness,
    next_look,
    progress_mark,
)
from airflow_provider_zeta.core.ledger import CorruptState, Ledger, LedgerStatus

NOW = 1_000_000.0


def ledger(token="t1", status=LedgerStatus.RUNNING, started=NOW - 100, beat=NOW - 2, ckpt=None, source="emea"):
    return Ledger(
        token=token,
        status=status,
        started_at=started,
        heartbeat_at=beat,
        last_checkpoint_at=ckpt,
        checkpoints=0 if ckpt is None else 5,
        source=source,
    )


# ---------------------------------------------------------------------------- ages


def test_the_checkpoint_age_is_zero_at_the_progress_mark_and_never_negative():
    running = ledger(ckpt=NOW - 10)
    assert checkpoint_age(running, progress_mark(running)) == 0.0
    assert checkpoint_age(running, NOW - 60) == 0.0  # a watcher's clock behind the driver's
    assert checkpoint_age(running, NOW) == 10.0
    assert checkpoint_age(ledger(started=NOW - 7), NOW) == 7.0  # before the first checkpoint: from the start


def _seconds_in(text: str) -> int:
    """What a ``describe_age`` text stands for, read back from its parts."""
    units = {"h": 3600, "m": 60, "s": 1}
    parts = re.fullmatch(r"(\d+)([hms])(?: (\d{2})([ms]))?", text)
    assert parts, text
    total = int(parts.group(1)) * units[parts.group(2)]
    if parts.group(3) is not None:
        total += int(parts.group(3)) * units[parts.group(4)]
    return total


@pytest.mark.parametrize("seconds", [0, 1, 59, 60, 61, 119, 3540, 3599, 3600, 3601, 3659, 3660, 3720, 7199, 7200, 86399, 90061])
def test_describe_age_reads_back_to_the_age_to_its_coarsest_unit(seconds):
    text = describe_age(seconds)
    # Seconds are shown below an hour, minutes from an hour on (the seconds are dropped there).
    unit = 1 if seconds < 3600 else 60
    assert _seconds_in(text) == seconds - seconds % unit


@pytest.mark.parametrize(
    "seconds, text",
    [(59, "59s"), (60, "1m 00s"), (3599, "59m 59s"), (3600, "1h 00m"), (3661, "1h 01m"), (7200, "2h 00m")],
)
def test_describe_age_switches_unit_exactly_at_a_minute_and_at_an_hour(seconds, text):
    assert describe_age(seconds) == text


def test_describe_age_of_a_negative_age_is_zero_and_of_an_unknown_one_a_dash():
    assert describe_age(-5) == "0s"
    assert describe_age(None) == "-"


# ---------------------------------------------------------------------------- thresholds


def test_any_positive_threshold_is_accepted_even_below_one_second():
    assert judge_freshness("j", "deferred", ledger(ckpt=NOW), NOW, threshold=0.5).verdict is Freshness.WATCHING
    sub_second = judge_freshness("j", "deferred", ledger(started=NOW), NOW, 30, first_checkpoint_threshold=0.5)
    assert sub_second.verdict is Freshness.WATCHING and sub_second.stale_at == NOW + 0.5
    for bad in (0, -1):
        with pytest.raises(ValueError, match="threshold must be positive"):
            judge_freshness("j", "deferred", None, NOW, threshold=bad)
        with pytest.raises(ValueError, match="first_checkpoint_threshold must be positive"):
            judge_freshness("j", "deferred", None, NOW, 30, first_checkpoint_threshold=bad)


def test_a_checkpoint_exactly_as_old_as_the_threshold_is_still_fresh():
    at_limit = judge_freshness("j", "deferred", ledger(ckpt=NOW - 30), NOW, threshold=30)
    assert (at_limit.verdict, at_limit.rule, at_limit.stale_at) == (Freshness.WATCHING, "fresh", NOW)
    past = judge_freshness("j", "deferred", ledger(ckpt=NOW - 30.5), NOW, threshold=30)
    assert (past.verdict, past.rule) == (Freshness.STALE, "checkpoint_stale")


def test_a_start_exactly_as_old_as_the_first_checkpoint_threshold_is_still_fresh():
    at_limit = judge_freshness("j", "deferred", ledger(started=NOW - 120), NOW, 30, first_checkpoint_threshold=120)
    assert at_limit.verdict is Freshness.WATCHING
    assert judge_freshness("j", "deferred", ledger(started=NOW - 121), NOW, 30, 120).verdict is Freshness.STALE


# ---------------------------------------------------------------------------- what each verdict carries


@pytest.mark.parametrize("state", ["success", "failed"])
def test_an_ended_job_names_the_job_and_its_task_state_and_keeps_the_attempt(state):
    judgement = judge_freshness("sales.deploy_emea", state, ledger("tok-9"), NOW, 30)
    assert judgement.verdict is Freshness.ENDED
    assert judgement.message == f"job sales.deploy_emea ended ({state})"
    assert judgement.token == "tok-9"


def test_an_ended_job_whose_ledger_is_unreadable_or_missing_has_no_attempt():
    for unknown in (CorruptState("ledger x is not valid JSON"), None):
        judgement = judge_freshness("j", "success", unknown, NOW, 30)
        assert (judgement.verdict, judgement.token) == (Freshness.ENDED, None)


def test_an_unreadable_ledger_names_the_job_and_the_reason():
    judgement = judge_freshness("sales.deploy_emea", "deferred", CorruptState("ledger x is not valid JSON"), NOW, 30)
    assert judgement.verdict is Freshness.STALE
    assert "sales.deploy_emea" in judgement.message and "ledger x is not valid JSON" in judgement.message
    assert (judgement.token, judgement.age, judgement.stale_at) == (None, None, None)


def test_a_job_without_a_driver_is_watched_and_says_so():
    judgement = judge_freshness("sales.deploy_emea", "queued", None, NOW, 30)
    assert (judgement.verdict, judgement.rule) == (Freshness.WATCHING, "not_started")
    assert judgement.message == "job sales.deploy_emea has not started a driver yet"
    assert (judgement.token, judgement.stale_at) == (None, None)


def test_between_attempts_the_message_names_the_attempt_its_end_and_the_task_state():
    failed = ledger("tok-3", LedgerStatus.FAILED)
    judgement = judge_freshness("sales.deploy_emea", "up_for_retry", failed, NOW, 30)
    assert judgement.message == "job sales.deploy_emea: attempt tok-3 ended failed; the task is up_for_retry"
    assert judgement.token == "tok-3" and judgement.stale_at is None
    unknown = judge_freshness("sales.deploy_emea", None, failed, NOW, 30)
    assert unknown.message.endswith("the task is unknown")


def test_a_stale_checkpoint_carries_its_attempt_and_age():
    judgement = judge_freshness("j", "deferred", ledger("tok-5", ckpt=NOW - 95), NOW, threshold=60)
    assert (judgement.token, judgement.age, judgement.stale_at) == ("tok-5", 95.0, None)
    assert judgement.message.startswith("job j (source emea, attempt tok-5): its last checkpoint was 1m 35s ago")
    assert "more than the threshold of 60s" in judgement.message
    assert "5 checkpoint(s) so far" in judgement.message


def test_a_fresh_checkpoint_message_gives_the_age_and_the_threshold_it_is_held_to():
    judgement = judge_freshness("j", "deferred", ledger("tok-5", ckpt=NOW - 10), NOW, threshold=60)
    assert (judgement.token, judgement.age) == ("tok-5", 10.0)
    assert judgement.message == "job j (source emea, attempt tok-5): its last checkpoint was 10s ago (the threshold 60s)"


def test_before_the_first_checkpoint_the_message_counts_from_the_start_against_the_threshold_in_force():
    steady = judge_freshness("j", "deferred", ledger("tok-5", started=NOW - 10), NOW, threshold=60)
    assert steady.message == "job j (source emea, attempt tok-5): its start (no checkpoint yet) was 10s ago (the threshold 60s)"
    own = judge_freshness("j", "deferred", ledger("tok-5", started=NOW - 10), NOW, 60, first_checkpoint_threshold=600)
    assert own.message.endswith("its start (no checkpoint yet) was 10s ago (the first-checkpoint threshold 600s)")


def test_a_ledger_without_a_source_is_named_by_a_question_mark():
    judgement = judge_freshness("j", "deferred", ledger("tok-5", ckpt=NOW - 1, source=None), NOW, 60)
    assert judgement.message.startswith("job j (source ?, attempt tok-5):")


# ---------------------------------------------------------------------------- when to look again


def test_the_next_look_is_never_sooner_than_half_a_second_even_past_the_stale_moment():
    overdue = FreshnessJudgement(Freshness.WATCHING, "fresh", "", "t", 40.0, stale_at=NOW - 10)
    assert next_look(overdue, NOW, poll_interval=5) == NOW + 0.5
    imminent = FreshnessJudgement(Freshness.WATCHING, "fresh", "", "t", 29.9, stale_at=NOW + 0.1)
    assert next_look(imminent, NOW, poll_interval=5) == NOW + 0.6


def test_without_a_stale_moment_the_next_look_is_one_poll_away():
    stale = judge_freshness("j", "deferred", ledger(ckpt=NOW - 95), NOW, threshold=60)
    assert next_look(stale, NOW, poll_interval=5) == NOW + 5
    assert next_look(stale, NOW, poll_interval=0.1) == NOW + 0.5
