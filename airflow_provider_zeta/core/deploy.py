"""Deploy decisions (G1, G6): re-attach, reuse, wait, fence, redeploy — one table, no I/O.

Theory of operation
-------------------
A deploy task runs one PySpark driver per (run, task, map index, incarnation). Every time a try of
the task starts or resumes, its adapter observes

* the latest **attempt record** any try of this task wrote to the task state store (token,
  incarnation, phase, handle, whether a failure was already reported),
* the **ledger** the driver of that token keeps on storage (missing / running / terminal),
* whether a **process** carrying the token is alive on this host (alive / gone / unknown),

and asks ``decide`` what to do. ``decide`` walks ``DEPLOY_TABLE`` top to bottom; the first row whose
condition holds names the action. Every row has a stable ``rule`` name that the adapter logs, so a
task log tells which row fired.

The protocol that makes the table safe:

1. **Intent before launch.** A new token is written to the task state store (``Phase.INTENT``)
   before the driver is launched; the driver stamps the token on its ledger, staging path and Spark
   app name. A try that died between the two leaves an intent that the next try finds.
2. **Claim/fence handshake.** A driver first writes its ledger (the claim), *then* checks for the
   token's cancel marker and exits without running user code if it is there. A coordinator that
   gives up on a token first writes the cancel marker (``Action.FENCE``), *then* re-reads the
   ledger. One of the two always sees the other, so a token that was given up never runs user
   code unseen, and a driver that did claim is waited for, not duplicated.
3. **Orphaned tries cannot write.** The execution API rejects a task-state write from a task
   instance that the scheduler has reset (its id no longer exists), so an orphan that is still
   alive can launch only tokens whose intent it wrote before the reset — which the new try reads.
   Records are kept per try (one key each), so an orphan can never overwrite the new try's record.
4. **A failure is reported once, then redeployed.** A failed or lost driver fails the try that sees
   it first (``REPORT_FAILURE``, retries are Airflow's policy); a later try redeploys with a new
   token. A higher incarnation (the run or task was cleared) never reuses an older result.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Callable

from airflow_provider_zeta.core.ledger import AttemptRecord, CorruptState, Ledger, LedgerStatus, LedgerView, Phase


class Action(str, Enum):
    FRESH_LAUNCH = "fresh_launch"  # write an intent with a new token, then launch
    REATTACH = "reattach"  # defer on the token's running driver
    WAIT_FOR_LAUNCH = "wait_for_launch"  # intent stored, driver not visible yet: wait, bounded
    REUSE_RESULT = "reuse_result"  # the token's driver succeeded: return its result
    REPORT_FAILURE = "report_failure"  # fail this try with the driver's error (a retry redeploys)
    FENCE = "fence"  # write the token's cancel marker, mark the record abandoned, decide again
    FAIL = "fail"  # state that cannot be trusted or a contradiction: fail, launch nothing


class ProcessView(str, Enum):
    ALIVE = "alive"  # a process carrying the token runs on this host
    GONE = "gone"  # the recorded driver process is known to have exited
    UNKNOWN = "unknown"  # no handle on this host: only the ledger can tell


#: A launch whose process lives but writes no ledger for this many launch graces is stuck (say,
#: spark-submit hanging in dependency resolution): it is fenced rather than waited for forever.
LAUNCH_STUCK_FACTOR = 5


@dataclass(frozen=True)
class Timing:
    lost_after: float  # heartbeat age after which a running ledger counts as lost
    launch_grace: float  # how long an intent without a ledger may be a launch in progress


@dataclass(frozen=True)
class DeployObservation:
    now: float
    incarnation: int
    try_number: int
    record: AttemptRecord | CorruptState | None
    ledger: Ledger | CorruptState | None
    process: ProcessView
    timing: Timing
    max_tries: int | None = None  # the task instance's max_tries now

    # -- derived facts the table's conditions read
    @property
    def task_cleared_since_record(self) -> bool:
        """This task (not merely another task of its run) was cleared after the record was made."""
        record = self.record
        assert isinstance(record, AttemptRecord)
        if record.max_tries is not None and self.max_tries is not None:
            return record.max_tries < self.max_tries
        return record.incarnation < self.incarnation  # records without max_tries: run-wide signal
    @property
    def heartbeat_stale(self) -> bool:
        return isinstance(self.ledger, Ledger) and self.ledger.heartbeat_age(self.now) > self.timing.lost_after

    @property
    def intent_age(self) -> float:
        assert isinstance(self.record, AttemptRecord)
        return self.now - self.record.intent_at

    @property
    def failure_already_reported(self) -> bool:
        reported = self.record.failure_reported_try if isinstance(self.record, AttemptRecord) else None
        return reported is not None and reported < self.try_number


@dataclass(frozen=True)
class Decision:
    action: Action
    rule: str
    reason: str
    token: str | None = None  # the token the action is about (None for a fresh launch)
    cancel_token: str | None = None  # an older token to fence before a fresh launch


@dataclass(frozen=True)
class Row:
    rule: str
    when: Callable[[DeployObservation], bool]
    then: Callable[[DeployObservation], Decision]


def _rec(o: DeployObservation) -> AttemptRecord:
    assert isinstance(o.record, AttemptRecord)
    return o.record


def _led(o: DeployObservation) -> Ledger:
    assert isinstance(o.ledger, Ledger)
    return o.ledger


def _status(o: DeployObservation) -> LedgerStatus | None:
    return o.ledger.status if isinstance(o.ledger, Ledger) else None


def _same_incarnation(o: DeployObservation) -> bool:
    return isinstance(o.record, AttemptRecord) and o.record.incarnation == o.incarnation


def _failed_or_lost(o: DeployObservation) -> bool:
    status = _status(o)
    if status in (LedgerStatus.FAILED, LedgerStatus.CANCELLED):
        return True
    if status is LedgerStatus.RUNNING:
        return o.heartbeat_stale or o.process is ProcessView.GONE
    return False


def _failure_text(o: DeployObservation) -> str:
    led = _led(o)
    if led.status is LedgerStatus.RUNNING:
        why = "its process is gone" if o.process is ProcessView.GONE else (
            f"its last heartbeat is {led.heartbeat_age(o.now):.0f}s old (lost after {o.timing.lost_after:.0f}s)"
        )
        return f"driver {led.token} is lost: {why}"
    return f"driver {led.token} ended {led.status.value}" + (f": {led.error}" if led.error else "")


def _decision(action: Action, rule: str, reason: str, token: str | None = None, cancel: str | None = None):
    return Decision(action=action, rule=rule, reason=reason, token=token, cancel_token=cancel)


#: The decision table. Order matters: the first matching row wins.
DEPLOY_TABLE: tuple[Row, ...] = (
    # -- state that cannot be trusted: fail loudly, never launch on a guess
    Row(
        "corrupt_record",
        lambda o: isinstance(o.record, CorruptState),
        lambda o: _decision(Action.FAIL, "corrupt_record", str(o.record)),
    ),
    Row(
        "fresh_submit",
        lambda o: o.record is None,
        lambda o: _decision(Action.FRESH_LAUNCH, "fresh_submit", "no attempt recorded for this task"),
    ),
    Row(
        "future_incarnation",
        lambda o: _rec(o).incarnation > o.incarnation,
        lambda o: _decision(
            Action.FAIL,
            "future_incarnation",
            f"attempt {_rec(o).token} was recorded by incarnation {_rec(o).incarnation}, newer than this "
            f"task's incarnation {o.incarnation}: the run was cleared while this try ran; stopping.",
        ),
    ),
    # -- the user cleared this task (alone or with its run): never reuse, stop the old driver.
    #    A clear of *other* tasks of the run raises the run's clear_number too, but must not make
    #    this task re-run its job: only a rise of this task's own max_tries counts.
    Row(
        "new_incarnation",
        lambda o: o.task_cleared_since_record,
        lambda o: _decision(
            Action.FRESH_LAUNCH,
            "new_incarnation",
            f"this task was cleared (incarnation {o.incarnation}, max_tries {_rec(o).max_tries} -> {o.max_tries}): "
            f"attempt {_rec(o).token} is not reused and is asked to stop",
            cancel=_rec(o).token,
        ),
    ),
    Row(
        "corrupt_ledger",
        lambda o: isinstance(o.ledger, CorruptState),
        lambda o: _decision(Action.FAIL, "corrupt_ledger", str(o.ledger), token=_rec(o).token),
    ),
    # -- a finished driver is reused, even one we had given up on: it ran, its result stands
    Row(
        "already_succeeded",
        lambda o: _status(o) is LedgerStatus.SUCCEEDED,
        lambda o: _decision(
            Action.REUSE_RESULT, "already_succeeded", f"driver {_led(o).token} already succeeded", token=_led(o).token
        ),
    ),
    # -- a token we fenced: once its driver is provably stopped or never started, launch anew
    Row(
        "fenced_driver_stopped",
        lambda o: _rec(o).phase is Phase.ABANDONED and _failed_or_lost(o),
        lambda o: _decision(
            Action.FRESH_LAUNCH, "fenced_driver_stopped", f"fenced attempt {_rec(o).token} stopped: {_failure_text(o)}"
        ),
    ),
    Row(
        "fenced_never_started",
        lambda o: _rec(o).phase is Phase.ABANDONED and o.ledger is None and o.process is not ProcessView.ALIVE,
        lambda o: _decision(
            Action.FRESH_LAUNCH,
            "fenced_never_started",
            f"attempt {_rec(o).token} never claimed its ledger and is fenced: it can no longer run",
        ),
    ),
    Row(
        "fenced_still_running",
        lambda o: _rec(o).phase is Phase.ABANDONED,
        lambda o: _decision(
            Action.WAIT_FOR_LAUNCH if o.ledger is None else Action.REATTACH,
            "fenced_still_running",
            f"attempt {_rec(o).token} was fenced but its driver is still up; waiting for it to stop",
            token=_rec(o).token,
        ),
    ),
    # -- a driver that failed, was cancelled, or is lost (G6: never shown as running)
    Row(
        "terminal_resubmit",
        lambda o: _failed_or_lost(o) and o.failure_already_reported,
        lambda o: _decision(
            Action.FRESH_LAUNCH,
            "terminal_resubmit",
            f"{_failure_text(o)}; reported by try {_rec(o).failure_reported_try}, redeploying with a new token",
            cancel=_led(o).token,
        ),
    ),
    Row(
        "driver_failed",
        _failed_or_lost,
        lambda o: _decision(Action.REPORT_FAILURE, "driver_failed", _failure_text(o), token=_led(o).token),
    ),
    # -- a live driver: re-attach (the Zeta fix: never deploy beside a running task)
    Row(
        "reconnect",
        lambda o: _status(o) is LedgerStatus.RUNNING,
        lambda o: _decision(
            Action.REATTACH,
            "reconnect",
            f"driver {_led(o).token} is running (heartbeat {_led(o).heartbeat_age(o.now):.0f}s ago)",
            token=_led(o).token,
        ),
    ),
    # -- no ledger yet
    Row(
        "launch_stuck",
        lambda o: o.process is ProcessView.ALIVE and o.intent_age > LAUNCH_STUCK_FACTOR * o.timing.launch_grace,
        lambda o: _decision(
            Action.FENCE,
            "launch_stuck",
            f"a process carrying token {_rec(o).token} has run {o.intent_age:.0f}s without writing its ledger "
            f"(more than {LAUNCH_STUCK_FACTOR} x launch_grace); fencing it and stopping its processes",
            token=_rec(o).token,
        ),
    ),
    Row(
        "launch_in_progress",
        lambda o: o.process is ProcessView.ALIVE,
        lambda o: _decision(
            Action.WAIT_FOR_LAUNCH,
            "launch_in_progress",
            f"a process carrying token {_rec(o).token} is starting",
            token=_rec(o).token,
        ),
    ),
    Row(
        "driver_exited_before_start",
        lambda o: _rec(o).phase is Phase.LAUNCHED and o.process is ProcessView.GONE and not o.failure_already_reported,
        lambda o: _decision(
            Action.REPORT_FAILURE,
            "driver_exited_before_start",
            f"driver {_rec(o).token} exited before it wrote its ledger (spark-submit failed to start it)",
            token=_rec(o).token,
        ),
    ),
    Row(
        "intent_recent",
        lambda o: o.intent_age < o.timing.launch_grace and o.process is not ProcessView.GONE,
        lambda o: _decision(
            Action.WAIT_FOR_LAUNCH,
            "intent_recent",
            f"attempt {_rec(o).token} was chosen {o.intent_age:.0f}s ago; its driver may still be starting",
            token=_rec(o).token,
        ),
    ),
    Row(
        "launch_never_started",
        lambda o: True,
        lambda o: _decision(
            Action.FENCE,
            "launch_never_started",
            f"attempt {_rec(o).token} has no ledger {o.intent_age:.0f}s after its intent; fencing it",
            token=_rec(o).token,
        ),
    ),
)


def decide(observation: DeployObservation) -> Decision:
    for row in DEPLOY_TABLE:
        if row.when(observation):
            return row.then(observation)
    raise AssertionError("the deploy table ends with a catch-all row")  # pragma: no cover


def latest_record(records: dict[int, AttemptRecord | CorruptState | None]) -> AttemptRecord | CorruptState | None:
    """The record of the highest try that wrote one (records are keyed by try number)."""
    for try_number in sorted(records, reverse=True):
        if records[try_number] is not None:
            return records[try_number]
    return None


def launch_wait_deadline(intent_at: float, launch_grace: float, now: float, poll_interval: float) -> float:
    """Until when a missing ledger may be waited for before the task is woken to decide.

    The launch grace counts from the intent; never sooner than one poll from now, so a grace that
    is already spent (the task decides ``launch_in_progress`` again) cannot make it spin.
    """
    return max(intent_at + launch_grace, now + poll_interval)


def trigger_should_fire(view: LedgerView, now: float, missing_deadline: float) -> bool:
    """The driver trigger's rule: wake the task for anything but a live driver or a young launch.

    A running ledger keeps the trigger waiting; a terminal, lost or unreadable one wakes the task,
    which decides with ``decide``. A missing ledger wakes it only after ``missing_deadline`` (the
    launch grace), so the task can fence a launch that never started.
    """
    if view is LedgerView.RUNNING:
        return False
    if view is LedgerView.MISSING:
        return now >= missing_deadline
    return True


def cancel_on_trigger_kill(task_state: str | None) -> bool:
    """Should a killed driver trigger stop its driver? Only if its task no longer waits on it.

    Airflow calls a trigger's ``on_kill`` for user actions (mark failed/success, clear) — and also
    when a recovered triggerer finds its trigger was handed to another triggerer meanwhile. In the
    second case the task is still ``deferred`` and its driver must live on. When the state cannot
    be read (``None``), keep the driver: a stray driver is stopped later (a new incarnation's
    deploy or the sweep), while a wrong cancel would make the job run twice. A cleared task
    instance, which has no state yet, is passed as ``"none"``.
    """
    return task_state is not None and task_state != "deferred"
