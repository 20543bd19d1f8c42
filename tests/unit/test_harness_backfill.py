"""The harness's backfill creation on SQLite, where Airflow refuses a creation that meets another
writer (503) and may leave the refused backfill behind (zeta_harness/chaos.py, ``create_backfill``)."""

from __future__ import annotations

import pytest

from zeta_harness.chaos import create_backfill
from zeta_harness.cluster import ClusterError

BODY = {"dag_id": "d", "from_date": "2026-01-01T00:00:00Z", "to_date": "2026-01-03T00:00:00Z"}


class FakeApi:
    """Answers POST /backfills from a script of outcomes; lists the backfills it holds."""

    def __init__(self, posts: list, backfills: list[dict]):
        self.posts, self.backfills, self.calls = list(posts), backfills, []

    def api(self, method: str, path: str, body=None):
        self.calls.append((method, path))
        if method == "POST":
            outcome = self.posts.pop(0)
            if isinstance(outcome, Exception):
                raise outcome
            return outcome
        if path.startswith("/backfills?"):
            return {"backfills": self.backfills}
        return {"dag_runs": []}


def running(backfill_id: int, from_date: str = "2026-01-01T00:00:00Z", to_date: str = "2026-01-03T00:00:00Z") -> dict:
    return {"id": backfill_id, "from_date": from_date, "to_date": to_date, "completed_at": None}


def test_a_409_after_a_refusal_returns_the_backfill_the_refusal_left_running(monkeypatch):
    monkeypatch.setattr("zeta_harness.chaos.time.sleep", lambda s: None)
    fake = FakeApi(
        [ClusterError("HTTP 503: Database is locked"), ClusterError("HTTP 409: There is already a running backfill for dag d")],
        [running(7, to_date="2026-02-01T00:00:00Z"), running(9, "2026-01-01T00:00:00+00:00", "2026-01-03T00:00:00+00:00")],
    )
    assert create_backfill(fake, BODY, log=lambda line: None)["id"] == 9


def test_a_409_without_an_earlier_refusal_is_an_error(monkeypatch):
    monkeypatch.setattr("zeta_harness.chaos.time.sleep", lambda s: None)
    fake = FakeApi([ClusterError("HTTP 409: There is already a running backfill for dag d")], [running(9)])
    with pytest.raises(ClusterError, match="409"):
        create_backfill(fake, BODY, log=lambda line: None)


def test_a_409_after_a_refusal_with_no_running_backfill_of_those_dates_is_an_error(monkeypatch):
    monkeypatch.setattr("zeta_harness.chaos.time.sleep", lambda s: None)
    fake = FakeApi(
        [ClusterError("HTTP 503: Database is locked"), ClusterError("HTTP 409: There is already a running backfill for dag d")],
        [running(7, to_date="2026-02-01T00:00:00Z"), {**running(9), "completed_at": "2026-01-04T00:00:00Z"}],
    )
    with pytest.raises(ClusterError, match="409"):
        create_backfill(fake, BODY, log=lambda line: None)
