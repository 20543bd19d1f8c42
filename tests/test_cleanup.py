"""G4/G5/G8 on real Airflow components (SQLite, fake drivers): the whole run cleared inside the
retention window, a run marked failed by hand before its cleanup (the sweep), and a failed run.

The kills of the triggerer and the scheduler inside the window, on both databases, are in
``test_pipeline_publish.py`` (the fake-driver cluster is shared by the whole session).
"""

from __future__ import annotations

import json
import time
from urllib.parse import quote

import pytest

from airflow_provider_zeta.processes import pids_carrying
from airflow_provider_zeta.testing.leftovers import leftovers_past_due, run_directory
from tests.conftest import PIPELINE_DAGS, check_nothing_past_due
from tests.test_deploy_windows import launches
from tests.test_pipeline_publish import DAG_ID, SOURCES, expected_row_count, marker, published

SWEEP_DAG = "zeta_sweep_test"

# Provider logic, not the database: the PostgreSQL variant is deselected (see conftest).
pytestmark = pytest.mark.sqlite_only


@pytest.fixture(autouse=True)
def nothing_left_past_due(request):
    yield
    check_nothing_past_due(request, "fake_driver_cluster")


def tokens_by_task(log) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for entry in launches(log):
        found.setdefault(entry["task"], []).append(entry["token"])
    return found


def test_clearing_the_run_inside_the_window_cleans_the_old_incarnation_only(fake_driver_cluster, tmp_path):
    cluster = fake_driver_cluster
    cluster.wait_for_dag(DAG_ID)
    state_root, output = cluster.home / "zeta-state", cluster.home / "pipeline-output"
    log = tmp_path / "launches.jsonl"
    ds = "2026-04-01"
    run_id = cluster.trigger_run(
        DAG_ID, f"{ds}T00:00:00Z", conf={"launch_log": str(log), "seconds": 1, "cleanup_delay": 15}
    )
    cluster.wait_for_task(DAG_ID, run_id, "counting.cleanup", {"deferred"}, timeout=240)
    first = marker(cluster, ds)
    old_tokens = {t for tokens in tokens_by_task(log).values() for t in tokens}
    old_record = json.loads(next((run_directory(state_root, DAG_ID, run_id) / "cleanup").glob("*-0.json")).read_text())
    old_staging = [state_root / p for p in old_record["state_paths"]]
    assert len(old_staging) == 3 and all(p.exists() for p in old_staging)

    cluster.clear_run(DAG_ID, run_id)  # incarnation 1: every task again, new tokens
    cluster.wait_for_task(DAG_ID, run_id, "counting.completed_point", {"success"}, timeout=300)
    new_tokens = {t for tokens in tokens_by_task(log).values() for t in tokens} - old_tokens
    assert len(new_tokens) == 3, tokens_by_task(log)
    second = marker(cluster, ds)
    assert second["incarnation"] == 1 and set(second["tokens"].values()) == new_tokens
    # The old window's due time passed while incarnation 1 ran: its record was not carried out by
    # anyone (the clear killed its wait) and the new incarnation published from its own staging.
    result = cluster.xcom(DAG_ID, run_id, "counting.completed_point")
    assert result["rule"] == "newer_incarnation" and result["tombstone"]

    cluster.wait_for_task(DAG_ID, run_id, "counting.cleanup", {"deferred", "success"}, timeout=120)
    # The record file exists while the cleanup waits; a slow look may come after it is done.
    new_record_file = next((run_directory(state_root, DAG_ID, run_id) / "cleanup").glob("*-1.json"), None)
    if new_record_file is not None:
        new_record = json.loads(new_record_file.read_text())
        assert new_record["adopted"] == [0]
        assert {p.rsplit("/", 1)[-1] for p in new_record["state_paths"]} == old_tokens | new_tokens
    cluster.wait_for_run(DAG_ID, run_id, timeout=180)
    summary = cluster.xcom(DAG_ID, run_id, "counting.cleanup")
    assert summary["incarnation"] == 1 and summary["adopted"] == [0], summary
    assert summary["status"] == "cleaned" and summary["paths"] == summary["deleted"] >= 6, summary
    assert summary["cleaned_at"] >= summary["due_at"], "deleted before the due time"
    assert not any(p.exists() for p in old_staging)
    assert marker(cluster, ds) == second, "the cleanup touched the published partition"
    rows = published(cluster, ds)
    for source in SOURCES:
        assert {r["token"] for r in rows[source]} == {second["tokens"][source]}
        assert len(rows[source]) == expected_row_count(source)
    assert first["commit_id"] != second["commit_id"]
    assert not (output / "_zeta_tombstones").exists() or not any((output / "_zeta_tombstones").rglob("*"))
    assert leftovers_past_due(state_root, [output], dag_ids=PIPELINE_DAGS) == []


def start_held_run(cluster, tmp_path, ds: str, name: str):
    """A run whose three drivers keep running (no release), all three deploy tasks deferred."""
    log, release = tmp_path / f"{name}.jsonl", tmp_path / f"release-{name}"
    release.mkdir()
    run_id = cluster.trigger_run(DAG_ID, f"{ds}T00:00:00Z", conf={"launch_log": str(log), "release_dir": str(release)})
    cluster.wait_for(lambda: len(launches(log)) == 3, 120, "three drivers running")
    for source in SOURCES:
        cluster.wait_for_task(DAG_ID, run_id, f"counting.deploy_{source}", {"deferred"}, timeout=60)
    return run_id, [e["token"] for e in launches(log)]


def test_run_marked_failed_by_hand_is_cleaned_by_its_teardown_or_else_by_the_sweep(fake_driver_cluster, tmp_path):
    """With the triggerer down no trigger's on_kill stops the drivers when a run is marked failed.

    1. Airflow keeps a teardown when a run is marked failed: the cleanup still runs, stops the
       drivers and deletes the staging.
    2. When the cleanup task itself was marked too (it never runs), the sweep stops the drivers,
       gives the leftovers the retention window, and a later sweep deletes them.
    """
    cluster = fake_driver_cluster
    cluster.wait_for_dag(DAG_ID)
    cluster.wait_for_dag(SWEEP_DAG)
    state_root, output = cluster.home / "zeta-state", cluster.home / "pipeline-output"
    by_teardown, teardown_tokens = start_held_run(cluster, tmp_path, "2026-04-02", "teardown")
    by_sweep, sweep_tokens = start_held_run(cluster, tmp_path, "2026-04-04", "sweep")
    cluster.kill("triggerer")
    try:
        cluster.api(
            "PATCH",
            f"/dags/{DAG_ID}/dagRuns/{quote(by_sweep, safe='')}/taskInstances/counting.cleanup",
            {"new_state": "failed"},
        )
        for run_id in (by_teardown, by_sweep):
            cluster.set_run_state(DAG_ID, run_id, "failed")

        # 1. the teardown ran although the run was marked failed
        cluster.wait_for_run(DAG_ID, by_teardown, states={"failed"}, timeout=120)
        assert cluster.task_instance(DAG_ID, by_teardown, "counting.cleanup")["state"] == "success"
        assert not any(pids_carrying(t) for t in teardown_tokens)
        assert not run_directory(state_root, DAG_ID, by_teardown).exists()

        # 2. no cleanup ran for the other run: its drivers outlive it until the sweep
        assert all(pids_carrying(t) for t in sweep_tokens), "drivers should outlive the run here (no triggerer)"
        sweep_1 = cluster.trigger_run(SWEEP_DAG, no_logical_date=True)
        cluster.wait_for_run(SWEEP_DAG, sweep_1, timeout=120)
        summary = cluster.xcom(SWEEP_DAG, sweep_1, "sweep")
        # On the session's shared cluster the sweep also sees other tests' ended runs: count ours.
        assert set(sweep_tokens) <= set(summary["stopped_drivers"]), summary
        assert not set(teardown_tokens) & set(summary["stopped_drivers"]), "the teardown had stopped those"
        assert not any(pids_carrying(t) for t in sweep_tokens)
        run = run_directory(state_root, DAG_ID, by_sweep)
        sweep_record = json.loads((run / "cleanup" / "sweep.json").read_text())
        assert len(sweep_record["state_paths"]) == 3 and sweep_record["due_at"] > time.time()
        assert leftovers_past_due(state_root, [output], dag_ids=PIPELINE_DAGS) == []  # retained, not orphaned

        time.sleep(max(0.0, sweep_record["due_at"] - time.time()) + 1)
        sweep_2 = cluster.trigger_run(SWEEP_DAG, no_logical_date=True)
        cluster.wait_for_run(SWEEP_DAG, sweep_2, timeout=120)
        assert cluster.xcom(SWEEP_DAG, sweep_2, "sweep")["deleted_paths"] >= 3
        assert not any((state_root / p).exists() for p in sweep_record["state_paths"])
        assert not run.exists()
        assert leftovers_past_due(state_root, [output], dag_ids=PIPELINE_DAGS) == []
    finally:
        cluster.start_component("triggerer")
        cluster.wait_healthy()


def test_failed_sources_fail_the_run_although_the_cleanup_runs_last(fake_driver_cluster, tmp_path):
    cluster = fake_driver_cluster
    cluster.wait_for_dag(DAG_ID)
    state_root, output = cluster.home / "zeta-state", cluster.home / "pipeline-output"
    log = tmp_path / "launches.jsonl"
    ds = "2026-04-03"
    run_id = cluster.trigger_run(
        DAG_ID, f"{ds}T00:00:00Z", conf={"launch_log": str(log), "seconds": 1, "fail_source": "beta"}
    )
    cluster.wait_for_run(DAG_ID, run_id, states={"failed"}, timeout=300)
    states = {ti["task_id"]: ti["state"] for ti in cluster.task_instances(DAG_ID, run_id)}
    assert states["counting.deploy_beta"] == "failed"
    assert states["counting.completed_point"] == "upstream_failed"
    assert states["counting.cleanup"] == "success", states
    assert not (output / f"ds={ds}").exists()
    assert not run_directory(state_root, DAG_ID, run_id).exists(), "the failed run's staging was cleaned"
    assert leftovers_past_due(state_root, [output], dag_ids=PIPELINE_DAGS) == []


def test_sweep_leaves_a_running_pipeline_alone(fake_driver_cluster, tmp_path):
    """G1/G5: a sweep while a pipeline runs stops none of its drivers and records nothing for it;
    the run then publishes with one launch per source. (A sweep once read the Task SDK's run
    state as ``"DagRunState.RUNNING"``, took every running run for ended and stopped its drivers;
    the shipped maintenance DAG runs every 15 minutes, so any pipeline could meet it.)"""
    cluster = fake_driver_cluster
    cluster.wait_for_dag(DAG_ID)
    cluster.wait_for_dag(SWEEP_DAG)
    state_root = cluster.home / "zeta-state"
    ds = "2026-04-05"
    run_id, tokens = start_held_run(cluster, tmp_path, ds, "swept")

    sweep = cluster.trigger_run(SWEEP_DAG, no_logical_date=True)
    cluster.wait_for_run(SWEEP_DAG, sweep, timeout=120)
    summary = cluster.xcom(SWEEP_DAG, sweep, "sweep")
    assert not set(tokens) & set(summary["stopped_drivers"]), summary
    assert f"{DAG_ID}/{run_id}" in summary["phases"]["running"], summary
    assert all(pids_carrying(t) for t in tokens), "a driver of the running pipeline was stopped"
    assert not (run_directory(state_root, DAG_ID, run_id) / "cleanup" / "sweep.json").exists()

    for source in SOURCES:
        (tmp_path / "release-swept" / source).write_text("go")
    cluster.wait_for_run(DAG_ID, run_id, timeout=300)
    assert {e["token"] for e in launches(tmp_path / "swept.jsonl")} == set(tokens), "a job ran twice"
    assert marker(cluster, ds)["tokens"].keys() == set(SOURCES)
