"""Sources decided at run time (dynamic task mapping), on real components (fake drivers, SQLite).

``tests/dags/pipeline_mapped.py``: an upstream task returns the run's source names, the deploy task
is mapped over them, one map index per source. Oracles outside the provider's bookkeeping: the
counting job's own launch log (a start entry per launch, an end entry per finished driver), the
attempt directories on disk, and the published partition's files and rows (each row carries the
token of its launch).

* A scheduler killed while the mapped drivers run: each source's job ran exactly once, and the
  partition was published once with every mapped source.
* One mapped instance cleared with the sensor and downstream: that source alone runs again, and the
  partition holds its new launch beside the others' first ones.
* A backfill of two dates whose discovery step returns a different list per date: each date's
  partition holds exactly that date's sources.
* An empty source list: nothing launches, nothing is published, the run ends ``success`` and the
  sensor says why.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_provider_zeta.core.paths import task_attempts_dir
from zeta_harness.chaos import create_backfill
from zeta_harness.published import read_partition

pytestmark = pytest.mark.sqlite_only

DAG_ID = "pipeline_mapped"
DAILY = "pipeline_mapped_daily"
DEPLOY = "mapped.deploy"
OUTPUT = "pipeline-mapped-output"


def _entries(log: Path) -> list[dict]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def _launched(log: Path, run_id: str | None = None) -> dict[str, list[str]]:
    """Source -> tokens of its launches, in launch order (the job's own log)."""
    found: dict[str, list[str]] = {}
    for entry in _entries(log):
        if "end" not in entry and (run_id is None or entry["run_id"] == run_id):
            found.setdefault(entry["source"], []).append(entry["token"])
    return found


def _ended(log: Path) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for entry in _entries(log):
        if "end" in entry:
            found.setdefault(entry["source"], []).append(entry["token"])
    return found


def _task_log(cluster, dag_id: str, run_id: str, task_id: str) -> str:
    folder = cluster.home / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}" / f"task_id={task_id}"
    return "\n".join(p.read_text(errors="replace") for p in sorted(folder.rglob("attempt=*.log")))


def _attempt_tokens(cluster, dag_id: str, run_id: str, map_index: int) -> set[str]:
    folder = cluster.home / "zeta-state" / task_attempts_dir(dag_id, run_id, DEPLOY, map_index)
    return {p.name for p in folder.iterdir()} if folder.is_dir() else set()


def _start(cluster, tmp_path: Path, ds: str, sources: list[str], **conf) -> tuple[str, Path, Path]:
    log, release = tmp_path / "launches.jsonl", tmp_path / "release"
    release.mkdir()
    conf = {"launch_log": str(log), "release_dir": str(release), "sources": sources, **conf}
    run_id = cluster.trigger_run(DAG_ID, f"{ds}T00:00:00Z", conf=conf)
    return run_id, log, release


def _release(release: Path, sources: list[str]) -> None:
    for source in sources:
        (release / source).write_text("go")


def _check_published(cluster, output: Path, ds: str, expected: dict[str, str]) -> dict:
    partition = read_partition(output, ds)
    assert partition.tokens() == {s: {t} for s, t in expected.items()}, partition.tokens()
    assert partition.marker is not None and partition.marker["tokens"] == expected
    return partition.marker


def test_a_scheduler_killed_while_mapped_drivers_run_runs_each_source_once_and_publishes_them_all(fake_driver_cluster, tmp_path):
    cluster = fake_driver_cluster
    cluster.wait_for_dag(DAG_ID)
    ds, sources = "2026-08-01", ["north", "south", "east"]
    # The attempts are read after the run ends: a retention window longer than the test, or the
    # run's cleanup may already have deleted them (the DAG's default window is one second).
    run_id, log, release = _start(cluster, tmp_path, ds, sources, cleanup_delay=600)
    for index in range(len(sources)):
        cluster.wait_for_task(DAG_ID, run_id, DEPLOY, {"deferred"}, timeout=180, map_index=index)
    cluster.wait_for(lambda: len(_launched(log)) == 3, 60, "the three mapped drivers started")

    cluster.kill("scheduler")
    cluster.start_component("scheduler")
    cluster.wait_healthy()
    _release(release, sources)

    cluster.wait_for_run(DAG_ID, run_id, timeout=240)
    launched = _launched(log)
    assert {s: len(t) for s, t in launched.items()} == dict.fromkeys(sources, 1), launched
    assert {s: len(t) for s, t in _ended(log).items()} == dict.fromkeys(sources, 1), _ended(log)
    first = {s: t[0] for s, t in launched.items()}
    # Each map index launched its own source, under its own attempts directory, once.
    for index, source in enumerate(sources):
        assert _attempt_tokens(cluster, DAG_ID, run_id, index) == {first[source]}
        report = cluster.xcom(DAG_ID, run_id, DEPLOY, map_index=index)
        report = json.loads(report) if isinstance(report, str) else report
        assert report["source"] == source and report["token"] == first[source]
    assert not _attempt_tokens(cluster, DAG_ID, run_id, -1)
    marker = _check_published(cluster, cluster.home / OUTPUT, ds, first)
    assert marker["run_id"] == run_id
    assert _task_log(cluster, DAG_ID, run_id, "mapped.completed_point").count("zeta.publish.") >= 1


def test_clearing_one_mapped_source_with_the_sensor_reruns_that_source_alone(fake_driver_cluster, tmp_path):
    cluster = fake_driver_cluster
    cluster.wait_for_dag(DAG_ID)
    ds, sources = "2026-08-02", ["north", "south", "east"]
    run_id, log, release = _start(cluster, tmp_path, ds, sources, cleanup_delay=60)
    _release(release, sources)
    cluster.wait_for_run(DAG_ID, run_id, timeout=240)
    first = {s: t[0] for s, t in _launched(log).items()}
    _check_published(cluster, cluster.home / OUTPUT, ds, first)

    # What the UI's Clear of one mapped instance posts, with the sensor and downstream.
    cluster.api(
        "POST",
        f"/dags/{DAG_ID}/clearTaskInstances",
        {
            "dry_run": False,
            "dag_run_id": run_id,
            "task_ids": [[DEPLOY, 1], "mapped.ready_to_close"],
            "include_downstream": True,
            "include_upstream": False,
            "only_failed": False,
            "reset_dag_runs": True,
        },
    )
    cluster.wait_for(lambda: len(_launched(log).get("south", ())) == 2, 120, "south launched again")
    cluster.wait_for_run(DAG_ID, run_id, timeout=240)
    launched = _launched(log)
    assert {s: len(t) for s, t in launched.items()} == {"north": 1, "south": 2, "east": 1}, launched
    expected = {s: t[-1] for s, t in launched.items()}
    _check_published(cluster, cluster.home / OUTPUT, ds, expected)
    # The other map indexes kept their one attempt; south's has both, each in its own directory.
    assert _attempt_tokens(cluster, DAG_ID, run_id, 0) == {first["north"]}
    assert _attempt_tokens(cluster, DAG_ID, run_id, 2) == {first["east"]}
    assert _attempt_tokens(cluster, DAG_ID, run_id, 1) == set(launched["south"])
    for index in (0, 2):
        assert cluster.task_instance(DAG_ID, run_id, DEPLOY, index)["try_number"] == 1


def test_a_backfill_of_two_dates_publishes_each_date_with_its_own_mapped_sources(fake_driver_cluster, tmp_path):
    cluster = fake_driver_cluster
    cluster.wait_for_dag(DAILY)
    log = tmp_path / "launches.jsonl"
    by_ds = {"2026-03-02": ["north", "south"], "2026-03-03": ["north", "east", "west"]}
    create_backfill(
        cluster,
        {
            "dag_id": DAILY,
            "from_date": "2026-03-02T00:00:00Z",
            "to_date": "2026-03-03T00:00:00Z",
            "max_active_runs": 2,
            "dag_run_conf": {"launch_log": str(log), "seconds": 1, "sources_by_ds": by_ds},
        },
    )

    def runs() -> dict[str, dict]:
        found = cluster.api("GET", f"/dags/{DAILY}/dagRuns?limit=100")["dag_runs"]
        return {r["dag_run_id"]: r for r in found if r["run_type"] == "backfill"}

    ended = cluster.wait_for(
        lambda: (r := runs()) and len(r) == 2 and all(v["state"] in ("success", "failed") for v in r.values()) and r,
        300,
        "both backfill runs ended",
        interval=2,
    )
    assert {r["state"] for r in ended.values()} == {"success"}, {k: v["state"] for k, v in ended.items()}
    output = cluster.home / (OUTPUT + "-daily")
    for run_id, run in ended.items():
        ds = run["logical_date"][:10]
        launched = _launched(log, run_id)
        assert sorted(launched) == sorted(by_ds[ds]) and all(len(t) == 1 for t in launched.values()), launched
        _check_published(cluster, output, ds, {s: t[0] for s, t in launched.items()})


def test_an_empty_source_list_publishes_nothing_and_the_run_succeeds_saying_so(fake_driver_cluster, tmp_path):
    cluster = fake_driver_cluster
    cluster.wait_for_dag(DAG_ID)
    ds = "2026-08-03"
    run_id, log, _ = _start(cluster, tmp_path, ds, [])
    cluster.wait_for_run(DAG_ID, run_id, timeout=180)
    states = {(t["task_id"], t["map_index"]): t["state"] for t in cluster.task_instances(DAG_ID, run_id)}
    assert states[(DEPLOY, -1)] == "skipped", states
    assert states[("mapped.ready_to_close", -1)] == "skipped", states
    assert states[("mapped.completed_point", -1)] == "skipped", states
    assert not _launched(log)
    assert not (cluster.home / OUTPUT / f"ds={ds}").exists()
    assert "zeta.ready.no_sources" in _task_log(cluster, DAG_ID, run_id, "mapped.ready_to_close")
    # No event of the pipeline's Asset (the cleanup's own Asset event is emitted as on every run).
    events = cluster.asset_events(limit=100, source_dag_id=DAG_ID)
    assert not [e for e in events if e["source_run_id"] == run_id and e["name"] == f"{DAG_ID}.mapped"], events
