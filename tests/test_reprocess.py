"""Reprocessing one source of a published run the Airflow way, on real components (fake drivers;
the main gestures on SQLite and PostgreSQL): the REST clear the UI posts (with and without
``include_downstream``, with and without ``reset_dag_runs``) and ``airflow tasks clear -d``, before,
during and after the publish, and after the retention window.

Oracle, independent of the provider's bookkeeping: every row the counting job writes carries the
token of its launch, and the job appends each launch to a launch log. After a clear of a source
together with the ready-to-close sensor and their downstream tasks, the partition must hold exactly
the cleared sources' new launches and the other sources' first ones, from one new commit, the
replaced partition moved to the run's tombstones. A clear of a source without the sensor (alone, or
with its own downstream, which is only the cleanup) must launch nothing, fail that task naming what
to clear instead, and end the run ``failed``, leaving the partition as it was. A clear that lands
while the completed point is mid-publish (held at a named window of ``tests/dags/pipeline_publish.py``)
must end the same way as one after it: the new attempt published, once. After the retention window
a partial clear must fail the wait naming the sources whose attempts are gone, and touch nothing.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from pathlib import Path

import pytest

from airflow_provider_zeta.core.paths import run_tombstones_dir
from tests.test_deploy_windows import launches
from tests.test_publish_windows import consumer_runs
from zeta_harness.published import read_partition

DAG_ID = "pipeline_counting"
SOURCES = ("alpha", "beta", "gamma")
OUTPUT = "pipeline-output"


def _task(source: str) -> str:
    return f"counting.deploy_{source}"


def _launched(log: Path) -> dict[str, list[str]]:
    """Source -> tokens of its launches, in launch order (the job's own log)."""
    per_source: dict[str, list[str]] = {s: [] for s in SOURCES}
    for entry in launches(log):
        per_source[entry["task"].removeprefix("counting.deploy_")].append(entry["token"])
    return per_source


def _rows_by_source(cluster, ds: str) -> dict[str, set[str]]:
    """The launch token of every row (and file) of every source of the published partition."""
    return read_partition(cluster.home / OUTPUT, ds).tokens()


def _marker(cluster, ds: str) -> dict:
    return json.loads((cluster.home / OUTPUT / f"ds={ds}" / "_zeta_commit.json").read_text())


def _task_log(cluster, run_id: str, task_id: str) -> str:
    folder = cluster.home / "logs" / f"dag_id={DAG_ID}" / f"run_id={run_id}" / f"task_id={task_id}"
    return "\n".join(p.read_text(errors="replace") for p in sorted(folder.glob("attempt=*.log")))


def _clear(
    cluster, run_id: str, sources: list[str], *, downstream: bool, reset: bool, with_sensor: bool = False, dag_id: str = DAG_ID
) -> None:
    # What the UI's Clear dialog posts (it leaves reset_dag_runs at its default, true).
    cluster.api(
        "POST",
        f"/dags/{dag_id}/clearTaskInstances",
        {
            "dry_run": False,
            "dag_run_id": run_id,
            "task_ids": [_task(s) for s in sources] + (["counting.ready_to_close"] if with_sensor else []),
            "include_downstream": downstream,
            "include_upstream": False,
            "only_failed": False,
            "reset_dag_runs": reset,
        },
    )


def _published_run(cluster, tmp_path: Path, ds: str) -> tuple[str, Path, Path, dict[str, str]]:
    log, release = tmp_path / "launches.jsonl", tmp_path / "release"
    release.mkdir()
    for source in SOURCES:
        (release / source).write_text("go")
    # A retention window long enough to find the replaced partition among the tombstones.
    conf = {"launch_log": str(log), "release_dir": str(release), "cleanup_delay": 60}
    run_id = cluster.trigger_run(DAG_ID, f"{ds}T00:00:00Z", conf=conf)
    cluster.wait_for_run(DAG_ID, run_id, timeout=240)
    first = {s: tokens[0] for s, tokens in _launched(log).items()}
    assert _rows_by_source(cluster, ds) == {s: {t} for s, t in first.items()}
    return run_id, log, release, first


def _check_republished(cluster, ds: str, run_id: str, log: Path, first: dict[str, str], rerun: set[str]) -> None:
    launched = _launched(log)
    for source in SOURCES:
        assert len(launched[source]) == (2 if source in rerun else 1), launched
    expected = {s: launched[s][-1] for s in SOURCES}
    assert _rows_by_source(cluster, ds) == {s: {t} for s, t in expected.items()}, launched
    commit = _marker(cluster, ds)
    assert commit["tokens"] == expected and commit["run_id"] == run_id
    # The replaced partition is a tombstone of this run: every file of a replaced launch is there.
    table = cluster.home / OUTPUT
    tombstones = table / run_tombstones_dir(DAG_ID, run_id)
    for source in rerun:
        old = [p for p in table.rglob("*") if p.is_file() and first[source] in p.name]
        assert old and all(p.is_relative_to(tombstones) for p in old), old
    publish_log = _task_log(cluster, run_id, "counting.completed_point")
    assert publish_log.count("zeta.publish.newer_incarnation -> replace") == 1, publish_log[-3000:]


def test_clearing_a_source_with_the_sensor_republishes_its_new_launch_beside_the_others(fake_driver_cluster, tmp_path):
    cluster = fake_driver_cluster
    cluster.wait_for_dag(DAG_ID)
    ds = "2026-05-11"
    run_id, log, _, first = _published_run(cluster, tmp_path, ds)
    _clear(cluster, run_id, ["beta"], downstream=True, reset=True, with_sensor=True)
    cluster.wait_for(lambda: len(_launched(log)["beta"]) == 2, 120, "beta launched again")
    cluster.wait_for_run(DAG_ID, run_id, timeout=240)
    _check_republished(cluster, ds, run_id, log, first, {"beta"})


@pytest.mark.sqlite_only
def test_a_clear_without_reset_dag_runs_is_republished_too(fake_driver_cluster, tmp_path):
    """beta is cleared with the sensor (the run runs again, beta held); meanwhile gamma is cleared
    with downstream through REST with reset_dag_runs false, which leaves clear_number alone: gamma
    must run again and be published, not reused nor ignored as a late report."""
    cluster = fake_driver_cluster
    cluster.wait_for_dag(DAG_ID)
    ds = "2026-05-13"
    run_id, log, release, first = _published_run(cluster, tmp_path, ds)
    (release / "beta").unlink()
    (release / "gamma").unlink()
    _clear(cluster, run_id, ["beta"], downstream=True, reset=True, with_sensor=True)
    cluster.wait_for(lambda: len(_launched(log)["beta"]) == 2, 120, "beta launched again")
    cluster.wait_for_task(DAG_ID, run_id, "counting.ready_to_close", {"deferred"}, timeout=120)
    _clear(cluster, run_id, ["gamma"], downstream=True, reset=False)
    cluster.wait_for(lambda: len(_launched(log)["gamma"]) == 2, 120, "gamma launched again")
    (release / "beta").write_text("go")
    (release / "gamma").write_text("go")
    cluster.wait_for_run(DAG_ID, run_id, timeout=240)
    _check_republished(cluster, ds, run_id, log, first, {"beta", "gamma"})


@pytest.mark.parametrize(
    "gesture",
    [
        pytest.param("alone", marks=pytest.mark.sqlite_only),
        pytest.param("alone_no_reset", marks=pytest.mark.sqlite_only),
        "rest_downstream",
        pytest.param("cli_downstream", marks=pytest.mark.sqlite_only),
    ],
)
def test_clearing_a_source_without_the_sensor_after_the_publish_launches_nothing_fails_the_run_and_says_what_to_clear(
    fake_driver_cluster, tmp_path, gesture
):
    cluster = fake_driver_cluster
    cluster.wait_for_dag(DAG_ID)
    ds = {"alone": "2026-05-14", "alone_no_reset": "2026-05-15", "rest_downstream": "2026-05-17", "cli_downstream": "2026-05-18"}[gesture]
    run_id, log, release, first = _published_run(cluster, tmp_path, ds)
    before = _marker(cluster, ds)
    if gesture == "cli_downstream":
        # Airflow 3.3.2 matches -t as a substring of the task id (not as the regex its help names).
        cluster.cli("tasks", "clear", DAG_ID, "-t", "counting.deploy_beta", "-d", "-s", ds, "-e", ds, "-y")
    else:
        _clear(cluster, run_id, ["beta"], downstream=gesture == "rest_downstream", reset=gesture != "alone_no_reset")
    if gesture == "alone_no_reset":
        # Airflow schedules no task of a finished run cleared without reset_dag_runs: beta stays
        # cleared (no state) and nothing runs.
        cluster.wait_for_task(DAG_ID, run_id, _task("beta"), {None}, timeout=60)
    else:
        cluster.wait_for_task(DAG_ID, run_id, _task("beta"), {"failed"}, timeout=120)
        # Visibly not success: the deploy tasks are among the run's last tasks.
        cluster.wait_for_run(DAG_ID, run_id, states={"failed"}, timeout=120)
        text = _task_log(cluster, run_id, _task("beta"))
        assert "zeta.deploy.cleared_without_downstream" in text and "counting.ready_to_close" in text, text[-3000:]
        # The plugin's run view says it beside the source (what the api-server answers a browser).
        query = urllib.parse.urlencode({"dag_id": DAG_ID, "run_id": run_id})
        shown = cluster._http("GET", f"/zeta/api/run?{query}")
        refusals = {s["task_id"]: s.get("refusal") for p in shown["pipelines"] for s in p["sources"]}
        assert refusals[_task("beta")] and "cleared_without_downstream" in refusals[_task("beta")], refusals
        assert "counting.ready_to_close" in refusals[_task("beta")], refusals
        assert not refusals[_task("alpha")], refusals
    assert {s: len(t) for s, t in _launched(log).items()} == {s: 1 for s in SOURCES}
    assert _rows_by_source(cluster, ds) == {s: {t} for s, t in first.items()}
    assert _marker(cluster, ds) == before


@pytest.mark.sqlite_only
def test_a_source_cleared_without_reset_dag_runs_while_its_run_runs_runs_again_and_is_published(fake_driver_cluster, tmp_path):
    """The run still waits for beta; gamma, already finished, is cleared with downstream through
    REST with reset_dag_runs false: clear_number stays 0, only gamma's max_tries rises. gamma must
    run again and its new launch be the one published (before, its finished driver was reused)."""
    cluster = fake_driver_cluster
    cluster.wait_for_dag(DAG_ID)
    ds = "2026-05-16"
    log, release = tmp_path / "launches.jsonl", tmp_path / "release"
    release.mkdir()
    for source in ("alpha", "gamma"):
        (release / source).write_text("go")
    run_id = cluster.trigger_run(DAG_ID, f"{ds}T00:00:00Z", conf={"launch_log": str(log), "release_dir": str(release)})
    cluster.wait_for_task(DAG_ID, run_id, _task("gamma"), {"success"}, timeout=120)
    cluster.wait_for_task(DAG_ID, run_id, "counting.ready_to_close", {"deferred"}, timeout=120)
    _clear(cluster, run_id, ["gamma"], downstream=True, reset=False)
    cluster.wait_for(lambda: len(_launched(log)["gamma"]) == 2, 120, "gamma launched again")
    (release / "beta").write_text("go")
    cluster.wait_for_run(DAG_ID, run_id, timeout=240)
    launched = _launched(log)
    assert {s: len(t) for s, t in launched.items()} == {"alpha": 1, "beta": 1, "gamma": 2}, launched
    expected = {s: launched[s][-1] for s in SOURCES}
    assert _rows_by_source(cluster, ds) == {s: {t} for s, t in expected.items()}
    assert _marker(cluster, ds)["tokens"] == expected


WINDOWS_DAG = "publish_windows"  # tests/dags/pipeline_publish.py: the counting pipeline with a windowed completed point


@pytest.mark.parametrize("window", ["after_assemble", pytest.param("after_publish", marks=pytest.mark.sqlite_only)])
def test_a_source_cleared_with_the_sensor_while_the_completed_point_publishes_is_published_once(
    fake_driver_cluster, tmp_path, window
):
    """The completed point is held mid-publish — ``after_assemble``: the old attempts assembled in
    the pending area, the table untouched; ``after_publish``: the old attempts' partition committed,
    its Asset event not yet emitted — when beta is cleared with the sensor and their downstream
    tasks. The clear kills the held try; the run must end with beta's new launch published beside
    the others' first ones, never the held try's assembly of the old launch. Held before its commit,
    the date gets exactly one commit, hence one Asset event (the consumer DAG's runs count them)."""
    cluster = fake_driver_cluster
    for dag in (WINDOWS_DAG, "publish_windows_consumer"):
        cluster.wait_for_dag(dag)
    output = cluster.home / "pipeline-output-windows"
    ds = {"after_assemble": "2026-08-11", "after_publish": "2026-08-12"}[window]
    log, held = tmp_path / "launches.jsonl", tmp_path / "held"
    consumed_before = consumer_runs(cluster)
    run_id = cluster.trigger_run(
        WINDOWS_DAG,
        f"{ds}T00:00:00Z",
        conf={"launch_log": str(log), "seconds": 1, "cleanup_delay": 900, "hold_at": window, "hold_marker": str(held)},
    )
    cluster.wait_for(held.exists, 240, f"the completed point held at {window}")
    first = {e["source"]: e["token"] for e in launches(log)}
    assert sorted(first) == sorted(SOURCES), first
    if window == "after_assemble":
        assert not read_partition(output, ds).exists, "held before its commit, the table must be untouched"
    else:
        assert read_partition(output, ds).tokens() == {s: {t} for s, t in first.items()}

    cluster.api(
        "POST",
        f"/dags/{WINDOWS_DAG}/clearTaskInstances",
        {
            "dry_run": False,
            "dag_run_id": run_id,
            "task_ids": ["counting.deploy_beta", "counting.ready_to_close"],
            "include_downstream": True,
            "include_upstream": False,
            "only_failed": False,
            "reset_dag_runs": True,
        },
    )
    cluster.wait_for_run(WINDOWS_DAG, run_id, timeout=300)
    launched: dict[str, list[str]] = {}
    for entry in launches(log):
        launched.setdefault(entry["source"], []).append(entry["token"])
    assert {s: len(t) for s, t in launched.items()} == {"alpha": 1, "beta": 2, "gamma": 1}, launched
    expected = {s: tokens[-1] for s, tokens in launched.items()}
    partition = read_partition(output, ds)
    assert partition.tokens() == {s: {t} for s, t in expected.items()}, "the new attempt is not what is published"
    assert partition.marker["tokens"] == expected and partition.marker["run_id"] == run_id
    if window == "after_assemble":
        # One commit of the date, one event; none from the killed try, however long we wait.
        cluster.wait_for(lambda: consumer_runs(cluster) >= consumed_before + 1, 90, "the consumer ran for the commit")
        time.sleep(10)
        assert consumer_runs(cluster) == consumed_before + 1
    else:
        # The held try's commit was replaced: its files are this run's tombstones, none in the table.
        table_files = [p for p in (output / f"ds={ds}").rglob("*") if p.is_file()]
        assert not [p for p in table_files if first["beta"] in p.name], table_files


@pytest.mark.sqlite_only
def test_a_partial_clear_after_the_retention_window_fails_the_wait_naming_the_cleaned_sources(fake_driver_cluster, tmp_path):
    """After the retention window the cleanup has deleted every attempt of the run, the published
    partition aside. beta cleared with the sensor and their downstream tasks: beta runs again, but
    alpha's and gamma's reports name attempts that are gone, so the wait must fail at once naming
    them (what to do instead: clear the whole run), the run end ``failed`` and the partition keep
    what it had."""
    cluster = fake_driver_cluster
    cluster.wait_for_dag(DAG_ID)
    cluster.wait_for_dag("zeta_cleanup")
    ds = "2026-08-13"
    log, release = tmp_path / "launches.jsonl", tmp_path / "release"
    release.mkdir()
    for source in SOURCES:
        (release / source).write_text("go")
    run_id = cluster.trigger_run(
        DAG_ID, f"{ds}T00:00:00Z", conf={"launch_log": str(log), "release_dir": str(release), "cleanup_delay": 1}
    )
    cluster.wait_for_run(DAG_ID, run_id, timeout=240)
    first = {s: tokens[0] for s, tokens in _launched(log).items()}
    before = _marker(cluster, ds)
    runs = cluster.home / "zeta-state" / "runs"
    cluster.wait_for(
        lambda: not any(any(runs.rglob(f"{token}/ledger.json")) for token in first.values()),
        180,
        "the cleanup deleted the run's attempts",
    )

    _clear(cluster, run_id, ["beta"], downstream=True, reset=True, with_sensor=True)
    cluster.wait_for_run(DAG_ID, run_id, states={"failed"}, timeout=240)
    sensor = cluster.task_instance(DAG_ID, run_id, "counting.ready_to_close")
    assert sensor["state"] == "failed" and sensor["try_number"] >= 2, sensor
    text = _task_log(cluster, run_id, "counting.ready_to_close")
    assert "zeta.ready.unverifiable_report" in text, text[-3000:]
    assert "'alpha'" in text and "'gamma'" in text, text[-3000:]
    assert _marker(cluster, ds) == before
    assert _rows_by_source(cluster, ds) == {s: {t} for s, t in first.items()}
