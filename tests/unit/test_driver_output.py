"""triggers/driver_output.py: incremental, bounded, offset-tracking reading of the driver's output."""

from __future__ import annotations

import asyncio
import json
import logging
import os

import pytest

from airflow_provider_zeta.triggers.driver_output import (
    DRIVER_LOG,
    OFFSET_FILE,
    DriverOutput,
    connections_visible_to_driver,
    driver_output_kwargs,
    split_lines,
    unseal_secrets,
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


# ------------------------------------------------------------------ secrets only the worker knows


WORKER_ONLY_SECRETS = {
    "env": "env-Token-4f9a2c",
    "conf": "conf-S3secret-77d1",
    "arg": "arg-Jdbc-pw-9e3b",
    "json_conn": "json-Conn-pw-5c2e",
    "uri_conn": "uri-Conn-pw-8a4d",
    "extra": "extra-Sas-3b7f",
}


def worker_only_launch() -> dict:
    s = WORKER_ONLY_SECRETS
    return {
        "env_vars": {
            "LEAKY_API_TOKEN": s["env"],
            "REGION": "eu-west-1",
            "AIRFLOW_CONN_WORKER_JSON": json.dumps({"conn_type": "generic", "password": s["json_conn"], "extra": {"sas_token": s["extra"]}}),
            "AIRFLOW_CONN_WORKER_URI": f"postgres://etl:{s['uri_conn']}@db.internal:5432/sales",
        },
        "conf": {"spark.hadoop.fs.s3a.secret.key": s["conf"], "spark.app.name": "sales"},
        "application_args": ["--jdbc-password", s["arg"], "--date", "2026-01-01"],
    }


def test_secrets_only_the_worker_knows_reach_the_triggerers_masker_sealed(fernet_key, caplog):
    """A connection defined only in the operator's env_vars, sensitive env_vars, conf entries and
    flags: the triggerer cannot look any of them up, so the deploy task seals their values with
    the Fernet key and the trigger registers them with Airflow's masker; the trigger kwargs, stored
    unencrypted, never hold one in clear."""
    from airflow.sdk._shared.secrets_masker import redact as airflow_redact
    from airflow.sdk._shared.secrets_masker import reset_secrets_masker

    launch = worker_only_launch()
    kwargs = driver_output_kwargs("spark_default", launch["env_vars"], launch["conf"], launch["application_args"])
    assert kwargs["conn_ids"] == ["spark_default", "worker_json", "worker_uri"]
    stored = json.dumps(kwargs)
    for secret in WORKER_ONLY_SECRETS.values():
        assert secret not in stored
    assert sorted(unseal_secrets(kwargs["sealed_secrets"])) == sorted(WORKER_ONLY_SECRETS.values())
    assert "eu-west-1" not in unseal_secrets(kwargs["sealed_secrets"])

    # The triggerer is another process: its masker knows nothing the worker registered.
    reset_secrets_masker()
    output = DriverOutput.from_kwargs("/nonexistent", ATTEMPT, kwargs)
    for secret in WORKER_ONLY_SECRETS.values():  # not known to the masker before
        assert secret in airflow_redact(f"x {secret} y")
    asyncio.run(output.register_secrets(logging.getLogger("test")))
    for secret in WORKER_ONLY_SECRETS.values():
        assert secret not in airflow_redact(f"bare {secret} printed"), secret


@pytest.mark.parametrize(
    "fernet_key_value, said",
    [("", "no [core] fernet_key on this worker"), ("not-a-fernet-key", "could not be sealed")],
    ids=["no-key", "malformed-key"],
)
def test_a_worker_that_cannot_seal_hands_over_nothing_says_so_and_still_defers(monkeypatch, caplog, fernet_key_value, said):
    """Without a Fernet key, or with a malformed one (Airflow's get_fernet raises), the deploy
    defers anyway, masking by form only, and says so; nothing secret in the kwargs or the log."""
    from airflow.sdk.crypto import get_fernet

    monkeypatch.setenv("AIRFLOW__CORE__FERNET_KEY", fernet_key_value)
    get_fernet.cache_clear()
    try:
        launch = worker_only_launch()
        with caplog.at_level(logging.WARNING):
            kwargs = driver_output_kwargs(None, launch["env_vars"], launch["conf"], launch["application_args"])
    finally:
        get_fernet.cache_clear()
    assert kwargs["sealed_secrets"] is None and kwargs["conn_ids"] == ["worker_json", "worker_uri"]
    assert said in caplog.text
    for secret in WORKER_ONLY_SECRETS.values():
        assert secret not in json.dumps(kwargs) and secret not in caplog.text


def test_a_triggerer_with_another_fernet_key_logs_why_it_cannot_mask_by_value(fernet_key, monkeypatch, caplog):
    from airflow.sdk.crypto import get_fernet
    from cryptography.fernet import Fernet

    launch = worker_only_launch()
    kwargs = driver_output_kwargs(None, launch["env_vars"], {}, [])
    monkeypatch.setenv("AIRFLOW__CORE__FERNET_KEY", Fernet.generate_key().decode())
    get_fernet.cache_clear()
    with caplog.at_level(logging.WARNING):
        asyncio.run(DriverOutput.from_kwargs("/nonexistent", ATTEMPT, kwargs).register_secrets(logging.getLogger("test")))
    assert "cannot be decrypted here" in caplog.text and "fernet_key" in caplog.text


def test_the_resumed_task_logs_what_the_trigger_left_of_the_output_once_and_masked(state, fernet_key):
    """The trigger drains about 1 MiB once the driver ended; the rest goes into the resumed try's
    log (the worker's masker told every value the driver was handed), and a later reader repeats
    nothing."""
    from airflow.sdk._shared.secrets_masker import redact as airflow_redact
    from airflow.sdk._shared.secrets_masker import reset_secrets_masker

    from airflow_provider_zeta.triggers.driver_output import drain_in_worker, register_worker_secrets

    token = WORKER_ONLY_SECRETS["env"]
    line_size = len(b"line 0000000 of a chatty driver\n")
    filler = b"".join(b"line %07d of a chatty driver\n" % i for i in range(45_000))  # about 1.3 MiB
    write(state, filler + f"the last line: {token}\n".encode())
    trigger_side = reader(state)
    assert trigger_side.drain()  # the trigger's final drain: bounded, so it stops short
    assert 0 < trigger_side.offset < len(filler) and trigger_side.offset % line_size == 0
    first_left = trigger_side.offset // line_size

    reset_secrets_masker()  # the worker is another process than the triggerer
    logged: list[str] = []

    class Log:
        def info(self, message, *args):
            logged.append(airflow_redact(message % args))

    launch = worker_only_launch()
    register_worker_secrets(None, launch["env_vars"], launch["conf"], launch["application_args"], logging.getLogger("test"))
    drain_in_worker(DriverOutput(str(state), ATTEMPT, trigger_side.offset), Log())
    assert logged[-1] == "[driver] the last line: ***"
    assert logged[0] == f"[driver] line {first_left:07d} of a chatty driver"
    assert len(logged) == 45_000 - first_left + 1
    assert reader(state).poll() == []  # the offset file moved on: nothing twice


@pytest.mark.parametrize(
    "view, ended",
    [("succeeded", True), ("failed", True), ("cancelled", True), ("running", False), ("lost", False), ("missing", False), ("invisible", False), (None, False)],
)
def test_only_an_ended_driver_has_the_rest_of_its_output_read_by_the_task(view, ended):
    """A wake-up for a driver that may still write (lost, job timeout, a missing ledger) leaves
    the output to the next trigger: reading to the end would take a half-written line as complete."""
    from airflow_provider_zeta.core.ledger import driver_output_ended

    assert driver_output_ended(view) is ended


@pytest.mark.parametrize("extra_bytes, says_more", [(0, False), (10, True)], ids=["ends-at-the-cap", "more-than-the-cap"])
def test_past_the_workers_cap_a_line_says_the_rest_is_only_in_the_raw_log(state, extra_bytes, says_more):
    """docs/ui.md: the resumed task logs up to a cap, past which one line says where the rest is;
    a log that ends exactly at the cap gets no such line."""
    from airflow_provider_zeta.triggers.driver_output import drain_in_worker

    write(state, b"".join(b"%09d\n" % i for i in range(10)) + b"x" * extra_bytes)  # 100 bytes, then more
    logged: list[str] = []

    class Log:
        def info(self, message, *args):
            logged.append(message % args)

    drain_in_worker(DriverOutput(str(state), ATTEMPT, max_bytes=50), Log(), max_polls=2)
    assert logged[:10] == [f"[driver] {i:09d}" for i in range(10)]
    assert (logged[10:] == ["[driver] (driver output past 100 more bytes is only in driver.log)"]) is says_more
    assert len(logged) == (11 if says_more else 10)
