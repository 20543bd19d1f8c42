"""What the plugin shows of audits: the run view (API and page) carries each source's audit results
from the completed point's XCom ``zeta_audit_results``, and the DAG's page charts rows per source
over its last runs (inline SVG). The plugin's real app over Airflow's models on SQLite, as in
test_plugin_hostile.py; the XComs are written the way Airflow stores them."""

from __future__ import annotations

import re

import pytest

from airflow_provider_zeta.core.audits import AUDIT_RESULTS_XCOM, SourceFacts, decide_audits, rows_within
from airflow_provider_zeta.plugins.page import render_rows_charts
from tests.unit.test_monitor_listing_cost import DAG, engine  # noqa: F401 (fixture)
from tests.unit.test_plugin_hostile import plugin_test_client

POINT = "p.completed_point"


@pytest.fixture
def client(engine, tmp_path, monkeypatch):  # noqa: F811
    from airflow.models.xcom import XComModel
    from sqlalchemy import delete

    with engine.begin() as connection:  # the engine is the module's: no XCom of an earlier test
        connection.execute(delete(XComModel))
    yield from plugin_test_client(engine, tmp_path, monkeypatch)


def put_xcom(engine, run_id: str, key: str, value) -> None:  # noqa: F811
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from sqlalchemy import insert, select

    with engine.begin() as connection:
        run_pk = connection.execute(select(DagRun.id).where(DagRun.dag_id == DAG, DagRun.run_id == run_id)).scalar_one()
        exists = connection.execute(
            select(TaskInstance.task_id).where(TaskInstance.run_id == run_id, TaskInstance.task_id == POINT)
        ).first()
        if not exists:
            connection.execute(insert(TaskInstance), [{"dag_id": DAG, "run_id": run_id, "task_id": POINT, "pool": "default_pool",
                                                       "operator": "CompletedPointOperator", "state": "failed", "map_index": -1}])
        connection.execute(insert(XComModel), [{
            "dag_run_id": run_pk, "task_id": POINT, "map_index": -1, "key": key, "dag_id": DAG, "run_id": run_id,
            "value": XComModel.serialize_value(value),
        }])


def refused_outcome(rows: dict[str, int]) -> dict:
    facts = {s: SourceFacts(s, f"tok-{s}", n) for s, n in rows.items()}
    outcome = decide_audits([rows_within(min=3, max=100)], facts).to_value()
    return {**outcome, "pipeline_id": "p", "rows": rows, "tokens": {s: f"tok-{s}" for s in rows}, "at": 1.0e9}


def test_the_run_view_shows_each_sources_audit_results(client, engine):  # noqa: F811
    run_id = client.live["running"]
    put_xcom(engine, run_id, AUDIT_RESULTS_XCOM, refused_outcome({"a": 1}))
    answer = client.get("/api/run", params={"dag_id": DAG, "run_id": run_id}).json()
    (pipeline,) = answer["pipelines"]
    assert pipeline["audits"]["passed"] is False and pipeline["audits"]["failed_sources"] == ["a"]
    (source,) = pipeline["sources"]
    assert source["audits"] == [{"audit": "rows_within(min=3, max=100)", "passed": False,
                                 "numbers": {"min": 3, "max": 100, "rows": 1},
                                 "message": "source 'a': 1 rows, below the minimum 3"}]
    html = client.get("/ui", params={"dag_id": DAG, "run_id": run_id}).text
    cell = re.search(r'<td data-source-audits="a">(.*?)</td>', html).group(1)
    assert 'data-audit="rows_within(min=3, max=100)" data-passed="false"' in cell
    assert "rows=1" in cell and "min=3" in cell and "max=100" in cell and "1 rows, below the minimum 3" in cell
    assert 'data-audits="p">audit failed: a</span>' in html


def test_a_run_without_audits_shows_none(client):
    run_id = client.live["running"]
    answer = client.get("/api/run", params={"dag_id": DAG, "run_id": run_id}).json()
    assert answer["pipelines"][0]["audits"] is None and answer["pipelines"][0]["sources"][0]["audits"] == []
    assert '<td data-source-audits="a">-</td>' in client.get("/ui", params={"dag_id": DAG, "run_id": run_id}).text


def test_audit_text_is_escaped(client, engine):  # noqa: F811
    run_id = client.live["running"]
    outcome = refused_outcome({"a": 1})
    outcome["results"][0]["message"] = "<script>alert(1)</script>"
    put_xcom(engine, run_id, AUDIT_RESULTS_XCOM, outcome)
    html = client.get("/ui", params={"dag_id": DAG, "run_id": run_id}).text
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_the_dag_page_charts_rows_per_source_over_its_last_runs(client, engine):  # noqa: F811
    retained, running = client.live["retained"], client.live["running"]
    put_xcom(engine, retained, "return_value", {"commit_id": "c1", "pipeline_id": "p", "rows": {"a": 40}, "tokens": {"a": "t"}})
    put_xcom(engine, running, AUDIT_RESULTS_XCOM, refused_outcome({"a": 2}))
    history = client.get("/api/rows", params={"dag_id": DAG}).json()
    assert [(p["run_id"], p["rows"], p["status"]) for p in history["pipelines"]["p"]] == [
        (running, {"a": 2}, "audit_failed"), (retained, {"a": 40}, "published")
    ] or [(p["run_id"], p["rows"], p["status"]) for p in history["pipelines"]["p"]] == [
        (retained, {"a": 40}, "published"), (running, {"a": 2}, "audit_failed")
    ]
    html = client.get("/ui", params={"dag_id": DAG}).text
    chart = re.search(r'<div class="chart" data-pipeline="p" data-runs="2">.*?</svg>', html).group(0)
    circles = re.findall(r'<circle [^>]*data-source="a" data-run="([^"]+)" data-rows="(\d+)" data-status="(\w+)"', chart)
    assert sorted(circles) == sorted([(retained, "40", "published"), (running, "2", "audit_failed")])
    assert chart.count('stroke="#c92a2a"') == 1  # the refused run's point is ringed
    assert "<polyline" in chart
    # No chart on the overview or a run's page.
    assert 'class="chart"' not in client.get("/ui").text
    assert 'class="chart"' not in client.get("/ui", params={"dag_id": DAG, "run_id": running}).text


def test_chart_geometry_and_escaping():
    history = {"dag_id": "d", "pipelines": {"p<x>": [
        {"run_id": "r1", "rows": {"a": 0, "b": 10}, "status": "published"},
        {"run_id": "r2", "rows": {"a": 5, "b": None}, "status": "audit_failed", "failed_sources": ["a"]},
    ]}}
    html = render_rows_charts(history)
    assert "p<x>" not in html and "p&lt;x&gt;" in html
    points = re.findall(r'<circle cx="([\d.]+)" cy="([\d.]+)"[^>]*data-source="(\w)" data-run="(\w+)"', html)
    # x: first and last run at the plot's edges; y: 0 rows at the bottom, the largest count at the top.
    assert ("44.0", "130.0", "a", "r1") in points and ("550.0", "70.0", "a", "r2") in points
    assert ("44.0", "10.0", "b", "r1") in points
    assert len(points) == 3  # b has no count in r2
    assert render_rows_charts({"dag_id": "d", "pipelines": {}}) == '<div id="zeta-rows" data-dag="d"></div>'


def test_the_lists_show_audit_results_too(client, engine):  # noqa: F811
    run_id = client.live["running"]
    put_xcom(engine, run_id, AUDIT_RESULTS_XCOM, refused_outcome({"a": 1}))
    listed = client.get("/api/runs", params={"section": "running"}).json()
    (run,) = [r for r in listed["runs"] if r["run_id"] == run_id]
    assert run["pipelines"][0]["sources"][0]["audits"][0]["passed"] is False
    assert 'data-audits="p">audit failed: a</span>' in client.get("/ui", params={"dag_id": DAG}).text
