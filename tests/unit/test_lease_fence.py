"""A fence never discards a recorded success of the task's own incarnation.

The run's clear_number rises when *another* task of the run is cleared; this task's driver, fenced
by a retry meanwhile (it had not written its ledger in time), may still have claimed and succeeded
before it saw the cancel marker. Its result is this task's own: the next decision reuses it.
"""

from __future__ import annotations

from airflow_provider_zeta.core.deploy import Action, decide
from airflow_provider_zeta.core.ledger import Ledger, LedgerStatus, attempt_record_key
from airflow_provider_zeta.core.paths import LEDGER_FILE
from airflow_provider_zeta.operators import spark_job
from airflow_provider_zeta.operators.spark_job import ZetaSparkJobOperator

from .test_deploy_operator import Store, _attempt, _context, _launched_record, state_root  # noqa: F401


def test_a_fence_after_another_tasks_clear_keeps_the_tasks_own_success(state_root):  # noqa: F811
    store = Store()
    # Launched by try 1 in incarnation 0, with the task's max_tries of then (3).
    store.set(attempt_record_key(1), _launched_record(max_tries=3).to_value())
    operator = ZetaSparkJobOperator(task_id="job", application="/x.py")
    storage = spark_job.open_state_storage(str(state_root))
    # Try 2 after a clear of another task: clear_number 1, this task's max_tries unchanged (3).
    context = _context(try_number=2, clear_number=1, store=store)
    _, timing, _, _ = operator._settings()
    observation = operator._observe(context, storage, timing)
    assert decide(observation).action is Action.FENCE  # launch_never_started: no ledger after the grace
    operator._fence(context, storage, observation)
    # The driver had claimed meanwhile and finished: its ledger carries the incarnation it was launched with.
    attempt = _attempt(state_root, "tok")
    attempt.mkdir(parents=True, exist_ok=True)
    done = Ledger(token="tok", status=LedgerStatus.SUCCEEDED, started_at=1.0, heartbeat_at=2.0, incarnation=0, rows=7)
    (attempt / LEDGER_FILE).write_bytes(done.to_json())
    decision = decide(operator._observe(context, storage, timing))
    assert decision.action is Action.REUSE_RESULT, decision


def test_a_fence_of_a_cleared_task_still_refuses_the_old_success(state_root):  # noqa: F811
    store = Store()
    store.set(attempt_record_key(1), _launched_record(max_tries=3).to_value())
    operator = ZetaSparkJobOperator(task_id="job", application="/x.py")
    storage = spark_job.open_state_storage(str(state_root))
    context = _context(try_number=2, clear_number=1, store=store)
    context["ti"].max_tries = 5  # this task was cleared: Airflow raised its max_tries
    _, timing, _, _ = operator._settings()
    observation = operator._observe(context, storage, timing)
    assert decide(observation).rule == "new_incarnation"
    operator._fence(context, storage, observation)
    attempt = _attempt(state_root, "tok")
    done = Ledger(token="tok", status=LedgerStatus.SUCCEEDED, started_at=1.0, heartbeat_at=2.0, incarnation=0)
    (attempt / LEDGER_FILE).write_bytes(done.to_json())
    decision = decide(operator._observe(context, storage, timing))
    assert decision.action is Action.FRESH_LAUNCH and decision.rule == "fenced_driver_stopped", decision
