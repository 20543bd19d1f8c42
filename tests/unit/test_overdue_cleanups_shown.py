"""The monitoring overview shows the overdue cleanups of the DAGs the user may read: per DAG and in
total, how many cleanup records are still pending more than the grace past their due time and how
late the most overdue one is, with what to do (``core.cleanup.overdue_summary``, shown by
``plugins.api.Monitor.overdue`` and ``plugins.page.render_overdue``).

The oracle is the records written here with known due times: on disk under a state root, beside
runs in Airflow's own models on a SQLite file, read through the plugin's real FastAPI app (only
authentication replaced, as in ``test_plugin_hostile.py``). A record that cannot be read is a row
of its own; nothing fails the request.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable

import pytest

from airflow_provider_zeta.core.cleanup import (
    OVERDUE_GRACE,
    CleanupRecord,
    Leftovers,
    RecordSeen,
    RecordStatus,
    new_record,
    overdue_summary,
)
from airflow_provider_zeta.core.ledger import CorruptState
from airflow_provider_zeta.core.paths import cleanup_record_path, cleanup_records_dir, run_info_path
from airflow_provider_zeta.storage import StateStorage
from tests.unit.test_monitor_listing_cost import DAG, CountingFS, engine, make_runs  # noqa: F401 (fixture)
from tests.unit.test_plugin_hostile import SECRET, plugin_test_client

NOW = 1_000_000.0
HOUR = 3600.0


def record(dag="d", run="r", due=NOW, incarnation=0, status=RecordStatus.PENDING, owner="p.cleanup") -> CleanupRecord:
    return CleanupRecord(dag, run, incarnation, owner, due - 600, due, status=status)


def seen(rec, dag=None, run_state="success", where="runs/x/cleanup/p.cleanup-0.json") -> RecordSeen:
    return RecordSeen(dag or (rec.dag_id if isinstance(rec, CleanupRecord) else "d"), run_state, rec, where)


# -- the rule --------------------------------------------------------------------------------------


def test_per_dag_and_total_count_only_records_pending_beyond_the_grace():
    entries = [
        seen(record("a", "r1", NOW - 3 * HOUR)),  # overdue by 3 h
        seen(record("a", "r2", NOW - OVERDUE_GRACE - 1)),  # just past the grace
        seen(record("a", "r3", NOW - OVERDUE_GRACE + 5)),  # past due, within the grace: not overdue
        seen(record("a", "r4", NOW + HOUR)),  # not due
        seen(record("a", "r5", NOW - 9 * HOUR, status=RecordStatus.CLEANED)),  # carried out
        seen(record("b", "r1", NOW - HOUR)),
    ]
    summary = overdue_summary(entries, NOW)
    assert [(row.dag_id, row.count, row.most_late_s) for row in summary.dags] == [
        ("a", 2, 3 * HOUR),
        ("b", 1, HOUR),
    ]
    assert (summary.total.count, summary.total.most_late_s) == (3, 3 * HOUR)
    assert summary.grace == OVERDUE_GRACE and summary.unreadable == () and summary.sweep_records == 0
    assert "'zeta_cleanup'" in summary.hint and "missing, paused or failing" in summary.hint
    assert "'zeta_sweep'" in summary.hint


def test_the_grace_covers_the_cleanup_dag_rescan():
    """A working cleanup DAG takes a past-due record nobody waits for at its next listing, at most
    ``DEFAULT_RESCAN_INTERVAL`` late: that is never overdue."""
    from airflow_provider_zeta.core.cleanup import DEFAULT_RESCAN_INTERVAL

    assert overdue_summary([seen(record(due=NOW - DEFAULT_RESCAN_INTERVAL))], NOW).total.count == 0


def test_nothing_overdue_no_hint():
    summary = overdue_summary([seen(record(due=NOW + 5))], NOW)
    assert summary.dags == () and summary.total.count == 0 and summary.hint is None


def test_a_record_of_an_active_run_waits_by_the_rule_and_is_not_overdue():
    entries = [seen(record(due=NOW - 5 * HOUR), run_state=state) for state in ("running", "queued")]
    assert overdue_summary(entries, NOW).total.count == 0
    # The run was deleted from Airflow: the cleanup DAG carries it out at its due time (run_gone).
    assert overdue_summary([seen(record(due=NOW - 5 * HOUR), run_state=None)], NOW).total.count == 1


def test_sweep_records_count_and_the_hint_names_the_sweep():
    summary = overdue_summary([seen(record(due=NOW - 2 * HOUR, incarnation=None, owner="sweep"))], NOW)
    assert summary.total.count == 1 and summary.sweep_records == 1
    assert "only the sweep ('zeta_sweep')" in summary.hint and "zeta_cleanup" not in summary.hint


def test_a_record_is_counted_under_its_directory_dag_not_the_dag_it_names():
    summary = overdue_summary([seen(record("secret_dag", due=NOW - HOUR), dag="a")], NOW)
    assert [row.dag_id for row in summary.dags] == ["a"]


@pytest.mark.parametrize("due", [float("-inf"), float("inf"), float("nan")])
def test_a_record_without_a_finite_due_time_is_unreadable_on_its_own(due):
    entries = [seen(record(due=NOW - HOUR)), seen(record(due=NOW), where="w")]
    entries[1] = RecordSeen("d", "success", record(due=NOW).with_changes(due_at=due), "w")
    summary = overdue_summary(entries, NOW)
    assert summary.unreadable == (("d", "w"),) and (summary.total.count, summary.total.most_late_s) == (1, HOUR)
    assert "cannot be read" in summary.hint


def test_a_corrupt_record_is_unreadable_and_never_counted():
    summary = overdue_summary([RecordSeen("d", None, CorruptState("bad"), "runs/d/r/cleanup/x.json")], NOW)
    assert summary.total.count == 0 and summary.unreadable == (("d", "runs/d/r/cleanup/x.json"),)


# -- the plugin: the real app over a state root and Airflow's models ---------------------------------


@pytest.mark.parametrize(
    ("cleanup_dag", "says"),
    [
        ((False, None), "no DAG 'zeta_cleanup' is deployed"),
        ((True, True), "the cleanup DAG 'zeta_cleanup' is paused"),
        ((True, False), "is deployed and not paused: look at its failed runs"),
        (None, "is missing, paused or failing"),
    ],
    ids=["missing", "paused", "running", "unknown"],
)
def test_the_hint_says_what_is_wrong_with_the_cleanup_dag(cleanup_dag, says):
    """Whether the cleanup DAG is deployed and unpaused (``None``: not asked) decides the hint."""
    summary = overdue_summary([seen(record(due=NOW - HOUR))], NOW, cleanup_dag=cleanup_dag)
    assert says in (summary.hint or ""), summary.hint
    assert overdue_summary([], NOW, cleanup_dag=(False, None)).hint is None  # nothing overdue, nothing said


@pytest.fixture
def client(engine, tmp_path, monkeypatch):  # noqa: F811
    yield from plugin_test_client(engine, tmp_path, monkeypatch)


def write_record(state: StateStorage, dag: str, run: str, due: float, owner: str = "p.cleanup", incarnation=0, register=True):
    if register:
        state.write_atomic(run_info_path(dag, run), json.dumps({"dag_id": dag, "run_id": run}).encode())
    rec = new_record(dag, run, incarnation, owner, due - HOUR, HOUR, Leftovers())
    state.write_atomic(cleanup_record_path(dag, run, owner, incarnation), rec.to_json())


def plant(client) -> float:
    """Records with known due times; returns the moment they were written against."""
    now = time.time()
    retained, running = client.live["retained"], client.live["running"]
    write_record(client.state, DAG, retained, now - 3 * HOUR, owner="q.cleanup")  # overdue by 3 h
    write_record(client.state, DAG, retained, now - 60, owner="r.cleanup")  # within the grace
    write_record(client.state, DAG, running, now - 5 * HOUR)  # the run is running: waits by the rule
    write_record(client.state, DAG, "manual__deleted", now - 2 * HOUR)  # run gone from Airflow: overdue
    write_record(client.state, "not_readable", "manual__1", now - 9 * HOUR)  # a DAG the user may not read
    return now


def overview(client, section="running") -> dict:
    answer = client.get("/api/runs", params={"section": section})
    assert answer.status_code == 200, answer.text[:500]
    return answer.json()["overdue_cleanups"]


def test_the_overview_shows_overdue_cleanups_per_dag_and_in_total(client):
    now = plant(client)
    for section in ("running", "retained", "ended"):
        shown = overview(client, section)
        assert shown["count"] == 2, shown
        assert [(row["dag_id"], row["count"]) for row in shown["dags"]] == [(DAG, 2)]
        # The most overdue is the 3-hour-late record, measured at the request's moment.
        assert 3 * HOUR <= shown["most_late_s"] < 3 * HOUR + 60 and shown["most_late_text"].startswith("3h 0")
        assert shown["dags"][0]["most_late_s"] == shown["most_late_s"]
        assert shown["unreadable"] == [] and shown["error"] is None and shown["grace_s"] == OVERDUE_GRACE
        assert "zeta_cleanup" in shown["hint"]
    assert time.time() - now < 60
    page = client.get("/ui")
    assert page.status_code == 200
    assert 'data-overdue-count="2"' in page.text and f'data-overdue-dag="{DAG}"' in page.text
    assert 'data-overdue-total="2"' in page.text and "3h 0" in page.text and "zeta_cleanup" in page.text
    assert "not_readable" not in page.text
    # The page of one run does not carry the overview.
    one = client.get("/ui", params={"dag_id": DAG, "run_id": client.live["retained"]})
    assert one.status_code == 200 and "zeta-overdue" not in one.text


def set_cleanup_dag(engine, paused: bool | None) -> None:  # noqa: F811
    """The cleanup DAG's row in Airflow's ``dag`` table: absent (``None``), paused or not."""
    from airflow.models.dag import DagModel
    from sqlalchemy import delete, insert

    with engine.begin() as connection:
        connection.execute(delete(DagModel).where(DagModel.dag_id == "zeta_cleanup"))
        if paused is not None:
            connection.execute(insert(DagModel), [{"dag_id": "zeta_cleanup", "is_paused": paused, "is_stale": False, "bundle_name": "dags-folder", "max_active_tasks": 16, "max_active_runs": 16, "max_consecutive_failed_dag_runs": 0, "has_task_concurrency_limits": False}])


@pytest.mark.parametrize(("paused", "says"), [(None, "is deployed:"), (True, "is paused")], ids=["missing", "paused"])
def test_the_overview_asks_airflow_about_the_cleanup_dag(client, engine, paused, says):  # noqa: F811
    set_cleanup_dag(engine, paused)
    try:
        plant(client)
        shown = overview(client)
        assert shown["count"] == 2 and says in shown["hint"], shown["hint"]
    finally:
        set_cleanup_dag(engine, None)


def test_no_overdue_cleanups_one_line(client):
    shown = overview(client)
    assert shown["count"] == 0 and shown["dags"] == [] and shown["hint"] is None
    page = client.get("/ui").text
    assert 'data-overdue-count="0"' in page and "Overdue cleanups: none" in page and "section-overdue" not in page


def hostile_files(client) -> dict[str, Callable[[], None]]:
    folder = client.root / cleanup_records_dir(DAG, client.live["retained"])

    def text(content):
        def make():
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "x.cleanup-0.json").write_text(content)

        return make

    def directory():
        (folder / "x.cleanup-0.json").mkdir(parents=True)

    def fifo():
        folder.mkdir(parents=True, exist_ok=True)
        os.mkfifo(folder / "x.cleanup-0.json")

    def symlink():
        outside = client.root.parent / "outside.json"
        outside.write_text("{}")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "x.cleanup-0.json").symlink_to(outside)

    good = json.loads(new_record(DAG, client.live["retained"], 0, "x.cleanup", 0.0, HOUR, Leftovers()).to_json())

    def with_field(name, raw):
        data = dict(good)
        data[name] = "__P__"
        return text(json.dumps(data).replace('"__P__"', raw))

    return {
        "garbage": text(f"not json {SECRET}"),
        "nested": text("[" * 200_000 + "]" * 200_000),
        "due_minus_infinity": with_field("due_at", "-Infinity"),
        "due_nan": with_field("due_at", "NaN"),
        "due_huge": with_field("due_at", "-1" + "0" * 400),
        "due_text": with_field("due_at", f'"{SECRET}"'),
        "foreign_path": with_field("state_paths", f'["runs/other/{SECRET}/attempts/x"]'),
        "a_list": text("[1, 2]"),
        "directory": directory,
        "fifo": fifo,
        "symlink": symlink,
    }


@pytest.mark.parametrize(
    "kind",
    ["garbage", "nested", "due_minus_infinity", "due_nan", "due_huge", "due_text", "foreign_path", "a_list", "directory", "fifo", "symlink"],
)
def test_a_hostile_record_file_is_an_unreadable_row_never_a_500(client, kind):
    plant(client)
    hostile_files(client)[kind]()
    answers = {
        "runs": client.get("/api/runs", params={"section": "retained"}),
        "ended": client.get("/api/runs", params={"section": "ended"}),
        "ui": client.get("/ui"),
        "fragment": client.get("/ui", params={"fragment": 1}),
    }
    for name, answer in answers.items():
        assert answer.status_code == 200, (kind, name, answer.text[:300])
        assert SECRET not in answer.text, (kind, name)
    shown = answers["runs"].json()["overdue_cleanups"]
    # The other records are still judged: the run gone from Airflow's is overdue whatever happens to
    # the retained run's directory; its 3-hour-late record too unless the whole directory is unreadable.
    assert shown["count"] >= 1 and shown["dags"][0]["dag_id"] == DAG, shown
    assert len(shown["unreadable"]) == 1, shown
    (row,) = shown["unreadable"]
    assert row["dag_id"] == DAG and client.live["retained"].replace(":", "_")[:20] in row["where"].replace(":", "_")
    assert f'data-unreadable="{DAG}"' in answers["ui"].text and "cannot be read" in answers["ui"].text
    assert "cannot be read" in shown["hint"]


def test_an_unlistable_run_directory_is_an_unreadable_row(client, monkeypatch):
    """A run directory of a run deleted from Airflow whose records cannot be listed (storage
    error) is a row of its own; the other DAG rows stand."""
    from airflow_provider_zeta.plugins.api import StateReader

    plant(client)
    write_record(client.state, DAG, "manual__broken", time.time() - HOUR)
    listed = StateReader.records

    def records(self, base):
        if base.endswith("/manual__broken"):
            raise PermissionError(f"denied {SECRET}")
        return listed(self, base)

    monkeypatch.setattr(StateReader, "records", records)
    answer = client.get("/api/runs")
    page = client.get("/ui")
    assert answer.status_code == 200 and page.status_code == 200 and SECRET not in answer.text + page.text
    shown = answer.json()["overdue_cleanups"]
    assert shown["count"] == 2 and [row["where"] for row in shown["unreadable"]] == [f"runs/{DAG}/manual__broken/cleanup"]


def test_an_overview_that_fails_is_an_error_line_never_a_500(client, monkeypatch):
    from airflow_provider_zeta.plugins import api

    plant(client)

    def fails(*args, **kwargs):
        raise RuntimeError(SECRET)

    monkeypatch.setattr(api, "overdue_summary", fails)
    answer = client.get("/api/runs")
    page = client.get("/ui")
    assert answer.status_code == 200 and page.status_code == 200 and SECRET not in answer.text + page.text
    assert answer.json()["overdue_cleanups"]["error"] == "overdue cleanups cannot be read (RuntimeError)"
    assert answer.json()["runs"], "the sections are still listed"
    assert 'data-error="overdue"' in page.text


def test_the_overview_reads_nothing_more_for_runs_the_listing_read(engine, tmp_path, monkeypatch):  # noqa: F811
    """The records of listed runs were read for their statuses: the overview adds no storage call.
    A run directory no listed run owns costs its own reads, and nothing else grows."""
    from sqlalchemy.orm import Session

    from airflow_provider_zeta.plugins.api import Monitor

    root = tmp_path / "state"
    state = StateStorage.from_url(str(root))
    live = make_runs(engine, state, 20)
    write_record(state, DAG, live["retained"], time.time() - 3 * HOUR, owner="q.cleanup")
    monkeypatch.setenv("AIRFLOW__ZETA__STATE_ROOT", str(root))

    def cost(orphans: int) -> tuple[int, int, dict]:
        for n in range(orphans):
            write_record(state, DAG, f"manual__gone{n}", time.time() - HOUR)
        calls: list[str] = []
        with Session(engine) as session:
            monitor = Monitor(session, {DAG}, {DAG})
            monitor.reader.storage.fs = CountingFS(monitor.reader.storage.fs, calls)
            monitor.live_statuses()
            listing = len(calls)
            shown = monitor.overdue()
        return listing, len(calls) - listing, shown

    listing, extra, shown = cost(0)
    assert extra == 0 and shown["count"] == 1, (listing, extra, shown)
    _, extra_one, shown = cost(1)
    _, extra_two, shown_two = cost(2)
    assert shown["count"] == 2 and shown_two["count"] == 3
    assert extra_one > 0 and extra_two == 2 * extra_one, (extra_one, extra_two)


# -- the page --------------------------------------------------------------------------------------


def test_every_shown_value_of_the_overview_is_escaped():
    from airflow_provider_zeta.plugins.page import render_overdue

    hostile = "<script>alert(1)</script>\"onload=alert(2) x='</td>"
    html = render_overdue(
        {
            "count": 1,
            "most_late_text": hostile,
            "grace_s": 660.0,
            "dags": [{"dag_id": hostile, "count": 1, "most_late_text": hostile}],
            "unreadable": [{"dag_id": hostile, "where": hostile, "error": "cannot be read"}],
            "hint": hostile,
            "error": None,
        }
    )
    assert "<script>" not in html and "'</td>" not in html and '"onload' not in html
    assert "&lt;script&gt;" in html and "11m 00s" in html


def test_an_overview_that_could_not_be_made_is_an_error_line():
    from airflow_provider_zeta.plugins.api import overdue_json
    from airflow_provider_zeta.plugins.page import render_overdue

    html = render_overdue(overdue_json(None, error="overdue cleanups cannot be read (OSError)"))
    assert 'data-error="overdue"' in html and "OSError" in html
