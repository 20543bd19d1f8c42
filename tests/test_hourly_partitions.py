"""Hourly partitions on real Airflow components (SQLite, fake drivers).

``pipeline_counting_hourly`` (tests/dags/pipeline_hourly.py) renders its partition from the spec
``ds={{ ds }}/hour={{ logical_date.strftime('%H') }}``. Two runs of one day, 10:00 and 11:00 UTC,
must both succeed and publish ``ds=2026-07-01/hour=10`` and ``ds=2026-07-01/hour=11`` side by
side, each whole (every source, every row, from the reporting attempts only); the day's directory
is no partition of its own. With the partition fixed at ``ds=`` the second run failed
(``partition_of_another_owner``).

Oracles: the files on disk (every data file read with ``zeta_harness.published``), the launch log the
jobs write (each driver received the rendered partition), ``zeta_harness.leftovers``.
"""

from __future__ import annotations

import json
import time

import pytest

from zeta_harness.leftovers import leftovers_past_due
from zeta_harness.published import read_partition

pytestmark = pytest.mark.sqlite_only  # provider logic, not the database

DAG_ID = "pipeline_counting_hourly"
SOURCES = ("alpha", "beta", "gamma")
DAY = "2026-07-01"
HOURS = ("10", "11")


def expected_row_count(source: str) -> int:  # mirrors tests/jobs/counting_job.py
    return 3 + sum(map(ord, source)) % 10


def test_two_hourly_runs_of_one_day_publish_two_partitions(fake_driver_cluster, tmp_path):
    cluster = fake_driver_cluster
    cluster.wait_for_dag(DAG_ID)
    cluster.wait_for_dag("zeta_cleanup")
    log = tmp_path / "launches.jsonl"
    conf = {"launch_log": str(log), "seconds": 1}
    # One run after the other: the first commit of an asset that no DAG declares is created by
    # Airflow when its first event arrives, and two such events at the same instant make Airflow
    # fail one completed point (UNIQUE constraint on the asset; README, limitations). Both runs
    # at once met it.
    run_ids = {}
    for hour in HOURS:
        run_ids[hour] = cluster.trigger_run(DAG_ID, f"{DAY}T{hour}:00:00Z", conf=conf)
        cluster.wait_for_run(DAG_ID, run_ids[hour], timeout=420)

    output = cluster.home / "pipeline-output-hourly"
    day = output / f"ds={DAY}"
    listing = sorted(str(p.relative_to(output)) for p in output.rglob("*"))
    assert sorted(p.name for p in day.iterdir()) == [f"hour={hour}" for hour in HOURS], listing
    assert not (day / "_zeta_commit.json").exists(), "the day is no partition of its own"
    launched = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    starts = [entry for entry in launched if "end" not in entry]
    assert len(starts) == len(SOURCES) * len(HOURS), launched  # one driver start per source and run
    for hour, run_id in run_ids.items():
        partition = f"ds={DAY}/hour={hour}"
        published = read_partition(output, partition=partition)
        assert published.exists and sorted(published.sources) == list(SOURCES), (partition, listing)
        ours = {e["source"]: e["token"] for e in starts if e["run_id"] == run_id}
        assert {e["partition"] for e in starts if e["run_id"] == run_id} == {partition}  # the driver's view
        assert {e["ds"] for e in starts if e["run_id"] == run_id} == {DAY}
        for source in SOURCES:
            rows = published.sources[source].rows
            assert sorted(r["n"] for r in rows) == list(range(expected_row_count(source))), (partition, source)
            assert published.sources[source].tokens == {ours[source]}, (partition, source)
        marker = published.marker
        assert marker is not None and marker["run_id"] == run_id and marker["partition"] == partition
        assert marker["ds"] == DAY and marker["tokens"] == ours

    state_root = cluster.home / "zeta-state"
    # The cleanup DAG runs when a run announces its cleanup record and carries it out one second
    # later; late in a loaded suite its run may take a minute or two to be scheduled and started.
    deadline = time.monotonic() + 240
    while (problems := leftovers_past_due(state_root, [output], dag_ids=[DAG_ID])) and time.monotonic() < deadline:
        time.sleep(2)
    assert problems == [], problems
