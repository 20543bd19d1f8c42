"""The completed point on real Airflow components (fake drivers): crash windows, one Asset event
per new commit, and two DAGs writing one table.

Oracles are the files on disk (``zeta_harness.published.read_partition``: every file of every source),
the jobs' own launch log (which tokens ran and reported), the runs of an asset-scheduled consumer
DAG, and the task logs — not the provider's bookkeeping.
"""

from __future__ import annotations

import shutil
import time

import pytest

from tests.test_deploy_windows import launches
from zeta_harness.published import read_partition

SOURCES = ("alpha", "beta", "gamma")


def expected_row_count(source: str) -> int:  # mirrors tests/jobs/counting_job.py
    return 3 + sum(map(ord, source)) % 10


def clear(cluster, dag_id: str, run_id: str, task_ids: list[str]) -> None:
    cluster.api(
        "POST",
        f"/dags/{dag_id}/clearTaskInstances",
        {"dry_run": False, "task_ids": task_ids, "dag_run_id": run_id, "only_failed": False, "include_downstream": False},
    )


def consumer_runs(cluster) -> int:
    return cluster.api("GET", "/dags/publish_windows_consumer/dagRuns?limit=100")["total_entries"]


def task_logs(cluster, dag_id: str, run_id: str, task_id: str) -> str:
    folder = cluster.home / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}" / f"task_id={task_id}"
    return "\n".join(p.read_text(errors="replace") for p in sorted(folder.glob("attempt=*.log")))


def assert_complete(partition, reporting: dict[str, str], incarnation: int) -> None:
    """Every source present, every file of it from its reporting token, every row there."""
    assert partition.exists, "no partition: the date is gone"
    assert sorted(partition.sources) == list(SOURCES)
    assert partition.tokens() == {s: {t} for s, t in reporting.items()}
    for source in SOURCES:
        assert sorted(r["n"] for r in partition.sources[source].rows) == list(range(expected_row_count(source))), source
    assert partition.marker["tokens"] == reporting and partition.marker["incarnation"] == incarnation


@pytest.mark.sqlite_only
def test_sigkill_between_the_renames_of_a_replacement_ends_with_a_complete_partition_and_one_event_per_commit(
    fake_driver_cluster, tmp_path
):
    """First publish (one consumer run); a re-execution of the completed
    point (no-op: no consumer run); then a replacement (the sensor and the completed point cleared:
    a newer incarnation) whose first try is killed with SIGKILL after the old partition became a tombstone
    and before the new one was renamed in. The retry must publish the new partition, complete, and
    the consumer must have run exactly once per new commit."""
    cluster = fake_driver_cluster
    dag_id = "publish_windows"
    for dag in (dag_id, "publish_windows_consumer"):
        cluster.wait_for_dag(dag)
    output = cluster.home / "pipeline-output-windows"
    log, crash_marker = tmp_path / "launches.jsonl", tmp_path / "crashed"
    ds = "2026-05-01"
    consumed_before = consumer_runs(cluster)
    run_id = cluster.trigger_run(
        dag_id,
        f"{ds}T00:00:00Z",
        conf={"launch_log": str(log), "seconds": 1, "cleanup_delay": 900, "crash_at": "between_renames",
              "crash_marker": str(crash_marker)},
    )
    cluster.wait_for_task(dag_id, run_id, "counting.completed_point", {"success"}, timeout=300)
    reporting = {e["source"]: e["token"] for e in launches(log)}
    assert len(launches(log)) == 3
    first = read_partition(output, ds)
    assert_complete(first, reporting, incarnation=0)
    cluster.wait_for(lambda: consumer_runs(cluster) == consumed_before + 1, 90, "the consumer ran for the first commit")

    # A no-op re-execution: same commit, no event, no consumer run.
    clear(cluster, dag_id, run_id, ["counting.completed_point"])
    cluster.wait_for(
        lambda: (ti := cluster.task_instance(dag_id, run_id, "counting.completed_point"))["try_number"] >= 2
        and ti["state"] == "success",
        180,
        "the completed point re-executed",
        describe=lambda: cluster.ti_summary(dag_id, run_id),
    )
    assert cluster.xcom(dag_id, run_id, "counting.completed_point")["rule"] == "already_published"
    assert read_partition(output, ds).marker == first.marker

    # The replacement, killed between its two renames on its first try.
    clear(cluster, dag_id, run_id, ["counting.ready_to_close", "counting.completed_point"])
    cluster.wait_for(crash_marker.exists, 180, "the completed point reached between_renames and was killed")
    cluster.wait_for(
        lambda: cluster.task_instance(dag_id, run_id, "counting.completed_point")["state"] == "success"
        and cluster.xcom(dag_id, run_id, "counting.completed_point"),
        180,
        "the retry published",
        describe=lambda: cluster.ti_summary(dag_id, run_id),
    )
    result = cluster.xcom(dag_id, run_id, "counting.completed_point")
    assert result["rule"] == "first_publish", result  # the retry found no partition and published the new one
    second = read_partition(output, ds)
    # The same reports, published by the newer incarnation: each clear raised clear_number (2), and
    # the sensor's own clear came after its try 1 (core.incarnation.publish_incarnation: 2 + 1).
    assert_complete(second, reporting, incarnation=3)
    assert second.marker["commit_id"] != first.marker["commit_id"]
    tombstones = list((output / "_zeta_tombstones").glob(f"*/*/ds={ds}-{first.marker['commit_id']}"))
    assert len(tombstones) == 1, "the replaced partition is kept as a tombstone for the cleanup"
    logs = task_logs(cluster, dag_id, run_id, "counting.completed_point")
    assert "test: killing the task process at window between_renames" in logs
    assert "zeta.publish.newer_incarnation" in logs and "zeta.publish.first_publish" in logs

    # Two new commits: exactly two consumer runs (none for the no-op), however long we wait.
    cluster.wait_for(lambda: consumer_runs(cluster) == consumed_before + 2, 90, "the consumer ran for the second commit")
    time.sleep(15)
    assert consumer_runs(cluster) == consumed_before + 2
    # No empty pending directory of this run stays behind; the crashed try's
    # assembled partition may (the cleanup deletes it): it is not empty.
    for run_pending in (output / "_zeta_pending" / dag_id).glob("*"):
        assert any(run_pending.iterdir()), f"empty pending directory left: {run_pending}"


@pytest.mark.sqlite_only
def test_two_dags_writing_one_table_for_one_date_refuse_clearly_and_lose_nothing(fake_driver_cluster, tmp_path):
    """``pipeline_counting`` and ``pipeline_counting_twin`` (same pipeline id, same
    table, same Asset) run with the same run id for the same date. The second must not report the
    first's commit as its own (nor emit an event for it), must not tombstone or delete it, and must
    fail naming the owner."""
    cluster = fake_driver_cluster
    for dag in ("pipeline_counting", "pipeline_counting_twin"):
        cluster.wait_for_dag(dag)
    output = cluster.home / "pipeline-output"
    ds, run_id = "2026-05-10", "shared__2026-05-10"
    log_a, log_b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    cluster.trigger_run("pipeline_counting", f"{ds}T00:00:00Z", run_id=run_id, conf={"launch_log": str(log_a), "seconds": 1})
    cluster.wait_for_run("pipeline_counting", run_id, timeout=300)
    reporting_a = {e["source"]: e["token"] for e in launches(log_a)}
    first = read_partition(output, ds)
    assert_complete(first, reporting_a, incarnation=0)
    assert first.marker["dag_id"] == "pipeline_counting" and first.marker["pipeline_id"] == "counting"

    cluster.trigger_run("pipeline_counting_twin", f"{ds}T00:00:00Z", run_id=run_id, conf={"launch_log": str(log_b), "seconds": 1})
    cluster.wait_for_run("pipeline_counting_twin", run_id, states={"failed"}, timeout=300)
    ti = cluster.task_instance("pipeline_counting_twin", run_id, "counting.completed_point")
    assert ti["state"] == "failed" and ti["try_number"] == 1, "a refusal is final, not retried"
    logs = task_logs(cluster, "pipeline_counting_twin", run_id, "counting.completed_point")
    assert "zeta.publish.partition_of_another_owner" in logs and "'pipeline_counting'" in logs
    # The twin's cleanup ran (a teardown) and the first DAG's partition is whole, untouched.
    cluster.wait_for(
        lambda: cluster.task_instance("pipeline_counting_twin", run_id, "counting.cleanup")["state"] in ("success", "failed"),
        120,
        "the twin's cleanup ended",
    )
    time.sleep(3)
    after = read_partition(output, ds)
    assert_complete(after, reporting_a, incarnation=0)
    assert after.marker == first.marker
    assert not list((output / "_zeta_tombstones" / "pipeline_counting_twin").glob("*/*")), "the twin tombstoned a partition"
    events = cluster.asset_events(100)
    # The twin's cleanup task announces its cleanup record (CLEANUP_ASSET) like every pipeline's;
    # what must not exist is an event on the table's Asset, i.e. a commit announcement.
    twin_commits = [
        e
        for e in events
        if e.get("source_dag_id") == "pipeline_counting_twin"
        and e.get("name") != "zeta_cleanup_recorded"  # CLEANUP_ASSET (not imported: no Airflow in the test process)
    ]
    assert not twin_commits, f"the twin announced a commit: {twin_commits}"
    assert len([e for e in events if e.get("extra", {}).get("commit_id") == first.marker["commit_id"]]) == 1


@pytest.mark.sqlite_only
def test_a_reported_attempt_whose_ledger_is_gone_fails_the_wait_at_once(fake_driver_cluster, tmp_path):
    """A reported attempt whose ledger is gone, as a partial clear meets it: the run published;
    alpha's attempt directory (ledger and staging) is then deleted from outside — as an older incarnation's cleanup did — and
    the sensor and the completed point are cleared. alpha's report still stands (its deploy task was
    not cleared), so the new sensor must fail at once, naming alpha and its token, instead of
    counting alpha as missing until ready_timeout (600 s here, 6 h by default)."""
    cluster = fake_driver_cluster
    dag_id = "publish_windows"
    cluster.wait_for_dag(dag_id)
    log = tmp_path / "launches.jsonl"
    ds = "2026-05-20"
    run_id = cluster.trigger_run(dag_id, f"{ds}T00:00:00Z", conf={"launch_log": str(log), "seconds": 1, "cleanup_delay": 900})
    cluster.wait_for_task(dag_id, run_id, "counting.completed_point", {"success"}, timeout=300)
    token = next(e["token"] for e in launches(log) if e["source"] == "alpha")
    attempt = next((cluster.home / "zeta-state" / "runs").rglob(f"{token}/ledger.json")).parent
    shutil.rmtree(attempt)

    clear(cluster, dag_id, run_id, ["counting.ready_to_close", "counting.completed_point"])
    cleared_at = time.time()
    cluster.wait_for(
        lambda: (ti := cluster.task_instance(dag_id, run_id, "counting.ready_to_close"))["state"] == "failed"
        and ti["try_number"] >= 2,
        90,
        "the cleared sensor failed",
    )
    print(f"the sensor failed {time.time() - cleared_at:.0f}s after the clear")
    logs = task_logs(cluster, dag_id, run_id, "counting.ready_to_close")
    assert "zeta.ready.unverifiable_report" in logs and "'alpha'" in logs and token in logs
    # The published partition is untouched: nothing was replaced by the failed incarnation.
    partition = read_partition(cluster.home / "pipeline-output-windows", ds)
    assert partition.exists and partition.tokens()["alpha"] == {token}
