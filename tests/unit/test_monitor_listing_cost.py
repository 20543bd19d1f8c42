"""The monitoring listing costs the same per request with 20 or 2,000 historical runs.

Real SQL (Airflow's own models on a SQLite file, the plugin's real queries) and real storage (a
local state root); cost is counted, not timed: SQL statements, rows fetched from the database, and
calls into the storage's filesystem. The oracle is independent of the plugin: the runs are made
here, with their states and directories, and the expected sections follow from that.

Also: a malformed ledger and an unreadable run show as errors on their own rows while the rest of
the page is listed (``test_plugin_hostile.py`` has the hostile attempt trees).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from airflow_provider_zeta.core.cleanup import Leftovers, new_record
from airflow_provider_zeta.core.ledger import Ledger, LedgerStatus
from airflow_provider_zeta.core.monitor import Section
from airflow_provider_zeta.core.paths import attempt_dir, cleanup_record_path, run_info_path
from airflow_provider_zeta.storage import StateStorage

DAG = "hist"
TASK = "p.deploy_a"
START = datetime(2020, 1, 1, tzinfo=UTC)


class CountingFS:
    """Counts every method call into the state root's filesystem (ls, cat_file, exists, ...)."""

    def __init__(self, fs, calls: list) -> None:
        self._fs, self._calls = fs, calls

    def __getattr__(self, name):
        value = getattr(self._fs, name)
        if callable(value):

            def counted(*args, **kwargs):
                self._calls.append(name)
                return value(*args, **kwargs)

            return counted
        return value


class CountingSession:
    """A session proxy that counts statements and rows fetched."""

    def __init__(self, session) -> None:
        self.session, self.statements, self.rows = session, 0, 0

    def execute(self, statement, *args, **kwargs):
        self.statements += 1
        result = self.session.execute(statement, *args, **kwargs)
        outer = self

        class Counted:
            def all(self):
                rows = result.all()
                outer.rows += len(rows)
                return rows

            def scalar_one(self):
                outer.rows += 1
                return result.scalar_one()

        return Counted()


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    from airflow.models import import_all_models
    from sqlalchemy import create_engine

    import_all_models()
    from airflow.models.base import Base

    engine = create_engine(f"sqlite:///{tmp_path_factory.mktemp('db')}/airflow.db")
    Base.metadata.create_all(engine)
    return engine


def make_runs(engine, state: StateStorage, historical: int, malformed: bool = False) -> dict[str, str]:
    """``historical`` ended runs with nothing left, and three live runs; returns the live run ids."""
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from sqlalchemy import delete, insert

    with engine.begin() as connection:
        connection.execute(delete(TaskInstance))
        connection.execute(delete(DagRun))
        runs, tasks = [], []
        for n in range(historical):
            run_id = f"scheduled__{(START + timedelta(hours=n)).isoformat()}"
            runs.append({"dag_id": DAG, "run_id": run_id, "run_type": "scheduled", "state": "success", "run_after": START + timedelta(hours=n)})
            tasks.append({"dag_id": DAG, "run_id": run_id, "task_id": TASK, "pool": "default_pool", "operator": "ZetaSparkJobOperator", "state": "success", "map_index": -1})
        late = START + timedelta(hours=historical + 10)
        live = {"running": f"manual__{late.isoformat()}", "retained": f"manual__{(late + timedelta(hours=1)).isoformat()}"}
        for offset, (kind, run_id) in enumerate(live.items()):
            runs.append({"dag_id": DAG, "run_id": run_id, "run_type": "manual", "state": "running" if kind == "running" else "success", "run_after": late + timedelta(hours=offset)})
            tasks.append({"dag_id": DAG, "run_id": run_id, "task_id": TASK, "pool": "default_pool", "operator": "ZetaSparkJobOperator", "state": "deferred" if kind == "running" else "success", "map_index": -1})
        connection.execute(insert(DagRun), runs)
        connection.execute(insert(TaskInstance), tasks)
    import time

    now = time.time()
    for kind, run_id in live.items():
        state.write_atomic(run_info_path(DAG, run_id), json.dumps({"dag_id": DAG, "run_id": run_id}).encode())
        relative = attempt_dir(DAG, run_id, TASK, -1, f"tok{kind}")
        ledger = Ledger(token=f"tok{kind}", status=LedgerStatus.RUNNING if kind == "running" else LedgerStatus.SUCCEEDED, started_at=now - 50, heartbeat_at=now - 1, source="a")
        data = json.loads(ledger.to_json())
        if malformed and kind == "running":
            data["error"], data["spark_ui_url"], data["source"] = 12345, ["http://x"], {"a": 1}
        state.write_atomic(f"{relative}/ledger.json", json.dumps(data).encode())
        if kind == "retained":
            record = new_record(DAG, run_id, 0, "p.cleanup", now, 3600, Leftovers(state_paths=(relative,)))
            state.write_atomic(cleanup_record_path(DAG, run_id, "p.cleanup", 0), record.to_json())
    return live


def request_cost(engine, state_root: str, monkeypatch, ended_offset: int = 0) -> tuple[dict, dict]:
    from sqlalchemy.orm import Session

    from airflow_provider_zeta.plugins.api import Monitor

    monkeypatch.setenv("AIRFLOW__ZETA__STATE_ROOT", state_root)
    calls: list[str] = []
    with Session(engine) as raw:
        session = CountingSession(raw)
        monitor = Monitor(session, {DAG}, {DAG})
        monitor.reader.storage.fs = CountingFS(monitor.reader.storage.fs, calls)
        shown = {
            Section.RUNNING: monitor.section(Section.RUNNING, 10, 0),
            Section.RETAINED: monitor.section(Section.RETAINED, 10, 0),
            Section.ENDED: monitor.section(Section.ENDED, 10, ended_offset),
        }
    return shown, {"statements": session.statements, "rows": session.rows, "storage_calls": len(calls)}


def test_per_request_cost_does_not_grow_with_history(engine, tmp_path, monkeypatch, capsys):
    costs = {}
    for historical in (20, 2000):
        root = tmp_path / f"state-{historical}"
        state = StateStorage.from_url(str(root))
        live = make_runs(engine, state, historical)
        shown, cost = request_cost(engine, str(root), monkeypatch)
        costs[historical] = cost
        assert [r["run_id"] for r in shown[Section.RUNNING]["runs"]] == [live["running"]]
        assert [r["run_id"] for r in shown[Section.RETAINED]["runs"]] == [live["retained"]]
        ended = shown[Section.ENDED]
        assert ended["total"] == historical
        newest = [f"scheduled__{(START + timedelta(hours=n)).isoformat()}" for n in range(historical - 1, historical - 11, -1)]
        assert [r["run_id"] for r in ended["runs"]] == newest
        # A deep page of the ended section costs the same as the first.
        deep, deep_cost = request_cost(engine, str(root), monkeypatch, ended_offset=historical - 5)
        assert [r["run_id"] for r in deep[Section.ENDED]["runs"]] == [
            f"scheduled__{(START + timedelta(hours=n)).isoformat()}" for n in range(4, -1, -1)
        ]
        assert deep_cost["storage_calls"] == cost["storage_calls"] and deep_cost["statements"] == cost["statements"]
    print(f"\nlisting cost per request (3 sections): 20 historical runs {costs[20]}; 2,000 historical runs {costs[2000]}")
    assert costs[20] == costs[2000], costs
    assert costs[2000]["rows"] < 50  # a page and the live runs, never the history


def test_a_malformed_ledger_is_an_error_on_its_own_row(engine, tmp_path, monkeypatch):
    root = tmp_path / "state"
    state = StateStorage.from_url(str(root))
    live = make_runs(engine, state, 3, malformed=True)
    shown, _ = request_cost(engine, str(root), monkeypatch)
    (running,) = shown[Section.RUNNING]["runs"]
    source = running["pipelines"][0]["sources"][0]
    # The job wrote a number as its error, a list as its Spark UI URL and an object as its source:
    # the source is corrupt on its own row, the reason names the field, no TypeError reaches the page.
    assert source["driver"] == "corrupt" and source["spark_ui_url"] is None and source["source"] == "a", source
    assert "field 'error' is not text" in source["error"] and "12345" not in source["error"], source
    # The rest of the page still works.
    assert [r["run_id"] for r in shown[Section.RETAINED]["runs"]] == [live["retained"]]
    assert shown[Section.ENDED]["total"] == 3


def test_a_run_whose_state_cannot_be_read_is_an_error_row(engine, tmp_path, monkeypatch):
    root = tmp_path / "state"
    state = StateStorage.from_url(str(root))
    live = make_runs(engine, state, 3)
    # A directory where the ledger should be: reading it raises, for this run only.
    ledger = root / attempt_dir(DAG, live["retained"], TASK, -1, "tokretained") / "ledger.json"
    ledger.unlink()
    ledger.mkdir()
    shown, _ = request_cost(engine, str(root), monkeypatch)
    rows = {r["run_id"]: r for section in shown.values() for r in section["runs"]}
    assert rows[live["retained"]]["error"] and rows[live["retained"]]["pipelines"] == []
    assert rows[live["running"]]["error"] is None and rows[live["running"]]["pipelines"]
