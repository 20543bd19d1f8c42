"""Rules of core/pacing.py and core/ledger.py that mutation testing found no unit test pinned.

Each test checks one rule by its observable result (a return value, a refusal and what it says, a
stored value read back), at the edges where a changed comparison, constant or field name would show:
the pacer's refusal of intervals that are not positive, how long it says the next full look is away,
the signature it knows, the listing interval; the observation and record values of the ledger
module.
"""

from __future__ import annotations

import json

import pytest

from airflow_provider_zeta.core.ledger import (
    AttemptRecord,
    CorruptState,
    HeartbeatSeen,
    Ledger,
    LedgerStatus,
    LedgerView,
    Phase,
    classify_ledger,
    lease_timing_error,
    parse_attempt_record,
    parse_ledger,
)
from airflow_provider_zeta.core.pacing import NOTHING_SEEN, Pacer, listing_interval

# ---------------------------------------------------------------- core/pacing.py

_INTERVALS = {"tick": 0.5, "first": 1.0, "slowest": 5.0, "after_change": 2.0}


@pytest.mark.parametrize("name", sorted(_INTERVALS))
@pytest.mark.parametrize("value", [0.0, -1.0])
def test_a_pacer_refuses_each_interval_that_is_not_positive_showing_the_intervals(name, value):
    intervals = {**_INTERVALS, name: value}
    with pytest.raises(ValueError, match=r"^pacing intervals must be positive: Pacer\(") as refused:
        Pacer(**intervals)
    assert f"{name}={value!r}" in str(refused.value)


def test_a_pacer_accepts_intervals_below_a_second():
    pacer = Pacer(tick=0.01, first=0.02, slowest=0.5, after_change=0.1)
    pacer.looked(0.0, None)
    assert pacer.until_full_look(0.0) == pytest.approx(0.02)  # the first full look's delay is ``first``


def test_until_full_look_is_the_time_left_to_the_backoffs_next_full_look_never_negative():
    pacer = Pacer(tick=0.5, first=4.0, slowest=10.0, after_change=2.0)
    assert pacer.until_full_look(100.0) == 0.0  # before the first full look: due now
    pacer.looked(100.0, "running")  # the next full look at 104
    assert pacer.until_full_look(100.0) == 4.0
    assert pacer.until_full_look(103.5) == 0.5
    assert pacer.until_full_look(104.0) == 0.0
    assert pacer.until_full_look(110.0) == 0.0  # overdue: 0, never negative


def test_the_known_signature_is_the_one_taken_before_the_last_full_look_and_no_signature_keeps_it():
    pacer = Pacer(tick=0.5, first=1.0, slowest=5.0, after_change=5.0)
    assert pacer.known_signature is NOTHING_SEEN
    pacer.looked(0.0, "a")
    assert pacer.known_signature == "a"
    pacer.looked(1.0, None)  # the cheap look failed: no new baseline
    assert pacer.known_signature == "a"
    pacer.looked(3.0, "b")
    assert pacer.known_signature == "b"


@pytest.mark.parametrize(
    ("directories", "fastest", "per_second", "interval"),
    [(0, 0.5, 200.0, 0.5), (1, 0.5, 200.0, 0.5), (100, 0.5, 200.0, 0.5), (400, 0.5, 200.0, 2.0), (30, 1.0, 10.0, 3.0)],
)
def test_listings_come_every_fastest_seconds_but_no_more_than_per_second_directories_a_second(directories, fastest, per_second, interval):
    assert listing_interval(directories, fastest, per_second) == pytest.approx(interval)


# ---------------------------------------------------------------- core/ledger.py

_SEEN = {"token": "0123456789abcdef", "mark": "3/1700000000.5", "silent_for": 4.0, "at": 50.0, "clock": "boot-1"}


@pytest.mark.parametrize("field", ["token", "mark", "clock"])
def test_an_observation_keeps_texts_up_to_200_characters_and_counts_a_longer_one_as_none(field):
    at_limit = HeartbeatSeen.from_value({**_SEEN, field: "x" * 200})
    assert at_limit is not None and getattr(at_limit, field) == "x" * 200
    assert HeartbeatSeen.from_value({**_SEEN, field: "x" * 201}) is None
    assert HeartbeatSeen.from_value({**_SEEN, field: 7}) is None


_RECORD_VALUE = {
    "token": "0123456789abcdef",
    "incarnation": 3,
    "try_number": 4,
    "phase": "launched",
    "intent_at": 1700000000.5,
    "launch_try": 2,
    "host": "worker-1",
    "pid": 4242,
    "pid_start": 1699999999.25,
    "failure_reported_try": 3,
    "max_tries": 5,
    "host_id": "boot/ns/init",
    "intent_on_storage": True,
    "driver_ended": True,
    "state_root_id": "root-7",
    "lost_after": 60.0,
    "heartbeat_interval": 5.0,
}


def test_an_attempt_record_is_stored_as_a_plain_value_of_every_field_and_read_back_equal():
    record = parse_attempt_record(_RECORD_VALUE, "t")
    assert record is not None and record.phase is Phase.LAUNCHED
    value = record.to_value()
    assert value == _RECORD_VALUE
    assert type(value["phase"]) is str  # a plain text in the store, not the enum
    assert parse_attempt_record(value, "t") == record


def test_an_attempt_record_holding_only_the_required_fields_reads_the_others_as_unset():
    required = {k: _RECORD_VALUE[k] for k in ("token", "incarnation", "try_number", "phase", "intent_at", "launch_try")}
    assert parse_attempt_record(required, "t") == AttemptRecord(
        token="0123456789abcdef", incarnation=3, try_number=4, phase=Phase.LAUNCHED, intent_at=1700000000.5, launch_try=2
    )
    record = parse_attempt_record({**required, **{k: None for k in _RECORD_VALUE if k not in required}}, "t")
    assert record is not None
    assert (record.host, record.pid, record.pid_start, record.failure_reported_try, record.max_tries) == (None,) * 5
    assert (record.host_id, record.state_root_id, record.lost_after, record.heartbeat_interval) == (None,) * 4
    assert (record.intent_on_storage, record.driver_ended) == (False, False)


def test_an_attempt_record_reads_numbers_stored_as_text_into_their_types():
    as_text = {k: (str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v) for k, v in _RECORD_VALUE.items()}
    as_text["state_root_id"] = 7  # an identity is kept as a text whatever it was stored as
    record = parse_attempt_record(as_text, "t")
    assert record is not None
    assert record.to_value() == {**_RECORD_VALUE, "state_root_id": "7"}
    assert [type(getattr(record, k)) for k in ("incarnation", "try_number", "launch_try", "pid", "failure_reported_try", "max_tries")] == [int] * 6
    assert [type(getattr(record, k)) for k in ("intent_at", "pid_start", "lost_after", "heartbeat_interval")] == [float] * 4


def test_an_unset_attempt_record_key_reads_as_none():
    assert parse_attempt_record(None, "t") is None


def test_a_stored_value_that_is_not_an_attempt_record_is_refused_saying_how_to_decide_afresh():
    with pytest.raises(CorruptState) as refused:
        parse_attempt_record(["token"], "zeta_attempt_try_2")
    assert str(refused.value) == (
        "task state zeta_attempt_try_2 holds list, not an attempt record. Delete the key "
        "(REST API: DELETE .../state-store/<key>) to let the task decide afresh."
    )


@pytest.mark.parametrize("field", ["token", "incarnation", "try_number", "phase", "intent_at", "launch_try"])
def test_an_attempt_record_without_a_required_field_is_refused_naming_it(field):
    value = {k: v for k, v in _RECORD_VALUE.items() if k != field}
    with pytest.raises(CorruptState) as refused:
        parse_attempt_record(value, "k")
    assert str(refused.value) == f"task state k lacks the field '{field}'; delete the key to decide afresh"


@pytest.mark.parametrize(("field", "bad"), [("phase", "sleeping"), ("pid", "many"), ("incarnation", None), ("lost_after", [1])])
def test_an_attempt_record_with_an_invalid_value_is_refused_naming_the_error(field, bad):
    with pytest.raises(CorruptState) as refused:
        parse_attempt_record({**_RECORD_VALUE, field: bad}, "k")
    message = str(refused.value)
    assert message.startswith("task state k has an invalid value (") and message.endswith("); delete the key to decide afresh")
    assert len(message) > len("task state k has an invalid value (); delete the key to decide afresh")


_LEDGER_VALUE = {
    "token": "0123456789abcdef",
    "status": "succeeded",
    "started_at": 1700000000.0,
    "heartbeat_at": 1700000100.5,
    "ended_at": 1700000101.25,
    "output_path": "/data/out/run-1",
    "rows": 1234,
    "last_checkpoint_at": 1700000090.0,
    "checkpoints": 7,
    "error": "an executor was lost once",
    "pid": 4242,
    "host": "worker-1",
    "spark_app_id": "app-20231114-0001",
    "spark_ui_url": "http://worker-1:4040",
    "metrics": {"bytes": 10},
    "dag_id": "dag",
    "run_id": "run",
    "task_id": "group.deploy_orders",
    "source": "orders",
    "incarnation": 2,
    "beat": 31,
    "host_id": "boot/ns/init",
    "files": {"part-0.parquet": 100, "_SUCCESS": 0},
}


def test_a_ledger_file_is_sorted_json_of_every_field_with_the_status_as_text_and_the_format_version():
    ledger = parse_ledger(json.dumps(_LEDGER_VALUE).encode(), "0123456789abcdef", "/state/ledger.json")
    assert ledger is not None and ledger.status is LedgerStatus.SUCCEEDED
    raw = ledger.to_json()
    assert raw == json.dumps({**_LEDGER_VALUE, "v": 1}, sort_keys=True).encode()
    assert parse_ledger(raw, "0123456789abcdef", "/state/ledger.json") == ledger


def test_a_ledger_holding_only_the_required_fields_reads_the_others_as_unset():
    required = {k: _LEDGER_VALUE[k] for k in ("token", "status", "started_at", "heartbeat_at")}
    expected = Ledger(token="0123456789abcdef", status=LedgerStatus.SUCCEEDED, started_at=1700000000.0, heartbeat_at=1700000100.5)
    assert parse_ledger(json.dumps(required).encode(), "0123456789abcdef", "w") == expected
    unset = {k: None for k in _LEDGER_VALUE if k not in required}
    assert parse_ledger(json.dumps({**required, **unset}).encode(), "0123456789abcdef", "w") == expected
    assert (expected.checkpoints, expected.beat, expected.metrics, expected.files) == (0, 0, {}, None)


def test_a_ledger_reads_numbers_stored_as_text_into_their_types():
    as_text = {k: _LEDGER_VALUE[k] for k in ("token", "status", "ended_at", "rows", "last_checkpoint_at", "checkpoints", "incarnation", "beat")}
    as_text = {k: str(v) for k, v in as_text.items()} | {"started_at": "1700000000", "heartbeat_at": "1700000100.5", "files": {"a": "5", 3: 4}}
    ledger = parse_ledger(json.dumps(as_text).encode(), "0123456789abcdef", "w")
    assert ledger is not None
    assert (ledger.started_at, ledger.heartbeat_at, ledger.ended_at, ledger.last_checkpoint_at) == (1700000000.0, 1700000100.5, 1700000101.25, 1700000090.0)
    assert (ledger.rows, ledger.checkpoints, ledger.incarnation, ledger.beat) == (1234, 7, 2, 31)
    assert type(ledger.started_at) is float and type(ledger.rows) is int and type(ledger.beat) is int
    assert ledger.files == {"a": 5, "3": 4}


def test_no_ledger_yet_reads_as_none():
    assert parse_ledger(None, "tok", "w") is None


def test_a_ledger_that_is_not_json_is_refused_as_outside_damage_saying_what_to_do():
    with pytest.raises(CorruptState) as refused:
        parse_ledger(b'{"token": "tok", "sta', "tok", "/state/a/ledger.json")
    message = str(refused.value)
    assert message.startswith("driver ledger /state/a/ledger.json is not valid JSON (")
    assert message.endswith(
        "; 21 bytes). It is written atomically, so this is outside damage: inspect it, then delete it to let the task "
        "redeploy, or restore it."
    )


def test_a_ledger_that_is_not_an_object_is_refused_naming_what_it_holds():
    with pytest.raises(CorruptState) as refused:
        parse_ledger(b"[1, 2]", "tok", "/state/a/ledger.json")
    assert str(refused.value) == "driver ledger /state/a/ledger.json holds list, not an object"


@pytest.mark.parametrize("field", ["token", "status", "started_at", "heartbeat_at"])
def test_a_ledger_without_a_required_field_is_refused_naming_it(field):
    value = {k: v for k, v in _LEDGER_VALUE.items() if k != field}
    with pytest.raises(CorruptState) as refused:
        parse_ledger(json.dumps(value).encode(), "0123456789abcdef", "/l")
    assert str(refused.value) == f"driver ledger /l lacks the field '{field}'"


@pytest.mark.parametrize(("field", "bad"), [("status", "paused"), ("rows", "many"), ("started_at", None), ("files", [1])])
def test_a_ledger_with_an_invalid_value_is_refused_naming_the_error(field, bad):
    with pytest.raises(CorruptState) as refused:
        parse_ledger(json.dumps({**_LEDGER_VALUE, field: bad}).encode(), "0123456789abcdef", "/l")
    message = str(refused.value)
    assert message.startswith("driver ledger /l has an invalid value: ") and len(message) > len("driver ledger /l has an invalid value: ")


def test_a_ledger_of_another_attempt_is_refused_naming_both_tokens_and_the_setting_to_check():
    with pytest.raises(CorruptState) as refused:
        parse_ledger(json.dumps(_LEDGER_VALUE).encode(), "fedcba9876543210", "/l")
    assert str(refused.value) == (
        "driver ledger /l belongs to attempt '0123456789abcdef', not 'fedcba9876543210': "
        "two attempts share a path, which the provider never does. Check [zeta] state_root."
    )


def test_a_succeeded_drivers_result_is_its_token_output_rows_application_and_metrics():
    ledger = parse_ledger(json.dumps(_LEDGER_VALUE).encode(), "0123456789abcdef", "w")
    assert ledger is not None
    assert ledger.result() == {
        "token": "0123456789abcdef",
        "output_path": "/data/out/run-1",
        "rows": 1234,
        "spark_app_id": "app-20231114-0001",
        "metrics": {"bytes": 10},
    }


def _running(heartbeat_at: float = 100.0) -> Ledger:
    return Ledger(token="tok", status=LedgerStatus.RUNNING, started_at=0.0, heartbeat_at=heartbeat_at)


def test_a_running_ledger_is_lost_only_when_silent_longer_than_lost_after_or_its_process_gone():
    assert classify_ledger(None, 200.0, 30.0) is LedgerView.MISSING
    assert classify_ledger(_running(), 130.0, 30.0) is LedgerView.RUNNING  # exactly lost_after: not yet
    assert classify_ledger(_running(), 130.5, 30.0) is LedgerView.LOST
    assert classify_ledger(_running(), 100.0, 30.0, process_gone=True) is LedgerView.LOST
    # An observed silence replaces the timestamp's age, both ways.
    assert classify_ledger(_running(), 1000.0, 30.0, unchanged_for=30.0) is LedgerView.RUNNING
    assert classify_ledger(_running(), 100.0, 30.0, unchanged_for=30.5) is LedgerView.LOST


@pytest.mark.parametrize("status", [LedgerStatus.SUCCEEDED, LedgerStatus.FAILED, LedgerStatus.CANCELLED])
def test_a_terminal_ledger_is_its_status_whatever_its_silence_or_process(status):
    ended = Ledger(token="tok", status=status, started_at=0.0, heartbeat_at=0.0)
    assert classify_ledger(ended, 1e9, 30.0, process_gone=True, unchanged_for=1e9) is LedgerView(status.value)


@pytest.mark.parametrize(("heartbeat", "lost_after"), [(0.0, 60.0), (-1.0, 60.0), (5.0, 0.0), (5.0, -2.0)])
def test_a_heartbeat_interval_or_lost_after_not_positive_is_refused_naming_both(heartbeat, lost_after):
    assert lease_timing_error(heartbeat, lost_after, "[zeta] hb", "[zeta] la") == (
        f"[zeta] hb ({heartbeat:g}s) and [zeta] la ({lost_after:g}s) must both be positive"
    )


def test_a_heartbeat_interval_must_be_less_than_the_lease_and_the_refusal_says_what_to_change():
    assert lease_timing_error(41.9, 60.0, "[zeta] hb", "[zeta] la") is None
    assert lease_timing_error(0.01, 0.02, "[zeta] hb", "[zeta] la") is None
    assert lease_timing_error(42.0, 60.0, "[zeta] hb", "[zeta] la") == (
        "[zeta] hb (42s) must be less than 0.7 x [zeta] la (42s): a driver stops itself when no heartbeat renewed its lease "
        "for 0.7 x [zeta] la. Lower [zeta] hb or raise [zeta] la."
    )


@pytest.mark.parametrize(("silent_for", "at"), [(0.0, 0.0), (0.0, -5.0), (3.5, 1e9)])
def test_an_observation_of_a_silence_of_zero_or_more_at_any_finite_moment_is_read_back_equal(silent_for, at):
    value = {**_SEEN, "silent_for": silent_for, "at": at}
    seen = HeartbeatSeen.from_value(value)
    assert seen == HeartbeatSeen(token=_SEEN["token"], mark=_SEEN["mark"], silent_for=silent_for, at=at, clock=_SEEN["clock"])
    assert seen.to_value() == value


@pytest.mark.parametrize("missing", sorted(_SEEN))
def test_an_observation_missing_a_field_counts_as_none(missing):
    assert HeartbeatSeen.from_value({k: v for k, v in _SEEN.items() if k != missing}) is None


@pytest.mark.parametrize(("field", "bad"), [("at", float("nan")), ("at", float("-inf")), ("silent_for", -0.001), ("at", "soon")])
def test_an_observation_with_a_moment_or_silence_that_is_not_a_usable_number_counts_as_none(field, bad):
    assert HeartbeatSeen.from_value({**_SEEN, field: bad}) is None
