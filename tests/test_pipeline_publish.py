"""G2 + G3 under real Airflow components (fake drivers), SQLite and PostgreSQL.

A three-source pipeline: one source is released, two keep running, and while the ready-to-close
sensor waits, the scheduler and then the triggerer are killed with SIGKILL. After the others are
released, the partition must be published exactly once with exactly the expected rows per source,
from the reporting attempts only.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from airflow_provider_zeta.core.paths import run_tombstones_dir
from tests.conftest import PIPELINE_DAGS, check_nothing_past_due
from tests.test_deploy_windows import launches
from zeta_harness.chaos import run_scenario
from zeta_harness.leftovers import leftovers_past_due, run_directory
from zeta_harness.published import read_partition

DAG_ID = "pipeline_counting"
SOURCES = ("alpha", "beta", "gamma")


@pytest.fixture(autouse=True)
def nothing_left_past_due(request):
    yield
    check_nothing_past_due(request, "fake_driver_cluster")


def expected_row_count(source: str) -> int:  # mirrors tests/jobs/counting_job.py
    return 3 + sum(map(ord, source)) % 10


def published(cluster, ds: str, output: str = "pipeline-output") -> dict[str, list[dict]]:
    """Every row of every data file of every source of the partition (not one file per source):
    a second attempt's file shows up as extra rows and a second token."""
    return {name: source.rows for name, source in read_partition(cluster.home / output, ds).sources.items()}


def published_tokens(cluster, ds: str, output: str = "pipeline-output") -> dict[str, set[str]]:
    """The attempt tokens every file of each source names (by file name and by row)."""
    return read_partition(cluster.home / output, ds).tokens()


def marker(cluster, ds: str) -> dict:
    return json.loads((cluster.home / "pipeline-output" / f"ds={ds}" / "_zeta_commit.json").read_text())


def test_partition_published_once_across_scheduler_and_triggerer_kills(fake_driver_cluster, tmp_path):
    cluster = fake_driver_cluster
    cluster.wait_for_dag(DAG_ID)
    log, release = tmp_path / "launches.jsonl", tmp_path / "release"
    release.mkdir()
    ds = "2026-03-01"
    run_id = cluster.trigger_run(DAG_ID, f"{ds}T00:00:00Z", conf={"launch_log": str(log), "release_dir": str(release)})
    (release / "alpha").write_text("go")
    cluster.wait_for(lambda: cluster.xcom(DAG_ID, run_id, "counting.deploy_alpha"), 120, "alpha reported ready-to-close")
    cluster.wait_for_task(DAG_ID, run_id, "counting.ready_to_close", {"deferred"}, timeout=60)
    assert not (cluster.home / "pipeline-output" / f"ds={ds}").exists()

    cluster.kill("scheduler")
    cluster.start_component("scheduler")
    cluster.kill("triggerer")
    cluster.start_component("triggerer")
    cluster.wait_healthy()
    (release / "beta").write_text("go")
    (release / "gamma").write_text("go")

    cluster.wait_for_run(DAG_ID, run_id, timeout=300)
    rows = published(cluster, ds)
    assert sorted(rows) == list(SOURCES)
    for source in SOURCES:
        assert len(rows[source]) == expected_row_count(source), source
        assert {r["n"] for r in rows[source]} == set(range(expected_row_count(source)))
    by_task = {entry["task"]: entry for entry in launches(log)}
    assert len(launches(log)) == 3, launches(log)
    commit = marker(cluster, ds)
    reporting = {s: by_task[f"counting.deploy_{s}"]["token"] for s in SOURCES}
    assert commit["tokens"] == reporting
    assert published_tokens(cluster, ds) == {s: {t} for s, t in reporting.items()}
    ready_set = cluster.xcom(DAG_ID, run_id, "counting.ready_to_close")
    assert {s: v["token"] for s, v in ready_set["sources"].items()} == commit["tokens"]
    result = cluster.xcom(DAG_ID, run_id, "counting.completed_point")
    assert result["rule"] == "first_publish" and result["commit_id"] == commit["commit_id"]
    assert result["rows"] == {s: expected_row_count(s) for s in SOURCES}

    # The Asset event carries the commit.
    events = cluster.asset_events(50)
    ours = [e for e in events if e.get("extra", {}).get("commit_id") == commit["commit_id"]]
    assert len(ours) == 1 and ours[0]["extra"]["rows"] == result["rows"]

    # Re-executing the completed point is a no-op: same marker, no second event of a new commit.
    cluster.api(
        "POST",
        f"/dags/{DAG_ID}/clearTaskInstances",
        {"dry_run": False, "task_ids": ["counting.completed_point"], "dag_run_id": run_id, "only_failed": False},
    )
    cluster.wait_for(
        lambda: cluster.task_instance(DAG_ID, run_id, "counting.completed_point")["try_number"] >= 2
        and cluster.task_instance(DAG_ID, run_id, "counting.completed_point")["state"] == "success",
        180,
        "the completed point re-executed",
    )
    assert marker(cluster, ds) == commit
    assert cluster.xcom(DAG_ID, run_id, "counting.completed_point")["rule"] == "already_published"
    events = cluster.asset_events(100)
    assert len([e for e in events if e.get("extra", {}).get("commit_id") == commit["commit_id"]]) == 1, (
        "a no-op re-execution emitted a second event for the same commit"
    )


@pytest.mark.sqlite_only
def test_stale_attempt_output_is_never_published(fake_driver_cluster, tmp_path):
    """beta's first attempt stages output and then fails; only its redeployed attempt is published."""
    cluster = fake_driver_cluster
    cluster.wait_for_dag(DAG_ID)
    log = tmp_path / "launches.jsonl"
    ds = "2026-03-02"
    run_id = cluster.trigger_run(
        DAG_ID, f"{ds}T00:00:00Z", conf={"launch_log": str(log), "fail_first_of": "beta", "cleanup_delay": 600}
    )
    cluster.wait_for_task(DAG_ID, run_id, "counting.completed_point", {"success"}, timeout=300)
    beta = [entry for entry in launches(log) if entry["task"] == "counting.deploy_beta"]
    assert len(beta) == 2 and beta[0]["token"] != beta[1]["token"]
    stale_output = next((cluster.home / "zeta-state" / "runs").rglob(f"{beta[0]['token']}/output/part-0.json"))
    assert stale_output.exists(), "the failed attempt did stage output"
    rows = published(cluster, ds)
    assert {r["token"] for r in rows["beta"]} == {beta[1]["token"]}
    assert len(rows["beta"]) == expected_row_count("beta"), "the stale attempt's rows must not be there too"
    assert published_tokens(cluster, ds)["beta"] == {beta[1]["token"]}
    assert marker(cluster, ds)["tokens"]["beta"] == beta[1]["token"]


@pytest.mark.sqlite_only
def test_run_without_logical_date_fails_clearly_and_launches_nothing(fake_driver_cluster, tmp_path):
    cluster = fake_driver_cluster
    cluster.wait_for_dag(DAG_ID)
    log = tmp_path / "launches.jsonl"
    run_id = cluster.trigger_run(DAG_ID, conf={"launch_log": str(log)}, no_logical_date=True)
    cluster.wait_for_run(DAG_ID, run_id, states={"failed"}, timeout=180)
    assert launches(log) == []

    folder = cluster.home / "logs" / f"dag_id={DAG_ID}" / f"run_id={run_id}" / "task_id=counting.deploy_alpha"
    text = "\n".join(p.read_text() for p in folder.glob("attempt=*.log"))
    assert "has no logical date" in text


@pytest.mark.sqlite_only
def test_clearing_one_source_reruns_only_that_source(fake_driver_cluster, tmp_path):
    """Clearing beta raises the run's clear_number; alpha and gamma, deferred on healthy drivers,
    must re-attach and reuse their results — not re-run their jobs."""
    cluster = fake_driver_cluster
    cluster.wait_for_dag(DAG_ID)
    log, release = tmp_path / "launches.jsonl", tmp_path / "release"
    release.mkdir()
    ds = "2026-03-03"
    run_id = cluster.trigger_run(DAG_ID, f"{ds}T00:00:00Z", conf={"launch_log": str(log), "release_dir": str(release)})
    cluster.wait_for(lambda: len(launches(log)) == 3, 120, "all three jobs running")
    for source in SOURCES:
        cluster.wait_for_task(DAG_ID, run_id, f"counting.deploy_{source}", {"deferred"}, timeout=60)
    first_beta = next(e for e in launches(log) if e["task"] == "counting.deploy_beta")

    cluster.api(
        "POST",
        f"/dags/{DAG_ID}/clearTaskInstances",
        {"dry_run": False, "task_ids": ["counting.deploy_beta"], "dag_run_id": run_id, "only_failed": False},
    )
    cluster.wait_for(lambda: len(launches(log)) == 4, 120, "beta relaunched after its clear")
    for source in SOURCES:
        (release / source).write_text("go")
    cluster.wait_for_run(DAG_ID, run_id, timeout=300)

    per_task = {}
    for entry in launches(log):
        per_task.setdefault(entry["task"], []).append(entry["token"])
    assert len(per_task["counting.deploy_alpha"]) == 1 and len(per_task["counting.deploy_gamma"]) == 1, per_task
    assert len(per_task["counting.deploy_beta"]) == 2
    commit = marker(cluster, ds)
    assert commit["tokens"]["beta"] == per_task["counting.deploy_beta"][1] != first_beta["token"]
    assert commit["tokens"]["alpha"] == per_task["counting.deploy_alpha"][0]
    reporting = {"alpha": per_task["counting.deploy_alpha"][0], "beta": per_task["counting.deploy_beta"][1],
                 "gamma": per_task["counting.deploy_gamma"][0]}
    assert published_tokens(cluster, ds) == {s: {t} for s, t in reporting.items()}
    for source, rows in published(cluster, ds).items():
        assert len(rows) == expected_row_count(source), source


def test_cleanup_window_survives_triggerer_and_scheduler_kills(fake_driver_cluster, tmp_path):
    """G4: the record's due time stands across a triggerer kill and a scheduler kill inside the
    window (the run itself has ended; the cleanup DAG waits); the data is deleted once, not before
    the due time and within 15 s after it."""
    cluster = fake_driver_cluster
    cluster.wait_for_dag(DAG_ID)
    state_root, output = cluster.home / "zeta-state", cluster.home / "pipeline-output"
    log = tmp_path / "launches.jsonl"
    ds = "2026-03-04"
    window = 40
    run_id = cluster.trigger_run(
        DAG_ID, f"{ds}T00:00:00Z", conf={"launch_log": str(log), "seconds": 1, "cleanup_delay": window}
    )
    cluster.wait_for_run(DAG_ID, run_id, timeout=300)
    run = run_directory(state_root, DAG_ID, run_id)
    record_file = next((run / "cleanup").glob("counting.cleanup-*.json"))
    record = json.loads(record_file.read_text())
    staging = [state_root / p for p in record["state_paths"]]
    assert record["status"] == "pending" and len(staging) == 3 and all(p.is_dir() for p in staging)
    assert {Path(p).name for p in record["state_paths"]} == {e["token"] for e in launches(log)}
    assert record["due_at"] - record["created_at"] == window

    cluster.kill("triggerer")
    cluster.start_component("triggerer")
    cluster.wait_healthy()
    cluster.kill("scheduler")
    cluster.start_component("scheduler")
    cluster.wait_healthy()
    assert json.loads(record_file.read_text())["due_at"] == record["due_at"], "a restart moved the due time"
    assert time.time() < record["due_at"], "the restarts took longer than the window; lengthen it"

    deleted_at = cluster.wait_for(
        lambda: not any(p.exists() for p in staging) and time.time(), window + 120, "staging deleted", interval=0.5
    )
    print(f"staging deleted {deleted_at - record['due_at']:.1f}s after the due time")
    assert record["due_at"] <= deleted_at <= record["due_at"] + 15
    cleanup = cluster.task_instance(DAG_ID, run_id, "counting.cleanup")
    assert cleanup["try_number"] == 1, "the cleanup was retried, the window could have restarted"
    assert published(cluster, ds).keys() == set(SOURCES), "the cleanup must never touch the partition"
    cluster.wait_for(lambda: not run.exists(), 30, "the run's bookkeeping removed once it is cleaned")
    assert leftovers_past_due(state_root, [output], dag_ids=PIPELINE_DAGS) == []


CHAOS_DAG = "pipeline_counting_daily"
DATES = ["2026-02-01", "2026-02-02", "2026-02-03"]


def read_rows(folder):
    rows = []
    for path in sorted(folder.glob("*.json")):
        rows += [{"n": r["n"], "source": r["source"]} for r in json.loads(path.read_text())]
    return rows


def expected(source: str, ds: str):
    return [{"n": n, "source": source} for n in range(expected_row_count(source))]


def test_pipeline_survives_random_kills_with_a_reprocessing_backfill(fake_driver_cluster, chaos_seed):
    """The short chaos run of the default suite (``make chaos`` is the long soak, with real Spark
    and the stock-operator baseline): three dates of the daily counting pipeline, a backfill that
    reprocesses the first, and 3 ``kill -9`` per database (6 in all) of the scheduler, the triggerer
    and the task workers at seeded random moments — the seed is printed; ``ZETA_CHAOS_SEED``
    replays one. Every check of ``zeta_harness.chaos`` must hold."""
    cluster = fake_driver_cluster
    cluster.wait_for_dag(CHAOS_DAG)
    seed = chaos_seed  # printed; named in the failure report and test-artifacts/ (conftest.py)
    report = run_scenario(
        cluster,
        dag_id=CHAOS_DAG,
        dates=DATES,
        output=cluster.home / "pipeline-output-daily",
        sources=SOURCES,
        expected_rows=expected,
        read_rows=read_rows,
        kills=3,
        seed=seed,
        conf={"seconds": 6, "cleanup_delay": 10},
        retention_s=10,
        bound_s=600,
        kill_window_s=50,
    )
    print(json.dumps(report.summary(), indent=1, default=str))
    assert len(report.kills) >= 3 and report.runs == len(DATES)
    assert report.launches >= 3 * (len(DATES) + 1), "every date ran, the reprocessed one twice"
    assert report.violations == [], report.violations


def _crash_triggerer_at(cluster, point: str, run_id: str, action) -> None:
    """Arm ``point`` for ``run_id``, do ``action``, and wait until the triggerer killed itself there."""
    armed = cluster.arm_crash_point(point, run_id)
    try:
        action()
        cluster.wait_for(lambda: not armed.exists(), 240, f"the triggerer to reach crash point {point}", interval=0.5)
        cluster.wait_for(lambda: not cluster.components["triggerer"].alive(), 30, "the triggerer to die", interval=0.2)
    finally:
        armed.unlink(missing_ok=True)


@pytest.mark.sqlite_only
def test_a_triggerer_killed_while_a_trigger_emits_its_event_loses_no_report(fake_driver_cluster, tmp_path):
    """A triggerer killed exactly while a trigger hands over its event, before the event
    is stored (armed crash points kill the whole triggerer in that loop pass). First the driver
    trigger of a finished job as it ends its deploy task from the triggerer (TaskSuccessEvent with
    its report as the task's return value), then ready-to-close as it ends its sensor
    from the triggerer (TaskSuccessEvent with the ready set as XCom). Each trigger must run again
    on the next triggerer and emit the same: no report lost, no job launched again, no worker
    resume, the partition published once. Oracles: the jobs' launch log, the published files, the
    tries and the task logs."""
    cluster = fake_driver_cluster
    cluster.wait_for_dag(DAG_ID)
    log, release = tmp_path / "launches.jsonl", tmp_path / "release"
    release.mkdir()
    ds = "2026-04-14"  # a date of its own on the shared cluster
    try:
        run_id = cluster.trigger_run(DAG_ID, f"{ds}T00:00:00Z", conf={"launch_log": str(log), "release_dir": str(release)})
        cluster.wait_for(lambda: len(launches(log)) == 3, 180, "three drivers launched")
        _crash_triggerer_at(cluster, "driver.success_event", run_id, lambda: (release / "alpha").write_text("go"))
        deploy = cluster.task_instance(DAG_ID, run_id, "counting.deploy_alpha")
        assert deploy["state"] == "deferred", deploy  # the event died with the triggerer
        cluster.start_component("triggerer")
        cluster.wait_for_task(DAG_ID, run_id, "counting.deploy_alpha", {"success"}, timeout=180)
        # The report reads back as the document a task returns (not as JSON text).
        report = cluster.xcom(DAG_ID, run_id, "counting.deploy_alpha")
        alpha = [entry["token"] for entry in launches(log) if entry["task"] == "counting.deploy_alpha"]
        assert isinstance(report, dict) and report["source"] == "alpha" and [report["token"]] == alpha, (report, alpha)

        def release_the_rest():
            for source in ("beta", "gamma"):
                (release / source).write_text("go")

        _crash_triggerer_at(cluster, "ready_to_close.success_event", run_id, release_the_rest)
        sensor = cluster.task_instance(DAG_ID, run_id, "counting.ready_to_close")
        assert (sensor["state"], sensor["try_number"]) == ("deferred", 1), sensor
    finally:
        if not cluster.components["triggerer"].alive():
            cluster.start_component("triggerer")
    cluster.wait_for_run(DAG_ID, run_id, timeout=300)

    sensor = cluster.task_instance(DAG_ID, run_id, "counting.ready_to_close")
    assert (sensor["state"], sensor["try_number"]) == ("success", 1), sensor
    # Ended from the triggerer: one worker start (the first evaluation, which deferred), no resume.
    # (The trigger proved itself the sensor's current one by its deferral mark, core.events.)
    logs = cluster.home / "logs" / f"dag_id={DAG_ID}" / f"run_id={run_id}"
    sensor_log = logs / "task_id=counting.ready_to_close" / "attempt=1.log"
    assert sensor_log.read_text().count("::group::Pre Execute") == 1, "the sensor resumed on a worker"
    # The deploy task too: ended from the (restarted) triggerer, never resumed on a worker.
    deploy_log = (logs / "task_id=counting.deploy_alpha" / "attempt=1.log").read_text()
    assert deploy_log.count("::group::Pre Execute") == 1, "deploy_alpha resumed on a worker"
    # Its triggers' lines, in the files beside it (one per triggerer that ran them).
    trigger_logs = "".join(p.read_text() for p in (logs / "task_id=counting.deploy_alpha").glob("attempt=1.log.trigger.*"))
    assert "its report goes with the event that ends the task from the triggerer" in trigger_logs, trigger_logs[-2000:]
    assert cluster.task_instance(DAG_ID, run_id, "counting.deploy_alpha")["try_number"] == 1
    assert len(launches(log)) == 3, launches(log)  # one job per source, none launched again
    reporting = {entry["task"].removeprefix("counting.deploy_"): entry["token"] for entry in launches(log)}
    commit = marker(cluster, ds)
    assert commit["tokens"] == reporting
    assert published_tokens(cluster, ds) == {s: {t} for s, t in reporting.items()}
    rows = published(cluster, ds)
    assert {s: len(rows[s]) for s in SOURCES} == {s: expected_row_count(s) for s in SOURCES}


@pytest.mark.sqlite_only
def test_the_sensor_ends_on_a_report_stored_while_the_last_deploy_task_is_still_deferred(fake_driver_cluster, tmp_path):
    """The last source's driver trigger stores its report (the deploy task's return value)
    and then yields the event that ends its task, which Airflow applies at the triggerer's next
    beat. The ready-to-close trigger counts the stored report already (core.ready,
    REPORTED_WHILE_DEFERRED), so the sensor ends in the same beat, not one later. Here that trigger
    is held right after storing (an armed crash point with a hold) until the triggerer is killed:
    its task's end never reaches the database. Meanwhile the sensor must end and the completed
    point publish; the restarted triggerer then ends the deploy task with the same report. (A stale
    trigger's late store is core.ready's unit tests: it names an older deferral.) Oracles:
    the jobs' launch log, the published files and commit marker, the tries and the task logs."""
    cluster = fake_driver_cluster
    cluster.wait_for_dag(DAG_ID)
    log, release = tmp_path / "launches.jsonl", tmp_path / "release"
    release.mkdir()
    ds = "2026-04-15"  # a date of its own on the shared cluster
    holding = False  # alpha's trigger holds at the crash point (until released)
    try:
        run_id = cluster.trigger_run(DAG_ID, f"{ds}T00:00:00Z", conf={"launch_log": str(log), "release_dir": str(release)})
        cluster.wait_for(lambda: len(launches(log)) == 3, 180, "three drivers launched")
        for source in ("beta", "gamma"):
            (release / source).write_text("go")
        for source in ("beta", "gamma"):
            cluster.wait_for_task(DAG_ID, run_id, f"counting.deploy_{source}", {"success"}, timeout=180)
        armed = cluster.arm_crash_point("driver.success_event", run_id, hold=600)  # released below
        (release / "alpha").write_text("go")
        cluster.wait_for(lambda: not armed.exists(), 120, "alpha's driver trigger to store its report and hold", interval=0.2)
        holding = True
        # Held: alpha's report is stored, its task's end is not. The sensor ends on the report.
        cluster.wait_for_task(DAG_ID, run_id, "counting.ready_to_close", {"success"}, timeout=20)
        cluster.wait_for_task(DAG_ID, run_id, "counting.completed_point", {"success"}, timeout=120)
        deploy = cluster.task_instance(DAG_ID, run_id, "counting.deploy_alpha")
        assert deploy["state"] == "deferred", deploy  # published while alpha's task had not ended
        cluster.release_crash_point("driver.success_event")
        cluster.wait_for(lambda: not cluster.components["triggerer"].alive(), 60, "the triggerer to die", interval=0.2)
        holding = False
        assert cluster.task_instance(DAG_ID, run_id, "counting.deploy_alpha")["state"] == "deferred"
    finally:
        (cluster.crash_points / "driver.success_event").unlink(missing_ok=True)
        if holding:  # a check above failed during the hold: end it, the triggerer dies
            cluster.release_crash_point("driver.success_event")
            cluster.wait_for(lambda: not cluster.components["triggerer"].alive(), 60, "the triggerer to die", interval=0.2)
        (cluster.crash_points / "driver.success_event.release").unlink(missing_ok=True)
        if not cluster.components["triggerer"].alive():
            cluster.start_component("triggerer")
    cluster.wait_for_run(DAG_ID, run_id, timeout=300)
    alpha = cluster.task_instance(DAG_ID, run_id, "counting.deploy_alpha")
    assert (alpha["state"], alpha["try_number"]) == ("success", 1), alpha
    logs = cluster.home / "logs" / f"dag_id={DAG_ID}" / f"run_id={run_id}"
    deploy_log = (logs / "task_id=counting.deploy_alpha" / "attempt=1.log").read_text()
    assert deploy_log.count("::group::Pre Execute") == 1, "deploy_alpha resumed on a worker"
    report = cluster.xcom(DAG_ID, run_id, "counting.deploy_alpha")
    assert len(launches(log)) == 3, launches(log)  # one job per source, none launched again
    reporting = {entry["task"].removeprefix("counting.deploy_"): entry["token"] for entry in launches(log)}
    assert isinstance(report, dict) and report["token"] == reporting["alpha"], (report, reporting)
    assert marker(cluster, ds)["tokens"] == reporting
    assert published_tokens(cluster, ds) == {s: {t} for s, t in reporting.items()}
    rows = published(cluster, ds)
    assert {s: len(rows[s]) for s in SOURCES} == {s: expected_row_count(s) for s in SOURCES}


@pytest.mark.sqlite_only
def test_a_date_whose_run_was_deleted_is_published_by_the_next_run_of_the_date(fake_driver_cluster, tmp_path):
    """A run published its date and was then deleted — by a user, or by Airflow itself: on SQLite,
    its clean-up of a backfill refused for a locked database (HTTP 503) deletes the runs the backfill
    was reprocessing (the chaos test above met it, seeds 100681 and 208229). The date is triggered
    again, under another run id. The new run must publish its own attempts (``owner_run_deleted``:
    the completed point asks Airflow whether the marker's run, of the same logical date, still
    exists), and the deleted run's
    partition is moved aside and deleted with the new run's cleanup. Before the rule the new run
    failed, ``partition_of_another_owner``, for good. Oracles: the jobs' launch log, every file
    under the table, the commit marker."""
    cluster = fake_driver_cluster
    cluster.wait_for_dag(DAG_ID)
    log = tmp_path / "launches.jsonl"
    ds = "2026-04-16"  # a date of its own on the shared cluster
    deleted = cluster.trigger_run(DAG_ID, f"{ds}T00:00:00Z", conf={"launch_log": str(log)})
    cluster.wait_for_run(DAG_ID, deleted, timeout=300)

    def xcom_errors(run_id: str) -> list[str]:
        """Error-level lines naming an XCom, of this run, in any component's log or task log: a
        healthy run has none (a read of a report not stored yet must not log one)."""
        found = []
        for path in (cluster.home / "component-logs").glob("*.log"):
            found += [
                f"{path.name}: {line}"
                for line in path.read_text(errors="replace").splitlines()
                if "[error" in line and "xcom" in line.lower() and run_id in line
            ]
        for path in (cluster.home / "logs" / f"dag_id={DAG_ID}" / f"run_id={run_id}").rglob("*.log"):
            found += [
                f"{path.parent.name}: {line}"
                for line in path.read_text(errors="replace").splitlines()
                if ('"level":"error"' in line.replace(" ", "") or "[error" in line) and "xcom" in line.lower()
            ]
        return found

    # The healthy run logged no error about an XCom (the ready-to-close trigger asks for reports
    # before they are stored, at every poll while a driver has ended and its task has not).
    assert xcom_errors(deleted) == []
    old_tokens = {entry["token"] for entry in launches(log)}
    assert len(old_tokens) == 3 and marker(cluster, ds)["run_id"] == deleted
    cluster.delete_run(DAG_ID, deleted)

    # A retention window long enough to find the tombstone once the run has ended.
    again = cluster.trigger_run(DAG_ID, f"{ds}T00:00:00Z", conf={"launch_log": str(log), "cleanup_delay": 20})
    assert again != deleted
    cluster.wait_for_run(DAG_ID, again, timeout=300)
    assert xcom_errors(again) == []
    new_launches = [e for e in launches(log) if e["token"] not in old_tokens]
    reporting = {e["task"].removeprefix("counting.deploy_"): e["token"] for e in new_launches}
    assert len(new_launches) == 3 and sorted(reporting) == sorted(SOURCES), launches(log)  # one new job per source
    commit = marker(cluster, ds)
    assert commit["run_id"] == again and commit["tokens"] == reporting
    assert published_tokens(cluster, ds) == {s: {t} for s, t in reporting.items()}
    rows = published(cluster, ds)
    assert {s: len(rows[s]) for s in SOURCES} == {s: expected_row_count(s) for s in SOURCES}
    logs = cluster.home / "logs" / f"dag_id={DAG_ID}" / f"run_id={again}" / "task_id=counting.completed_point"
    assert "zeta.publish.owner_run_deleted" in "".join(p.read_text() for p in logs.glob("attempt=*.log"))
    # The deleted run's partition went to the new run's tombstones; once the new run's retention
    # window is over, no file of the old attempts is left anywhere under the table.
    table = cluster.home / "pipeline-output"

    def old_files() -> list[Path]:
        return [p for p in table.rglob("*") if p.is_file() and any(token in p.as_posix() for token in old_tokens)]

    tombstoned = old_files()
    tombstones = table / run_tombstones_dir(DAG_ID, again)
    assert tombstoned and all(p.is_relative_to(tombstones) for p in tombstoned), tombstoned
    cluster.wait_for(lambda: not old_files(), 90, "the deleted run's partition to be deleted after the window", interval=1)
