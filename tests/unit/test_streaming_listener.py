"""The driver's streaming listener: progress and idle events are signs of life; Spark Connect is skipped."""

from __future__ import annotations

import pytest

from airflow_provider_zeta.runtime import streaming

pytest.importorskip("pyspark")


class Streams:
    def __init__(self) -> None:
        self.listeners = []

    def addListener(self, listener) -> None:  # noqa: N802 (PySpark's name)
        self.listeners.append(listener)


class ClassicSession:
    def __init__(self) -> None:
        self.streams = Streams()


def test_progress_and_idle_events_record_a_checkpoint(monkeypatch, capsys):
    monkeypatch.delenv("SPARK_CONNECT_MODE_ENABLED", raising=False)
    monkeypatch.setattr(streaming, "is_remote_session", lambda session: False)
    session, seen = ClassicSession(), []
    assert streaming.register_listener(session, seen.append)
    (listener,) = session.streams.listeners
    listener.onQueryProgress(type("Event", (), {"progress": "p1"})())
    listener.onQueryIdle("idle")
    listener.onQueryStarted("started")
    listener.onQueryTerminated("terminated")
    assert seen == ["p1", "idle"]
    assert "listener registered" in capsys.readouterr().err


def test_a_listener_error_never_reaches_the_query(monkeypatch, capsys):
    monkeypatch.setattr(streaming, "is_remote_session", lambda session: False)
    session = ClassicSession()
    calls = []

    def broken(event):
        calls.append(event)
        raise OSError("ledger write failed")

    streaming.register_listener(session, broken)
    (listener,) = session.streams.listeners
    # Neither callback raises into Spark's listener bus; each error is printed with its traceback,
    # and the listener keeps recording the next events.
    listener.onQueryIdle("idle")
    listener.onQueryProgress(type("Event", (), {"progress": "p1"})())
    assert calls == ["idle", "p1"]
    err = capsys.readouterr().err
    assert err.count("OSError: ledger write failed") == 2 and "Traceback" in err


def test_a_spark_connect_session_is_skipped_with_one_line(capsys):
    remote_class = type("SparkSession", (), {"__module__": "pyspark.sql.connect.session"})
    session = remote_class()
    session.streams = Streams()
    assert streaming.is_remote_session(session)
    assert not streaming.register_listener(session, lambda _: None)
    assert session.streams.listeners == []
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Spark Connect" in err and "Traceback" not in err


def test_connect_mode_is_detected_from_the_environment(monkeypatch):
    monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")
    assert streaming.is_remote_session(ClassicSession())
