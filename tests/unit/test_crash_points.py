"""crash_points: a point fires once per arming, only when armed, after the caller's current step
(or, armed with a hold, after holding the caller there while the rest of the loop runs on)."""

from __future__ import annotations

import asyncio
import time

import pytest

from airflow_provider_zeta import crash_points


@pytest.fixture
def events(tmp_path, monkeypatch) -> list:
    """Points armed in tmp_path; a kill is recorded here ("killed", or its time where a test asks)
    instead of killing the test (a raise inside the loop's callback would only be logged)."""
    monkeypatch.setenv(crash_points.ENV_VAR, str(tmp_path))
    recorded: list = []
    monkeypatch.setattr(crash_points, "_kill_component", lambda: recorded.append("killed"))
    return recorded


def test_an_armed_point_fires_once_at_the_next_pass_of_the_loop(tmp_path, events):
    (tmp_path / "some.point").write_text("run-1\n")
    order = events

    async def emitter():
        await crash_points.crash_when_armed("some.point", "run-2")  # armed for another run
        await crash_points.crash_when_armed("some.point", "run-1")
        order.append("handed over")  # what the caller does before its next suspension
        await asyncio.sleep(0)
        await crash_points.crash_when_armed("some.point", "run-1")  # disarmed by the first call
        await asyncio.sleep(0)

    asyncio.run(emitter())
    assert order == ["handed over", "killed"]
    assert not (tmp_path / "some.point").exists()


def test_nothing_fires_without_the_environment_or_the_file(tmp_path, monkeypatch):
    kills: list[str] = []  # a raise inside the loop's callback would only be logged: record instead
    monkeypatch.setattr(crash_points, "_kill_component", lambda: kills.append("killed"))
    (tmp_path / "some.point").write_text("run-1\n")

    async def emitter():
        await crash_points.crash_when_armed("some.point", "run-1")  # no ZETA_CRASH_POINTS: production
        monkeypatch.setenv(crash_points.ENV_VAR, str(tmp_path))
        await crash_points.crash_when_armed("other.point", "run-1")  # armed directory, another point
        await asyncio.sleep(0)

    monkeypatch.delenv(crash_points.ENV_VAR, raising=False)
    asyncio.run(emitter())
    assert (tmp_path / "some.point").exists()
    assert kills == []


def test_a_point_armed_with_a_hold_stops_its_caller_while_the_loop_runs_on_then_fires(tmp_path, events):
    (tmp_path / "some.point").write_text("run-1 hold=2\n")
    order = events

    async def caller():
        await crash_points.crash_when_armed("some.point", "run-1")
        order.append("caller went on")  # only because the kill is replaced here

    async def other_trigger():
        for _ in range(3):
            await asyncio.sleep(0.01)
            order.append("other ran")

    async def main():
        await asyncio.gather(caller(), other_trigger())

    asyncio.run(main())
    assert order == ["other ran"] * 3 + ["killed", "caller went on"]
    assert not (tmp_path / "some.point").exists()


def test_a_held_point_fires_when_released_and_an_unreadable_hold_counts_as_none(tmp_path, events):
    async def release_soon():
        await asyncio.sleep(0.2)
        (tmp_path / "some.point.release").write_text("go")

    async def main():
        (tmp_path / "some.point").write_text("run-1 hold=600\n")
        start = time.monotonic()
        await asyncio.gather(crash_points.crash_when_armed("some.point", "run-1"), release_soon())
        return time.monotonic() - start  # the held call returns once it has "killed"

    held_for = asyncio.run(main())
    assert events == ["killed"] and held_for < 60, f"the release ended the hold ({held_for:.1f} s)"
    assert not (tmp_path / "some.point.release").exists()

    async def unreadable():
        (tmp_path / "some.point").write_text("run-1 hold=soon\n")
        await crash_points.crash_when_armed("some.point", "run-1")  # fires like an unheld point
        await asyncio.sleep(0)

    asyncio.run(unreadable())
    assert events == ["killed", "killed"]


def test_a_point_armed_to_freeze_stops_the_callers_process_group_and_returns_once_continued(tmp_path, events, monkeypatch):
    """Armed with ``freeze``: SIGSTOP to the caller's own process group (nothing of the component
    runs), never a kill; when the group is continued the caller goes on from the point, once."""
    import signal

    signals: list = []
    monkeypatch.setattr(crash_points.os, "killpg", lambda group, sig: signals.append((group, sig)))
    (tmp_path / "some.point").write_text("run-1 freeze\n")

    async def caller():
        await crash_points.crash_when_armed("some.point", "run-1")
        events.append("went on")
        await crash_points.crash_when_armed("some.point", "run-1")  # disarmed by the first call
        await asyncio.sleep(0)

    asyncio.run(caller())
    assert signals == [(crash_points.os.getpgrp(), signal.SIGSTOP)]
    assert events == ["went on"]
    assert not (tmp_path / "some.point").exists()
