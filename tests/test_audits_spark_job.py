"""The audit job with real Spark: the completed point submits ``spark_jobs/audit_job.py`` through
``SparkSubmitHook`` (pyspark's own spark-submit, local mode) over staged Parquet, and judges what it
read. Oracle: the Parquet files are written here with pyarrow, so the nulls, duplicates and
schemas are known independently of Spark and of the provider.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_zeta.core.audits import AUDIT_RESULTS_XCOM, not_null, rows_within, same_schema, unique_key, user_audit
from airflow_provider_zeta.core.ready import Report
from airflow_provider_zeta.storage import StateStorage

pytestmark = pytest.mark.spark


def write(folder: Path, table: pa.Table, files: int = 2) -> None:
    folder.mkdir(parents=True)
    step = max(1, -(-table.num_rows // files))
    for n, start in enumerate(range(0, table.num_rows, step)):
        pq.write_table(table.slice(start, step), folder / f"part-{n:05d}.parquet")
    (folder / "_SUCCESS").write_bytes(b"")


def test_the_audit_job_reads_schema_nulls_and_duplicates_of_each_staged_source(tmp_path, monkeypatch):
    from airflow.sdk import DAG

    from airflow_provider_zeta.operators.completed_point import CompletedPointOperator

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_AUDIT", '{"conn_type": "spark", "host": "local[1]"}')
    state = StateStorage.from_url(str(tmp_path / "state"))
    # eu: clean. us: one null id and one repeated (id, day). apac: its id is a string.
    write(tmp_path / "state/attempts/t-eu/output", pa.table({"id": [1, 2, 3, 4], "day": ["a"] * 4}))
    write(tmp_path / "state/attempts/t-us/output", pa.table({"id": [1, 1, None, 5, 6], "day": ["a", "a", "b", "b", "b"]}))
    write(tmp_path / "state/attempts/t-apac/output", pa.table({"id": ["1", "2"], "day": ["a", "a"]}), files=1)
    sources = {n: Report(n, f"p.deploy_{n}", 0, f"t-{n}", "x", rows) for n, rows in (("eu", 4), ("us", 5), ("apac", 2))}
    staging = {n: (f"attempts/t-{n}/output", None) for n in sources}
    seen_rows = {}

    def counted(fact):
        seen_rows[fact.source] = fact.read_rows
        return fact.read_rows == fact.rows or f"read {fact.read_rows} rows, the driver reported {fact.rows}"

    with DAG("audited", schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC)):
        operator = CompletedPointOperator(
            task_id="completed_point",
            output_root=str(tmp_path / "table"),
            ready_task_id="ready",
            audits=[rows_within(min=1), same_schema(), not_null("id"), unique_key(["id", "day"]),
                    user_audit(counted, name="rows_read_match", needs_schema=True)],
            audit_conn_id="spark_audit",
            audit_spark_submit_kwargs={"conf": {"spark.ui.enabled": "false"}},
        )
    pushed = {}
    context = {"ti": SimpleNamespace(dag_id="audited", run_id="r", xcom_push=lambda key, value: pushed.__setitem__(key, value))}
    with pytest.raises(AirflowFailException) as failed:
        operator.audit(context, state, sources, staging)
    results = {(r["audit"], r["source"]): r for r in pushed[AUDIT_RESULTS_XCOM]["results"]}
    assert {k: r["passed"] for k, r in results.items()} == {
        ("rows_within(min=1, max=None)", "apac"): True,
        ("rows_within(min=1, max=None)", "eu"): True,
        ("rows_within(min=1, max=None)", "us"): True,
        ("same_schema", "apac"): False,
        ("same_schema", "eu"): True,
        ("same_schema", "us"): True,
        ("not_null(id)", "apac"): True,
        ("not_null(id)", "eu"): True,
        ("not_null(id)", "us"): False,
        ("unique_key(id, day)", "apac"): True,
        ("unique_key(id, day)", "eu"): True,
        ("unique_key(id, day)", "us"): False,
        ("rows_read_match", "apac"): True,
        ("rows_read_match", "eu"): True,
        ("rows_read_match", "us"): True,
    }
    assert results[("same_schema", "apac")]["numbers"]["type_differs"] == {"id": ["bigint", "string"]}
    assert results[("not_null(id)", "us")]["numbers"]["nulls"] == {"id": 1}
    assert results[("unique_key(id, day)", "us")]["numbers"] == {"duplicates": 1, "rows": 5}
    assert seen_rows == {"eu": 4, "us": 5, "apac": 2}
    assert pushed[AUDIT_RESULTS_XCOM]["failed_sources"] == ["apac", "us"]
    message = str(failed.value)
    assert "same_schema on apac" in message and "not_null(id) on us" in message and '"duplicates": 1' in message
