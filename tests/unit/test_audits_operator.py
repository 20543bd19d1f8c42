"""CompletedPointOperator(audits=...): the audits run on the reporting attempts' staging before
anything moves; a failed one fails the task with its name and numbers (log, XCom) and leaves the
table and the staging exactly as they were.

The operator runs with a fake task context on a local table (ledger checks stubbed: tested
elsewhere). Oracles: every file on disk under the table and the staging, before and after.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_zeta.core.audits import AUDIT_RESULTS_XCOM, SourceFacts, not_null, rows_within, same_schema, unique_key
from airflow_provider_zeta.storage import StateStorage

DS = "2026-07-01"
SOURCES = ("eu", "us")


class Store(dict):
    def set(self, key: str, value: Any) -> None:
        self[key] = json.loads(json.dumps(value))

    def delete(self, key: str) -> None:
        self.pop(key, None)


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


class Harness:
    def __init__(self, tmp_path: Path, monkeypatch) -> None:
        self.tmp_path, self.monkeypatch = tmp_path, monkeypatch
        self.state_root = tmp_path / "state"
        self.table = tmp_path / "table"
        self.table.mkdir()
        monkeypatch.setenv("AIRFLOW__ZETA__STATE_ROOT", str(self.state_root))
        self.state = StateStorage.from_url(str(self.state_root))
        self.xcoms: dict[str, Any] = {}
        self.store = Store()

    def stage(self, token: str) -> dict[str, tuple[str, dict[str, int]]]:
        staging = {}
        for name in SOURCES:
            relative = f"attempts/{token}/{name}/output"
            self.state.write_atomic(f"{relative}/part-0.json", json.dumps([{"token": token, "source": name}]).encode())
            staging[name] = (relative, self.state.file_sizes(relative))
        return staging

    def publish(self, token: str, rows: dict[str, int | None], audits: list, incarnation: int = 0, **kwargs: Any) -> dict:
        from airflow.sdk import DAG

        from airflow_provider_zeta.operators.completed_point import CompletedPointOperator

        staged = self.stage(token)
        self.monkeypatch.setattr(
            CompletedPointOperator, "_verified_staging", lambda self_, state_, ti, report: staged[report.source]
        )
        with DAG("dag", schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC)):
            operator = CompletedPointOperator(
                task_id="completed_point", output_root=str(self.table), ready_task_id="ready", audits=audits, **kwargs
            )
        reports = {
            n: {"source": n, "task_id": f"deploy_{n}", "incarnation": incarnation, "token": f"{token}-{n}",
                "output_path": "x", "rows": rows[n]}
            for n in SOURCES
        }
        self.xcoms.clear()
        context = {
            "ds": DS,
            "logical_date": datetime(2026, 7, 1, tzinfo=UTC),
            "ti": SimpleNamespace(
                dag_id="dag",
                run_id=f"scheduled__{DS}",
                xcom_pull=lambda task_ids: {"incarnation": incarnation, "sources": reports},
                xcom_push=lambda key, value: self.xcoms.__setitem__(key, json.loads(json.dumps(value))),
                get_dr_count=lambda dag_id, run_ids: len(run_ids),
            ),
            "task_state_store": self.store,
            "outlet_events": {},
        }
        operator.render_template_fields(context)
        self.operator = operator
        return operator.execute(context)


@pytest.fixture
def harness(tmp_path, monkeypatch):
    return Harness(tmp_path, monkeypatch)


def test_passing_audits_publish_and_push_their_results(harness):
    result = harness.publish("t1", {"eu": 10, "us": 20}, [rows_within(min=10, max=20)])
    assert result["rule"] == "first_publish" and (harness.table / f"ds={DS}" / "source=eu").is_dir()
    pushed = harness.xcoms[AUDIT_RESULTS_XCOM]
    assert pushed["passed"] is True and pushed["failed_sources"] == []
    assert {r["source"]: (r["passed"], r["numbers"]["rows"]) for r in pushed["results"]} == {"eu": (True, 10), "us": (True, 20)}
    assert pushed["tokens"] == {"eu": "t1-eu", "us": "t1-us"}


def test_a_failed_audit_fails_with_name_and_numbers_and_leaves_table_and_staging_as_they_were(harness, capsys):
    harness.publish("t1", {"eu": 10, "us": 20}, [rows_within(min=5)])
    table_before, staging_before = snapshot(harness.table), snapshot(harness.state_root)
    capsys.readouterr()
    with pytest.raises(AirflowFailException) as failed:
        harness.publish("t2", {"eu": 3, "us": 20}, [rows_within(min=5)], incarnation=1)
    message = str(failed.value)
    assert "[zeta.audit.failed]" in message and "rows_within(min=5, max=None) on eu" in message
    assert '"rows": 3' in message and '"min": 5' in message and "['eu']" in message and "ready" in message
    assert snapshot(harness.table) == table_before  # the published partition untouched, nothing pending
    after = snapshot(harness.state_root)
    assert {k: v for k, v in after.items() if k in staging_before} == staging_before
    assert any("attempts/t2/" in k for k in after)  # the failed run's staging stays for the cleanup
    pushed = harness.xcoms[AUDIT_RESULTS_XCOM]
    assert pushed["passed"] is False and pushed["failed_sources"] == ["eu"]
    failed_result = next(r for r in pushed["results"] if not r["passed"])
    assert failed_result == {"audit": "rows_within(min=5, max=None)", "source": "eu", "passed": False,
                             "numbers": {"min": 5, "max": None, "rows": 3}, "message": "source 'eu': 3 rows, below the minimum 5"}
    logged = capsys.readouterr().out  # the task logger writes there outside a task runner
    assert "zeta.audit.failed: rows_within(min=5, max=None) on eu" in logged and '"rows": 3' in logged
    assert "zeta.audit.passed: rows_within(min=5, max=None) on us" in logged


def test_a_user_callable_sees_each_reporting_attempts_facts_and_can_fail_the_publish(harness):
    seen: list[SourceFacts] = []

    def no_eu(fact: SourceFacts):
        seen.append(fact)
        return fact.source != "eu" or "eu is embargoed"

    with pytest.raises(AirflowFailException, match="no_eu on eu: source 'eu': eu is embargoed"):
        harness.publish("t1", {"eu": 1, "us": 2}, [no_eu])
    assert [(f.source, f.token, f.rows) for f in seen] == [("eu", "t1-eu", 1), ("us", "t1-us", 2)]
    assert all(f.staging.endswith(f"attempts/t1/{f.source}/output") for f in seen)
    assert not (harness.table / f"ds={DS}").exists()


def test_audits_that_read_data_ask_the_audit_job_about_the_reporting_attempts_staging_only(harness, monkeypatch):
    from airflow_provider_zeta.operators.completed_point import CompletedPointOperator

    asked = []

    def job(self, context, wanted, staging):
        asked.append((wanted, dict(staging)))
        return {
            name: {"schema": (("id", "bigint"),), "nulls": {"id": 1 if name == "us" else 0},
                   "duplicates": {("id",): 0}, "read_rows": 4}
            for name in staging
        }

    monkeypatch.setattr(CompletedPointOperator, "run_audit_job", job)
    with pytest.raises(AirflowFailException, match=r"not_null\(id\) on us.*1 null"):
        harness.publish("t1", {"eu": 4, "us": 4}, [same_schema(), not_null("id"), unique_key("id")])
    (wanted, staging), = asked
    assert wanted.schema and wanted.not_null == ("id",) and wanted.unique_keys == (("id",),)
    assert set(staging) == set(SOURCES) and all(url.endswith(f"attempts/t1/{n}/output") for n, url in staging.items())
    results = harness.xcoms[AUDIT_RESULTS_XCOM]["results"]
    assert [(r["audit"], r["source"], r["passed"]) for r in results] == [
        ("same_schema", "eu", True), ("same_schema", "us", True),
        ("not_null(id)", "eu", True), ("not_null(id)", "us", False),
        ("unique_key(id)", "eu", True), ("unique_key(id)", "us", True),
    ]


def test_row_count_audits_need_no_audit_job(harness, monkeypatch):
    from airflow_provider_zeta.operators.completed_point import CompletedPointOperator

    monkeypatch.setattr(CompletedPointOperator, "run_audit_job", lambda *a: pytest.fail("no Spark needed"))
    harness.publish("t1", {"eu": 1, "us": 1}, [rows_within(min=1), lambda fact: True])


def test_a_re_execution_of_a_published_commit_audits_nothing(harness):
    harness.publish("t1", {"eu": 10, "us": 10}, [rows_within(min=1)])
    calls = []

    def spy(fact):
        calls.append(fact)
        return True

    result = harness.publish("t1", {"eu": 10, "us": 10}, [spy])
    assert result["rule"] == "already_published" and calls == [] and AUDIT_RESULTS_XCOM not in harness.xcoms


def test_bad_audits_are_refused_when_the_dag_is_parsed():
    from airflow_provider_zeta.operators.completed_point import CompletedPointOperator

    with pytest.raises(ValueError, match="completed_point.*neither an audit"):
        CompletedPointOperator(task_id="completed_point", output_root="/t", ready_task_id="r", audits=["rows"])


def test_zeta_pipeline_passes_its_audits_and_spark_connection_to_the_completed_point():
    from airflow.sdk import DAG

    from airflow_provider_zeta import zeta_pipeline

    audits = [rows_within(min=1), same_schema()]
    with DAG("audited", schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC)) as dag:
        zeta_pipeline("p", sources={"eu": "/jobs/eu.py"}, output="/t", conn_id="spark_audit", audits=audits)
        zeta_pipeline("q", sources={"eu": "/jobs/eu.py"}, output="/u")
    audited, plain = dag.get_task("p.completed_point"), dag.get_task("q.completed_point")
    assert list(audited.audits) == audits and audited.audit_conn_id == "spark_audit"
    assert plain.audits == ()


def crash_at(monkeypatch, window: str) -> None:
    """Kill the task (an exception it does not handle) at the named crash window."""
    from airflow_provider_zeta.operators.completed_point import CompletedPointOperator

    class Killed(BaseException):
        pass

    def failure_window(self, name, context):
        if name == window:
            raise Killed(name)

    monkeypatch.setattr(CompletedPointOperator, "failure_window", failure_window)
    return Killed


def test_a_replacement_killed_between_its_renames_is_finished_by_the_retry_without_auditing_again(harness, monkeypatch):
    from airflow_provider_zeta.operators.completed_point import CompletedPointOperator

    harness.publish("t1", {"eu": 10, "us": 20}, [rows_within(min=5)])
    killed = crash_at(monkeypatch, "between_renames")
    with pytest.raises(killed):
        harness.publish("t2", {"eu": 10, "us": 20}, [rows_within(min=5)], incarnation=1)
    assert not (harness.table / f"ds={DS}").exists()  # the old partition is a tombstone, the new one pending
    monkeypatch.setattr(CompletedPointOperator, "failure_window", lambda self, name, context: None)
    monkeypatch.setattr(CompletedPointOperator, "run_audit_job", lambda *a: pytest.fail("no audit job on a resumed publish"))
    calls = []
    # The retry's audits would fail now (tightened, or a user callable); the fence says they passed.
    result = harness.publish("t2", {"eu": 10, "us": 20}, [rows_within(min=15), lambda f: calls.append(f) or False], incarnation=1)
    assert result["rule"] == "first_publish" and result["new_commit"] is True and calls == []
    published = harness.table / f"ds={DS}" / "source=eu"
    assert [json.loads(p.read_bytes())[0]["token"] for p in published.glob("*.json")] == ["t2"]


def test_a_failed_audit_does_not_claim_the_table_unchanged_when_an_earlier_try_left_the_partition_aside(harness, monkeypatch):
    from airflow_provider_zeta.operators.completed_point import CompletedPointOperator

    harness.publish("t1", {"eu": 10, "us": 20}, [rows_within(min=5)])
    killed = crash_at(monkeypatch, "between_renames")
    with pytest.raises(killed):
        harness.publish("t2", {"eu": 10, "us": 20}, [rows_within(min=5)], incarnation=1)
    monkeypatch.setattr(CompletedPointOperator, "failure_window", lambda self, name, context: None)
    # Another commit (new attempts after a clear) whose audit fails: the partition is still aside.
    with pytest.raises(AirflowFailException) as failed:
        harness.publish("t3", {"eu": 1, "us": 20}, [rows_within(min=5)], incarnation=2)
    message = str(failed.value)
    assert "[zeta.audit.failed]" in message and "as they were" not in message
    assert "absent" in message and "_zeta_tombstones" in message
    assert not (harness.table / f"ds={DS}").exists()


def test_a_staging_that_is_not_what_its_driver_recorded_fails_before_any_audit_runs(harness, monkeypatch):
    from airflow.sdk.exceptions import AirflowException

    from airflow_provider_zeta.operators.completed_point import CompletedPointOperator

    stage = Harness.stage

    def stage_then_add_a_file(self, token):
        staged = stage(self, token)
        self.state.write_atomic(f"attempts/{token}/us/output/part-9.json", b"[]")  # not recorded by its driver
        return staged

    monkeypatch.setattr(Harness, "stage", stage_then_add_a_file)

    def job(*args):
        raise AirflowException("the audit job cannot read the staging")

    monkeypatch.setattr(CompletedPointOperator, "run_audit_job", job)
    calls = []
    with pytest.raises(AirflowFailException, match=r"\[zeta.publish.staging_mismatch\].*'us'.*part-9.json"):
        harness.publish("t1", {"eu": 1, "us": 1}, [same_schema(), lambda f: calls.append(f) or True])
    assert calls == [] and AUDIT_RESULTS_XCOM not in harness.xcoms
    assert not (harness.table / f"ds={DS}").exists()


@pytest.mark.parametrize("key", ["application", "application_args", "conn_id"])
def test_audit_spark_submit_kwargs_the_operator_sets_itself_are_refused_when_the_dag_is_parsed(key):
    from airflow_provider_zeta.operators.completed_point import CompletedPointOperator

    with pytest.raises(ValueError, match=rf"completed_point.*audit_spark_submit_kwargs.*'{key}'"):
        CompletedPointOperator(
            task_id="completed_point", output_root="/t", ready_task_id="r", audits=[same_schema()],
            audit_spark_submit_kwargs={key: "x", "executor_memory": "1g"},
        )
    CompletedPointOperator(  # what the operator does not set itself is passed on
        task_id="completed_point", output_root="/t", ready_task_id="r", audits=[same_schema()],
        audit_spark_submit_kwargs={"executor_memory": "1g", "conf": {"spark.x": "1"}},
    )


class FakeSparkSubmitHook:
    """Stands for SparkSubmitHook: records its arguments, and its submit answers like the audit job."""

    made: list[dict[str, Any]] = []
    behaviour: Any = None

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs
        self._connection = {"deploy_mode": None}
        self.killed = False
        FakeSparkSubmitHook.made.append(kwargs)
        FakeSparkSubmitHook.last = self

    def submit(self, application: str) -> None:
        with open(self.kwargs["application_args"][0]) as handle:
            request = json.load(handle)
        self.request = request
        if FakeSparkSubmitHook.behaviour is not None:
            FakeSparkSubmitHook.behaviour(self)
        result = {"format": 1, "sources": {
            name: {"rows": 1, "schema": [["id", "bigint"]], "nulls": {}, "duplicates": []} for name in request["sources"]
        }}
        with open(request["result"], "w") as handle:
            json.dump(result, handle)

    def on_kill(self) -> None:
        self.killed = True


@pytest.fixture
def fake_hook(monkeypatch):
    from airflow.providers.apache.spark.hooks import spark_submit

    FakeSparkSubmitHook.made, FakeSparkSubmitHook.behaviour = [], None
    monkeypatch.setattr(spark_submit, "SparkSubmitHook", FakeSparkSubmitHook)
    return FakeSparkSubmitHook


def test_the_audit_job_reads_the_staging_at_the_url_drivers_get_not_the_connection_url_of_messages(harness, monkeypatch, fake_hook):
    from airflow_provider_zeta.operators import completed_point
    from airflow_provider_zeta.settings import driver_url

    opened = completed_point.open_state_storage

    def open_state(url):
        storage = opened(url)
        if url == str(harness.state_root):  # an object store's URL names its Airflow connection
            storage = StateStorage(storage.fs, storage.root, "s3://aws_state@bucket/state")
        return storage

    monkeypatch.setattr(completed_point, "open_state_storage", open_state)
    seen: list[SourceFacts] = []
    harness.publish("t1", {"eu": 1, "us": 1}, [same_schema(), lambda f: seen.append(f) or True],
                    audit_spark_submit_kwargs={"conf": {"spark.hadoop.fs.s3a.access.key": "k"}})
    (made,) = fake_hook.made
    state = StateStorage.from_url(str(harness.state_root))
    assert fake_hook.last.request["sources"] == {n: driver_url(state, f"attempts/t1/{n}/output") for n in SOURCES}
    assert all("aws_state@" not in url for url in fake_hook.last.request["sources"].values())
    assert [f.staging for f in seen] == [driver_url(state, f"attempts/t1/{n}/output") for n in SOURCES]
    assert made["conf"] == {"spark.hadoop.fs.s3a.access.key": "k"} and made["conn_id"] == "spark_default"


def test_zeta_pipeline_gives_the_audit_job_its_spark_conf_like_its_deploy_tasks():
    from airflow.sdk import DAG

    from airflow_provider_zeta import zeta_pipeline

    conf = {"spark.hadoop.fs.s3a.access.key": "k", "spark.x": "pipeline"}
    with DAG("audited_conf", schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC)) as dag:
        zeta_pipeline("p", sources={"eu": "/jobs/eu.py"}, output="/t", conf=conf, audits=[same_schema()])
        zeta_pipeline("q", sources={"eu": "/jobs/eu.py"}, output="/u", conf=conf, audits=[same_schema()],
                      completed_point_kwargs={"audit_spark_submit_kwargs": {"conf": {"spark.x": "audit"}, "executor_memory": "1g"}})
    assert dag.get_task("p.deploy_eu").conf == conf
    assert dag.get_task("p.completed_point").audit_spark_submit_kwargs == {"conf": conf}
    assert dag.get_task("q.completed_point").audit_spark_submit_kwargs == {
        "conf": {**conf, "spark.x": "audit"}, "executor_memory": "1g"}
    assert "audit_spark_submit_kwargs" in dag.get_task("p.completed_point").template_fields  # rendered like a deploy's conf


def blocked_until_killed(hook) -> None:
    """A spark-submit that runs until it is killed, then exits non-zero (SparkSubmitHook raises)."""
    from airflow.sdk.exceptions import AirflowException

    deadline = time.monotonic() + 30
    while not hook.killed and time.monotonic() < deadline:
        time.sleep(0.01)
    raise AirflowException("Cannot execute: spark-submit ... Error code is: -9.")


def test_an_audit_job_running_past_audit_timeout_is_killed_and_fails_the_try_plainly(harness, fake_hook):
    from airflow.sdk.exceptions import AirflowException

    fake_hook.behaviour = blocked_until_killed
    started = time.monotonic()
    with pytest.raises(AirflowException, match=r"\[zeta.audit.timeout\].*0.3 s.*killed.*nothing was published") as failed:
        harness.publish("t1", {"eu": 1, "us": 1}, [same_schema()], audit_timeout=0.3)
    assert not isinstance(failed.value, AirflowFailException)  # an ordinary error: the task retries
    assert fake_hook.last.killed and time.monotonic() - started < 10
    assert not Path(fake_hook.last.kwargs["application_args"][0]).parent.exists()  # its temporary directory
    assert not (harness.table / f"ds={DS}").exists()


def test_on_kill_kills_the_running_audit_job_and_its_temporary_directory_goes(harness, fake_hook):
    from airflow.sdk.exceptions import AirflowException

    def killed_from_outside(hook):
        harness.operator.on_kill()  # what the task runner calls on SIGTERM, while the job runs
        blocked_until_killed(hook)

    fake_hook.behaviour = killed_from_outside
    with pytest.raises(AirflowException):
        harness.publish("t1", {"eu": 1, "us": 1}, [same_schema()])
    assert fake_hook.last.killed
    assert not Path(fake_hook.last.kwargs["application_args"][0]).parent.exists()


@pytest.mark.parametrize("bad", ["soon", -1, 0, True])
def test_a_bad_audit_timeout_is_refused_when_the_dag_is_parsed(bad):
    from airflow_provider_zeta.operators.completed_point import CompletedPointOperator

    with pytest.raises(ValueError, match="completed_point: 'audit_timeout' must be"):
        CompletedPointOperator(task_id="completed_point", output_root="/t", ready_task_id="r", audit_timeout=bad)


def test_audit_timeout_is_a_duration_of_an_hour_by_default():
    from airflow_provider_zeta.operators.completed_point import CompletedPointOperator

    def make(**kwargs):
        return CompletedPointOperator(task_id="completed_point", output_root="/t", ready_task_id="r", **kwargs)

    assert make().audit_timeout == 3600.0
    assert make(audit_timeout=timedelta(minutes=5)).audit_timeout == 300.0 and make(audit_timeout="0:02:00").audit_timeout == 120.0
