"""``job_timeout`` — past it the driver is stopped and the try fails naming task and timeout.

The rule lives in ``core.deploy`` (rows ``job_timeout`` / ``job_timeout_reported``, ``timeout_wake_at``,
``trigger_should_fire(timeout_at=)``); elapsed time counts from the record's durable ``intent_at``,
so a new try or a re-created trigger keeps the deadline. The operator test stops a real process
carrying the token and checks the process table, not the provider's bookkeeping.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest

from airflow_provider_zeta.core.deploy import (
    Action,
    Decision,
    DeployObservation,
    ProcessView,
    Timing,
    decide,
    job_deadline,
    timeout_wake_at,
    trigger_should_fire,
)
from airflow_provider_zeta.core.durations import InvalidDuration
from airflow_provider_zeta.core.ledger import AttemptRecord, Ledger, LedgerStatus, LedgerView, Phase, attempt_record_key
from airflow_provider_zeta.core.paths import CANCEL_MARKER, LEDGER_FILE
from airflow_provider_zeta.operators.spark_job import ZetaSparkJobOperator
from airflow_provider_zeta.processes import process_start_time
from tests.unit.test_deploy_operator import Store, _attempt, _context, state_root  # noqa: F401 (fixture)

NOW = 50_000.0
TIMED = Timing(lost_after=60, launch_grace=90, job_timeout=120)


def _record(intent_age: float, phase=Phase.LAUNCHED, **kw) -> AttemptRecord:
    return AttemptRecord(
        token="tok", incarnation=0, try_number=1, phase=phase, intent_at=NOW - intent_age, launch_try=1, **kw
    )


def _running() -> Ledger:
    return Ledger(token="tok", status=LedgerStatus.RUNNING, started_at=NOW - 100, heartbeat_at=NOW - 1)


def _observe(record, ledger=None, process=ProcessView.UNKNOWN, timing=TIMED, try_number=1) -> DeployObservation:
    return DeployObservation(
        now=NOW, incarnation=0, try_number=try_number, record=record, ledger=ledger, process=process,
        timing=timing, task="sales.deploy_web",
    )


def test_a_running_driver_past_its_timeout_is_stopped_and_the_message_names_task_and_timeout():
    decision = decide(_observe(_record(121), _running()))
    assert (decision.rule, decision.action, decision.token) == ("job_timeout", Action.REPORT_FAILURE, "tok")
    assert "sales.deploy_web" in decision.reason and "job_timeout of 120s (0:02:00)" in decision.reason


def test_before_the_timeout_the_driver_is_reattached():
    assert decide(_observe(_record(119), _running())).rule == "reconnect"


def test_without_a_timeout_a_long_driver_runs_on():
    assert decide(_observe(_record(10**6), _running(), timing=Timing(60, 90))).rule == "reconnect"


def test_a_launch_still_starting_past_the_timeout_is_stopped_too():
    decision = decide(_observe(_record(121), None, ProcessView.ALIVE))
    assert decision.rule == "job_timeout" and "still starting" in decision.reason


def test_a_finished_or_gone_driver_is_judged_by_its_own_rows_not_the_timeout():
    done = Ledger(token="tok", status=LedgerStatus.SUCCEEDED, started_at=1, heartbeat_at=2)
    assert decide(_observe(_record(500), done)).rule == "already_succeeded"
    failed = Ledger(token="tok", status=LedgerStatus.FAILED, started_at=1, heartbeat_at=2, error="x")
    assert decide(_observe(_record(500), failed)).rule == "driver_failed"
    gone = _record(500, host="h", pid=1)
    assert decide(_observe(gone, None, ProcessView.GONE)).rule == "driver_exited_before_start"


def test_a_new_try_keeps_counting_from_the_durable_intent():
    # An orphan reset or a worker crash: try 2 finds try 1's record; the clock is not reset.
    decision = decide(_observe(_record(121), _running(), try_number=2))
    assert decision.rule == "job_timeout"


def test_a_reported_timeout_is_fenced_then_waited_for_until_stopped():
    reported = _record(200, failure_reported_try=1)
    assert decide(_observe(reported, _running(), try_number=2)).action is Action.FENCE
    fenced = reported.with_changes(phase=Phase.ABANDONED)
    assert decide(_observe(fenced, _running(), try_number=2)).rule == "fenced_still_running"
    cancelled = Ledger(token="tok", status=LedgerStatus.CANCELLED, started_at=1, heartbeat_at=2)
    # Cancelled by the timeout and reported: the retry redeploys (a new token, a new deadline).
    assert decide(_observe(reported, cancelled, try_number=2)).rule == "terminal_resubmit"


def test_the_trigger_deadline_comes_from_the_intent_and_only_for_a_live_wait():
    observation = _observe(_record(30), _running())
    assert timeout_wake_at(observation, Decision(Action.REATTACH, "reconnect", "", token="tok")) == NOW - 30 + 120
    assert timeout_wake_at(observation, Decision(Action.WAIT_FOR_STOP, "x", "", token="tok")) is None
    fenced = _observe(_record(30, phase=Phase.ABANDONED), _running())
    assert timeout_wake_at(fenced, Decision(Action.WAIT_FOR_LAUNCH, "x", "", token="tok")) is None
    assert job_deadline(100.0, None) is None


def test_the_trigger_rule_fires_at_the_deadline_for_a_running_or_missing_ledger():
    for view in (LedgerView.RUNNING, LedgerView.MISSING):
        assert not trigger_should_fire(view, 99.0, 10**9, timeout_at=100.0)
        assert trigger_should_fire(view, 100.0, 10**9, timeout_at=100.0)
    # Waiting for a given-up driver to stop: the deadline does not matter any more.
    assert not trigger_should_fire(LedgerView.RUNNING, 200.0, 10**9, timeout_at=100.0, wait_for_stop=True)


def test_a_recreated_trigger_keeps_the_absolute_deadline(tmp_path):
    from airflow_provider_zeta.triggers.driver import ZetaDriverTrigger

    ledger = Ledger(token="tok", status=LedgerStatus.RUNNING, started_at=1.0, heartbeat_at=time.time(), beat=1)
    (tmp_path / "attempt").mkdir()
    (tmp_path / "attempt" / "ledger.json").write_bytes(ledger.to_json())
    deadline = time.time() + 0.5
    first = ZetaDriverTrigger(
        state_root=str(tmp_path), attempt_dir="attempt", token="tok", lost_after=60, poll_interval=0.05,
        missing_deadline=time.time() + 3600, timeout_at=deadline,
    )
    classpath, kwargs = first.serialize()
    assert kwargs["timeout_at"] == deadline
    restarted = ZetaDriverTrigger(**kwargs)  # what a triggerer restart does

    async def first_event():
        async for event in restarted.run():
            return event.payload

    payload = asyncio.run(asyncio.wait_for(first_event(), 10))
    assert time.time() >= deadline and "job_timeout reached" in payload["detail"]


def test_a_bad_job_timeout_fails_at_parse_time_naming_the_task():
    with pytest.raises(InvalidDuration, match="deploy_web: 'job_timeout' must be a duration"):
        ZetaSparkJobOperator(task_id="deploy_web", application="/a.py", job_timeout="soon")
    with pytest.raises(InvalidDuration, match="deploy_web: 'job_timeout' must be a positive duration"):
        ZetaSparkJobOperator(task_id="deploy_web", application="/a.py", job_timeout=0)
    assert ZetaSparkJobOperator(task_id="ok", application="/a.py", job_timeout=timedelta(hours=2)).job_timeout


def test_the_operator_stops_the_driver_process_and_fails_the_try(state_root):  # noqa: F811
    token = "tok"
    # A process carrying the token as a driver does (its conf on the command line); it ignores
    # the cancel marker, so the operator must signal it.
    driver = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(300)", f"spark.zeta.attemptToken={token}"],
        start_new_session=True,
    )
    try:
        store = Store()
        record = AttemptRecord(
            token=token, incarnation=0, try_number=1, phase=Phase.LAUNCHED, intent_at=time.time() - 45, launch_try=1,
            host="h", pid=driver.pid,
        )
        store.set(attempt_record_key(1), record.to_value())
        attempt = _attempt(state_root, token)
        attempt.mkdir(parents=True)
        ledger = Ledger(token=token, status=LedgerStatus.RUNNING, started_at=time.time() - 40, heartbeat_at=time.time())
        (attempt / LEDGER_FILE).write_bytes(ledger.to_json())
        operator = ZetaSparkJobOperator(task_id="job", application="/x.py", job_timeout=30, heartbeat_interval=1)
        with pytest.raises(Exception, match=r"zeta.deploy.job_timeout\] task d.job: driver tok exceeded its job_timeout of 30s"):
            operator.execute(_context(try_number=1, store=store))
        deadline = time.monotonic() + 20
        while process_start_time(driver.pid) is not None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert process_start_time(driver.pid) is None, "the driver process is still running"
        assert (attempt / CANCEL_MARKER).exists()
        assert store[attempt_record_key(1)]["failure_reported_try"] == 1
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, 9)
        driver.wait()


def test_a_driver_within_its_timeout_is_deferred_on_with_the_deadline(state_root, monkeypatch):  # noqa: F811
    store = Store()
    intent_at = time.time() - 10
    record = AttemptRecord(token="tok", incarnation=0, try_number=1, phase=Phase.LAUNCHED, intent_at=intent_at, launch_try=1)
    store.set(attempt_record_key(1), record.to_value())
    attempt = _attempt(state_root, "tok")
    attempt.mkdir(parents=True)
    ledger = Ledger(token="tok", status=LedgerStatus.RUNNING, started_at=1.0, heartbeat_at=time.time())
    (attempt / LEDGER_FILE).write_bytes(ledger.to_json())
    operator = ZetaSparkJobOperator(task_id="job", application="/x.py", job_timeout=timedelta(minutes=5))
    deferred = []
    monkeypatch.setattr(operator, "defer", lambda **kw: deferred.append(kw))
    operator.execute(_context(try_number=2, store=store))  # a later try: same record, same deadline
    assert deferred and deferred[0]["trigger"].timeout_at == pytest.approx(intent_at + 300)
    assert Path(attempt).exists()
