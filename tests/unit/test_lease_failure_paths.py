"""Every failure path after a launch stops the driver or leaves it to a try that will own it, and
executors are recognised by class, not by the text of their name."""

from __future__ import annotations

import json
import os
import time

import pytest

from airflow_provider_zeta.core.ledger import Phase, attempt_record_key
from airflow_provider_zeta.core.paths import LEDGER_FILE
from airflow_provider_zeta.operators import spark_job
from airflow_provider_zeta.operators.spark_job import ZetaSparkJobOperator
from airflow_provider_zeta.processes import pids_carrying

from .test_deploy_operator import Store, _context, _job_through_fake_spark_submit, _wait_for, state_root  # noqa: F401


class FailingLaunchRecord(Store):
    """A task state store that fails the write of the launched handle (the metadata DB went away)."""

    def set(self, key, value):
        if key.startswith("zeta_attempt_try_") and value.get("phase") == Phase.LAUNCHED.value:
            raise ConnectionError("the API server is unreachable")
        super().set(key, value)


def _token(store: Store) -> str:
    return store[attempt_record_key(1)]["token"]


def test_an_error_after_the_launch_with_no_retry_left_stops_the_driver(state_root, tmp_path, monkeypatch):  # noqa: F811
    job = _job_through_fake_spark_submit(tmp_path, monkeypatch, work_seconds=30)
    store = FailingLaunchRecord()
    operator = ZetaSparkJobOperator(task_id="job", application=str(job), deferrable=False)
    context = _context(store=store)
    context["ti"].max_tries = 0  # no retry: nothing else would ever stop this driver
    with pytest.raises(ConnectionError):
        operator.execute(context)
    token = _token(store)
    ledger = next(state_root.rglob(LEDGER_FILE), None)
    try:
        assert _wait_for(lambda: not pids_carrying(token), 20), f"driver {token} still running after the try failed"
        if ledger is not None:  # it had claimed: it recorded that it was cancelled
            assert json.loads(ledger.read_text())["status"] == "cancelled"
    finally:
        for pid in pids_carrying(token):
            os.kill(pid, 9)


def test_an_error_after_the_launch_with_a_retry_left_keeps_the_driver_for_it(state_root, tmp_path, monkeypatch):  # noqa: F811
    job = _job_through_fake_spark_submit(tmp_path, monkeypatch, work_seconds=30)
    store = FailingLaunchRecord()
    operator = ZetaSparkJobOperator(task_id="job", application=str(job), deferrable=False)
    context = _context(store=store)  # max_tries 3: the next try re-attaches by the intent record
    with pytest.raises(ConnectionError):
        operator.execute(context)
    token = _token(store)
    try:
        time.sleep(2)
        assert pids_carrying(token)
    finally:
        for pid in pids_carrying(token):
            os.kill(pid, 9)


def test_a_trigger_failure_with_no_retry_left_stops_the_driver(state_root, monkeypatch):  # noqa: F811
    store = Store()
    from .test_deploy_operator import _launched_record

    store.set(attempt_record_key(1), _launched_record(max_tries=0).to_value())
    stopped = []
    monkeypatch.setattr(spark_job, "stop_token_processes", lambda token, handle=None, **kw: stopped.append(token) or [])
    operator = ZetaSparkJobOperator(task_id="job", application="/x.py")
    context = _context(store=store)
    context["ti"].max_tries = 0
    with pytest.raises(Exception, match="trigger blew up"):
        operator.resume_execution("__fail__", {"error": "trigger blew up"}, context)
    assert stopped == ["tok"]
    assert next(state_root.rglob("cancel"), None) is not None  # the marker: a driver on another host stops too


class KubernetesExecutor:  # stands in for the provider's class when it is not installed
    pass


class TeamKubernetesExecutor(KubernetesExecutor):
    pass


@pytest.mark.parametrize("alias", ["k8s", "tenant_pods"])
def test_a_kubernetes_executor_under_an_alias_is_refused(state_root, monkeypatch, alias):  # noqa: F811
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("AIRFLOW__CORE__EXECUTOR", f"LocalExecutor,{alias}:{__name__}.TeamKubernetesExecutor")
    operator = ZetaSparkJobOperator(task_id="job", application="/x.py", deferrable=True, executor=alias)
    with pytest.raises(Exception, match="deferrable=False"):
        operator.execute(_context())
    assert not state_root.exists()


def test_an_executor_whose_name_only_mentions_kubernetes_is_not_refused(monkeypatch):
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("AIRFLOW__CORE__EXECUTOR", f"NotAKubernetesExecutorProxy:{__name__}.Plain")
    operator = ZetaSparkJobOperator(task_id="job", application="/x.py", deferrable=True, executor="NotAKubernetesExecutorProxy")
    assert spark_job._executor_classes(operator, _context()) == ("Plain", "object")


class Plain:
    pass
