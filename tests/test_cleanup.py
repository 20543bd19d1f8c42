"""G4/G5/G8 on real Airflow components (SQLite, fake drivers): the run lifecycle (a run ends at
once, its cleanup happens at the due time in the cleanup DAG), the whole run cleared inside the
retention window, partial clears with and without downstream (REST clear endpoint), a run marked
failed by hand before its cleanup (the sweep), and a failed run.

The kills of the triggerer and the scheduler inside the window, on both databases, are in
``test_pipeline_publish.py`` (the fake-driver cluster is shared by the whole session).
"""

from __future__ import annotations

import json
import time
from urllib.parse import quote

import pytest

from airflow_provider_zeta.core.paths import attempt_dir
from airflow_provider_zeta.processes import pids_carrying
from tests.conftest import PIPELINE_DAGS, check_nothing_past_due
from tests.test_deploy_windows import launches
from tests.test_pipeline_publish import DAG_ID, SOURCES, expected_row_count, marker, published
from zeta_harness.leftovers import leftovers_past_due, run_directory

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


CLEANUP_DAG = "zeta_cleanup"


def record_files(state_root, run_id) -> dict[str, dict]:
    folder = run_directory(state_root, DAG_ID, run_id) / "cleanup"
    return {path.name: json.loads(path.read_text()) for path in sorted(folder.glob("*.json"))}


def wait_deleted(cluster, paths, timeout: float) -> float:
    """The moment (this process's clock) every path is gone."""
    return cluster.wait_for(lambda: not any(p.exists() for p in paths) and time.time(), timeout, "paths deleted", interval=0.5)


def page_runs(cluster, section: str) -> list[dict]:
    return cluster._http("GET", f"/zeta/api/runs?section={section}&limit=100")["runs"]


def test_run_ends_at_once_and_its_cleanup_happens_at_the_due_time(fake_driver_cluster, tmp_path):
    """Run lifecycle: with a retention window far longer than the bound, the run
    is ``success`` within 30 s of its completed point; the data is kept until the due time the run
    recorded, shown on the Zeta page, and deleted then by the cleanup DAG — not before, and not a
    sweep period later."""
    cluster = fake_driver_cluster
    cluster.wait_for_dag(DAG_ID)
    cluster.wait_for_dag(CLEANUP_DAG)
    state_root = cluster.home / "zeta-state"
    log = tmp_path / "launches.jsonl"
    ds, window = "2026-04-06", 30  # the checks between the run's end and the due time take seconds
    run_id = cluster.trigger_run(
        DAG_ID, f"{ds}T00:00:00Z", conf={"launch_log": str(log), "seconds": 1, "cleanup_delay": window}
    )
    run = cluster.wait_for_run(DAG_ID, run_id, timeout=300)
    published_at = cluster.task_instance(DAG_ID, run_id, "counting.completed_point")["end_date"]
    ended = _epoch(run["end_date"]) - _epoch(published_at)
    print(f"run ended {ended:.1f}s after its completed point (window {window}s)")
    assert ended <= 30, f"the run ended {ended:.0f}s after its completed point"
    records = record_files(state_root, run_id)
    (record,) = records.values()
    assert record["status"] == "pending" and record["due_at"] - record["created_at"] == window
    staging = [state_root / p for p in record["state_paths"]]
    assert len(staging) == 3 and all(p.is_dir() for p in staging)
    assert {p.name for p in staging} == {e["token"] for e in launches(log)}
    shown = {(r["dag_id"], r["run_id"]): r for r in page_runs(cluster, "retained")}
    assert shown[(DAG_ID, run_id)]["cleanup_due_at"] == record["due_at"], "the Zeta page shows the due time"

    assert time.time() < record["due_at"] - 5, "the run took longer than the window; lengthen it"
    cluster.wait_for(lambda: time.time() >= record["due_at"] - 3, window, "3 s before the due time")
    assert all(p.is_dir() for p in staging), "deleted before the due time"
    deleted_at = wait_deleted(cluster, staging, 120)
    print(f"staging deleted {deleted_at - record['due_at']:.1f}s after the due time")
    assert record["due_at"] <= deleted_at <= record["due_at"] + 15
    assert marker(cluster, ds)["tokens"].keys() == set(SOURCES), "the cleanup must never touch the partition"
    cluster.wait_for(lambda: not run_directory(state_root, DAG_ID, run_id).exists(), 30, "run bookkeeping removed")


# A's retention window must outlast what comes before B's cleanup starts: up to a minute for the
# cleanup DAG's run of A's event to start (it is marked only once started), then what is left of
# B's run once its drivers are released — B starts beside A and waits, held, so only its last
# tasks (seconds on an idle 2-core machine, up to half a minute on a busy one) come after the mark.
A_WINDOW_S = 90


def test_a_record_whose_announcement_no_run_names_is_carried_out_at_its_due_time(fake_driver_cluster, tmp_path):
    """Airflow folds an asset event that arrives while the cleanup DAG is already queued into that
    queue row, and then no run of the cleanup DAG names it (the short chaos run caught a backfill's
    record left this way, past due). Reproduced here by marking every waiting cleanup DAG run
    ``success`` once run A's record is written (deleting them would not do: the next run's event
    window would then reach back to A's event), then letting run B's cleanup, with a shorter
    window, start a new one: that run must carry out A's record at A's due time too, not leave it
    to the sweep. (B runs beside A from the start, its drivers held until A's announcement is
    lost, so that A's window need only outlast B's last tasks.)"""
    cluster = fake_driver_cluster
    cluster.wait_for_dag(DAG_ID)
    cluster.wait_for_dag(CLEANUP_DAG)
    state_root = cluster.home / "zeta-state"
    log, release_b = tmp_path / "launches.jsonl", tmp_path / "release-b"
    release_b.mkdir()
    run_a = cluster.trigger_run(
        DAG_ID, "2026-04-11T00:00:00Z", conf={"launch_log": str(log), "seconds": 1, "cleanup_delay": A_WINDOW_S}
    )
    run_b = cluster.trigger_run(
        DAG_ID, "2026-04-12T00:00:00Z", conf={"launch_log": str(log), "release_dir": str(release_b), "cleanup_delay": 5}
    )
    cluster.wait_for_run(DAG_ID, run_a, timeout=300)
    (record_a,) = record_files(state_root, run_a).values()
    staging_a = [state_root / p for p in record_a["state_paths"]]
    assert record_a["status"] == "pending" and all(p.is_dir() for p in staging_a)

    def active_cleanup_runs() -> list[dict]:
        runs = cluster.api("GET", f"/dags/{CLEANUP_DAG}/dagRuns?limit=200")["dag_runs"]
        return [r for r in runs if r["state"] in ("queued", "running")]

    def all_started() -> list[dict]:
        active = active_cleanup_runs()
        return active if active and all(r["start_date"] for r in active) else []

    # A's announcement is lost: no run of the cleanup DAG waits for its record any more, and the
    # runs that ended keep A's event out of the next run's window. Marked only once started: a run
    # marked success while still queued never gets a start date, and Airflow 3.3.2 then answers
    # 500 to every GET /assets/events listing its event (apache/airflow#71360) — which fails a
    # later test on this shared cluster.
    for cleanup_run in cluster.wait_for(all_started, 60, "the cleanup DAG run of A's announcement started"):
        run_path = f"/dags/{CLEANUP_DAG}/dagRuns/{quote(cleanup_run['dag_run_id'], safe='')}"
        cluster.api("PATCH", run_path, {"state": "success"})
    cluster.wait_for(lambda: active_cleanup_runs() == [], 30, "no cleanup DAG run waiting")
    assert all(p.is_dir() for p in staging_a)
    assert cluster.dag_run(DAG_ID, run_b)["state"] == "running", "B ended before it was released"

    for source in SOURCES:
        (release_b / source).write_text("go")
    cluster.wait_for_run(DAG_ID, run_b, timeout=300)
    print(f"B ended {record_a['due_at'] - time.time():.1f}s before A's due time")
    assert time.time() < record_a["due_at"] - 10, "B took longer than A's window; lengthen it"
    deleted_at = wait_deleted(cluster, staging_a, record_a["due_at"] - time.time() + 60)
    print(f"A's staging deleted {deleted_at - record_a['due_at']:.1f}s after its due time")
    assert record_a["due_at"] <= deleted_at <= record_a["due_at"] + 15


def _epoch(iso: str) -> float:
    import datetime as dt

    return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def test_clearing_the_run_inside_the_window_cleans_the_old_incarnation_only(fake_driver_cluster, tmp_path):
    cluster = fake_driver_cluster
    cluster.wait_for_dag(DAG_ID)
    state_root, output = cluster.home / "zeta-state", cluster.home / "pipeline-output"
    log = tmp_path / "launches.jsonl"
    ds, window = "2026-04-01", 20
    run_id = cluster.trigger_run(
        DAG_ID, f"{ds}T00:00:00Z", conf={"launch_log": str(log), "seconds": 1, "cleanup_delay": window}
    )
    cluster.wait_for_run(DAG_ID, run_id, timeout=300)
    first = marker(cluster, ds)
    old_tokens = {t for tokens in tokens_by_task(log).values() for t in tokens}
    old_record = record_files(state_root, run_id)["counting.cleanup-0.json"]
    old_staging = [state_root / p for p in old_record["state_paths"]]
    assert len(old_staging) == 3 and all(p.exists() for p in old_staging)

    cluster.clear_run(DAG_ID, run_id)  # incarnation 1: every task again, new tokens
    cluster.wait_for_run(DAG_ID, run_id, timeout=300)
    new_tokens = {t for tokens in tokens_by_task(log).values() for t in tokens} - old_tokens
    assert len(new_tokens) == 3, tokens_by_task(log)
    second = marker(cluster, ds)
    # The commit's incarnation (core.incarnation.publish_incarnation: clear_number plus the sensor's
    # own clear evidence) rose above 0; the cleanup's is the run's clear_number.
    assert second["incarnation"] >= 1 and set(second["tokens"].values()) == new_tokens
    result = cluster.xcom(DAG_ID, run_id, "counting.completed_point")
    assert result["rule"] == "newer_incarnation" and result["tombstone"]
    summary = cluster.xcom(DAG_ID, run_id, "counting.cleanup")
    assert summary["incarnation"] == 1 and summary["adopted"] == [0] and summary["status"] == "pending", summary
    # The new record covers both incarnations' attempts (3 + 3) and the tombstone of the replaced
    # partition (its file may already be carried out by the time this looks: the count is the task's).
    assert summary["paths"] >= len(old_tokens | new_tokens) + 1, summary
    new_staging = [
        state_root / attempt_dir(DAG_ID, run_id, task, -1, token)
        for task, tokens in tokens_by_task(log).items()
        for token in tokens
        if token in new_tokens
    ]
    # The old record's due time came while incarnation 1 ran or after it: the cleanup DAG left the
    # old attempts to the new record (adopted), which deletes everything at its own due time.
    deleted_at = wait_deleted(cluster, old_staging, window + 120)
    assert deleted_at >= summary["due_at"], "the old attempts went before the new window ended"
    wait_deleted(cluster, new_staging, 120)
    assert marker(cluster, ds) == second, "the cleanup touched the published partition"
    rows = published(cluster, ds)
    for source in SOURCES:
        assert {r["token"] for r in rows[source]} == {second["tokens"][source]}
        assert len(rows[source]) == expected_row_count(source)
    assert first["commit_id"] != second["commit_id"]
    cluster.wait_for(
        lambda: not (output / "_zeta_tombstones").exists() or not any((output / "_zeta_tombstones").rglob("*")),
        60,
        "tombstone deleted",
    )
    assert leftovers_past_due(state_root, [output], dag_ids=PIPELINE_DAGS) == []


def test_clearing_the_run_after_its_cleanup_launches_every_source_again_and_publishes(fake_driver_cluster, tmp_path):
    """A run cleared (or reprocessed by a backfill) after its retention window: the cleanup has
    deleted every attempt of incarnation 0, ledger and intent file included. Incarnation 1 must
    launch each source once and publish, not read the missing intent file as a state root this
    host does not share (read that way, every source of a reprocessed date once failed)."""
    cluster = fake_driver_cluster
    cluster.wait_for_dag(DAG_ID)
    cluster.wait_for_dag(CLEANUP_DAG)
    state_root, output = cluster.home / "zeta-state", cluster.home / "pipeline-output"
    log = tmp_path / "launches.jsonl"
    ds = "2026-04-09"  # a date of its own: every test of this shared cluster has its own runs
    run_id = cluster.trigger_run(DAG_ID, f"{ds}T00:00:00Z", conf={"launch_log": str(log), "seconds": 1, "cleanup_delay": 1})
    cluster.wait_for_run(DAG_ID, run_id, timeout=300)
    old_tokens = {t for tokens in tokens_by_task(log).values() for t in tokens}
    assert len(old_tokens) == 3
    logs = cluster.home / "logs" / f"dag_id={DAG_ID}" / f"run_id={run_id}"
    for source in SOURCES:
        # Each deploy task was ended by its trigger (one worker start, no resume), so no
        # try recorded driver_ended in the task state store.
        first_try = (logs / f"task_id=counting.deploy_{source}" / "attempt=1.log").read_text()
        assert first_try.count("::group::Pre Execute") == 1, f"deploy_{source} resumed on a worker"
    cluster.wait_for(lambda: not run_directory(state_root, DAG_ID, run_id).exists(), 180, "incarnation 0 cleaned up")

    cluster.clear_run(DAG_ID, run_id)
    cluster.wait_for_run(DAG_ID, run_id, timeout=300)
    for source in SOURCES:
        # The run's commit told the cleared task that its earlier driver ended: a launch at once
        # from any host (without it, a host other than the launching one waits stopped_after).
        # (The sensor's ready set cannot: a clear of the whole run starts the sensor at once.)
        second_try = (logs / f"task_id=counting.deploy_{source}" / "attempt=2.log").read_text()
        assert "counting.completed_point recorded that driver" in second_try, second_try[-3000:]
        assert "zeta.deploy.earlier_incarnation_ended" in second_try, second_try[-3000:]
    by_task = tokens_by_task(log)
    assert all(len(tokens) == 2 for tokens in by_task.values()) and len(by_task) == 3, by_task
    new_tokens = {tokens[-1] for tokens in by_task.values()}
    second = marker(cluster, ds)
    assert second["incarnation"] >= 1 and set(second["tokens"].values()) == new_tokens
    rows = published(cluster, ds)
    for source in SOURCES:
        assert {r["token"] for r in rows[source]} == {second["tokens"][source]}
        assert len(rows[source]) == expected_row_count(source)
    assert not any(pids_carrying(token) for token in old_tokens | new_tokens)
    cluster.wait_for(lambda: not run_directory(state_root, DAG_ID, run_id).exists(), 180, "incarnation 1 cleaned up")
    assert leftovers_past_due(state_root, [output], dag_ids=PIPELINE_DAGS) == []


PARTIAL_CLEARS = {False: "2026-04-07", True: "2026-04-08"}  # include_downstream -> the run's date


def _trigger_partial_clear_runs(cluster, tmp_path, window: int) -> dict[bool, dict]:
    """One run per way of clearing (PARTIAL_CLEARS), its drivers released, its cleanup delayed by
    ``window`` seconds: include_downstream -> its date, launch log, release folder and run id."""
    runs: dict[bool, dict] = {}
    for include_downstream, ds in PARTIAL_CLEARS.items():
        name = "with_downstream" if include_downstream else "without_downstream"
        log, release = tmp_path / f"{name}.jsonl", tmp_path / f"release-{name}"
        release.mkdir()
        for source in SOURCES:
            (release / source).write_text("go")
        run_id = cluster.trigger_run(
            DAG_ID, f"{ds}T00:00:00Z", conf={"launch_log": str(log), "release_dir": str(release), "cleanup_delay": window}
        )
        runs[include_downstream] = {"ds": ds, "log": log, "release": release, "run_id": run_id}
    return runs


def _clear_beta_to_completed_point(cluster, runs: dict[bool, dict]) -> None:
    """Clear deploy_beta, ready_to_close and completed_point of each run through the REST clear
    endpoint, with or without downstream as the run's key says; beta's next driver is held."""
    for include_downstream, run in runs.items():
        (run["release"] / "beta").unlink()  # incarnation 1's beta waits until released
        cluster.api(
            "POST",
            f"/dags/{DAG_ID}/clearTaskInstances",
            {
                "dry_run": False,
                "dag_run_id": run["run_id"],
                "task_ids": ["counting.deploy_beta", "counting.ready_to_close", "counting.completed_point"],
                "only_failed": False,
                "include_downstream": include_downstream,
            },
        )


def _note_end_times(cluster, runs: dict[bool, dict]) -> bool:
    """Airflow's end time of each run, as it says (not when this test happened to look); whether
    every run has ended."""
    for run in runs.values():
        if "ended_at" not in run:
            state = cluster.dag_run(DAG_ID, run["run_id"])
            assert state["state"] in ("queued", "running", "success"), state
            if state["state"] == "success":
                run["ended_at"] = _epoch(state["end_date"])
    return all("ended_at" in run for run in runs.values())


def test_partial_clears_inside_the_window_lose_no_attempt_and_leave_nothing(fake_driver_cluster, tmp_path):
    """G5: deploy_beta, ready_to_close and completed_point of a published run
    cleared through the REST clear endpoint, without downstream (its default: the cleanup is not
    cleared) and with it — two runs, one per way, side by side (their waits overlap). Incarnation 1
    publishes alpha's and gamma's incarnation-0 attempts and beta's new one. The old record falls
    due while incarnation 1 still runs (beta is held): its attempts must stay (the old rule deleted
    alpha's and gamma's, which incarnation 1 was about to publish); afterwards every path — old
    attempts, beta's new attempt, the replaced partition's tombstone — is deleted by some cleanup,
    not before incarnation 1's own window."""
    cluster = fake_driver_cluster
    cluster.wait_for_dag(DAG_ID)
    cluster.wait_for_dag(CLEANUP_DAG)
    state_root, output = cluster.home / "zeta-state", cluster.home / "pipeline-output"
    window = 20
    runs = _trigger_partial_clear_runs(cluster, tmp_path, window)
    for run in runs.values():
        run_id = run["run_id"]
        cluster.wait_for_task(DAG_ID, run_id, "counting.completed_point", {"success"}, timeout=300)
        cluster.wait_for(lambda run_id=run_id: record_files(state_root, run_id), 120, "the cleanup recorded")
        old = run["old"] = record_files(state_root, run_id)["counting.cleanup-0.json"]
        first = tokens_by_task(run["log"])
        run["kept"] = [
            state_root / p
            for p in old["state_paths"]
            if p.rsplit("/", 1)[-1] in (first["counting.deploy_alpha"] + first["counting.deploy_gamma"])
        ]
        assert len(run["kept"]) == 2
        # A published run, ended: a clear sent while the scheduler marks the run success (the record
        # is written moments before the cleanup task ends) can be overwritten by that stale success on
        # SQLite, leaving the cleared tasks unscheduled in a finished run (Airflow's race, not this one).
        cluster.wait_for_run(DAG_ID, run_id, timeout=120)

    _clear_beta_to_completed_point(cluster, runs)
    for run in runs.values():
        cluster.wait_for(lambda log=run["log"]: len(tokens_by_task(log)["counting.deploy_beta"]) == 2, 120, "beta redeployed")
    for run in runs.values():
        cluster.wait_for(lambda old=run["old"]: time.time() > old["due_at"] + 10, window + 60, "the old record past due")
        assert all(p.is_dir() for p in run["kept"]), "attempts incarnation 1 reads were deleted at the old due time"
        assert cluster.dag_run(DAG_ID, run["run_id"])["state"] == "running"

    for run in runs.values():
        (run["release"] / "beta").write_text("go")

    cluster.wait_for(lambda: _note_end_times(cluster, runs), 300, "both runs ended", interval=0.5)
    everything: list = []
    for run in runs.values():
        ds, old, kept = run["ds"], run["old"], run["kept"]
        tokens = tokens_by_task(run["log"])
        second = run["second"] = marker(cluster, ds)
        assert second["incarnation"] >= 1
        assert second["tokens"] == {
            "alpha": tokens["counting.deploy_alpha"][0],
            "beta": tokens["counting.deploy_beta"][1],
            "gamma": tokens["counting.deploy_gamma"][0],
        }
        part = output / f"ds={ds}"
        for source in SOURCES:
            files = sorted((part / f"source={source}").glob("*.json"))
            rows = [row for path in files for row in json.loads(path.read_text())]
            assert {r["token"] for r in rows} == {second["tokens"][source]} and len(rows) == expected_row_count(source)
        everything += kept + [state_root / p for p in old["state_paths"]]
        everything.append(next(p for p in (state_root / "runs").rglob(tokens["counting.deploy_beta"][1]) if p.is_dir()))
    tombstones = output / "_zeta_tombstones"
    assert any(tombstones.rglob("_zeta_commit.json")), "incarnation 0's partition was kept as a tombstone"
    # Nothing goes before incarnation 1's own window ends (it read alpha's and gamma's attempts).
    for run in sorted(runs.values(), key=lambda r: r["ended_at"]):
        ended_at = run["ended_at"]
        cluster.wait_for(lambda ended_at=ended_at: time.time() >= ended_at + window - 4, window, "just before incarnation 1's window ends")
        assert all(p.exists() for p in run["kept"]), "the attempts incarnation 1 published went before its window ended"
    wait_deleted(cluster, everything, 90)
    cluster.wait_for(lambda: not any(tombstones.rglob("*")), 30, "the tombstone deleted")
    for run in runs.values():
        cluster.wait_for(lambda run_id=run["run_id"]: not run_directory(state_root, DAG_ID, run_id).exists(), 30, "run bookkeeping removed")
        assert marker(cluster, run["ds"]) == run["second"]
    assert leftovers_past_due(state_root, [output], dag_ids=PIPELINE_DAGS) == []


def start_held_runs(cluster, tmp_path, *runs: tuple[str, str]) -> list[tuple[str, list[str]]]:
    """Runs (date, name) whose three drivers keep running (no release), every deploy task deferred:
    all triggered first, then waited for together. Returns (run id, driver tokens) per run."""
    started = []
    for ds, name in runs:
        log, release = tmp_path / f"{name}.jsonl", tmp_path / f"release-{name}"
        release.mkdir()
        run_id = cluster.trigger_run(DAG_ID, f"{ds}T00:00:00Z", conf={"launch_log": str(log), "release_dir": str(release)})
        started.append((run_id, log))
    held = []
    for run_id, log in started:
        cluster.wait_for(lambda log=log: len(launches(log)) == 3, 120, "three drivers running")
        for source in SOURCES:
            cluster.wait_for_task(DAG_ID, run_id, f"counting.deploy_{source}", {"deferred"}, timeout=60)
        held.append((run_id, [e["token"] for e in launches(log)]))
    return held


def start_held_run(cluster, tmp_path, ds: str, name: str):
    """A run whose three drivers keep running (no release), all three deploy tasks deferred."""
    ((run_id, tokens),) = start_held_runs(cluster, tmp_path, (ds, name))
    return run_id, tokens


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
    (by_teardown, teardown_tokens), (by_sweep, sweep_tokens) = start_held_runs(
        cluster, tmp_path, ("2026-04-02", "teardown"), ("2026-04-04", "sweep")
    )
    cluster.kill("triggerer")
    try:
        cluster.api(
            "PATCH",
            f"/dags/{DAG_ID}/dagRuns/{quote(by_sweep, safe='')}/taskInstances/counting.cleanup",
            {"new_state": "failed"},
        )
        for run_id in (by_teardown, by_sweep):
            cluster.set_run_state(DAG_ID, run_id, "failed")

        # 1. the teardown ran although the run was marked failed; the cleanup DAG deleted its data
        cluster.wait_for_run(DAG_ID, by_teardown, states={"failed"}, timeout=120)
        cluster.wait_for_task(DAG_ID, by_teardown, "counting.cleanup", {"success"}, timeout=120)
        assert not any(pids_carrying(t) for t in teardown_tokens)
        cluster.wait_for(lambda: not run_directory(state_root, DAG_ID, by_teardown).exists(), 60, "cleaned")

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
    cluster.wait_for(lambda: not run_directory(state_root, DAG_ID, run_id).exists(), 60, "the failed run's staging cleaned")
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


def test_a_source_marked_failed_while_it_ran_runs_again_when_its_run_is_cleared_after_the_cleanup(fake_driver_cluster, tmp_path):
    """A cleared deploy task always re-runs. A user marks a running source failed: its
    trigger's on_kill stops the driver, but no try of the task records that the driver ended. The
    run fails, its cleanup deletes every attempt (ledger and intent file). A clear of the run (or a
    reprocessing backfill) must then launch every source again and publish. Before, the marked
    source's new try fenced the vanished attempt — its cancel marker re-created the deleted
    directory — and then failed with ``state_root_not_shared``, and so did every later clear."""
    cluster = fake_driver_cluster
    cluster.wait_for_dag(DAG_ID)
    cluster.wait_for_dag(CLEANUP_DAG)
    state_root, output = cluster.home / "zeta-state", cluster.home / "pipeline-output"
    ds = "2026-04-13"  # a date of its own on the shared cluster
    run_id, first_tokens = start_held_run(cluster, tmp_path, ds, "marked")
    log, release = tmp_path / "marked.jsonl", tmp_path / "release-marked"
    cluster.api("PATCH", f"/dags/{DAG_ID}/dagRuns/{quote(run_id, safe='')}/taskInstances/counting.deploy_alpha",
                {"new_state": "failed"})
    for source in ("beta", "gamma"):
        (release / source).write_text("go")
    cluster.wait_for_run(DAG_ID, run_id, states={"failed"}, timeout=300)
    cluster.wait_for(lambda: not run_directory(state_root, DAG_ID, run_id).exists(), 180, "incarnation 0 cleaned up")
    assert not any(pids_carrying(token) for token in first_tokens), "the marked source's driver was stopped"

    (release / "alpha").write_text("go")  # incarnation 1's drivers run through
    cluster.clear_run(DAG_ID, run_id)
    cluster.wait_for_run(DAG_ID, run_id, timeout=300)
    by_task = tokens_by_task(log)
    assert len(by_task) == 3 and all(len(tokens) == 2 for tokens in by_task.values()), by_task
    second = marker(cluster, ds)
    assert second["incarnation"] >= 1 and set(second["tokens"].values()) == {t[-1] for t in by_task.values()}
    rows = published(cluster, ds)
    for source in SOURCES:
        assert {r["token"] for r in rows[source]} == {second["tokens"][source]}
        assert len(rows[source]) == expected_row_count(source)
    cluster.wait_for(lambda: not run_directory(state_root, DAG_ID, run_id).exists(), 180, "incarnation 1 cleaned up")
    assert leftovers_past_due(state_root, [output], dag_ids=PIPELINE_DAGS) == []
