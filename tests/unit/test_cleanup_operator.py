"""The pipeline's cleanup task (``DelayedCleanupOperator``) over a real state root, in-process.

Airflow is faked only where a task talks to it (``ti``, the task state store, the outlet events);
storage is a real directory. The oracles are the record files on disk and the task's own log.
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import UTC
from types import SimpleNamespace

import pytest

from airflow_provider_zeta.core.cleanup import cleanup_dag_problem
from airflow_provider_zeta.core.paths import attempt_dir, cleanup_records_dir
from airflow_provider_zeta.operators.cleanup import DelayedCleanupOperator
from airflow_provider_zeta.storage import StateStorage, register_run

DAG, RUN = "sales", "backfill__2026-11-01T00:00:00+00:00"
DEPLOY = "p.deploy_a"


class NotFound(Exception):
    """What the Task SDK raises for a missing DAG (AirflowRuntimeError carrying the API's 404 body)."""

    def __str__(self) -> str:
        return "API_SERVER_ERROR: {'detail': {'reason': 'not_found', 'message': 'The Dag with dag_id: `zeta_cleanup` was not found'}}"


class FakeTI:
    def __init__(self, dags: dict[str, bool]):
        self.dag_id, self.run_id = DAG, RUN
        self.dags = dags  # dag_id -> is_paused

    def get_dag(self, dag_id: str):
        if dag_id not in self.dags:
            raise NotFound()
        return SimpleNamespace(dag_id=dag_id, is_paused=self.dags[dag_id])


class Store(dict):
    def set(self, key, value):
        self[key] = json.loads(json.dumps(value))


class Run:
    """One Airflow run of the DAG: its task state store lives and dies with it."""

    def __init__(self, clear_number: int = 0, dags: dict[str, bool] | None = None):
        self.store = Store()
        self.clear_number = clear_number
        self.ti = FakeTI({"zeta_cleanup": False} if dags is None else dags)

    def context(self):
        return {
            "ti": self.ti,
            "dag_run": SimpleNamespace(clear_number=self.clear_number),
            "task_state_store": self.store,
            "outlet_events": defaultdict(SimpleNamespace),
        }


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW__ZETA__STATE_ROOT", str(tmp_path / "state"))
    storage = StateStorage.from_url(str(tmp_path / "state"))
    register_run(storage, DAG, RUN)
    return storage


def stage_attempt(state: StateStorage, token: str) -> str:
    attempt = attempt_dir(DAG, RUN, DEPLOY, -1, token)
    state.write_atomic(f"{attempt}/output/part-0.json", b"[]")
    state.write_atomic(f"{attempt}/ledger.json", json.dumps({"token": token, "status": "succeeded", "started_at": 1, "heartbeat_at": 2}).encode())
    return attempt


def records_on_disk(state: StateStorage) -> list[dict]:
    folder = cleanup_records_dir(DAG, RUN)
    return [json.loads(state.read_bytes(f"{folder}/{name}") or b"{}") for name in sorted(state.list_dir(folder))]


def task_log(capsys) -> list[str]:
    """The task's log lines (the task logger writes them to stdout outside a task runner)."""
    captured = capsys.readouterr()
    return (captured.out + captured.err).splitlines()


def cleanup_task(**kwargs) -> DelayedCleanupOperator:
    kwargs.setdefault("retention", 600)
    return DelayedCleanupOperator(task_id="p.cleanup", task_ids=[DEPLOY], output_roots=[], **kwargs)


# -- the cleanup DAG that carries records out: missing or paused is said in the task's log ----------


@pytest.mark.parametrize(
    ("dags", "rule"),
    [({}, "cleanup_dag_missing"), ({"zeta_cleanup": True}, "cleanup_dag_paused"), ({"zeta_cleanup": False}, None)],
    ids=["missing", "paused", "deployed"],
)
def test_the_cleanup_task_warns_when_no_cleanup_dag_will_carry_its_record_out(state, capsys, dags, rule):
    stage_attempt(state, "t1")
    run = Run(dags=dags)
    cleanup_task().execute(run.context())
    warnings = [line for line in task_log(capsys) if "warning" in line]
    if rule is None:
        assert not [w for w in warnings if "zeta.cleanup.cleanup_dag" in w], warnings
    else:
        (line,) = [w for w in warnings if f"zeta.cleanup.{rule}" in w]
        assert "'zeta_cleanup'" in line
        assert ("dags/zeta_maintenance.py" in line) if rule == "cleanup_dag_missing" else ("paused" in line)
    assert len(records_on_disk(state)) == 1  # the record is written either way


def test_a_cleanup_dag_of_another_id_is_the_one_asked_for(state, capsys):
    stage_attempt(state, "t1")
    run = Run(dags={"zeta_cleanup": False})
    cleanup_task(cleanup_dag_id="team_cleanup").execute(run.context())
    assert any("zeta.cleanup.cleanup_dag_missing" in line and "'team_cleanup'" in line for line in task_log(capsys))


def test_cleanup_dag_problem_names_each_case():
    assert cleanup_dag_problem("zeta_cleanup", True, False) is None
    assert cleanup_dag_problem("zeta_cleanup", False, None)[0] == "cleanup_dag_missing"
    assert cleanup_dag_problem("zeta_cleanup", True, True)[0] == "cleanup_dag_paused"
    assert cleanup_dag_problem("zeta_cleanup", None, None)[0] == "cleanup_dag_unknown"


# -- a run re-created under a deleted run's id ----------------------------------------------------


def test_a_run_recreated_under_a_deleted_runs_id_records_its_own_attempts(state):
    """Backfill run ids are deterministic: a deleted run's date backfilled again is a new run of the
    same id, with a fresh task state store and the same clear_number 0. Its cleanup must record
    its own attempts (and keep the deleted run's pending paths), not resume the deleted run's record."""
    old_attempt = stage_attempt(state, "old")
    deleted = Run()
    cleanup_task().execute(deleted.context())
    (old_record,) = records_on_disk(state)
    assert old_record["state_paths"] == [old_attempt]

    new_attempt = stage_attempt(state, "new")
    recreated = Run()  # the deleted run's store went with it
    result = cleanup_task().execute(recreated.context())

    paths = {p for record in records_on_disk(state) if record["status"] == "pending" for p in record["state_paths"]}
    assert new_attempt in paths, records_on_disk(state)
    assert old_attempt in paths  # the deleted run's data is still deleted, never forgotten
    assert result["paths"] >= 2
    # No due time moves earlier: the deleted run's paths are kept at least until their old due time.
    assert min(r["due_at"] for r in records_on_disk(state) if old_attempt in r["state_paths"]) >= old_record["due_at"]


def test_a_retry_of_the_same_run_resumes_its_record_and_its_due_time(state):
    stage_attempt(state, "t1")
    run = Run()
    first = cleanup_task().execute(run.context())
    stage_attempt(state, "late")  # something new: a resumed record does not take it
    second = cleanup_task().execute(run.context())
    assert second["due_at"] == first["due_at"]
    assert second["paths"] == first["paths"]


def test_a_crash_between_the_record_file_and_the_store_resumes_from_the_file(state):
    stage_attempt(state, "t1")
    run = Run()

    class CrashAfterFile(DelayedCleanupOperator):
        def failure_window(self, name, context):
            raise SystemExit(name)

    with pytest.raises(SystemExit):
        CrashAfterFile(task_id="p.cleanup", task_ids=[DEPLOY], output_roots=[], retention=600).execute(run.context())
    (on_file,) = records_on_disk(state)
    resumed = cleanup_task().execute(run.context())
    assert resumed["due_at"] == on_file["due_at"]



# -- two pipelines of one DAG writing one table ---------------------------------------------------


def stage_output_entry(out: StateStorage, folder: str, name: str, pipeline_id: str, depth: int = 1) -> str:
    """A pending directory (marker ``depth`` levels down, below its partition) or a tombstone
    (marker at its top), whose commit marker names ``pipeline_id``."""
    entry = f"{folder}/{name}"
    inner = "/".join([entry, *[f"k{i}=v" for i in range(depth - 1)]])
    marker = {"commit_id": name, "ds": "2026-11-01", "incarnation": 0, "tokens": {}, "rows": {}, "published_at": 1.0,
              "run_id": RUN, "dag_id": DAG, "pipeline_id": pipeline_id}
    out.write_atomic(f"{inner}/_zeta_commit.json", json.dumps(marker).encode())
    out.write_atomic(f"{inner}/source=a/part-0.json", b"[]")
    return entry


def test_two_pipelines_writing_one_table_each_record_only_their_own_leftovers(state, tmp_path):
    from datetime import datetime

    from airflow.sdk import DAG as Dag
    from airflow.sdk import TaskGroup

    from airflow_provider_zeta.core.paths import run_pending_dir, run_tombstones_dir

    table = str(tmp_path / "table")
    out = StateStorage.from_url(table)
    pending, tombstones = run_pending_dir(DAG, RUN), run_tombstones_dir(DAG, RUN)
    mine = {
        "p": {stage_output_entry(out, tombstones, "ds=2026-11-01__pipe=p-c1", "p"), stage_output_entry(out, pending, "c2-n1", "p", depth=3)},
        "q": {stage_output_entry(out, tombstones, "ds=2026-11-01__pipe=q-c3", "q"), stage_output_entry(out, pending, "c4-n2", "q", depth=3)},
    }
    attempts = {}
    for pipeline in ("p", "q"):
        attempt = attempt_dir(DAG, RUN, f"{pipeline}.deploy_a", -1, f"tok-{pipeline}")
        state.write_atomic(f"{attempt}/ledger.json", json.dumps({"token": f"tok-{pipeline}", "status": "succeeded", "started_at": 1, "heartbeat_at": 2}).encode())
        attempts[pipeline] = attempt

    with Dag(dag_id=DAG, schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC)):
        tasks = {}
        for pipeline in ("p", "q"):
            with TaskGroup(pipeline):
                tasks[pipeline] = DelayedCleanupOperator(
                    task_id="cleanup", retention=600, task_ids=[f"{pipeline}.deploy_a"], output_roots=[table]
                )
    run = Run()
    for pipeline in ("p", "q"):
        store = Store()  # each task has its own task state store
        context = {**run.context(), "task_state_store": store}
        tasks[pipeline].execute(context)
    by_owner = {r["owner"]: r for r in records_on_disk(state)}
    for pipeline in ("p", "q"):
        record = by_owner[f"{pipeline}.cleanup"]
        assert set(record["outputs"].get(table, [])) == mine[pipeline], record
        assert record["state_paths"] == [attempts[pipeline]]


def test_overdue_cleanups_count_pending_records_past_their_due_time_and_the_latest():
    from airflow_provider_zeta.core.cleanup import CleanupRecord, RecordStatus, overdue_cleanups

    def rec(due, status=RecordStatus.PENDING):
        return CleanupRecord(DAG, RUN, 0, "p.cleanup", due - 600, due, status=status)

    now = 10_000.0
    records = [rec(now - 3600), rec(now - 120), rec(now - 30), rec(now + 60), rec(now - 7200, RecordStatus.CLEANED)]
    overdue = overdue_cleanups(records, now)
    assert (overdue.count, overdue.most_late_s) == (2, 3600.0)
    assert overdue_cleanups([], now).count == 0


# -- a run that launched nothing still has its record found by the cleanup DAG ----------------------


def test_the_record_of_a_run_that_launched_nothing_is_listed_for_the_cleanup_dag(tmp_path, monkeypatch):
    # No deploy launched (marked failed first, or every source failed before its launch): nothing
    # wrote the run's run.json, by which the cleanup DAG and the sweep list runs; the cleanup task's
    # record must be listed all the same, or it is never carried out.
    from airflow_provider_zeta import janitor

    monkeypatch.setenv("AIRFLOW__ZETA__STATE_ROOT", str(tmp_path / "state"))
    storage = StateStorage.from_url(str(tmp_path / "state"))
    cleanup_task().execute(Run().context())
    assert records_on_disk(storage), "the cleanup task wrote no record"
    assert (DAG, RUN) in janitor.list_runs(storage)
