"""Templated partition specs: parsing and validation, nesting, the operators' templating.

Partitions used to be fixed at ``ds=<ds>``: an hourly schedule's second run of a day failed with
``partition_of_another_owner``. ``zeta_pipeline(partition=...)`` and ``CompletedPointOperator``
now take a templated spec, rendered by Airflow and checked by ``core.publish.parse_partition``;
partitions of one table never nest.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

from airflow_provider_zeta.core.ledger import CorruptState
from airflow_provider_zeta.core.paths import run_tombstones_dir
from airflow_provider_zeta.core.publish import (
    COMMIT_MARKER,
    DEFAULT_PARTITION,
    BadPartitionSpec,
    Owner,
    PublishAction,
    asset_extra,
    check_partition_spec,
    commit_id,
    decide_publish,
    enclosing_partitions,
    marker_for,
    nested_partitions,
    parse_commit_marker,
    parse_partition,
    partition_dir,
    partition_path,
)
from airflow_provider_zeta.core.ready import Report
from airflow_provider_zeta.storage import StateStorage

HOURLY = "ds={{ ds }}/hour={{ logical_date.strftime('%H') }}"
OWNER = Owner("dag_a", "pipe", "scheduled__2026-07-01T10:00:00+00:00")
OTHER = Owner("dag_b", "pipe", "scheduled__2026-07-01T00:00:00+00:00")


def sources(**tokens):
    return {name: Report(name, f"deploy_{name}", 0, token, "x", 1) for name, token in tokens.items()}


# -- parsing and validation ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "rendered,segments",
    [
        ("ds=2026-06-01", (("ds", "2026-06-01"),)),
        ("ds=2026-06-01/hour=13", (("ds", "2026-06-01"), ("hour", "13"))),
        ("ts=2026-06-01T13", (("ts", "2026-06-01T13"),)),
        ("region=eu_west/day=20260601", (("region", "eu_west"), ("day", "20260601"))),
        ("v2=1.5", (("v2", "1.5"),)),
    ],
)
def test_valid_partitions_parse_into_their_segments(rendered, segments):
    assert parse_partition(rendered) == segments
    assert partition_path(rendered) == rendered


@pytest.mark.parametrize(
    "rendered,why",
    [
        ("", "empty"),
        ("2026-06-01", "not key=value"),
        ("ds=2026-06-01/", "not key=value"),
        ("/ds=2026-06-01", "not key=value"),
        ("ds=2026-06-01//hour=1", "not key=value"),
        ("ds=", "empty"),
        ("ds=2026/hour=", "empty"),
        ("_ds=2026-06-01", "identifier"),
        (".ds=x", "identifier"),
        ("1ds=x", "identifier"),
        ("d-s=x", "identifier"),
        ("ds=..", "safe path segment"),
        ("ds=a..b", "safe path segment"),
        ("ds=_hidden", "safe path segment"),
        ("ds=.hidden", "safe path segment"),
        ("ts=2026-06-01T13:00:00+00:00", "safe path segment"),
        ("ds=a b", "safe path segment"),
        ("ds=a=b", "safe path segment"),
        ("ds=x/ds=y", "twice"),
        ("ds=x/source=eu", "level below the partition"),
    ],
)
def test_bad_partitions_fail_naming_the_rendered_value(rendered, why):
    with pytest.raises(ValueError) as raised:
        partition_path(rendered)
    assert isinstance(raised.value, BadPartitionSpec)
    assert repr(rendered) in str(raised.value) and why in str(raised.value)


def test_a_spec_without_template_is_checked_at_parse_time_a_templated_one_once_rendered():
    assert check_partition_spec("ds=2026-06-01/hour=13", "t") == "ds=2026-06-01/hour=13"
    assert check_partition_spec(HOURLY, "t") == HOURLY
    assert check_partition_spec("ds={{ ds }}/../x", "t")  # only the rendered value can be judged
    for bad in ("ds=../x", "", None, 3):
        with pytest.raises(ValueError):
            check_partition_spec(bad, "t")


def test_the_default_spec_renders_the_daily_partition_of_before():
    assert DEFAULT_PARTITION == "ds={{ ds }}"
    assert partition_path("ds=2026-06-01") == partition_dir("2026-06-01")


# -- nesting -------------------------------------------------------------------------------------


def test_enclosing_and_nested_partitions():
    assert enclosing_partitions("ds=x") == ()
    assert enclosing_partitions("ds=x/hour=13") == ("ds=x",)
    assert enclosing_partitions("a=1/b=2/c=3") == ("a=1", "a=1/b=2")
    files = {
        f"hour=13/{COMMIT_MARKER}": 5,
        "hour=13/source=eu/tok-part-0.json": 9,
        f"hour=14/{COMMIT_MARKER}": 5,
        "stray.txt": 1,
        COMMIT_MARKER: 5,  # the partition's own marker is not a nested partition
    }
    assert nested_partitions("ds=x", files) == ("ds=x/hour=13", "ds=x/hour=14")
    assert nested_partitions("ds=x", {"source=eu/p.json": 1}) == ()


def test_a_partition_inside_a_published_partition_is_refused():
    """DAG B (hourly) must not publish ds=X/hour=13 into DAG A's daily ds=X."""
    srcs = sources(eu="a")
    ours = commit_id("2026-07-01", 0, srcs, OWNER, "ds=2026-07-01/hour=13")
    daily = marker_for("c-daily", "2026-07-01", 0, srcs, 1.0, OTHER)
    decision = decide_publish(ours, 0, False, None, OWNER, enclosing={"ds=2026-07-01": daily})
    assert decision.action is PublishAction.FAIL and decision.rule == "partition_inside_another"
    assert "'ds=2026-07-01'" in decision.reason and OTHER.dag_id in decision.reason and "c-daily" in decision.reason
    unreadable = decide_publish(ours, 0, False, None, OWNER, enclosing={"ds=2026-07-01": CorruptState("x")})
    assert unreadable.rule == "partition_inside_another"
    # Even when the partition itself is there already (e.g. our own earlier commit): never nest.
    mine = marker_for(ours, "2026-07-01", 0, srcs, 1.0, OWNER, "ds=2026-07-01/hour=13")
    assert decide_publish(ours, 0, True, mine, OWNER, enclosing={"ds=2026-07-01": daily}).action is PublishAction.FAIL


def test_a_partition_around_published_partitions_is_refused():
    """DAG A (daily) must not publish ds=X where DAG B's hourly partitions ds=X/hour=.. are."""
    srcs = sources(eu="a")
    ours = commit_id("2026-07-01", 0, srcs, OTHER)
    decision = decide_publish(ours, 0, True, None, OTHER, nested=("ds=2026-07-01/hour=13",))
    assert decision.action is PublishAction.FAIL and decision.rule == "partition_holds_others"
    assert "'ds=2026-07-01/hour=13'" in decision.reason
    # Without partitions inside, a marker-less directory is still someone else's data.
    assert decide_publish(ours, 0, True, None, OTHER).rule == "foreign_partition"


def test_two_hourly_partitions_of_one_day_are_distinct_commits_and_owners():
    srcs = sources(eu="a")
    ten, eleven = (Owner("dag_a", "pipe", f"scheduled__2026-07-01T{h}:00:00+00:00") for h in ("10", "11"))
    c10 = commit_id("2026-07-01", 0, srcs, ten, "ds=2026-07-01/hour=10")
    c11 = commit_id("2026-07-01", 0, srcs, eleven, "ds=2026-07-01/hour=11")
    assert c10 != c11
    # Each decides on its own partition: nothing there yet, the shared ds= directory holds no marker.
    assert decide_publish(c11, 0, False, None, eleven, enclosing={}).rule == "first_publish"
    # With the daily spec both runs render ds=2026-07-01: the second one is refused, as before.
    first = marker_for("c", "2026-07-01", 0, srcs, 1.0, ten)
    assert decide_publish(c11, 0, True, first, eleven).rule == "partition_of_another_owner"


def test_commit_ids_of_daily_partitions_are_unchanged_and_the_partition_counts_otherwise():
    srcs = sources(eu="a", us="b")
    daily = commit_id("2026-07-01", 0, srcs, OWNER)
    assert commit_id("2026-07-01", 0, srcs, OWNER, "ds=2026-07-01") == daily
    assert commit_id("2026-07-01", 0, srcs, OWNER, "ds=2026-07-01/hour=10") != daily
    assert commit_id("2026-07-01", 0, srcs, OWNER, "ds=2026-07-01/hour=10") != commit_id(
        "2026-07-01", 0, srcs, OWNER, "ds=2026-07-01/hour=11"
    )


def test_the_marker_and_the_asset_event_carry_the_partition():
    srcs = sources(eu="a")
    marker = marker_for("c", "2026-07-01", 0, srcs, 1.0, OWNER, "ds=2026-07-01/hour=10")
    assert parse_commit_marker(marker.to_json(), "x") == marker
    assert asset_extra(marker)["partition"] == "ds=2026-07-01/hour=10" and asset_extra(marker)["ds"] == "2026-07-01"
    old = json.loads(marker.to_json())
    del old["partition"]  # a marker written before partition specs
    legacy = parse_commit_marker(json.dumps(old).encode(), "x")
    assert legacy is not None and legacy.partition_path == "ds=2026-07-01"
    assert marker_for("c", "2026-07-01", 0, srcs, 1.0, OWNER).partition == "ds=2026-07-01"


# -- on storage: two hourly partitions of a day, a replacement, the nesting checks -------------------


def _stage(state: StateStorage, token: str, name: str) -> dict:
    relative = f"attempts/{token}/{name}/output"
    state.write_atomic(f"{relative}/part-0.json", json.dumps([{"token": token}]).encode())
    return {name: (relative, state.file_sizes(relative))}


def test_hourly_partitions_publish_side_by_side_and_replace_into_flat_tombstones(tmp_path):
    from airflow_provider_zeta.operators.completed_point import enclosing_markers, publish_partition

    state, out = StateStorage.from_url(str(tmp_path / "state")), StateStorage.from_url(str(tmp_path / "table"))
    run_key = (OWNER.dag_id, OWNER.run_id)
    for hour in ("10", "11"):
        part = f"ds=2026-07-01/hour={hour}"
        marker = marker_for(f"c{hour}", "2026-07-01", 0, sources(eu=f"t{hour}"), 1.0, OWNER, part)
        assert publish_partition(state, _stage(state, f"t{hour}", "eu"), out, part, marker, None, run_key) is None
        assert enclosing_markers(out, part) == {}
    assert out.list_dir("ds=2026-07-01") == ["hour=10", "hour=11"]
    assert out.exists("ds=2026-07-01/hour=10/source=eu/t10-part-0.json")
    # The daily directory holds two partitions: a daily publish into it is refused.
    assert nested_partitions("ds=2026-07-01", out.file_sizes("ds=2026-07-01")) == (
        "ds=2026-07-01/hour=10",
        "ds=2026-07-01/hour=11",
    )
    # A replacement of a multi-segment partition tombstones it in one entry of the run's own
    # directory: each tombstone is recorded, listed and deleted on its own.
    part = "ds=2026-07-01/hour=10"
    newer = marker_for("c10b", "2026-07-01", 1, sources(eu="u10"), 2.0, OWNER, part)
    tombstone = publish_partition(state, _stage(state, "u10", "eu"), out, part, newer, "c10", run_key)
    assert tombstone == f"{run_tombstones_dir(*run_key)}/ds=2026-07-01__hour=10-c10"
    assert out.exists(f"{tombstone}/source=eu/t10-part-0.json") and out.exists(f"{part}/source=eu/u10-part-0.json")
    third = marker_for("c10c", "2026-07-01", 2, sources(eu="v10"), 3.0, OWNER, part)
    second_tombstone = publish_partition(state, _stage(state, "v10", "eu"), out, part, third, "c10b", run_key)
    assert out.list_dir(run_tombstones_dir(*run_key)) == ["ds=2026-07-01__hour=10-c10", "ds=2026-07-01__hour=10-c10b"]
    assert second_tombstone.endswith("/ds=2026-07-01__hour=10-c10b")
    # The janitor's listing (what the cleanup records) names each tombstone apart.
    from airflow_provider_zeta.janitor import find_leftovers

    leftovers, _ = find_leftovers(state, *run_key, lambda root: out, roots=[str(tmp_path / "table")])
    assert leftovers.outputs[str(tmp_path / "table")] == (tombstone, second_tombstone)


def test_enclosing_markers_find_a_published_daily_partition(tmp_path):
    from airflow_provider_zeta.operators.completed_point import enclosing_markers

    out = StateStorage.from_url(str(tmp_path / "table"))
    daily = marker_for("c-daily", "2026-07-01", 0, sources(eu="a"), 1.0, OTHER)
    out.write_atomic(f"ds=2026-07-01/{COMMIT_MARKER}", daily.to_json())
    assert enclosing_markers(out, "ds=2026-07-01/hour=13") == {"ds=2026-07-01": daily}
    out.write_atomic(f"ds=2026-07-02/{COMMIT_MARKER}", b"{not json")
    assert isinstance(enclosing_markers(out, "ds=2026-07-02/hour=1")["ds=2026-07-02"], CorruptState)


# -- the operators' templating --------------------------------------------------------------------


def _hourly_pipeline(partition=HOURLY):
    from airflow.sdk import DAG

    from airflow_provider_zeta import zeta_pipeline

    with DAG("hourly", schedule="@hourly", start_date=datetime(2026, 1, 1, tzinfo=UTC)) as dag:
        zeta_pipeline("orders", sources={"web": "/jobs/web.py"}, output="/tmp/out", partition=partition)
    return dag


def _context(hour: int) -> dict:
    logical_date = datetime(2026, 7, 1, hour, tzinfo=UTC)
    return {
        "ds": "2026-07-01",
        "logical_date": logical_date,
        "ts_nodash": logical_date.strftime("%Y%m%dT%H%M%S"),
        "ti": SimpleNamespace(run_id=f"scheduled__{logical_date.isoformat()}"),
    }


def test_the_pipeline_renders_the_hourly_spec_in_the_completed_point_and_the_deploys():
    dag = _hourly_pipeline()
    publish = dag.get_task("orders.completed_point")
    deploy = dag.get_task("orders.deploy_web")
    assert "partition" in publish.template_fields and "partition" in deploy.template_fields
    assert publish.partition == HOURLY and deploy.partition == HOURLY
    assert publish.render_template(publish.partition, _context(13)) == "ds=2026-07-01/hour=13"
    publish.render_template_fields(_context(9))
    deploy.render_template_fields(_context(9))
    assert publish.partition == "ds=2026-07-01/hour=09" and deploy._rendered_partition() == "ds=2026-07-01/hour=09"


def test_the_default_spec_renders_ds():
    from airflow.sdk import DAG

    from airflow_provider_zeta.operators.completed_point import CompletedPointOperator

    with DAG("daily", schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC)):
        publish = CompletedPointOperator(task_id="cp", output_root="/tmp/out", ready_task_id="r")
    assert publish.partition == DEFAULT_PARTITION
    publish.render_template_fields(_context(0))
    assert partition_path(publish.partition) == "ds=2026-07-01"


def test_a_bad_spec_fails_at_parse_time_or_once_rendered():
    from airflow.sdk.exceptions import AirflowFailException

    with pytest.raises(ValueError, match="'ds=_x'"):
        _hourly_pipeline("ds=_x")
    dag = _hourly_pipeline("ts={{ ts }}")  # 2026-07-01T13:00:00+00:00: ':' and '+' are not path-safe
    deploy = dag.get_task("orders.deploy_web")
    deploy.render_template_fields({**_context(13), "ts": "2026-07-01T13:00:00+00:00"})
    with pytest.raises(AirflowFailException, match=r"bad_partition.*'ts=2026-07-01T13:00:00\+00:00'"):
        deploy._rendered_partition()


def test_a_run_without_logical_date_is_refused_before_the_spec_is_rendered():
    from airflow.sdk.exceptions import AirflowFailException

    dag = _hourly_pipeline()
    for task_id in ("orders.completed_point", "orders.deploy_web"):
        with pytest.raises(AirflowFailException, match="has no logical date"):
            dag.get_task(task_id).render_template_fields({"ti": SimpleNamespace(run_id="manual__x"), "logical_date": None})


def test_the_job_spec_and_context_carry_the_rendered_partition(tmp_path, monkeypatch):
    """The driver receives ``partition`` beside ``ds``; the job reads it as zeta_context().partition."""
    from airflow_provider_zeta.operators import spark_job
    from airflow_provider_zeta.runtime.driver import SPEC_FLAG, DriverBootstrap

    monkeypatch.setenv("AIRFLOW__ZETA__STATE_ROOT", str(tmp_path / "state"))
    captured = {}

    class Stop(Exception):
        pass

    def fake_command(**kwargs):
        captured["spec"] = json.loads(kwargs["bootstrap_args"][kwargs["bootstrap_args"].index(SPEC_FLAG) + 1])
        raise Stop

    monkeypatch.setattr(spark_job, "spark_submit_command", fake_command)
    deploy = _hourly_pipeline().get_task("orders.deploy_web")
    context = {
        **_context(13),
        "ti": SimpleNamespace(dag_id="hourly", run_id="r", task_id=deploy.task_id, map_index=-1, try_number=1, max_tries=0, executor=None),
        "dag_run": SimpleNamespace(clear_number=0, conf={}),
        "task_state_store": _Store(),
    }
    deploy.render_template_fields(context)
    with pytest.raises(Stop):
        deploy.execute(context)
    spec = captured["spec"]
    assert spec["ds"] == "2026-07-01" and spec["partition"] == "ds=2026-07-01/hour=13"
    bootstrap = DriverBootstrap({**spec, "attempt_url": str(tmp_path / "attempt")}, [])
    assert bootstrap.context.partition == "ds=2026-07-01/hour=13" and bootstrap.context.ds == "2026-07-01"


class _Store(dict):
    def set(self, key, value):
        self[key] = json.loads(json.dumps(value))

    def delete(self, key):
        self.pop(key, None)


# -- the completed point's execute, with a fake task context --------------------------------------


def _publish(tmp_path, monkeypatch, dag_id, run_id, hour, partition, token, table="table", deleted_runs=()):
    """Run ``CompletedPointOperator.execute`` for one source whose staging holds one file; the
    ledger check is stubbed (tested elsewhere), the rest is the operator's own code. Every run
    exists in Airflow except ``deleted_runs`` (what the task's ``get_dr_count`` answers)."""
    from airflow.sdk import DAG

    from airflow_provider_zeta.operators.completed_point import CompletedPointOperator

    monkeypatch.setenv("AIRFLOW__ZETA__STATE_ROOT", str(tmp_path / "state"))
    # The deployment id a task keeps in the metadata database (an Airflow Variable; environment first).
    monkeypatch.setenv("AIRFLOW_VAR_ZETA_DEPLOYMENT_ID", os.environ.get("AIRFLOW_VAR_ZETA_DEPLOYMENT_ID", "deployment-1"))
    state = StateStorage.from_url(str(tmp_path / "state"))
    staged = _stage(state, token, "eu")["eu"]
    monkeypatch.setattr(CompletedPointOperator, "_verified_staging", lambda self, state, ti, report: staged)
    with DAG(dag_id, schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC)):
        publish = CompletedPointOperator(
            task_id="completed_point", output_root=str(tmp_path / table), ready_task_id="ready", partition=partition
        )
    ready_set = {"incarnation": 0, "sources": {"eu": {"source": "eu", "incarnation": 0, "token": token, "output_path": "x", "rows": 1}}}
    context = {
        **_context(hour),
        "ti": SimpleNamespace(
            dag_id=dag_id,
            run_id=run_id,
            xcom_pull=lambda task_ids: ready_set,
            get_dr_count=lambda dag_id, run_ids: sum(1 for r in run_ids if r not in deleted_runs),
        ),
        "task_state_store": _Store(),
    }
    publish.render_template_fields(context)
    return publish.execute(context)


def test_the_completed_point_publishes_hourly_partitions_and_refuses_nesting(tmp_path, monkeypatch):
    from airflow.sdk.exceptions import AirflowFailException

    first = _publish(tmp_path, monkeypatch, "hourly", "scheduled__10", 10, HOURLY, "t10")
    second = _publish(tmp_path, monkeypatch, "hourly", "scheduled__11", 11, HOURLY, "t11")
    assert first["rule"] == second["rule"] == "first_publish"
    assert first["partition"].endswith("/ds=2026-07-01/hour=10") and second["partition"].endswith("/ds=2026-07-01/hour=11")
    table = tmp_path / "table"
    assert (table / "ds=2026-07-01/hour=11/source=eu/t11-part-0.json").exists()
    # With the daily default the second run of the day is refused, as before.
    _publish(tmp_path, monkeypatch, "daily", "scheduled__a", 10, DEFAULT_PARTITION, "d1", table="daily")
    with pytest.raises(AirflowFailException, match="partition_of_another_owner"):
        _publish(tmp_path, monkeypatch, "daily", "scheduled__b", 11, DEFAULT_PARTITION, "d2", table="daily")
    assert (tmp_path / "daily/ds=2026-07-01/source=eu/d1-part-0.json").exists()
    # A daily DAG over the hourly partitions, an hourly DAG inside a daily partition: refused,
    # and neither table changes.
    def files(folder):
        return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if "_zeta" not in p.as_posix())

    before = files(table), files(tmp_path / "daily")
    with pytest.raises(AirflowFailException, match=r"partition_holds_others.*'ds=2026-07-01/hour=10'"):
        _publish(tmp_path, monkeypatch, "other_daily", "scheduled__c", 10, "ds=2026-07-01", "x1")
    with pytest.raises(AirflowFailException, match=r"partition_inside_another.*'ds=2026-07-01'.*'daily'"):
        _publish(tmp_path, monkeypatch, "other_hourly", "scheduled__d", 12, HOURLY, "x2", table="daily")
    assert before == (files(table), files(tmp_path / "daily"))
    with pytest.raises(AirflowFailException, match=r"bad_partition.*'ds=2026-07-01/hour=_12'"):
        _publish(tmp_path, monkeypatch, "bad", "scheduled__e", 12, "ds={{ ds }}/hour=_{{ logical_date.strftime('%H') }}", "x3")


def test_a_partition_of_a_deleted_run_is_replaced_by_the_next_run_of_the_date(tmp_path, monkeypatch):
    """A user deleted the run that published a date (or Airflow did: on SQLite its clean-up of a
    backfill refused for a locked database deletes the runs the backfill was reprocessing) and
    triggers the date again: the new run publishes, the deleted run's partition becomes the new
    run's tombstone. While the run exists the same publish is refused; once it is deleted, a run of
    another DAG writing the table, or of another logical date rendering the same partition (an
    hourly run with the daily spec), still is: configuration errors, not a reprocessing."""
    from airflow.sdk.exceptions import AirflowFailException

    _publish(tmp_path, monkeypatch, "daily", "manual__a", 10, DEFAULT_PARTITION, "d1")
    marker = json.loads((tmp_path / "table/ds=2026-07-01" / COMMIT_MARKER).read_text())
    assert marker["logical_date"] == "2026-07-01T10:00:00+00:00" and marker["state_root_id"]
    with pytest.raises(AirflowFailException, match="partition_of_another_owner"):
        _publish(tmp_path, monkeypatch, "daily", "backfill__b", 10, DEFAULT_PARTITION, "d2")
    with pytest.raises(AirflowFailException, match="partition_of_another_owner"):
        _publish(tmp_path, monkeypatch, "other_dag", "manual__x", 10, DEFAULT_PARTITION, "x1", deleted_runs={"manual__a"})
    with pytest.raises(AirflowFailException, match="partition_of_another_owner"):
        _publish(tmp_path, monkeypatch, "daily", "scheduled__11", 11, DEFAULT_PARTITION, "x2", deleted_runs={"manual__a"})
    assert sorted(p.name for p in (tmp_path / "table/ds=2026-07-01/source=eu").iterdir()) == ["d1-part-0.json"]
    replaced = _publish(tmp_path, monkeypatch, "daily", "backfill__b", 10, DEFAULT_PARTITION, "d2", deleted_runs={"manual__a"})
    assert replaced["rule"] == "owner_run_deleted" and replaced["new_commit"]
    table = tmp_path / "table"
    assert sorted(p.name for p in (table / "ds=2026-07-01/source=eu").iterdir()) == ["d2-part-0.json"]
    marker = json.loads((table / "ds=2026-07-01" / COMMIT_MARKER).read_text())
    assert marker["run_id"] == "backfill__b"
    tombstone = Path(replaced["tombstone"].removeprefix("file://"))
    assert tombstone.is_relative_to(table / "_zeta_tombstones/daily/backfill__b")
    assert (tombstone / "source=eu/d1-part-0.json").exists(), "the deleted run's partition waits for the delayed cleanup"
