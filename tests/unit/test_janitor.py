"""The cleanup's storage adapter on a real local directory, and the driver's late-arrival rule.

The driver test runs the real bootstrap (``runtime/driver.py``) as a separate process with a job
that keeps working; deleting its attempt directory (what the cleanup does) must make it stop
without re-creating anything.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from airflow_provider_zeta import janitor
from airflow_provider_zeta.core.cleanup import new_record
from airflow_provider_zeta.core.ledger import CorruptState
from airflow_provider_zeta.core.paths import attempt_dir, run_dir, run_tombstones_dir
from airflow_provider_zeta.storage import StateStorage, register_output, register_run

DAG, RUN = "sales", "scheduled__2026-11-01T00:00:00+00:00"


def make_run(tmp_path: Path):
    state = StateStorage.from_url(str(tmp_path / "state"))
    out_root = str(tmp_path / "table")
    register_run(state, DAG, RUN)
    register_output(state, DAG, RUN, out_root)
    for token in ("t1", "t2"):
        attempt = attempt_dir(DAG, RUN, "p.deploy_a", -1, token)
        state.write_atomic(f"{attempt}/output/part-0.json", b"[]")
        state.write_atomic(f"{attempt}/ledger.json", json.dumps({"token": token, "status": "succeeded", "started_at": 1, "heartbeat_at": 2}).encode())
    out = StateStorage.from_url(out_root)
    out.write_atomic(f"{run_tombstones_dir(DAG, RUN)}/ds=2026-11-01-c0/_zeta_commit.json", b"{}")
    out.write_atomic("ds=2026-11-01/_zeta_commit.json", b"{}")  # the published partition
    return state, out, out_root


def test_leftovers_of_a_run_are_found_and_deleted_exactly(tmp_path):
    state, out, out_root = make_run(tmp_path)
    other = attempt_dir(DAG, "another_run", "p.deploy_a", -1, "x")
    state.write_atomic(f"{other}/ledger.json", b"{}")
    leftovers, attempts = janitor.find_leftovers(state, DAG, RUN, StateStorage.from_url)
    assert len(leftovers.state_paths) == 2 and list(leftovers.outputs) == [out_root]
    assert not any(v.live for v in janitor.driver_views(state, attempts))
    record = new_record(DAG, RUN, 0, "p.cleanup", time.time(), 0, leftovers)
    assert janitor.carry_out(state, record, StateStorage.from_url) == 3
    assert janitor.carry_out(state, record, StateStorage.from_url) == 0  # idempotent
    assert out.exists("ds=2026-11-01/_zeta_commit.json"), "the published partition is never touched"
    assert state.exists(f"{other}/ledger.json"), "another run's attempt is never touched"
    assert not (tmp_path / "table" / "_zeta_tombstones").exists(), "empty hidden dirs are pruned"
    janitor.forget_run(state, DAG, RUN)
    assert not (tmp_path / "state" / run_dir(DAG, RUN)).exists()
    assert (tmp_path / "state" / "runs" / DAG).exists(), "the DAG dir still holds another run"


def test_a_record_naming_a_path_outside_its_run_deletes_nothing(tmp_path):
    state, out, out_root = make_run(tmp_path)
    leftovers, _ = janitor.find_leftovers(state, DAG, RUN, StateStorage.from_url)
    bad = new_record(DAG, RUN, 0, "p.cleanup", 0, 0, leftovers).with_changes(outputs={out_root: ("ds=2026-11-01",)})
    with pytest.raises(CorruptState, match="Nothing was deleted"):
        janitor.carry_out(state, bad, StateStorage.from_url)
    assert all(state.exists(p) for p in leftovers.state_paths) and out.exists("ds=2026-11-01")


def test_records_are_listed_with_corrupt_ones_reported(tmp_path):
    state, _, _ = make_run(tmp_path)
    record = new_record(DAG, RUN, 0, "p.cleanup", 0, 5, janitor.Leftovers())
    janitor.write_record_file(state, record)
    state.write_atomic(janitor.record_file(record.with_changes(incarnation=1)), b"{not json")
    found = janitor.read_records(state, DAG, RUN)
    assert record in found and sum(isinstance(r, CorruptState) for r in found) == 1
    assert janitor.list_runs(state) == [(DAG, RUN)]


def test_driver_stops_without_recreating_its_deleted_attempt(tmp_path):
    job = tmp_path / "job.py"
    job.write_text("import time\nwhile True:\n    time.sleep(0.2)\n")
    attempt = tmp_path / "state" / "attempt"
    spec = {
        "token": "tok-late",
        "attempt_url": f"file://{attempt}",
        "output_url": f"file://{attempt}/output",
        "application": str(job),
        "heartbeat_interval": 0.5,
        "lost_after": 30,
        "dag_id": DAG,
        "run_id": RUN,
        "task_id": "p.deploy_a",
    }
    driver = Path(__file__).resolve().parents[2] / "airflow_provider_zeta" / "runtime" / "driver.py"
    process = subprocess.Popen([sys.executable, str(driver), "--zeta-spec", json.dumps(spec)], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while not (attempt / "ledger.json").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert json.loads((attempt / "ledger.json").read_text())["status"] == "running"
        import shutil

        shutil.rmtree(attempt)  # the cleanup ran while the (orphaned) driver still works
        _, stderr = process.communicate(timeout=15)
    finally:
        process.kill()
    assert process.returncode != 0
    assert "deleted by the run's cleanup" in stderr
    time.sleep(1)
    assert not attempt.exists(), "a late heartbeat re-created the cleaned attempt"


def test_leftovers_past_due_sees_every_dag_unless_limited_to_some(tmp_path):
    from zeta_harness.leftovers import leftovers_past_due

    make_run(tmp_path)  # no cleanup record: its two attempts and its tombstone are orphans
    other = StateStorage.from_url(str(tmp_path / "state"))
    register_run(other, "bare deploy", RUN)
    other.write_atomic(f"{attempt_dir('bare deploy', RUN, 'job', -1, 't9')}/ledger.json", b"{}")
    state_root, table = tmp_path / "state", [tmp_path / "table"]

    everything = leftovers_past_due(state_root, table)
    assert len(everything) == 4 and any("t9" in problem for problem in everything)
    limited = leftovers_past_due(state_root, table, dag_ids=[DAG])
    assert len(limited) == 3 and not any("t9" in problem for problem in limited)
    assert leftovers_past_due(state_root, table, dag_ids=["bare deploy"]) == [p for p in everything if "t9" in p]


def test_sweep_reads_the_sdk_run_state_as_its_name():
    """The Task SDK answers with its own ``DagRunState`` enum; ``str()`` of it on Python 3.11 is
    ``"DagRunState.RUNNING"``, which once made every running run look ended to the sweep."""
    from airflow.sdk.api.datamodels._generated import DagRunState, TaskInstanceState

    from airflow_provider_zeta.core.cleanup import ACTIVE_RUN_STATES
    from airflow_provider_zeta.operators.sweep import _run_state, _task_states

    class FakeTI:
        def get_dr_count(self, dag_id, run_ids):
            return 1

        def get_dagrun_state(self, dag_id, run_id):
            return DagRunState.RUNNING

        def get_task_states(self, dag_id, run_ids):
            return {run_ids[0]: {"p.deploy_a": TaskInstanceState.DEFERRED, "p.cleanup": None}}

    state = _run_state(FakeTI(), DAG, RUN)
    assert state == "running" and type(state) is str and state in ACTIVE_RUN_STATES
    assert _task_states(FakeTI(), DAG, RUN) == {"p.deploy_a": "deferred", "p.cleanup": None}



def hdfs_like_storage(root: Path) -> StateStorage:
    from fsspec.implementations.local import LocalFileSystem

    class HdfsLike(LocalFileSystem):
        protocol = ("hdfslike",)
        cachable = False

    storage = StateStorage(HdfsLike(), str(root), f"hdfslike://{root}")
    assert not storage.is_local
    return storage


def test_run_trees_are_pruned_on_storage_with_explicit_directories(tmp_path):
    """Leak: on HDFS-like storage the emptied run tree must not stay forever."""
    make_run(tmp_path)  # written locally; now looked at as an HDFS-like filesystem
    state = hdfs_like_storage(tmp_path / "state")
    opener = lambda root: hdfs_like_storage(Path(root))  # noqa: E731
    leftovers, _ = janitor.find_leftovers(state, DAG, RUN, opener)
    record = new_record(DAG, RUN, 0, "p.cleanup", time.time(), 0, leftovers)
    assert janitor.carry_out(state, record, opener) == 3
    assert not (tmp_path / "state" / run_dir(DAG, RUN) / "attempts").exists(), "empty attempt tree left behind"
    assert not (tmp_path / "table" / "_zeta_tombstones").exists(), "empty tombstone tree left behind"
    assert (tmp_path / "table" / "ds=2026-11-01" / "_zeta_commit.json").exists()
    janitor.forget_run(state, DAG, RUN)
    assert not (tmp_path / "state" / "runs").exists() or not any((tmp_path / "state" / "runs").rglob("*"))


def test_collapsed_asset_events_name_every_record_once():
    """Several pipeline cleanups that emitted between two cleanup DAG runs arrive in one run: it
    takes every record they name (and ignores events of other producers)."""
    from types import SimpleNamespace

    from airflow_provider_zeta.operators.cleanup import EVENT_KEY, _named_records

    def event(run_id, incarnation, owner="p.cleanup"):
        named = {"dag_id": DAG, "run_id": run_id, "owner": owner, "incarnation": incarnation, "due_at": 1.0}
        return SimpleNamespace(extra={EVENT_KEY: named})

    events = [event("r1", 0), event("r2", 0), event("r1", 1), event("r1", 0), SimpleNamespace(extra={"other": 1})]
    assert sorted(set(_named_records(events))) == [
        (DAG, "r1", "p.cleanup", 0),
        (DAG, "r1", "p.cleanup", 1),
        (DAG, "r2", "p.cleanup", 0),
    ]


def test_forgetting_a_run_that_another_cleanup_forgets_at_the_same_moment_succeeds(tmp_path, monkeypatch):
    """Two runs of the cleanup DAG carry out the same due record at once (each takes every pending
    one); both then forget the run. Seen in the backfill benchmark: the second one's rmtree met the
    directories the first had just removed, and its task failed with FileNotFoundError."""
    import shutil

    state, _, _ = make_run(tmp_path)
    folder = tmp_path / "state" / run_dir(DAG, RUN)
    (folder / "outputs" / "x").mkdir(parents=True, exist_ok=True)
    real_rm = state.fs.rm

    def rm_after_the_other_cleanup(path, recursive=False, **kwargs):
        shutil.rmtree(path, ignore_errors=True)  # the other cleanup, a moment earlier
        return real_rm(path, recursive=recursive, **kwargs)

    monkeypatch.setattr(state.fs, "rm", rm_after_the_other_cleanup)
    janitor.forget_run(state, DAG, RUN)
    assert not [p for p in folder.rglob("*") if p.name != "attempts" and "attempts" not in p.parts]
