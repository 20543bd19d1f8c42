"""triggers/driver_output.py: incremental, bounded, offset-tracking reading of the driver's output."""

from __future__ import annotations

import os

import pytest

from airflow_provider_zeta.triggers.driver_output import (
    DRIVER_LOG,
    OFFSET_FILE,
    DriverOutput,
    connections_visible_to_driver,
    split_lines,
)

ATTEMPT = "runs/d/r/attempts/t/-1/tok"


@pytest.fixture
def state(tmp_path, monkeypatch):
    root = tmp_path / "state"
    (root / ATTEMPT).mkdir(parents=True)
    return root


def reader(state, **kw) -> DriverOutput:
    return DriverOutput(str(state), ATTEMPT, **kw)


def write(state, data: bytes, mode="ab") -> None:
    with open(state / ATTEMPT / DRIVER_LOG, mode) as log:
        log.write(data)


def test_new_complete_lines_only_each_once(state):
    write(state, b"one\ntwo\nthr")
    output = reader(state)
    assert output.poll() == ["one", "two"]
    assert output.poll() == []  # "thr" is not a complete line yet
    write(state, b"ee\n")
    assert output.poll() == ["three"]
    write(state, b"tail without newline")
    assert output.drain() == ["tail without newline"]  # the driver ended: the rest is taken


def test_each_poll_is_bounded_and_a_long_line_is_cut(state):
    write(state, b"x" * 50 + b"\n" + b"y" * 30 + b"\n")
    output = reader(state, max_bytes=40, max_line=20)
    offsets, lines = [], []
    for _ in range(10):
        lines += output.poll(final=True)
        offsets.append(output.offset)
    assert all(b - a <= 40 for a, b in zip([0, *offsets], offsets, strict=False))  # never more than max_bytes a poll
    assert offsets[-1] == 82  # everything read, nothing twice
    assert all(len(line.replace(" …(line cut)", "")) <= 20 for line in lines)
    assert "".join(line.replace(" …(line cut)", "") for line in lines) == "x" * 50 + "y" * 30


def test_a_restart_resumes_from_the_recorded_offset_and_repeats_nothing(state):
    write(state, b"a\nb\n")
    first = reader(state)
    assert first.poll() == ["a", "b"]
    assert (state / ATTEMPT / OFFSET_FILE).read_text() == "4"
    write(state, b"c\n")
    # A triggerer restart re-creates the trigger from its kwargs (offset 0 at defer time).
    again = DriverOutput.from_kwargs(str(state), ATTEMPT, {"offset": 0, "conn_ids": []})
    assert again.poll() == ["c"]


def test_a_bad_or_larger_recorded_offset_costs_at_most_a_reread(state):
    write(state, b"a\nb\n")
    (state / ATTEMPT / OFFSET_FILE).write_text("not a number")
    assert reader(state).poll() == ["a", "b"]
    (state / ATTEMPT / OFFSET_FILE).write_text("999")
    shrunk = reader(state).poll()
    assert shrunk[0].startswith("(driver log shrank") and shrunk[1:] == ["a", "b"]


def test_lines_are_masked_by_form(state):
    write(state, b"connecting with password=hunter2 to db\n")
    assert reader(state).poll() == ["connecting with password=***"]  # to the end of the line


def test_a_hard_linked_log_is_refused_once_not_streamed(state, tmp_path):
    config = tmp_path / "airflow.cfg"
    config.write_text("[core]\nsecret = hunter2\n")
    os.link(config, state / ATTEMPT / DRIVER_LOG)
    output = reader(state)
    lines = output.poll()
    assert len(lines) == 1 and "hard links" in lines[0] and "hunter2" not in lines[0]
    assert output.poll() == []


def test_the_connections_the_driver_can_reach():
    env = {"AIRFLOW_CONN_ZETA_SECRET": "{}", "PATH": "/bin", "AIRFLOW_CONN_": "x", "AIRFLOW__CORE__X": "y"}
    assert connections_visible_to_driver("spark_default", env) == ["spark_default", "zeta_secret"]


def test_split_lines_keeps_an_unfinished_line_for_later():
    assert split_lines(b"a\r\nb", 10, final=False) == (["a"], 3)
    assert split_lines(b"a\r\nb", 10, final=True) == (["a", "b"], 4)


def test_airflow_masker_masks_a_bare_connection_password_in_a_streamed_line(state):
    """The bare ``print(conn.password)`` form: no pattern can see it; Airflow's value masker does,
    once the connection is registered (``register_secrets`` does that in the triggerer)."""
    from airflow.sdk._shared.secrets_masker.secrets_masker import SecretsMasker

    masker = SecretsMasker()
    masker.add_mask("bare-Pa55word-value")
    write(state, b"bare-Pa55word-value\n")
    (line,) = reader(state).poll()
    assert "bare-Pa55word-value" not in masker.redact(line)


def test_the_driver_trigger_streams_the_output_into_its_log_and_reports_the_offset(state, capsys):
    """The call site in ZetaDriverTrigger.run: lines logged through the trigger's own logger
    (which the triggerer writes into the task's log), the offset in the event and kept on storage."""
    import asyncio
    import json
    import time

    from airflow_provider_zeta.core.ledger import Ledger, LedgerStatus
    from airflow_provider_zeta.triggers.driver import ZetaDriverTrigger

    now = time.time()
    ledger = Ledger(token="tok", status=LedgerStatus.SUCCEEDED, started_at=now - 5, heartbeat_at=now, ended_at=now)
    (state / ATTEMPT / "ledger.json").write_bytes(ledger.to_json())
    write(state, b"hello from the driver\npassword=hunter2\nlast line without newline")
    trigger = ZetaDriverTrigger(
        state_root=str(state),
        attempt_dir=ATTEMPT,
        token="tok",
        lost_after=60,
        poll_interval=1,
        missing_deadline=now + 60,
        driver_output={"offset": 0, "conn_ids": ["no_such_connection"]},
    )
    assert json.loads(json.dumps(trigger.serialize()[1]))["driver_output"] == {"offset": 0, "conn_ids": ["no_such_connection"]}

    async def first_event():
        async for event in trigger.run():
            return event

    event = asyncio.run(first_event())
    logged = capsys.readouterr().out  # the trigger's logger (structlog) writes here outside Airflow
    assert "[driver] hello from the driver" in logged and "[driver] password=***" in logged
    assert "[driver] last line without newline" in logged and "hunter2" not in logged
    size = (state / ATTEMPT / DRIVER_LOG).stat().st_size
    assert event.payload["driver_output_offset"] == size
    assert (state / ATTEMPT / OFFSET_FILE).read_text() == str(size)


def test_a_private_key_block_over_several_lines_and_polls_is_masked(state):
    write(state, b"key follows\n-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqSECRET1\n")
    output = reader(state)
    first = output.poll()
    write(state, b"BKcwggSjAgEAAoSECRET2\n-----END PRIVATE KEY-----\nafter the key\n")
    # a restart between the two polls: the new reader resumes inside the block
    second = reader(state).poll()
    shown = "\n".join(first + second)
    assert "SECRET1" not in shown and "SECRET2" not in shown, shown
    assert "key follows" in shown and "after the key" in shown and "-----END PRIVATE KEY-----" in shown
