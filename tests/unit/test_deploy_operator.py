"""ZetaSparkJobOperator's adapter code with a fake task context (no Airflow components).

The real driver bootstrap runs as a real process through tests/fake_spark (no JVM). Covers what
the decision table cannot: that the actions stop drivers before a try ends,
the order of the observation (item 6), the non-deferrable mode and the KubernetesExecutor refusal
(item 6 of the brief).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from airflow_provider_zeta import observers
from airflow_provider_zeta.core.ledger import HeartbeatSeen, Ledger, LedgerStatus, Phase, attempt_record_key
from airflow_provider_zeta.core.paths import CANCEL_MARKER, LEDGER_FILE, attempt_dir
from airflow_provider_zeta.operators import spark_job
from airflow_provider_zeta.operators.spark_job import ZetaSparkJobOperator
from airflow_provider_zeta.runtime import driver as bootstrap

ROOT = Path(__file__).resolve().parents[2]
FAKE_SPARK_SUBMIT = ROOT / "tests" / "fake_spark" / "spark-submit"


class Store(dict):
    def set(self, key, value):
        self[key] = json.loads(json.dumps(value))

    def delete(self, key):
        self.pop(key, None)


def _context(try_number=1, clear_number=0, store=None):
    xcoms: dict = {}
    ti = SimpleNamespace(
        dag_id="d", run_id="r", task_id="job", map_index=-1, try_number=try_number, max_tries=3, executor=None,
        xcoms=xcoms, xcom_push=lambda key, value: xcoms.__setitem__(key, value),
    )
    return {
        "ti": ti,
        "dag_run": SimpleNamespace(clear_number=clear_number, conf={}),
        "task_state_store": store if store is not None else Store(),
        "logical_date": None,
        "ds": None,
    }


@pytest.fixture
def state_root(tmp_path, monkeypatch):
    root = tmp_path / "state"
    monkeypatch.setenv("AIRFLOW__ZETA__STATE_ROOT", str(root))
    monkeypatch.setenv("AIRFLOW__ZETA__DRIVER_HEARTBEAT_INTERVAL", "1")
    monkeypatch.setenv("AIRFLOW__ZETA__POLL_INTERVAL", "1")
    return root


def _attempt(root: Path, token: str) -> Path:
    return root / attempt_dir("d", "r", "job", -1, token)


def _launched_record(token="tok", **changes):
    from airflow_provider_zeta.core.ledger import AttemptRecord

    record = AttemptRecord(token=token, incarnation=0, try_number=1, phase=Phase.LAUNCHED, intent_at=time.time() - 600, launch_try=1)
    return record.with_changes(**changes)


def test_reporting_a_lost_driver_stops_it_first(state_root):
    # Old code: _report_failure raised without a cancel marker, so a lost-but-alive driver on
    # another host kept running while a later try redeployed.
    store = Store()
    store.set(attempt_record_key(1), _launched_record().to_value())
    ledger = Ledger(token="tok", status=LedgerStatus.RUNNING, started_at=1.0, heartbeat_at=time.time())
    _attempt(state_root, "tok").mkdir(parents=True)
    (_attempt(state_root, "tok") / LEDGER_FILE).write_bytes(ledger.to_json())
    # This task has watched the same heartbeat mark for longer than lost_after (60 s).
    clock, now = spark_job.observer_clock()
    seen = HeartbeatSeen("tok", ledger.heartbeat_mark, silent_for=61.0, at=now, clock=clock)
    store.set(spark_job.HEARTBEAT_SEEN_KEY, seen.to_value())
    operator = ZetaSparkJobOperator(task_id="job", application="/x.py", launch_grace=20)
    with pytest.raises(Exception, match="zeta.deploy.driver_failed"):
        operator.execute(_context(try_number=1, store=store))
    assert (_attempt(state_root, "tok") / CANCEL_MARKER).exists()
    assert store[attempt_record_key(1)]["failure_reported_try"] == 1


def test_a_fail_decision_stops_the_tokens_driver_first(state_root):
    store = Store()
    store.set(attempt_record_key(1), _launched_record().to_value())
    _attempt(state_root, "tok").mkdir(parents=True)
    (_attempt(state_root, "tok") / LEDGER_FILE).write_bytes(b'{"token": "tok", "status": "runn')
    operator = ZetaSparkJobOperator(task_id="job", application="/x.py")
    with pytest.raises(Exception, match="zeta.deploy.corrupt_ledger"):
        operator.execute(_context(try_number=2, store=store))
    assert (_attempt(state_root, "tok") / CANCEL_MARKER).exists()


def test_the_process_is_observed_before_the_ledger(state_root, monkeypatch):
    order = []
    store = Store()
    store.set(attempt_record_key(1), _launched_record().to_value())
    monkeypatch.setattr(spark_job, "process_view", lambda token, handle: _record_process(order))
    real_parse = observers.parse_ledger  # the operator reads the attempt through observers.look_at_attempt
    monkeypatch.setattr(observers, "parse_ledger", lambda *a: order.append("ledger") or real_parse(*a))
    operator = ZetaSparkJobOperator(task_id="job", application="/x.py")
    from airflow_provider_zeta.core.deploy import Timing

    operator._observe(_context(try_number=2, store=store), spark_job.open_state_storage(str(state_root)), Timing(60, 20))
    assert order == ["process", "ledger"]


def _record_process(order):
    from airflow_provider_zeta.core.deploy import ProcessView

    order.append("process")
    return ProcessView.UNKNOWN


def test_a_deferrable_task_in_a_kubernetes_executor_pod_is_refused_before_launching(state_root, monkeypatch):
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    operator = ZetaSparkJobOperator(task_id="job", application="/x.py", deferrable=True, executor="KubernetesExecutor")
    with pytest.raises(Exception, match="deferrable=False"):
        operator.execute(_context())
    assert not state_root.exists()  # nothing written, nothing launched


def test_deferrable_defaults_from_zeta_default_deferrable(monkeypatch):
    assert ZetaSparkJobOperator(task_id="a", application="/x.py").deferrable is True
    monkeypatch.setenv("AIRFLOW__ZETA__DEFAULT_DEFERRABLE", "False")
    assert ZetaSparkJobOperator(task_id="b", application="/x.py").deferrable is False


def _job_through_fake_spark_submit(tmp_path, monkeypatch, work_seconds: float) -> Path:
    """A job that works ``work_seconds`` and reports 7 rows, launched by the real driver bootstrap
    through tests/fake_spark (a real separate process, no JVM)."""
    job = tmp_path / "job.py"
    job.write_text(
        "import time\nfrom airflow_provider_zeta.runtime import zeta_context\n"
        f"time.sleep({work_seconds})\nzeta_context().report(rows=7)\n"
    )

    def command(*, conn_id, token, bootstrap_args, conf, hook_kwargs, **_options):
        return [sys.executable, str(FAKE_SPARK_SUBMIT), "--conf", f"spark.zeta.attemptToken={token}",
                "--name", f"zeta-{token}", bootstrap.__file__, *bootstrap_args]

    monkeypatch.setattr(spark_job, "spark_submit_command", command)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    return job


def test_non_deferrable_keeps_the_worker_and_returns_the_drivers_result(state_root, tmp_path, monkeypatch):
    job = _job_through_fake_spark_submit(tmp_path, monkeypatch, work_seconds=2)
    operator = ZetaSparkJobOperator(task_id="job", application=str(job), deferrable=False)
    deferred = []
    monkeypatch.setattr(operator, "defer", lambda **kw: deferred.append(kw))
    started = time.monotonic()
    result = operator.execute(_context())
    assert deferred == []  # never deferred: the task held its worker while the driver ran
    assert result["rows"] == 7 and time.monotonic() - started >= 2
    ledger = json.loads((_attempt(state_root, result["token"]) / LEDGER_FILE).read_text())
    assert ledger["status"] == "succeeded"


@pytest.mark.parametrize("task_state, stopped", [("failed", True), ("running", False)])
def test_a_non_deferrable_task_killed_by_a_user_action_stops_its_driver(state_root, tmp_path, monkeypatch, task_state, stopped):
    """deferrable=False: the task waits in its worker, so no trigger's on_kill runs when a user
    marks it failed; the task's own on_kill stops the driver then (the state says so), and keeps
    it for a kill that a later try re-attaches after (a worker shutting down: still running)."""
    import threading

    from airflow.sdk.execution_time import task_runner

    job = _job_through_fake_spark_submit(tmp_path, monkeypatch, work_seconds=8)
    states = staticmethod(lambda **kw: {"r": {"job": task_state}})
    monkeypatch.setattr(task_runner.RuntimeTaskInstance, "get_task_states", states, raising=False)
    operator = ZetaSparkJobOperator(task_id="job", application=str(job), deferrable=False)
    outcome: list = []
    waiting = threading.Thread(target=lambda: outcome.append(_outcome(operator.execute, _context())), daemon=True)
    waiting.start()
    ledger = _wait_for(lambda: next(state_root.rglob(LEDGER_FILE), None), 30)
    _wait_for(lambda: operator._waiting_trigger, 10)
    operator.on_kill()
    assert (ledger.parent / CANCEL_MARKER).exists() is stopped
    if stopped:
        _wait_for(lambda: json.loads(ledger.read_text())["status"] == "cancelled", 15)
    else:
        assert json.loads(ledger.read_text())["status"] == "running"
        waiting.join(40)
        assert outcome and outcome[0]["rows"] == 7  # the driver went on to report


def _outcome(function, *args):
    try:
        return function(*args)
    except Exception as error:  # the try's own failure, once its driver was stopped
        return error


def _wait_for(check, timeout_s: float):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"not within {timeout_s}s")


def test_a_deferral_on_its_own_driver_carries_the_mark_and_report_the_trigger_needs_to_end_the_task(state_root, monkeypatch):
    """The trigger ends the task itself only with the task's latest deferral mark (an
    XCom written before the trigger exists) and the report's source, task id and incarnation; a
    task with outlets keeps its worker's end (Airflow emits no Asset event for a trigger's end)."""
    from airflow.sdk import Asset

    from airflow_provider_zeta.core.events import DEPLOY_DEFERRAL_XCOM

    store = Store()
    store.set(attempt_record_key(1), _launched_record(intent_at=time.time() - 5).to_value())
    _attempt(state_root, "tok").mkdir(parents=True)
    ledger = Ledger(token="tok", status=LedgerStatus.RUNNING, started_at=1.0, heartbeat_at=time.time())
    (_attempt(state_root, "tok") / LEDGER_FILE).write_bytes(ledger.to_json())

    def deferral(**kwargs):
        operator = ZetaSparkJobOperator(task_id="job", application="/x.py", source="alpha", **kwargs)
        deferred: list = []
        monkeypatch.setattr(operator, "defer", lambda **kw: deferred.append(kw["trigger"]))
        context = _context(try_number=2, store=store)
        operator.execute(context)
        assert len(deferred) == 1
        return deferred[0], context["ti"].xcoms

    trigger, xcoms = deferral()
    assert trigger.deferral_mark and xcoms[DEPLOY_DEFERRAL_XCOM] == trigger.deferral_mark
    assert trigger.report == {"source": "alpha", "task_id": "job", "incarnation": 0}
    trigger, xcoms = deferral(outlets=[Asset("s3://bucket/table")])
    # A new mark all the same (every deferral writes one), but nothing for the trigger to end with.
    assert xcoms[DEPLOY_DEFERRAL_XCOM] and trigger.deferral_mark is None and trigger.report is None


def test_a_cleared_task_finds_its_earlier_drivers_end_in_its_runs_commit_or_ready_set(monkeypatch):
    """A deploy task ended by its trigger records no driver_ended. The run's completed
    point (which runs again only after this task succeeded again) or ready-to-close sensor (which a
    clear of the whole run starts at once, wiping its value) names the token instead."""
    import json as jsonlib

    from airflow.sdk import DAG

    from airflow_provider_zeta.operators.completed_point import CompletedPointOperator
    from airflow_provider_zeta.sensors.ready_to_close import ReadyToCloseSensor

    with DAG("d", schedule=None):
        deploy = ZetaSparkJobOperator(task_id="job", application="/x.py", source="alpha")
        ReadyToCloseSensor(task_id="ready", sources={"alpha": "job"})
        CompletedPointOperator(task_id="publish", output_root="/out", ready_task_id="ready")
        ReadyToCloseSensor(task_id="other_ready", sources={"beta": "other_job"})
        CompletedPointOperator(task_id="other_publish", output_root="/out2", ready_task_id="other_ready")
    assert deploy._pipeline_readers() == (["ready"], ["publish"])
    ready_set = {"incarnation": 0, "sources": {"alpha": {
        "source": "alpha", "task_id": "job", "incarnation": 0, "token": "tok-ready", "output_path": "/o", "rows": 1}}}
    values = {"ready": jsonlib.dumps(ready_set), "publish": {"commit_id": "c", "tokens": {"alpha": "tok-commit"}}}
    asked = []

    class XCom:
        @staticmethod
        def get_one(key, dag_id, task_id, run_id, map_index):
            asked.append((key, task_id))
            return values.get(task_id)

    import airflow.sdk.execution_time.xcom as xcom_module

    monkeypatch.setattr(xcom_module, "XCom", XCom)
    assert deploy._end_reported_downstream(_context(), "tok-commit") and asked == [("return_value", "publish")]
    assert deploy._end_reported_downstream(_context(), "tok-ready")  # the sensor's value, when not yet wiped
    assert not deploy._end_reported_downstream(_context(), "another-token")
