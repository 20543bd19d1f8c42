"""A cleared deploy task always re-runs, across hosts, on the pure core and the process adapter:
hosts, clocks, liveness, detection.

Each test names the defect it reproduces; every one failed on the code before the fix (a clock
behind, a hostname shared by two containers, an unshared state root, "lost" taken for "stopped",
a PID without a start time, a cleared task reusing its old result).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from airflow_provider_zeta.core.deploy import (
    Action,
    DeployObservation,
    ProcessView,
    Timing,
    decide,
    deferral_refusal,
    trigger_should_fire,
)
from airflow_provider_zeta.core.ledger import (
    AttemptRecord,
    HeartbeatSeen,
    Ledger,
    LedgerStatus,
    LedgerView,
    Phase,
    classify_ledger,
    driver_lease,
    observe_heartbeat,
)

NOW = 50_000.0
TIMING = Timing(lost_after=60, launch_grace=20)


def rec(**changes) -> AttemptRecord:
    base = AttemptRecord(
        token="tok", incarnation=0, try_number=1, phase=Phase.LAUNCHED, intent_at=NOW - 600, launch_try=1,
        host="worker", pid=4242, pid_start=77.0,
    )
    return base.with_changes(**changes)


def running(heartbeat_at: float, beat: int = 1) -> Ledger:
    return Ledger(token="tok", status=LedgerStatus.RUNNING, started_at=heartbeat_at - 10, heartbeat_at=heartbeat_at, beat=beat)


def observe(record, ledger=None, try_number=2, **kw) -> DeployObservation:
    return DeployObservation(
        now=NOW, incarnation=0, try_number=try_number, record=record, ledger=ledger, process=kw.pop("process", ProcessView.UNKNOWN),
        timing=TIMING, **kw,
    )


# -- item 2: liveness is a heartbeat *change* seen by the observer's own clock -------------------


def test_a_driver_whose_host_clock_is_an_hour_behind_is_not_lost_while_its_heartbeat_changes():
    # Old rule: heartbeat_at (driver clock) compared with the observer's clock -> "lost", and a
    # later try launched a second driver beside the live one.
    behind = running(heartbeat_at=NOW - 3600)
    decision = decide(observe(rec(), behind, heartbeat_unchanged_for=2.0))
    assert decision.rule == "reconnect" and decision.action is Action.REATTACH


def test_a_driver_whose_host_clock_is_ahead_is_lost_when_its_heartbeat_stops_changing():
    ahead = running(heartbeat_at=NOW + 3600)  # looks "fresh" forever by timestamp
    decision = decide(observe(rec(), ahead, heartbeat_unchanged_for=TIMING.lost_after + 1))
    assert decision.action is Action.REPORT_FAILURE and "has not changed" in decision.reason


def test_heartbeat_observation_counts_on_its_own_clock_and_restarts_on_a_change():
    first = observe_heartbeat(None, "tok", "1/5.0", "host-a", now=100.0)
    same = observe_heartbeat(first, "tok", "1/5.0", "host-a", now=150.0)
    assert same.silent_for == 50.0 and (same.at, same.clock) == (150.0, "host-a")
    changed = observe_heartbeat(same, "tok", "2/10.0", "host-a", now=160.0)
    assert changed.silent_for == 0.0
    other_token = observe_heartbeat(same, "tok2", "1/5.0", "host-a", now=170.0)
    assert other_token.silent_for == 0.0


def test_a_restarted_observer_continues_the_persisted_measurement_and_never_shortens_it():
    # The trigger is re-created from its kwargs after a triggerer restart: the duration carries on.
    persisted = HeartbeatSeen.from_value(HeartbeatSeen("tok", "3/9.0", 40.0, at=1000.0, clock="host-a").to_value())
    assert observe_heartbeat(persisted, "tok", "3/9.0", "host-a", now=1070.0).silent_for == 110.0
    # Another clock (host) takes over the duration only; a clock reading behind ``at`` adds nothing.
    assert observe_heartbeat(persisted, "tok", "3/9.0", "host-b", now=9e9).silent_for == 40.0
    assert observe_heartbeat(persisted, "tok", "3/9.0", "host-a", now=500.0).silent_for == 40.0
    assert HeartbeatSeen.from_value({"token": "tok"}) is None and HeartbeatSeen.from_value("x") is None


def test_classify_uses_the_observed_silence_when_given():
    led = running(heartbeat_at=NOW - 3600)
    assert classify_ledger(led, NOW, 60, unchanged_for=5) is LedgerView.RUNNING
    assert classify_ledger(running(heartbeat_at=NOW), NOW, 60, unchanged_for=61) is LedgerView.LOST


def test_lease_ends_before_lost_and_certainly_stopped_is_past_both():
    assert driver_lease(60) < 60 < TIMING.stopped_after


# -- item 2: a redeploy after "lost" waits until the old driver has certainly stopped -------------


def test_lost_is_not_stopped_redeploy_waits_for_the_lease_to_end():
    reported = rec(failure_reported_try=1)
    lost = decide(observe(reported, running(NOW), heartbeat_unchanged_for=TIMING.lost_after + 5))
    assert lost.action is Action.WAIT_FOR_STOP  # old code: FRESH_LAUNCH at once, beside a live driver
    stopped = decide(observe(reported, running(NOW), heartbeat_unchanged_for=TIMING.stopped_after))
    assert stopped.action is Action.FRESH_LAUNCH
    gone_here = decide(observe(reported, running(NOW), heartbeat_unchanged_for=1, process=ProcessView.GONE))
    assert gone_here.action is Action.FRESH_LAUNCH  # seen exited on its own host


def test_a_fenced_running_driver_is_waited_for_until_it_stops_not_reattached_as_if_live():
    fenced = rec(phase=Phase.ABANDONED)
    assert decide(observe(fenced, running(NOW), heartbeat_unchanged_for=TIMING.lost_after + 1)).action is Action.WAIT_FOR_STOP
    assert decide(observe(fenced, running(NOW), heartbeat_unchanged_for=TIMING.stopped_after)).action is Action.FRESH_LAUNCH


def test_trigger_waiting_for_stop_wakes_only_once_the_driver_certainly_stopped():
    kw = dict(wait_for_stop=True, stopped_after=TIMING.stopped_after)
    assert not trigger_should_fire(LedgerView.LOST, NOW, 0, unchanged_for=TIMING.lost_after + 1, **kw)
    assert not trigger_should_fire(LedgerView.RUNNING, NOW, 0, unchanged_for=1, **kw)
    assert trigger_should_fire(LedgerView.LOST, NOW, 0, unchanged_for=TIMING.stopped_after, **kw)
    assert trigger_should_fire(LedgerView.LOST, NOW, 0, process_gone=True, **kw)
    assert trigger_should_fire(LedgerView.CANCELLED, NOW, 0, **kw)
    # The normal mode wakes the task on "lost" so that it reports the failure.
    assert trigger_should_fire(LedgerView.LOST, NOW, 0)
    assert trigger_should_fire(LedgerView.INVISIBLE, NOW, NOW + 100)


def test_trigger_waiting_on_a_deleted_attempt_wakes_on_its_own_count_not_on_a_clock():
    # earlier_incarnation_cleanup_wait: the count (carried on from the task's, on the triggerer's
    # own clock) decides; the deadline, a moment on the task host's clock, is a far fallback.
    kw = dict(attempt_deleted=True, stopped_after=TIMING.stopped_after)
    assert not trigger_should_fire(LedgerView.MISSING, NOW, NOW + 100, unchanged_for=TIMING.stopped_after - 1, **kw)
    assert trigger_should_fire(LedgerView.MISSING, NOW, NOW + 100, unchanged_for=TIMING.stopped_after, **kw)
    assert trigger_should_fire(LedgerView.MISSING, NOW, NOW - 1, unchanged_for=0, **kw)  # the fallback
    # Files again (a late claim): the task decides anew at once, even on a live-looking ledger.
    assert trigger_should_fire(LedgerView.RUNNING, NOW, NOW + 100, unchanged_for=0, **kw)


# -- item 1: detection instead of duplication ----------------------------------------------------


def test_an_observer_that_cannot_see_the_launch_fails_naming_state_root_and_launches_nothing():
    # The sequence: try 1 launched A on H1; try 2 on H2 finds no ledger and, on the old code,
    # fenced (marker on H2's disk) and launched B. Now the intent file it cannot see stops it.
    launched_on_h1 = rec(phase=Phase.LAUNCHED, host_id="boot-1:pidns-1", intent_on_storage=True, intent_at=NOW - 600)
    decision = decide(observe(launched_on_h1, None, intent_visible=False))
    assert decision.action is Action.FAIL and decision.rule == "state_root_not_shared"
    assert "[zeta] state_root" in decision.reason
    # The same after an earlier try fenced it (the abandoned record keeps the promise).
    fenced = launched_on_h1.with_changes(phase=Phase.ABANDONED)
    assert decide(observe(fenced, None, intent_visible=False)).action is Action.FAIL


def test_a_shared_root_with_no_ledger_still_fences_and_relaunches():
    launched = rec(phase=Phase.INTENT, intent_on_storage=True, intent_at=NOW - 600)
    assert decide(observe(launched, None, intent_visible=True)).rule == "launch_never_started"
    # Records of the old version (no intent file promised) keep the old behaviour.
    assert decide(observe(rec(phase=Phase.INTENT, intent_at=NOW - 600), None)).rule == "launch_never_started"


# -- item 6: KubernetesExecutor ---------------------------------------------------------------


def test_deferral_is_refused_only_inside_a_kubernetes_executor_pod():
    assert "deferrable=False" in deferral_refusal("KubernetesExecutor", True, in_kubernetes_pod=True)
    assert deferral_refusal("KubernetesExecutor", False, in_kubernetes_pod=True) is None
    assert deferral_refusal("CeleryExecutor", True, in_kubernetes_pod=True) is None
    assert deferral_refusal("LocalExecutor", True, in_kubernetes_pod=False) is None


# -- hosts are not hostnames; a PID without a start time is never trusted ---------------------


def test_host_id_is_boot_id_pid_namespace_and_its_init_start():
    from airflow_provider_zeta.processes import host_id, process_start_time

    with open("/proc/sys/kernel/random/boot_id") as handle:
        boot = handle.read().strip()
    init = process_start_time(1)
    assert init is not None
    assert host_id() == f"{boot}:pidns-{os.stat('/proc/self/ns/pid').st_ino}:init-{init:.0f}"


@pytest.fixture
def sleeper():
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield process
    process.kill()
    process.wait()


def test_a_handle_is_judged_only_on_its_own_host_by_id_not_by_hostname(sleeper):
    from airflow_provider_zeta.processes import ProcessHandle, handle_alive, host_id, process_start_time, this_host

    start = process_start_time(sleeper.pid)
    mine = ProcessHandle(host=this_host(), pid=sleeper.pid, start_time=start, host_id=host_id())
    assert handle_alive(mine) is True
    # Another container with the same hostname and the same pid number: not ours to judge.
    twin = ProcessHandle(host=this_host(), pid=sleeper.pid, start_time=start, host_id="other-boot:pidns-1")
    assert handle_alive(twin) is None


def test_a_pid_without_a_recorded_start_time_is_never_trusted_nor_signalled(sleeper):
    from airflow_provider_zeta.processes import ProcessHandle, handle_alive, host_id, stop_token_processes, this_host

    # Old code: trusted as "alive" (and SIGKILLed by a fence) although the pid may have been reused.
    blind = ProcessHandle(host=this_host(), pid=sleeper.pid, start_time=None, host_id=host_id())
    assert handle_alive(blind) is None
    assert stop_token_processes("no-such-token", blind, grace_s=0.1) == []
    assert sleeper.poll() is None


def test_the_longest_observed_silence_of_the_current_mark_carries_the_measurement_on():
    from airflow_provider_zeta.core.ledger import HeartbeatSeen, continue_observation

    stored = HeartbeatSeen("tok", "3/100.0", 20.0, at=1000.0, clock="worker")
    reported = HeartbeatSeen("tok", "3/100.0", 30.0, at=5.0, clock="triggerer")
    assert continue_observation(stored, reported, "tok", "3/100.0", "worker", 1000.0).silent_for == 30.0
    assert continue_observation(stored, reported, "tok", "3/100.0", "worker", 1015.0).silent_for == 35.0
    # A new mark starts a new measurement; another token's observation never counts.
    assert continue_observation(stored, reported, "tok", "4/105.0", "worker", 1020.0).silent_for == 0.0
    other = HeartbeatSeen("old", "3/100.0", 500.0, at=900.0, clock="worker")
    assert continue_observation(stored, other, "tok", "3/100.0", "worker", 1020.0).silent_for == 40.0
