"""The delayed cleanup's crash windows on real Airflow components (SQLite, fake drivers), one test
per window: the task process is killed with SIGKILL there once, Airflow retries the task, and the
cleanup still deletes every recorded path at or after its due time, never before, once.

* ``after_record_file`` — the pipeline's teardown (``DelayedCleanupOperator``) wrote the record
  file and had not stored the record in its task state store nor emitted the Asset event
  (``tests/dags/pipeline_publish.py``, ``conf["crash_at"]``);
* ``before_delete`` / ``after_delete`` — the cleanup DAG's task (``CarryOutCleanupsOperator``)
  around its deletion of one run's record (``tests/dags/zeta_cleanup_test.py``, armed by a file).

Oracles are the files on disk (the recorded paths, watched from before the due time; the published
partition read whole with ``zeta_harness.published``; ``zeta_harness.leftovers``), the Asset events of the
REST API and the task tries and logs — not the provider's summaries.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from airflow_provider_zeta.core.paths import safe_segment
from tests.test_publish_windows import task_logs
from zeta_harness.leftovers import leftovers_past_due, run_directory
from zeta_harness.published import read_partition

pytestmark = pytest.mark.sqlite_only  # provider logic, not the database

DAG_ID = "publish_windows"
CLEANUP_DAG = "zeta_cleanup"
CLEANUP_TASK = "counting.cleanup"
RECORD_NAME = "counting.cleanup-0.json"
CLEANUP_EVENT = "zeta_cleanup_recorded"  # CLEANUP_ASSET's name (no Airflow imported in the test process)
SOURCES = ("alpha", "beta", "gamma")
LATE_BOUND = 60  # seconds past due: a retry (retry_delay 5 s) and its scheduling


def start_run(cluster, tmp_path: Path, ds: str, window: int, **conf) -> tuple[str, dict, list[Path]]:
    """Trigger ``publish_windows`` for ``ds``; returns the run id, its cleanup record as written
    (read from its file) and the recorded paths, each checked to exist."""
    cluster.wait_for_dag(DAG_ID)
    cluster.wait_for_dag(CLEANUP_DAG)
    run_id = f"cleanup_windows__{ds}"
    arm = conf.pop("arm", None)
    if arm is not None:  # the cleanup DAG's windows: armed for this run's record only
        armed = cluster.home / "cleanup-windows" / safe_segment(DAG_ID) / f"{safe_segment(run_id)}.json"
        armed.parent.mkdir(parents=True, exist_ok=True)
        armed.write_text(json.dumps(arm))
    conf = {"launch_log": str(tmp_path / "launches.jsonl"), "seconds": 1, "cleanup_delay": window, **conf}
    cluster.trigger_run(DAG_ID, f"{ds}T00:00:00Z", run_id=run_id, conf=conf)
    record_file = run_directory(cluster.home / "zeta-state", DAG_ID, run_id) / "cleanup" / RECORD_NAME
    cluster.wait_for(record_file.exists, 300, "the cleanup record file")
    time.sleep(0.2)  # written atomically: it is whole once it exists; this only lets the rename settle
    record = json.loads(record_file.read_text())
    paths = recorded_paths(cluster, record)
    assert record["status"] == "pending" and record["incarnation"] == 0
    assert len(record["state_paths"]) == 3, record  # one attempt directory per source
    missing = [p for p in paths if not p.exists()]
    assert not missing, f"recorded paths missing at once: {missing}"
    assert time.time() < record["due_at"] - 3, "the run took longer than the window; lengthen it"
    return run_id, record, paths


def recorded_paths(cluster, record: dict) -> list[Path]:
    state_root = cluster.home / "zeta-state"
    paths = [state_root / p for p in record["state_paths"]]
    for root, relatives in record["outputs"].items():
        paths += [Path(root.removeprefix("file://")) / p for p in relatives]
    return paths


def watch_deletions(paths: list[Path], timeout: float) -> dict[Path, float]:
    """When (this process's clock) each path was first seen gone, polling every 0.2 s."""
    gone: dict[Path, float] = {}
    deadline = time.time() + timeout
    while len(gone) < len(paths) and time.time() < deadline:
        for path in paths:
            if path not in gone and not path.exists():
                gone[path] = time.time()
        time.sleep(0.2)
    assert len(gone) == len(paths), f"not deleted within {timeout:.0f}s: {[p for p in paths if p not in gone]}"
    return gone


def assert_deleted_in_time(gone: dict[Path, float], record: dict) -> None:
    early = {str(p): round(record["due_at"] - t, 1) for p, t in gone.items() if t < record["due_at"]}
    assert not early, f"deleted before the due time (seconds early): {early}"
    latest = max(gone.values()) - record["due_at"]
    print(f"recorded paths deleted {latest:.1f}s after the due time")
    assert latest <= LATE_BOUND, f"deleted {latest:.0f}s after the due time"


def snapshot(cluster, ds: str):
    partition = read_partition(cluster.home / "pipeline-output-windows", ds)
    assert partition.exists and sorted(partition.sources) == list(SOURCES)
    assert all(partition.sources[s].rows for s in SOURCES)
    return partition


def assert_nothing_of_the_run_left(cluster, run_id: str) -> None:
    """No leftover of this run past due or uncovered, and its bookkeeping gone (other tests' runs
    of the same DAG on the shared cluster are theirs to check)."""
    state_root, output = cluster.home / "zeta-state", cluster.home / "pipeline-output-windows"

    def problems() -> list[str]:
        found = leftovers_past_due(state_root, [output], dag_ids=[DAG_ID])
        return [p for p in found if f"/{safe_segment(run_id)}" in p]

    cluster.wait_for(lambda: not problems(), 30, f"nothing of the run left past due: {problems()}")
    cluster.wait_for(lambda: not run_directory(state_root, DAG_ID, run_id).exists(), 30, "the run's bookkeeping removed")


def cleanup_events(cluster, run_id: str) -> list[dict]:
    events = cluster.asset_events(100, source_dag_id=DAG_ID, source_run_id=run_id)
    return [e for e in events if e.get("name") == CLEANUP_EVENT]


def test_sigkill_after_the_record_file_keeps_the_due_time_and_announces_once(fake_driver_cluster, tmp_path):
    """``after_record_file``: the teardown is killed after its record file and before the task
    state store and the Asset event. The retry must take up the file (``resume_from_file``: the due
    time stands, no second record), emit the event exactly once, and the cleanup DAG must delete
    every recorded path at its due time."""
    cluster = fake_driver_cluster
    ds, window = "2026-06-01", 20
    marker = tmp_path / "crashed"
    run_id, record, paths = start_run(
        cluster, tmp_path, ds, window, crash_at="after_record_file", crash_marker=str(marker)
    )
    cluster.wait_for(marker.exists, 60, "the cleanup reached after_record_file and was killed")
    published = snapshot(cluster, ds)
    ti = cluster.wait_for_task(DAG_ID, run_id, CLEANUP_TASK, {"success"}, timeout=120)
    assert ti["try_number"] == 2, ti
    cluster.wait_for_run(DAG_ID, run_id, timeout=60)
    logs = task_logs(cluster, DAG_ID, run_id, CLEANUP_TASK)
    assert "test: killing the task process at window after_record_file" in logs
    assert "zeta.cleanup.resume_from_file" in logs, "the retry did not take up the record file"

    # One record, as first written; the task's copy and the event carry its due time.
    folder = run_directory(cluster.home / "zeta-state", DAG_ID, run_id) / "cleanup"
    files = sorted(p.name for p in folder.glob("*.json"))
    assert files == [RECORD_NAME], files
    assert json.loads((folder / RECORD_NAME).read_text()) == record
    assert cluster.task_state(DAG_ID, run_id, CLEANUP_TASK, "zeta_cleanup")["due_at"] == record["due_at"]
    events = cluster.wait_for(lambda: cleanup_events(cluster, run_id), 30, "the cleanup's Asset event")
    assert len(events) == 1, events
    assert events[0]["extra"]["zeta_cleanup"]["due_at"] == record["due_at"]
    assert events[0]["extra"]["zeta_cleanup"]["incarnation"] == 0

    gone = watch_deletions(paths, record["due_at"] - time.time() + LATE_BOUND + 10)
    assert_deleted_in_time(gone, record)
    assert_nothing_of_the_run_left(cluster, run_id)
    assert read_partition(cluster.home / "pipeline-output-windows", ds) == published, "the cleanup touched the partition"
    assert len(cleanup_events(cluster, run_id)) == 1, "a second announcement"


@pytest.mark.parametrize("window", ["before_delete", "after_delete"])
def test_sigkill_in_the_cleanup_dag_around_the_deletion_still_deletes_at_the_due_time(
    fake_driver_cluster, tmp_path, window
):
    """``before_delete`` / ``after_delete``: the cleanup DAG's task is killed just before it
    deletes this run's recorded paths, or after it deleted them and before it removed the record
    file. Its retry must carry the record out (deleting again finds the paths gone), remove the
    record file and the run's bookkeeping; nothing is deleted before the due time."""
    cluster = fake_driver_cluster
    ds = {"before_delete": "2026-06-02", "after_delete": "2026-06-03"}[window]
    marker = tmp_path / "crashed"
    run_id, record, paths = start_run(
        cluster, tmp_path, ds, 15, arm={"crash_at": window, "crash_marker": str(marker)}
    )
    cluster.wait_for_run(DAG_ID, run_id, timeout=120)
    published = snapshot(cluster, ds)
    record_file = run_directory(cluster.home / "zeta-state", DAG_ID, run_id) / "cleanup" / RECORD_NAME

    gone = watch_deletions(paths, record["due_at"] - time.time() + LATE_BOUND + 10)
    assert marker.exists(), f"the cleanup DAG's task never reached {window}"
    killed = json.loads(marker.read_text())
    assert killed["at"] >= record["due_at"]
    if window == "before_delete":
        # Killed before deleting: the paths went with the retry, after the kill.
        assert min(gone.values()) >= killed["at"], "a path went before the kill at before_delete"
    else:
        # Killed after deleting: every path was gone at the kill; the record file was still there.
        assert max(gone.values()) <= killed["at"] + 2
    assert_deleted_in_time(gone, record)
    cluster.wait_for(lambda: not record_file.exists(), 60, "the record file removed by the retry")

    cleanup_run = killed["cleanup_run_id"]
    cluster.wait_for_run(CLEANUP_DAG, cleanup_run, timeout=120)
    ti = cluster.task_instance(CLEANUP_DAG, cleanup_run, "carry_out")
    assert ti["state"] == "success" and ti["try_number"] >= 2, ti
    logs = task_logs(cluster, CLEANUP_DAG, cleanup_run, "carry_out")
    assert f"test: killing the task process at window {window}" in logs
    assert_nothing_of_the_run_left(cluster, run_id)
    assert read_partition(cluster.home / "pipeline-output-windows", ds) == published, "the cleanup touched the partition"
    assert cluster.dag_run(DAG_ID, run_id)["state"] == "success"
