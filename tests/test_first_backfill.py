"""A new pipeline's first backfill: runs in parallel, both databases, every run ends success.

Airflow creates an Asset that no DAG declares when its first event arrives; two completed points
emitting that first event at the same instant (through their ``AssetAlias`` outlets) then race to
insert the asset row, and one of them fails on the unique constraint although its partition was
published. The completed point therefore also declares its Asset as an inlet (which emits
nothing): the DAG processor creates the row when it parses the DAG, before any run.

The in-process test checks what the DAG processor collects from a pipeline's serialized DAG; the
cluster test runs the README's pipeline shape, never seen by its cluster before, as a backfill of
four dates with ``max_active_runs=2`` whose sources all finish at the same moment. No cleanup DAG
is deployed beside it, as a newcomer would start: each cleanup task must say so in its log.
"""

from __future__ import annotations

import json
import textwrap
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from airflow_provider_zeta import CLEANUP_ASSET, zeta_pipeline
from tests.conftest import spark_env
from tests.test_deploy_windows import launches
from zeta_harness.chaos import create_backfill

JOB = str(Path(__file__).resolve().parent / "jobs" / "counting_job.py")
DATES = ("2026-02-01", "2026-02-02", "2026-02-03", "2026-02-04")


def assets_the_dag_processor_creates(dag) -> set[tuple[str, str]]:
    """The (name, uri) of every asset row the DAG processor creates or keeps for ``dag``
    (``AssetModelOperation.sync_assets`` creates exactly these)."""
    from airflow.dag_processing.collection import AssetModelOperation
    from airflow.serialization.serialized_objects import LazyDeserializedDAG

    return set(AssetModelOperation.collect({dag.dag_id: LazyDeserializedDAG.from_dag(dag)}).assets)


def test_the_dag_processor_creates_the_pipeline_asset_and_the_cleanup_asset_from_the_dag(tmp_path):
    from airflow.sdk import DAG

    with DAG(dag_id="first_backfill_parse", schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC)) as dag:
        zeta_pipeline("orders", sources={"web": JOB, "stores": JOB}, output=str(tmp_path / "orders"))
    created = assets_the_dag_processor_creates(dag)
    assert ("orders", f"file://{tmp_path / 'orders'}") in created
    assert (CLEANUP_ASSET.name, CLEANUP_ASSET.uri) in created
    # The declaration emits nothing: the only outlet of the completed point is still its alias, so
    # a no-op re-execution emits no event.
    publish = dag.get_task("orders.completed_point")
    assert [type(o).__name__ for o in publish.outlets] == ["AssetAlias"]


def test_the_completed_points_of_one_dag_publish_one_at_a_time_unless_told_otherwise(tmp_path):
    # Two first events through one alias at once fail the second task's success update in
    # Airflow 3.3 (the cluster test below reproduced it on both databases before this default).
    from airflow.sdk import DAG

    with DAG(dag_id="first_backfill_serial", schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC)) as dag:
        zeta_pipeline("orders", sources={"web": JOB}, output=str(tmp_path / "orders"))
        zeta_pipeline(
            "returns",
            sources={"web": JOB},
            output=str(tmp_path / "returns"),
            completed_point_kwargs={"max_active_tis_per_dag": 4},
        )
    assert dag.get_task("orders.completed_point").max_active_tis_per_dag == 1
    assert dag.get_task("returns.completed_point").max_active_tis_per_dag == 4


PIPELINE_FILE = '''
from datetime import datetime, timedelta, timezone

from airflow.sdk import DAG

from airflow_provider_zeta import zeta_pipeline

with DAG(
    dag_id={dag_id!r},
    schedule="@daily",
    start_date=datetime(2026, 1, 1, tzinfo=timezone.utc),
    end_date=datetime(2026, 3, 31, tzinfo=timezone.utc),  # no scheduled run: only the backfill
    catchup=False,
):
    zeta_pipeline(
        {pipeline_id!r},
        sources={{"web": {job!r}, "stores": {job!r}}},
        output={output!r},
        cleanup_delay=timedelta(seconds=1),
        job_params={{"launch_log": {launch_log!r}, "release_file": {release!r}}},
        deploy_kwargs={{"retries": 2, "retry_delay": timedelta(seconds=1)}},
    )
'''


@pytest.mark.parametrize("db_kind", ["sqlite", "postgres"])
def test_first_backfill_of_a_new_pipeline_runs_in_parallel_and_every_run_succeeds(airflow_cluster, tmp_path, db_kind):
    suffix = uuid.uuid4().hex[:8]
    dag_id, pipeline_id = f"first_backfill_{suffix}", f"orders_{suffix}"
    dags, launch_log, release = tmp_path / "dags", tmp_path / "launches.jsonl", tmp_path / "release"
    dags.mkdir()
    output = tmp_path / "orders"
    (dags / f"{dag_id}.py").write_text(
        textwrap.dedent(PIPELINE_FILE).format(
            dag_id=dag_id, pipeline_id=pipeline_id, job=JOB, output=str(output), launch_log=str(launch_log), release=str(release)
        )
    )
    cluster = airflow_cluster(dags, db_kind, extra_env=spark_env(fake=True))
    cluster.wait_for_dag(dag_id)
    uri = f"file://{output}"
    # Declared, so created by the DAG processor: the asset row exists before any run.
    rows = cluster.wait_for(
        lambda: cluster.db_query("SELECT name, uri FROM asset WHERE name = :name", name=pipeline_id),
        60,
        "the pipeline's asset row after the DAG is parsed",
    )
    assert rows == [{"name": pipeline_id, "uri": uri}]
    assert not cluster.db_query("SELECT id FROM asset_event")

    create_backfill(
        cluster,
        {
            "dag_id": dag_id,
            "from_date": f"{DATES[0]}T00:00:00Z",
            "to_date": f"{DATES[-1]}T00:00:00Z",
            "max_active_runs": 2,
        },
    )
    # Both first runs' sources finish at the same moment, so their completed points publish (and
    # emit the Asset's first events) together.
    cluster.wait_for(lambda: len(launches(launch_log)) >= 4, 240, "the first two runs' four drivers launched")
    release.write_text("go")

    def run_states() -> dict[str, str]:
        found = cluster.api("GET", f"/dags/{dag_id}/dagRuns?limit=100")["dag_runs"]
        return {r["dag_run_id"]: r["state"] for r in found if r["run_type"] == "backfill"}

    states = cluster.wait_for(
        lambda: (s := run_states()) and len(s) == len(DATES) and all(v in ("success", "failed") for v in s.values()) and s,
        600,
        "every backfill run ended",
        interval=2,
    )
    assert set(states.values()) == {"success"}, states

    # Oracles outside the provider's bookkeeping: one partition per date on disk with every
    # source, and one event of the Asset per run (Airflow's own event table, through the API).
    for ds in DATES:
        partition = output / f"ds={ds}"
        assert sorted(p.name for p in partition.iterdir() if p.name.startswith("source=")) == ["source=stores", "source=web"]
    events = cluster.asset_events(limit=100, source_dag_id=dag_id)
    pipeline_events = [e for e in events if e["name"] == pipeline_id]
    assert sorted(e["source_run_id"] for e in pipeline_events) == sorted(states), json.dumps(pipeline_events, indent=1)
    assert {e["uri"] for e in pipeline_events} == {uri}
    # No cleanup DAG is deployed beside this pipeline: each run's cleanup task says so in its log
    # (the files Airflow wrote, what the Logs tab shows), naming what to deploy.
    for run_id in states:
        folder = cluster.home / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}" / f"task_id={pipeline_id}.cleanup"
        text = "\n".join(p.read_text(errors="replace") for p in sorted(folder.glob("attempt=*.log")))
        assert "zeta.cleanup.cleanup_dag_missing" in text and "dags/zeta_maintenance.py" in text, text[-2000:]
    # The asset was never created a second time by an event.
    assert cluster.db_query("SELECT name, uri FROM asset WHERE name = :name", name=pipeline_id) == [{"name": pipeline_id, "uri": uri}]
