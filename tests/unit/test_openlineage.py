"""OpenLineage: the deploy's Spark conf and the completed point's output, no Airflow components.

* The deploy injects the parent job (and, when asked, the transport) into the spark-submit command
  the real ``SparkSubmitHook`` builds, with the values the OpenLineage provider's own functions give
  ``SparkSubmitOperator``; once per launch, without changing the operator's ``conf`` or the
  attempt's record; nothing without the provider (its import made to fail).
* The completed point's ``get_openlineage_facets_on_complete`` after a real ``execute``: the table
  as the dataset, named by the OpenLineage conventions, the partition as its subset, the commit;
  and the event the provider's file transport writes from it.

The listener-driven event of a real run is ``tests/test_openlineage.py``.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from airflow_provider_zeta import lineage
from airflow_provider_zeta.core.ledger import Ledger, LedgerStatus
from airflow_provider_zeta.core.lineage import dataset_name
from airflow_provider_zeta.core.paths import LEDGER_FILE, OUTPUT_DIR, attempt_dir
from airflow_provider_zeta.operators import spark_job
from airflow_provider_zeta.operators.completed_point import CompletedPointOperator
from airflow_provider_zeta.operators.spark_job import ZetaSparkJobOperator
from airflow_provider_zeta.pipeline import zeta_pipeline

try:
    import airflow.providers.openlineage.utils.spark as openlineage_spark
except ImportError:
    # `make test` installs the openlineage extra: CI must run these tests, never skip them.
    if os.environ.get("CI", "").lower() == "true":
        raise
    pytest.skip("apache-airflow-providers-openlineage is not installed (pip install -e '.[openlineage]')", allow_module_level=True)
LOGICAL_DATE = datetime(2026, 5, 6, tzinfo=UTC)
RENDERED_PARTITION = "ds=2026-05-06"  # the default spec as the task runner renders it for LOGICAL_DATE
PARENT_KEYS = (
    "spark.openlineage.parentJobNamespace",
    "spark.openlineage.parentJobName",
    "spark.openlineage.parentRunId",
    "spark.openlineage.rootParentRunId",
    "spark.openlineage.rootParentJobName",
    "spark.openlineage.rootParentJobNamespace",
)


class Store(dict):
    def set(self, key, value):
        self[key] = json.loads(json.dumps(value))

    def delete(self, key):
        self.pop(key, None)


def _context(dag_id="lineage_dag", run_id="scheduled__2026-05-06T00:00:00+00:00", task_id="etl.deploy_eu", try_number=1):
    dag_run = SimpleNamespace(
        dag_id=dag_id, run_id=run_id, logical_date=LOGICAL_DATE, run_after=LOGICAL_DATE, clear_number=0, conf={}
    )
    context: dict = {"dag_run": dag_run, "task_state_store": Store(), "logical_date": LOGICAL_DATE, "ds": "2026-05-06"}
    context["ti"] = SimpleNamespace(
        dag_id=dag_id, run_id=run_id, task_id=task_id, map_index=-1, try_number=try_number, max_tries=3,
        executor=None, dag_run=dag_run, get_template_context=lambda: context, xcom_push=lambda key, value: None,
    )
    return context


def _conf_of(command: list[str]) -> dict[str, str]:
    pairs = [command[i + 1] for i, arg in enumerate(command) if arg == "--conf"]
    return dict(pair.split("=", 1) for pair in pairs)


@pytest.fixture
def launch(tmp_path, monkeypatch):
    """Run the operator's real launch path (real SparkSubmitHook command) up to the driver start,
    which is captured instead of run; returns (command, operator context) per call."""
    monkeypatch.setenv("AIRFLOW__ZETA__STATE_ROOT", str(tmp_path / "state"))
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", '{"conn_type": "spark", "host": "local[1]"}')
    launched: list[list[str]] = []

    def fake_launch(command, env, log_path):
        launched.append(command)
        return spark_job.ProcessHandle(host="h", pid=2**22 + 7, start_time=1.0, host_id="hid")

    monkeypatch.setattr(spark_job, "launch_driver", fake_launch)

    def run(operator: ZetaSparkJobOperator, context: dict) -> list[str]:
        monkeypatch.setattr(operator, "defer", lambda **kw: None)
        operator.execute(context)
        return launched[-1]

    return run


@pytest.fixture
def openlineage_config(monkeypatch):
    """Fresh OpenLineage config reads: its conf functions are cached, and so is the listener (with
    its client and transport) that ``get_openlineage_listener()`` returns."""
    from airflow.providers.openlineage import conf as ol_conf
    from airflow.providers.openlineage.plugins import listener

    def clear():
        for value in vars(ol_conf).values():
            if hasattr(value, "cache_clear"):
                value.cache_clear()
        listener.get_openlineage_listener.cache_clear()

    clear()
    yield clear
    clear()


def test_parent_job_info_reaches_the_spark_submit_command_as_spark_submit_operator_injects_it(launch, openlineage_config):
    operator = ZetaSparkJobOperator(
        task_id="etl.deploy_eu", application="/x.py", conf={"spark.executor.cores": "1"},
        openlineage_inject_parent_job_info=True,
    )
    context = _context()
    conf = _conf_of(launch(operator, context))
    expected = openlineage_spark.inject_parent_job_information_into_spark_properties({}, context)
    assert set(PARENT_KEYS) <= set(expected)
    assert {key: conf.get(key) for key in expected} == expected
    assert conf["spark.openlineage.parentJobName"] == "lineage_dag.etl.deploy_eu"
    assert conf["spark.openlineage.rootParentJobName"] == "lineage_dag"
    assert conf["spark.executor.cores"] == "1" and conf["spark.zeta.attemptToken"]
    # Computed for the launch only: the operator's conf and the attempt record do not hold it.
    assert operator.conf == {"spark.executor.cores": "1"}
    assert "openlineage" not in json.dumps(context["task_state_store"])


def test_the_parent_run_is_the_launching_try_and_the_same_for_the_same_try(launch, openlineage_config):
    first = ZetaSparkJobOperator(task_id="etl.deploy_eu", application="/x.py", openlineage_inject_parent_job_info=True)
    again = ZetaSparkJobOperator(task_id="etl.deploy_eu", application="/x.py", openlineage_inject_parent_job_info=True)
    retried = ZetaSparkJobOperator(task_id="etl.deploy_eu", application="/x.py", openlineage_inject_parent_job_info=True)
    one, two = launch(first, _context()), launch(again, _context())
    three = launch(retried, _context(try_number=2))
    run_id = "spark.openlineage.parentRunId"
    assert _conf_of(one)[run_id] == _conf_of(two)[run_id] != _conf_of(three)[run_id]
    # The attempt identity is the token, never the lineage properties: each launch has its own.
    assert _conf_of(one)["spark.zeta.attemptToken"] != _conf_of(two)["spark.zeta.attemptToken"]


def test_keys_the_user_set_are_kept(launch, openlineage_config):
    operator = ZetaSparkJobOperator(
        task_id="etl.deploy_eu", application="/x.py", conf={"spark.openlineage.parentJobName": "mine"},
        openlineage_inject_parent_job_info=True,
    )
    conf = _conf_of(launch(operator, _context()))
    assert conf["spark.openlineage.parentJobName"] == "mine" and "spark.openlineage.parentRunId" not in conf


def test_transport_info_is_injected_when_asked(launch, openlineage_config, monkeypatch):
    monkeypatch.setenv(
        "AIRFLOW__OPENLINEAGE__TRANSPORT",
        '{"type": "http", "url": "http://lineage.example:5000", "endpoint": "api/v1/lineage"}',
    )
    openlineage_config()
    operator = ZetaSparkJobOperator(task_id="etl.deploy_eu", application="/x.py", openlineage_inject_transport_info=True)
    conf = _conf_of(launch(operator, _context()))
    assert conf["spark.openlineage.transport.type"] == "http"
    assert conf["spark.openlineage.transport.url"] == "http://lineage.example:5000"
    assert conf["spark.openlineage.transport.endpoint"] == "api/v1/lineage"
    assert not any(key.startswith("spark.openlineage.parent") for key in conf)


def test_defaults_follow_the_openlineage_config_as_spark_submit_operator_reads_it(launch, openlineage_config, monkeypatch):
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    operator = ZetaSparkJobOperator(task_id="etl.deploy_eu", application="/x.py")
    assert (operator.openlineage_inject_parent_job_info, operator.openlineage_inject_transport_info) == (False, False)
    assert not any(key.startswith("spark.openlineage") for key in _conf_of(launch(operator, _context())))
    monkeypatch.setenv("AIRFLOW__OPENLINEAGE__SPARK_INJECT_PARENT_JOB_INFO", "true")
    monkeypatch.setenv("AIRFLOW__OPENLINEAGE__SPARK_INJECT_TRANSPORT_INFO", "true")
    operator = ZetaSparkJobOperator(task_id="etl.deploy_eu", application="/x.py")
    assert (operator.openlineage_inject_parent_job_info, operator.openlineage_inject_transport_info) == (True, True)
    assert "spark.openlineage.parentRunId" in _conf_of(launch(operator, _context()))
    # The same parameter names as SparkSubmitOperator's.
    import inspect

    ours = inspect.signature(ZetaSparkJobOperator.__init__).parameters
    theirs = inspect.signature(SparkSubmitOperator.__init__).parameters
    for name in ("openlineage_inject_parent_job_info", "openlineage_inject_transport_info"):
        assert name in ours and name in theirs


def test_without_the_provider_the_launch_is_unchanged(launch, monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "airflow.providers.openlineage.utils.spark", None)
    plain = ZetaSparkJobOperator(task_id="etl.deploy_eu", application="/x.py", conf={"spark.a": "1"})
    asked = ZetaSparkJobOperator(
        task_id="etl.deploy_eu", application="/x.py", conf={"spark.a": "1"},
        openlineage_inject_parent_job_info=True, openlineage_inject_transport_info=True,
    )
    without, with_flags = _conf_of(launch(plain, _context())), _conf_of(launch(asked, _context()))
    for conf in (without, with_flags):
        assert not any(key.startswith("spark.openlineage") for key in conf)
        assert conf["spark.a"] == "1"
    assert set(without) == set(with_flags)
    assert "apache-airflow-providers-openlineage is not installed" in caplog.text


def test_a_lineage_failure_does_not_stop_the_launch(launch, openlineage_config, monkeypatch):
    def broken(properties, context):
        raise RuntimeError("lineage backend down")

    monkeypatch.setattr(openlineage_spark, "inject_parent_job_information_into_spark_properties", broken)
    operator = ZetaSparkJobOperator(task_id="etl.deploy_eu", application="/x.py", openlineage_inject_parent_job_info=True)
    conf = _conf_of(launch(operator, _context()))
    assert conf["spark.zeta.attemptToken"] and not any(key.startswith("spark.openlineage") for key in conf)


def test_the_pipeline_passes_the_switches_to_every_deploy():
    from airflow.sdk import DAG

    with DAG("lineage_pipeline", schedule=None, start_date=LOGICAL_DATE) as dag:
        zeta_pipeline("p", {"eu": "/eu.py", "us": "/us.py"}, output="/tmp/t", openlineage_inject_parent_job_info=True)
        zeta_pipeline("q", {"eu": "/eu.py"}, output="/tmp/u", openlineage_inject_transport_info=False)
    switches = {
        task_id: (dag.get_task(task_id).openlineage_inject_parent_job_info, dag.get_task(task_id).openlineage_inject_transport_info)
        for task_id in ("p.deploy_eu", "p.deploy_us", "q.deploy_eu")
    }
    assert switches == {"p.deploy_eu": (True, False), "p.deploy_us": (True, False), "q.deploy_eu": (False, False)}


# ------------------------------------------------------------------ naming


@pytest.mark.parametrize(
    "root, expected",
    [
        ("/data/warehouse/orders", ("file", "/data/warehouse/orders")),
        ("/data/warehouse/orders/", ("file", "/data/warehouse/orders")),
        ("file:///data/warehouse/orders", ("file", "/data/warehouse/orders")),
        ("s3://lake/warehouse/orders", ("s3://lake", "warehouse/orders")),
        ("s3a://lake/warehouse/orders", ("s3://lake", "warehouse/orders")),
        ("s3://aws_default@lake/warehouse/orders", ("s3://lake", "warehouse/orders")),
        ("gs://lake/orders", ("gs://lake", "orders")),
        ("gcs://lake/orders", ("gs://lake", "orders")),
        ("hdfs://namenode:8020/warehouse/orders", ("hdfs://namenode:8020", "/warehouse/orders")),
        (
            "abfss://data@account.dfs.core.windows.net/orders",
            ("abfss://data@account.dfs.core.windows.net", "orders"),
        ),
        ("s3://lake", ("s3://lake", "/")),
    ],
)
def test_dataset_names_follow_the_openlineage_conventions(root, expected):
    assert dataset_name(root) == expected


def test_a_relative_local_root_is_named_by_its_absolute_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert lineage.output_dataset_name("table") == ("file", str(tmp_path / "table"))
    with pytest.raises(ValueError, match="relative"):
        dataset_name("table")


# ------------------------------------------------------------------ the completed point


def _published_run(tmp_path, monkeypatch, *, output_root: str, sources=("eu", "us")):
    """A real CompletedPointOperator.execute over succeeded attempts written as drivers write them."""
    state = tmp_path / "state"
    monkeypatch.setenv("AIRFLOW__ZETA__STATE_ROOT", str(state))
    context = _context(task_id="etl.completed_point")
    ti = context["ti"]
    reports = {}
    for n, name in enumerate(sources):
        token = f"tok{name}"
        attempt = state / attempt_dir(ti.dag_id, ti.run_id, f"etl.deploy_{name}", -1, token)
        (attempt / OUTPUT_DIR).mkdir(parents=True)
        (attempt / OUTPUT_DIR / "part-0.json").write_text('{"n": 1}\n' * (n + 2))
        output_path = f"file://{attempt / OUTPUT_DIR}"
        ledger = Ledger(
            token=token, status=LedgerStatus.SUCCEEDED, started_at=1.0, heartbeat_at=2.0, ended_at=3.0,
            output_path=output_path, rows=n + 2, files={"part-0.json": (attempt / OUTPUT_DIR / "part-0.json").stat().st_size},
        )
        (attempt / LEDGER_FILE).write_bytes(ledger.to_json())
        reports[name] = {"source": name, "task_id": f"etl.deploy_{name}", "incarnation": 0, "token": token,
                         "output_path": output_path, "rows": n + 2}
    ti.xcom_pull = lambda task_ids: {"incarnation": 0, "sources": reports}
    operator = CompletedPointOperator(
        task_id="etl.completed_point", output_root=output_root, ready_task_id="etl.ready_to_close", partition=RENDERED_PARTITION
    )
    returned = operator.execute(context)
    return operator, returned, context


def test_the_completed_point_reports_its_table_and_the_partition_it_published(tmp_path, monkeypatch):
    table = tmp_path / "warehouse" / "orders"
    operator, returned, _ = _published_run(tmp_path, monkeypatch, output_root=str(table))
    assert (table / "ds=2026-05-06" / "_zeta_commit.json").exists()  # the publish really happened
    facets = operator.get_openlineage_facets_on_complete(None)
    assert facets.inputs == []
    [output] = facets.outputs
    assert (output.namespace, output.name) == ("file", str(table))
    [partition] = output.outputFacets["subset"].outputCondition.partitions
    assert partition.dimensions == {"ds": "2026-05-06"}
    assert partition.identifier == returned["partition"] and returned["partition"].endswith("/ds=2026-05-06")
    assert output.facets["version"].datasetVersion == returned["commit_id"]
    assert output.outputFacets["outputStatistics"].rowCount == 2 + 3
    commit = facets.run_facets["zeta_commit"]
    assert commit.commitId == returned["commit_id"] and commit.ds == "2026-05-06"
    assert (commit.dagId, commit.pipelineId, commit.runId) == ("lineage_dag", "etl.completed_point", "scheduled__2026-05-06T00:00:00+00:00")
    assert commit.sources == {"eu": {"attempt": "tokeu", "rows": 2}, "us": {"attempt": "tokus", "rows": 3}}
    assert (commit.rule, commit.newCommit) == ("first_publish", True)


def test_a_no_op_re_execution_reports_the_same_commit_without_rows_written(tmp_path, monkeypatch):
    table = tmp_path / "orders"
    first, returned, context = _published_run(tmp_path, monkeypatch, output_root=str(table))
    again = CompletedPointOperator(
        task_id="etl.completed_point", output_root=str(table), ready_task_id="etl.ready_to_close", partition=RENDERED_PARTITION
    )
    assert again.execute(context)["rule"] == "already_published"
    [output] = again.get_openlineage_facets_on_complete(None).outputs
    assert output.facets["version"].datasetVersion == returned["commit_id"]
    assert "outputStatistics" not in output.outputFacets
    assert again.get_openlineage_facets_on_complete(None).run_facets["zeta_commit"].newCommit is False


def test_a_failed_or_unexecuted_completed_point_reports_no_output(tmp_path):
    operator = CompletedPointOperator(task_id="cp", output_root=str(tmp_path), ready_task_id="r")
    assert operator.get_openlineage_facets_on_complete(None).outputs == []
    assert operator.get_openlineage_facets_on_failure(None).outputs == []


def test_object_storage_roots_are_named_by_scheme_and_bucket():
    published = {"commit_id": "c1", "ds": "2026-05-06", "incarnation": 0, "rows": {"eu": 1}, "tokens": {"eu": "t"},
                 "run_id": "r", "dag_id": "d", "pipeline_id": "p", "partition": "s3://lake/orders/ds=2026-05-06",
                 "rule": "first_publish", "new_commit": True}
    [output] = lineage.completed_point_lineage("s3://aws_default@lake/orders", published).outputs
    assert (output.namespace, output.name) == ("s3://lake", "orders")


def test_the_file_transport_writes_the_output_dataset_and_facets(tmp_path, monkeypatch):
    """The provider's file transport serializes what the completed point returns (the event a
    listener would send; the listener itself runs in tests/test_openlineage.py)."""
    from openlineage.client import OpenLineageClient
    from openlineage.client.event_v2 import Job, Run, RunEvent, RunState
    from openlineage.client.transport.file import FileConfig, FileTransport
    from openlineage.client.uuid import generate_new_uuid

    operator, returned, _ = _published_run(tmp_path, monkeypatch, output_root=str(tmp_path / "orders"))
    facets = operator.get_openlineage_facets_on_complete(None)
    events = tmp_path / "events.jsonl"
    client = OpenLineageClient(transport=FileTransport(FileConfig(log_file_path=str(events), append=True)))
    client.emit(
        RunEvent(
            eventType=RunState.COMPLETE, eventTime=datetime.now(UTC).isoformat(),
            run=Run(runId=str(generate_new_uuid()), facets=facets.run_facets),
            job=Job(namespace="default", name="lineage_dag.etl.completed_point"),
            outputs=facets.outputs, inputs=facets.inputs,
        )
    )
    [event] = [json.loads(line) for line in events.read_text().splitlines()]
    [output] = event["outputs"]
    assert (output["namespace"], output["name"]) == ("file", str(tmp_path / "orders"))
    assert output["outputFacets"]["subset"]["outputCondition"] == {
        "type": "partition", "partitions": [{"dimensions": {"ds": "2026-05-06"}, "identifier": returned["partition"]}]
    }
    assert output["facets"]["version"]["datasetVersion"] == returned["commit_id"]
    assert event["run"]["facets"]["zeta_commit"]["commitId"] == returned["commit_id"]
    assert event["run"]["facets"]["zeta_commit"]["sources"]["us"] == {"attempt": "tokus", "rows": 3}


def test_the_listener_emits_the_completed_points_output_through_the_file_transport(tmp_path, monkeypatch, openlineage_config):
    """The OpenLineage provider's own listener, told that the task succeeded, writes the COMPLETE
    event with the output through its file transport (in a thread, not a fork, inside pytest).
    Under real components: tests/test_openlineage.py."""
    from airflow.providers.openlineage.plugins.listener import get_openlineage_listener
    from airflow.sdk import DAG
    from airflow.utils.state import TaskInstanceState

    events = tmp_path / "events.jsonl"
    monkeypatch.setenv("AIRFLOW__OPENLINEAGE__TRANSPORT", json.dumps({"type": "file", "log_file_path": str(events), "append": True}))
    monkeypatch.setenv("AIRFLOW__OPENLINEAGE__EXECUTE_IN_THREAD", "true")
    openlineage_config()
    executed, returned, context = _published_run(tmp_path, monkeypatch, output_root=str(tmp_path / "orders"))
    with DAG("lineage_dag", schedule=None, start_date=LOGICAL_DATE) as dag:
        operator = CompletedPointOperator(
        task_id="etl.completed_point", output_root=str(tmp_path / "orders"), ready_task_id="r", partition=RENDERED_PARTITION
    )
    operator._published = executed._published  # what execute left on the task the listener is handed
    dag_run = context["dag_run"]
    for name, value in dict(data_interval_start=LOGICAL_DATE, data_interval_end=LOGICAL_DATE, run_type="scheduled",
                            start_date=LOGICAL_DATE, end_date=None, state="running", dag=None).items():
        setattr(dag_run, name, value)
    ti = context["ti"]
    for name, value in dict(task=operator, state="success", start_date=LOGICAL_DATE, end_date=None, duration=None,
                            pool="default_pool", queue="default", priority_weight=1, log_url="", hostname="h").items():
        setattr(ti, name, value)
    context.update(dag=dag, task=operator)

    get_openlineage_listener().on_task_instance_success(previous_state=TaskInstanceState.RUNNING, task_instance=ti)

    [event] = [json.loads(line) for line in events.read_text().splitlines()] if events.exists() else [None]
    assert event is not None, "no event written"
    assert event["eventType"] == "COMPLETE" and event["job"]["name"] == "lineage_dag.etl.completed_point"
    [output] = event["outputs"]
    assert (output["namespace"], output["name"]) == ("file", str(tmp_path / "orders"))
    assert output["outputFacets"]["subset"]["outputCondition"]["partitions"][0]["dimensions"] == {"ds": "2026-05-06"}
    assert output["facets"]["version"]["datasetVersion"] == returned["commit_id"]
    # Through the provider's redaction too: the attempt ids are not masked.
    assert event["run"]["facets"]["zeta_commit"]["sources"] == {"eu": {"attempt": "tokeu", "rows": 2}, "us": {"attempt": "tokus", "rows": 3}}


def test_an_hourly_partition_has_one_dimension_per_segment():
    from airflow_provider_zeta.core.lineage import partition_dimensions

    assert partition_dimensions("ds=2026-07-01/hour=13") == {"ds": "2026-07-01", "hour": "13"}
    assert partition_dimensions("ds=2026-07-01") == {"ds": "2026-07-01"}
