"""Rules of the deploy task beside its decision table (core/deploy.py): when a failing try stops its
driver, which incarnation a fence keeps, the fallback wake-up of a deleted attempt's wait, and the
reasons a decision gives (what the task log, the exception and the e-mail say)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from airflow_provider_zeta.core.deploy import (
    Action,
    ProcessView,
    Timing,
    decide,
    fence_incarnation,
    self_stop_wait_deadline,
    stop_driver_on_failure,
)
from airflow_provider_zeta.core.ledger import LedgerStatus, Phase
from tests.unit.test_deploy_table import NOW, TIMED, TIMING, ledger, observe, record


@pytest.mark.parametrize(
    "try_number, max_tries, stop",
    [(1, 2, False), (2, 2, False), (3, 2, True), (1, 0, True), (5, None, True), (1, None, True)],
)
def test_a_failing_try_stops_its_driver_only_when_no_retry_is_left(try_number, max_tries, stop):
    assert stop_driver_on_failure(try_number, max_tries) is stop


def test_a_fence_moves_the_record_to_this_incarnation_only_when_this_task_was_cleared():
    earlier = record(Phase.LAUNCHED, incarnation=1, try_number=1, max_tries=2)
    cleared = observe(rec=earlier, incarnation=3, try_number=2, max_tries=4)  # max_tries rose: a clear of this task
    assert fence_incarnation(cleared) == 3
    elsewhere = observe(rec=earlier, incarnation=3, try_number=2, max_tries=2)  # another task of the run was cleared
    assert fence_incarnation(elsewhere) == 1


@pytest.mark.parametrize(
    "deleted_for, stopped_after, poll, wake_in",
    [
        (0.0, 75.0, 5.0, 75.0 + 75.0),  # the whole count ahead, then a full stopped_after beyond it
        (30.0, 75.0, 5.0, 45.0 + 75.0),  # the count carried on from the task's
        (100.0, 75.0, 5.0, 0.0 + 75.0),  # the count already there: never before now
        (0.0, 2.0, 5.0, 2.0 + 5.0),  # at least a poll beyond it
    ],
)
def test_the_fallback_wake_up_of_a_deleted_attempts_wait_lies_a_full_count_beyond_its_end(deleted_for, stopped_after, poll, wake_in):
    assert self_stop_wait_deadline(NOW, deleted_for, stopped_after, poll) == NOW + wake_in


# ---------------------------------------------------------------------------- reasons


def test_a_failed_driver_is_named_with_its_status_and_the_task_log_only_when_it_wrote_an_error():
    failed = decide(observe(rec=record(Phase.LAUNCHED), led=ledger(LedgerStatus.FAILED, error="password=hunter2")))
    assert (failed.action, failed.rule) == (Action.REPORT_FAILURE, "driver_failed")
    assert failed.reason == "driver tok-a ended failed; its error is in the task log of this try"
    cancelled = decide(observe(rec=record(Phase.LAUNCHED), led=ledger(LedgerStatus.CANCELLED)))
    assert cancelled.reason == "driver tok-a ended cancelled"


def test_a_lost_driver_is_named_by_its_gone_process_or_its_silence_against_the_lease():
    gone = decide(observe(rec=record(Phase.LAUNCHED), led=ledger(), process=ProcessView.GONE))
    assert gone.reason == "driver tok-a is lost: its process is gone"
    silent = decide(observe(rec=record(Phase.LAUNCHED), led=ledger(), unchanged_for=61.4))
    assert silent.reason == (
        "driver tok-a is lost: its heartbeat has not changed for 61s by this observer's clock (lost after 60s)"
    )


def test_a_fenced_driver_that_stopped_is_named_by_how_it_is_known_to_have_stopped():
    fenced = record(Phase.ABANDONED)
    ended = decide(observe(rec=fenced, led=ledger(LedgerStatus.FAILED)))
    assert (ended.rule, ended.reason) == ("fenced_driver_stopped", "fenced attempt tok-a stopped: its ledger is failed")
    gone = decide(observe(rec=fenced, led=ledger(), process=ProcessView.GONE))
    assert gone.reason == "fenced attempt tok-a stopped: its process is gone"
    silent = decide(observe(rec=fenced, led=ledger(), unchanged_for=80.2))
    assert silent.reason == "fenced attempt tok-a stopped: its heartbeat has been silent for 80s (past its lease)"


def test_a_job_timeout_names_the_task_the_driver_the_limit_and_whether_the_driver_started():
    running = replace(observe(rec=record(Phase.LAUNCHED, intent_at=NOW - 45), led=ledger(), timing=TIMED), task="sales.deploy_emea")
    decision = decide(running)
    assert (decision.action, decision.rule) == (Action.REPORT_FAILURE, "job_timeout")
    assert decision.reason.startswith(
        "task sales.deploy_emea: driver tok-a exceeded its job_timeout of 30s (0:00:30): running 45s after its launch intent"
    )
    assert decision.reason.endswith("; stopping it")
    starting = decide(observe(rec=record(Phase.LAUNCHED, intent_at=NOW - 45), timing=Timing(60, 900, job_timeout=30)))
    assert starting.reason.startswith("task ?: driver tok-a exceeded its job_timeout of 30s (0:00:30): still starting (no ledger yet)")


def test_timing_without_a_job_timeout_never_times_out():
    assert decide(observe(rec=record(Phase.LAUNCHED, intent_at=NOW - 10**6), led=ledger(), timing=TIMING)).rule != "job_timeout"


# ---------------------------------------------------------------------------- triggers and refusals


def test_a_missing_ledger_wakes_the_task_exactly_at_the_launch_deadline():
    from airflow_provider_zeta.core.deploy import trigger_should_fire
    from airflow_provider_zeta.core.ledger import LedgerView

    assert not trigger_should_fire(LedgerView.MISSING, NOW - 0.001, NOW)
    assert trigger_should_fire(LedgerView.MISSING, NOW, NOW)
    assert not trigger_should_fire(LedgerView.RUNNING, NOW, NOW)  # a live driver keeps it waiting
    assert trigger_should_fire(LedgerView.SUCCEEDED, NOW, NOW + 100)


def test_a_deferral_is_refused_by_executor_class_whatever_its_configured_name():
    from airflow_provider_zeta.core.deploy import deferral_refusal

    dotted = deferral_refusal("airflow.providers.cncf.kubernetes.executors.kubernetes_executor.KubernetesExecutor", True, True)
    assert dotted is not None and dotted.startswith(
        "ZetaSparkJobOperator cannot defer under airflow.providers.cncf.kubernetes.executors.kubernetes_executor.KubernetesExecutor:"
    )
    alias = deferral_refusal("my_k8s", True, True, executor_classes=("MyK8s", "KubernetesExecutor", "BaseExecutor"))
    assert alias is not None and "Set deferrable=False" in alias
    assert deferral_refusal("KubernetesExecutor", True, True, executor_classes=("LocalExecutor",)) is None
    assert deferral_refusal(None, True, True) is None


def test_a_job_timeout_says_whose_clock_measured_it():
    timed_out = decide(observe(rec=record(Phase.LAUNCHED, intent_at=NOW - 45), led=ledger(), timing=TIMED))
    assert "45s after its launch intent (by the launching task's clock, kept in the task state store); stopping it" in timed_out.reason
