"""Reprocessing one source of a published run with real PySpark: the REST clear the UI posts for
"Clear -> Downstream" on a source together with the ready-to-close sensor (``reset_dag_runs``
true), on the session's fake-driver SQLite cluster, whose ``pipeline_real_spark`` DAG runs every
driver through the real spark-submit (``tests/dags/pipeline_real_spark.py``). The same gesture with
fake drivers, and the other gestures, are ``tests/test_reprocess.py``.

Oracle, independent of the provider's bookkeeping: Spark writes every row with the token of the
launch that wrote it (a column of the Parquet files, read here with pyarrow), and the job appends a
start and an end entry per launch to its own launch log. After the clear, the partition must hold
exactly the re-run source's new rows beside the other sources' first rows (each source's full row
set, once), the re-run source's job must have run twice and the others once, and the replaced
partition, every source's first rows whole, must be the run's one tombstone.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from airflow_provider_zeta.core.paths import run_tombstones_dir
from tests.test_pipeline_publish import expected_row_count
from tests.test_reprocess import _clear

pytestmark = [pytest.mark.spark, pytest.mark.sqlite_only]

DAG_ID = "pipeline_real_spark"
SOURCES = ("alpha", "beta", "gamma")
OUTPUT = "pipeline-output-real-spark"


def _log_entries(log: Path) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Source -> tokens of its launches and source -> tokens of its finished jobs (the job's own log)."""
    started: dict[str, list[str]] = {s: [] for s in SOURCES}
    ended: dict[str, list[str]] = {s: [] for s in SOURCES}
    for line in log.read_text().splitlines() if log.exists() else ():
        if line.strip():
            entry = json.loads(line)
            (ended if "end" in entry else started)[entry["source"]].append(entry["token"])
    return started, ended


def _spark_rows(folder: Path) -> dict[str, list[tuple[int, str]]]:
    """Source -> every (n, token) row of every Parquet data file under ``folder``'s ``source=``
    directories, read as Spark's partition discovery would (names starting with ``_`` or ``.`` are
    not data)."""
    rows: dict[str, list[tuple[int, str]]] = {}
    for source_dir in sorted(folder.glob("source=*")):
        found = rows.setdefault(source_dir.name.removeprefix("source="), [])
        for path in sorted(source_dir.rglob("*")):
            if path.is_file() and not path.name.startswith(("_", ".")):
                table = pq.read_table(path).to_pydict()
                found += list(zip(table["n"], table["token"], strict=True))
    return rows


def _holds_exactly(rows: dict[str, list[tuple[int, str]]], tokens: dict[str, str]) -> bool:
    """Each source's rows are its full row set, once, all written by the launch ``tokens`` names."""
    return sorted(rows) == sorted(tokens) and all(
        sorted(rows[s]) == [(n, tokens[s]) for n in range(expected_row_count(s))] for s in tokens
    )


def _summary(rows: dict[str, list[tuple[int, str]]]) -> dict[str, dict[str, int]]:
    """Source -> launch token -> how many rows it wrote: what a failure message shows."""
    return {s: {t: [token for _, token in found].count(t) for t in {token for _, token in found}} for s, found in rows.items()}


def test_clearing_a_real_spark_source_with_the_sensor_republishes_its_new_rows_beside_the_others(fake_driver_cluster, tmp_path):
    cluster = fake_driver_cluster
    cluster.wait_for_dag(DAG_ID)
    ds = "2026-09-21"
    table = cluster.home / OUTPUT
    partition = table / f"ds={ds}"
    log = tmp_path / "launches.jsonl"
    # A retention window that outlasts the test: the other sources' first attempts are published
    # again, and the replaced partition is looked for among the tombstones.
    run_id = cluster.trigger_run(DAG_ID, f"{ds}T00:00:00Z", conf={"launch_log": str(log), "cleanup_delay": 300})
    cluster.wait_for_run(DAG_ID, run_id, timeout=420)
    started, ended = _log_entries(log)
    first = {s: tokens[0] for s, tokens in started.items() if tokens}
    assert sorted(first) == sorted(SOURCES), started
    assert _holds_exactly(_spark_rows(partition), first), (first, _summary(_spark_rows(partition)))
    # Real spark-submit ran each driver (the fake one runs the job without it): Spark's own log,
    # in the attempt's driver log, names the application the launch named after its token.
    runs = cluster.home / "zeta-state" / "runs"
    for source, token in first.items():
        (driver_log,) = runs.rglob(f"{token}/driver.log")
        assert f"Submitted application: zeta-{token}" in driver_log.read_text(errors="replace"), source

    _clear(cluster, run_id, ["beta"], downstream=True, reset=True, with_sensor=True, dag_id=DAG_ID)
    cluster.wait_for(lambda: len(_log_entries(log)[0]["beta"]) == 2, 180, "beta launched again")
    cluster.wait_for_run(DAG_ID, run_id, timeout=420)

    started, ended = _log_entries(log)
    assert {s: len(t) for s, t in started.items()} == {"alpha": 1, "beta": 2, "gamma": 1}, started
    assert ended == started, (started, ended)  # every launch ran its job to the end, once
    new_beta = started["beta"][1]
    assert new_beta != first["beta"]
    published = _spark_rows(partition)
    assert _holds_exactly(published, {**first, "beta": new_beta}), (started, _summary(published))
    # The replaced partition is this run's one tombstone, whole: the old beta rows beside the
    # others' first ones (the partition above holds none of them).
    tombstones = table / run_tombstones_dir(DAG_ID, run_id)
    replaced = [folder for folder in tombstones.rglob("*") if folder.is_dir() and any(folder.glob("source=*"))]
    assert len(replaced) == 1, (replaced, sorted(p.relative_to(table) for p in table.rglob("*") if p.is_file()))
    assert _holds_exactly(_spark_rows(replaced[0]), first), (first, _summary(_spark_rows(replaced[0])))
