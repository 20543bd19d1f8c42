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
   token. A higher incarnation (the run or task was cleared) never reuses an older result. A try
   that sees the driver end says so in the record (``driver_ended``); once this task is cleared,
   a later incarnation launches at once (``earlier_incarnation_ended``), even when the run's
   cleanup has deleted the old attempt (ledger and intent file): that is no sign of an unshared
   state root. When no try saw the driver end (the task was marked failed or success while it
   ran, or it was lost) and its attempt is gone, a try on the launching host — which checks the
   driver's process by pid and start time and sees the same files — takes it as cleaned up and
   launches (``earlier_incarnation_cleaned_up``). A try on another host cannot check that
   process, but it can tell a deleted attempt from an unshared state root by the root's identity
   file (``zeta-root-id``, noted in the record at launch): on the same root, the attempt was
   deleted, and a driver whose attempt is deleted stops itself (its next ledger write finds the
   directory gone; a hung write ends with its lease; a driver still starting finds its intent file
   gone and never claims). That try waits, writing nothing, until the attempt has been seen gone for
   ``Timing.stopped_after`` — the same wait as for a silent heartbeat, measured the same way — and
   then launches (``earlier_incarnation_cleaned_up_elsewhere``).
5. **Liveness by observation, never by comparing clocks.** The observer (task try or trigger)
   keeps the driver's heartbeat *mark* and how long it has seen it unchanged — a duration,
   measured on its own monotonic clock (``core.ledger.HeartbeatSeen``, persisted in task state and
   trigger kwargs and events). Observers hand one another only that duration; one counts on from a
   moment another took only if both read the same clock (same boot and time namespace), so no
   host's timestamp is ever subtracted from another host's, and a skew between Airflow hosts
   changes nothing. The time between hand-over and take-over is not counted: a wait can stretch,
   never shorten, so an observer with nothing carried over judges "lost" only after seeing the
   mark unchanged for ``lost_after`` itself. A running driver is
   *lost* once the mark has not changed for ``lost_after``; it is *certainly stopped* — and may be
   replaced — only once that silence reaches ``Timing.stopped_after``: a driver that cannot renew
   its heartbeat within its lease (``core.ledger.driver_lease``, shorter than ``lost_after``) stops
   itself, so at most one driver of a task key is alive at any moment. A terminal ledger, or a
   process seen gone *on its own host*, is stopped at once.
6. **A job timeout counts from the intent.** With ``Timing.job_timeout`` set, a driver that may
   still run (running ledger, or no ledger and no process seen gone) past ``job_timeout`` after
   its intent is stopped and the try fails (``job_timeout``), naming the task and the timeout. The
   elapsed time is ``now - record.intent_at``: the intent time is durable (task state store) and
   was taken by the launching task's clock, never the driver's, so a retry, an orphan reset or a
   triggerer restart does not reset it. The trigger wakes the task at ``job_deadline`` (an
   absolute time in its kwargs); a skew between the worker's and the triggerer's clocks shifts the
   moment by the skew, as for heartbeats.
7. **Detection instead of duplication across hosts.** The launching try writes an intent file to
   the state root before its intent record. An observer that finds the record's promise but not
   the file does not share the launching side's ``[zeta] state_root``: it fails the try and
   launches nothing (``state_root_not_shared``), instead of reading "never started" and launching
   a second driver. Process handles are checked only on the host that launched them, identified by
   boot id + PID namespace + its init's start time (``processes.host_id``), never by hostname.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from airflow_provider_zeta.core.events import REPORT_DEFERRAL_FIELD
from airflow_provider_zeta.core.ledger import (
    STOPPED_AFTER_FACTOR,
    AttemptRecord,
    CorruptState,
    Ledger,
    LedgerStatus,
    LedgerView,
    Phase,
)


class Action(str, Enum):
    """What the deploy task does next (``decide``)."""

    FRESH_LAUNCH = "fresh_launch"  # write an intent with a new token, then launch
    REATTACH = "reattach"  # defer on the token's running driver
    WAIT_FOR_LAUNCH = "wait_for_launch"  # intent stored, driver not visible yet: wait, bounded
    REUSE_RESULT = "reuse_result"  # the token's driver succeeded: return its result
    REPORT_FAILURE = "report_failure"  # stop the driver, fail this try with its error (a retry redeploys)
    FENCE = "fence"  # write the token's cancel marker, mark the record abandoned, decide again
    WAIT_FOR_STOP = "wait_for_stop"  # the driver is given up on but not certainly stopped: wait, bounded
    # the attempt's files were deleted (its run's cleanup): wait, writing nothing there, until a
    # driver it may still have has certainly stopped itself
    WAIT_FOR_SELF_STOP = "wait_for_self_stop"
    FAIL = "fail"  # state that cannot be trusted or a contradiction: stop the token's driver, fail, launch nothing


class ProcessView(str, Enum):
    """What this host can tell of the recorded driver process."""

    ALIVE = "alive"  # a process carrying the token runs on this host
    GONE = "gone"  # the recorded driver process is known to have exited (checked on its own host)
    UNKNOWN = "unknown"  # no handle on this host (or no recorded start time): only the ledger can tell


#: A launch whose process lives but writes no ledger for this many launch graces is stuck (say,
#: spark-submit hanging in dependency resolution): it is fenced rather than waited for forever.
LAUNCH_STUCK_FACTOR = 5


@dataclass(frozen=True)
class Timing:
    """The durations, in seconds, a deploy decision is made with."""

    lost_after: float  # observed heartbeat silence after which a running ledger counts as lost
    launch_grace: float  # how long an intent without a ledger may be a launch in progress
    job_timeout: float | None = None  # how long a driver may run, counted from its intent (None: no limit)

    @property
    def stopped_after(self) -> float:
        """Observed heartbeat silence after which the driver has certainly stopped itself."""
        return STOPPED_AFTER_FACTOR * self.lost_after


@dataclass(frozen=True)
class DeployObservation:
    """Everything ``decide`` looks at: the task's try, its attempt record, the driver's ledger and process, and the timing."""

    now: float
    incarnation: int
    try_number: int
    record: AttemptRecord | CorruptState | None
    ledger: Ledger | CorruptState | None
    process: ProcessView
    timing: Timing
    max_tries: int | None = None  # the task instance's max_tries now (task_cleared_since_record)
    # How long the ledger's heartbeat mark has been seen unchanged, a duration measured by the
    # observers' own clocks (``core.ledger.HeartbeatSeen.silent_for``); 0 for a mark seen first now.
    heartbeat_unchanged_for: float = 0.0
    # Whether the attempt's intent file is visible on this observer's state root (None: not read).
    intent_visible: bool | None = None
    # The trigger that woke this try (another observer, in the triggerer) could not see the
    # attempt's intent file nor its ledger (its event's view was ``invisible``).
    trigger_saw_nothing: bool = False
    # How the user knows the task ("dag_id.task_id"), for messages that must name it.
    task: str | None = None
    # The identity of the state root as this observer sees it (storage.state_root_identity; read
    # only when the record's attempt has left no file; None: not read, absent or unreadable).
    state_root_id: str | None = None
    # How long the record's attempt has been seen deleted (``attempt_deleted``), by the observers'
    # own clocks: the heartbeat measurement (``core.ledger.HeartbeatSeen``) with the mark
    # ``core.ledger.ATTEMPT_DELETED_MARK``, handed between tries and triggers as a duration.
    deleted_for: float = 0.0
    # The record's token is named by what this run's pipeline published or verified (read only when
    # nothing of the attempt is visible): the return value of the completed point that published
    # this source from it, or the ready set of a ready-to-close sensor waiting on this task. Both
    # were checked against the token's ledger reading succeeded, so its driver ended. Stands in for
    # the record's ``driver_ended`` when the driver trigger ended the task from the triggerer, where
    # it cannot write the task state store (``trigger_reports_success``).
    end_reported_downstream: bool = False
    # Tokens of this task key's attempts whose driver claimed a ledger on the state root, read
    # only when no try's record exists: records that expired or were deleted, not "nothing ran".
    claimed_without_record: tuple[str, ...] = ()

    # -- derived facts the table's conditions read
    @property
    def attempt_deleted(self) -> bool:
        """Nothing is left of the record's attempt on the very state root it was launched to.

        No ledger and no intent file, while the root's identity file reads what the launch
        recorded: the files were deleted (the run's cleanup), not written to storage this observer
        does not share, nor hidden by an unmounted mountpoint.
        """
        record = self.record
        return (
            isinstance(record, AttemptRecord)
            and record.intent_on_storage
            and self.ledger is None
            and self.intent_visible is False
            and record.state_root_id is not None
            and self.state_root_id == record.state_root_id
        )

    @property
    def task_cleared_since_record(self) -> bool:
        """This task was cleared after an earlier try made the record.

        The run's ``clear_number`` (the incarnation) rises when *any* task of the run is cleared,
        and a retry or an orphan reset raises ``try_number`` too, so those two alone would make a
        retry after a clear elsewhere in the run re-run a finished job (G1). Airflow raises this
        task's ``max_tries`` (to ``try_number + retries``) on every clear of it that is not
        RUNNING — deferred, succeeded, failed, up for retry — and never on a retry or an orphan
        reset: that is the signal that *this* task was asked to re-run. A record this very try
        wrote belongs to this try's incarnation. When both are known, ``max_tries`` alone
        decides: a REST clear with ``reset_dag_runs`` false raises it but not ``clear_number``
        (``core.incarnation``). When either is unknown (a record of an older version), the
        run-level signals decide, as before.

        A clear of this task while it is RUNNING is seen too: Airflow sets it RESTARTING, and when
        the executor reports the killed try the scheduler raises ``max_tries`` as for any clear.
        Not detectable: such a try that its executor never reports (its worker died with it), which
        the scheduler's heartbeat timeout retries without raising ``max_tries`` (or fails, with no
        retries left); the next try then re-attaches to, or reuses, the earlier driver
        (docs/operators/zeta_spark_job.md).
        """
        record = self.record
        assert isinstance(record, AttemptRecord)
        if record.try_number >= self.try_number:
            return False
        if record.max_tries is None or self.max_tries is None:
            return record.incarnation < self.incarnation
        return self.max_tries > record.max_tries

    @property
    def heartbeat_stale(self) -> bool:
        """The ledger's heartbeat mark has been seen unchanged for longer than ``lost_after``."""
        return isinstance(self.ledger, Ledger) and self.heartbeat_unchanged_for > self.timing.lost_after

    @property
    def driver_certainly_stopped(self) -> bool:
        """The driver cannot be running: terminal ledger, process gone on its own host, or silent past its lease."""
        status = _status(self)
        if status is None:
            return False
        if status.terminal or self.process is ProcessView.GONE:
            return True
        return self.heartbeat_unchanged_for >= self.timing.stopped_after

    @property
    def intent_age(self) -> float:
        """Seconds since the record's intent was written (there must be a record)."""
        assert isinstance(self.record, AttemptRecord)
        return self.now - self.record.intent_at

    @property
    def timed_out(self) -> bool:
        """The record's driver may still run and its intent is older than ``job_timeout``."""
        limit = self.timing.job_timeout
        if limit is None or not isinstance(self.record, AttemptRecord) or self.record.phase is Phase.ABANDONED:
            return False
        status = _status(self)
        may_run = status is LedgerStatus.RUNNING or (self.ledger is None and self.process is not ProcessView.GONE)
        return may_run and self.intent_age >= limit

    @property
    def failure_already_reported(self) -> bool:
        """An earlier try already reported the driver's failure."""
        reported = self.record.failure_reported_try if isinstance(self.record, AttemptRecord) else None
        return reported is not None and reported < self.try_number


@dataclass(frozen=True)
class Decision:
    """``decide``'s answer: the action, the rule that chose it and why, and the tokens it is about."""

    action: Action
    rule: str
    reason: str
    token: str | None = None  # the token the action is about (None for a fresh launch)
    cancel_token: str | None = None  # an older token to fence before a fresh launch


@dataclass(frozen=True)
class Row:
    """One row of the deploy table: its rule, when it applies and the decision it makes."""

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


TERMINAL_STATUSES = frozenset(status for status in LedgerStatus if status.terminal)


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
            f"its heartbeat has not changed for {o.heartbeat_unchanged_for:.0f}s by this observer's clock "
            f"(lost after {o.timing.lost_after:.0f}s)"
        )
        return f"driver {led.token} is lost: {why}"
    # The driver's own error text is job-written and may hold what it printed: it goes to the task
    # log only (the operator logs it there, masked); a decision's reason is read in exceptions,
    # e-mails, callbacks and the component's own output.
    return f"driver {led.token} ended {led.status.value}" + ("; its error is in the task log of this try" if led.error else "")


def _stop_text(o: DeployObservation) -> str:
    led = _led(o)
    if led.status.terminal:
        return f"its ledger is {led.status.value}"
    if o.process is ProcessView.GONE:
        return "its process is gone"
    return f"its heartbeat has been silent for {o.heartbeat_unchanged_for:.0f}s (past its lease)"


def _timeout_text(o: DeployObservation) -> str:
    limit = o.timing.job_timeout or 0.0
    started = "running" if isinstance(o.ledger, Ledger) else "still starting (no ledger yet)"
    return (
        f"task {o.task or '?'}: driver {_rec(o).token} exceeded its job_timeout of {_seconds_text(limit)}: "
        f"{started} {o.intent_age:.0f}s after its launch intent (by the launching task's clock, kept in "
        "the task state store)"
    )


def _seconds_text(seconds: float) -> str:
    from datetime import timedelta

    return f"{seconds:g}s ({timedelta(seconds=seconds)})"


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
    # -- no record, yet a driver of this task claimed its ledger: the task's state was lost (expired
    #    or deleted), not "never launched". A fresh launch could run beside that driver.
    Row(
        "record_missing",
        lambda o: o.record is None and bool(o.claimed_without_record),
        lambda o: _decision(
            Action.FAIL,
            "record_missing",
            f"no attempt record in the task state store, yet attempt(s) {', '.join(o.claimed_without_record[:5])} "
            "of this task claimed a ledger on the state root: the task's state was deleted or expired, so "
            "whether such a driver still runs cannot be told from it. Stop any running driver (write the "
            "attempt's cancel marker), then delete those attempt directories to let the task launch afresh.",
        ),
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
    # -- the launching side wrote an intent file this observer cannot see: the state root is not
    #    shared. "No ledger" would read as "never started" and launch a second driver; refuse.
    #    Not for an attempt of an older incarnation of this task: the delayed cleanup deletes a
    #    finished run's attempts (intent file included), and reprocessing the run clears the task.
    Row(
        "state_root_not_shared",
        lambda o: _rec(o).intent_on_storage and o.ledger is None and o.intent_visible is False
        and not o.task_cleared_since_record,
        lambda o: _decision(
            Action.FAIL,
            "state_root_not_shared",
            f"attempt {_rec(o).token} was launched by host {_rec(o).host or '?'} ({_rec(o).host_id or 'unknown id'}), "
            f"which wrote its intent file to [zeta] state_root, but this observer cannot see that file: "
            "[zeta] state_root is not shared storage between the workers, the triggerer and the drivers' "
            "hosts. Point [zeta] state_root at one shared location (NFS/HDFS path or object store URL) "
            "on every component; launching nothing."
            + (
                " (After a clear, this is also what an attempt looks like whose files the run's cleanup deleted "
                "when no try saw its driver end, if this state root does not read the identity (zeta-root-id) "
                "the launch recorded: a root moved without that file, or an attempt launched by an older "
                f"version. Then make sure driver {_rec(o).token} no longer runs on host {_rec(o).host or '?'}, "
                "delete this task instance's task state store (REST API: DELETE "
                ".../taskInstances/<task_id>/state-store) and clear the task again.)"
                if _rec(o).phase is Phase.ABANDONED
                else ""
            ),
            token=_rec(o).token,
        ),
    ),
    Row(
        "triggerer_cannot_see_state_root",
        lambda o: o.trigger_saw_nothing,
        lambda o: _decision(
            Action.FAIL,
            "triggerer_cannot_see_state_root",
            f"the triggerer found neither the ledger nor the intent file of attempt {_rec(o).token} that this "
            "task wrote: [zeta] state_root is not shared storage between the workers, the triggerer and the "
            "drivers' hosts. Point [zeta] state_root at one shared location (NFS/HDFS path or object store "
            "URL) on every component; launching nothing.",
            token=_rec(o).token,
        ),
    ),
    # -- this task was cleared (alone or with its run) since an earlier try saw the token's driver
    #    end: nothing of it can run any more, and its files may be gone with the run's cleanup (a
    #    clear or a reprocessing backfill after the retention window). Launch anew, fence nothing:
    #    a cancel marker would recreate a deleted attempt directory that no cleanup records.
    Row(
        "earlier_incarnation_ended",
        lambda o: o.task_cleared_since_record
        and (_rec(o).driver_ended or o.end_reported_downstream or _status(o) in TERMINAL_STATUSES),
        lambda o: _decision(
            Action.FRESH_LAUNCH,
            "earlier_incarnation_ended",
            f"this task was cleared (incarnation {_rec(o).incarnation} -> {o.incarnation}): attempt "
            f"{_rec(o).token} ended in its incarnation ("
            + (
                f"seen by try {_rec(o).try_number}"
                if _rec(o).driver_ended
                else f"its ledger is {_led(o).status.value}"
                if _status(o) in TERMINAL_STATUSES
                else "the run's completed point or ready set names it"
            )
            + ") and is not reused; launching a new one",
        ),
    ),
    # -- this task was cleared since an earlier try chose the token, no try saw its driver end (the
    #    task was marked failed or success while the driver ran, or the driver was lost), and
    #    nothing of the attempt is left on the state root it was launched to (``attempt_deleted``:
    #    no ledger, no intent file, the root's identity file reads the same, so not an unshared
    #    root nor an unmounted mountpoint): the run's cleanup deleted it. A cancel marker would only
    #    re-create the deleted directory, so none is written. On the host that launched it, its
    #    process is checked (pid and start time): gone, launch at once.
    Row(
        "earlier_incarnation_cleaned_up",
        lambda o: o.task_cleared_since_record and o.attempt_deleted and o.process is ProcessView.GONE,
        lambda o: _decision(
            Action.FRESH_LAUNCH,
            "earlier_incarnation_cleaned_up",
            f"this task was cleared (incarnation {_rec(o).incarnation} -> {o.incarnation}): nothing is left "
            f"of attempt {_rec(o).token} (the run's cleanup deleted it) and its driver process is gone on "
            "this host, where it was launched; launching a new one",
        ),
    ),
    #    On another host the process cannot be checked, but a driver whose attempt was deleted stops
    #    itself within its lease: launch once the attempt has been seen deleted for stopped_after
    #    (measured like a silent heartbeat), and wait until then.
    Row(
        "earlier_incarnation_cleaned_up_elsewhere",
        lambda o: o.task_cleared_since_record
        and o.attempt_deleted
        and o.process is not ProcessView.ALIVE
        and o.deleted_for >= o.timing.stopped_after,
        lambda o: _decision(
            Action.FRESH_LAUNCH,
            "earlier_incarnation_cleaned_up_elsewhere",
            f"this task was cleared (incarnation {_rec(o).incarnation} -> {o.incarnation}): nothing has been "
            f"left of attempt {_rec(o).token} for {o.deleted_for:.0f}s (the run's cleanup deleted it; the state "
            "root's identity is the one it was launched to), so a driver it had has stopped itself; launching "
            "a new one",
        ),
    ),
    Row(
        "earlier_incarnation_cleanup_wait",
        lambda o: o.task_cleared_since_record and o.attempt_deleted and o.process is not ProcessView.ALIVE,
        lambda o: _decision(
            Action.WAIT_FOR_SELF_STOP,
            "earlier_incarnation_cleanup_wait",
            f"this task was cleared (incarnation {_rec(o).incarnation} -> {o.incarnation}): nothing is left of "
            f"attempt {_rec(o).token} (the run's cleanup deleted it), launched on host {_rec(o).host or '?'}, "
            "whose process this host cannot check; a driver whose attempt is deleted stops itself: waiting "
            f"until it has been seen gone for {o.timing.stopped_after:.0f}s (seen so far: {o.deleted_for:.0f}s), "
            "writing nothing",
            token=_rec(o).token,
        ),
    ),
    # -- this task was cleared (alone or with its run) since an earlier try chose the token: never
    #    reuse it; fence it first, and launch only once it has certainly stopped (fenced rows).
    Row(
        "new_incarnation",
        lambda o: o.task_cleared_since_record,
        lambda o: _decision(
            Action.FENCE,
            "new_incarnation",
            f"this task was cleared (incarnation {_rec(o).incarnation} -> {o.incarnation}): attempt "
            f"{_rec(o).token} is not reused; fencing it, a new one starts once it has stopped",
            token=_rec(o).token,
        ),
    ),
    Row(
        "corrupt_ledger",
        lambda o: isinstance(o.ledger, CorruptState),
        # What is wrong may quote the job-written file: it goes to the task log only (the operator).
        lambda o: _decision(
            Action.FAIL,
            "corrupt_ledger",
            f"the driver ledger of attempt {_rec(o).token} cannot be trusted; what is wrong with it is in the task log of this try",
            token=_rec(o).token,
        ),
    ),
    # -- a finished driver of this incarnation is reused, even one we had given up on: it ran, its
    #    result stands. One launched for an older incarnation (fenced by new_incarnation) is not.
    Row(
        "already_succeeded",
        lambda o: _status(o) is LedgerStatus.SUCCEEDED and _led(o).incarnation in (None, _rec(o).incarnation),
        lambda o: _decision(
            Action.REUSE_RESULT, "already_succeeded", f"driver {_led(o).token} already succeeded", token=_led(o).token
        ),
    ),
    # -- a token we fenced: once its driver is provably stopped or never started, launch anew
    Row(
        "fenced_driver_stopped",
        lambda o: _rec(o).phase is Phase.ABANDONED and o.driver_certainly_stopped,
        lambda o: _decision(
            Action.FRESH_LAUNCH, "fenced_driver_stopped", f"fenced attempt {_rec(o).token} stopped: {_stop_text(o)}"
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
            Action.WAIT_FOR_LAUNCH if o.ledger is None else Action.WAIT_FOR_STOP,
            "fenced_still_running",
            f"attempt {_rec(o).token} was fenced but its driver may still be up; waiting until it has "
            f"certainly stopped (terminal ledger, or heartbeat silent for {o.timing.stopped_after:.0f}s)",
            token=_rec(o).token,
        ),
    ),
    # -- a driver that failed, was cancelled, or is lost (G6: never shown as running). A lost one is
    #    replaced only once it has certainly stopped: "lost" is not "stopped".
    Row(
        "terminal_resubmit",
        lambda o: _failed_or_lost(o) and o.failure_already_reported and o.driver_certainly_stopped,
        lambda o: _decision(
            Action.FRESH_LAUNCH,
            "terminal_resubmit",
            f"{_failure_text(o)}; reported by try {_rec(o).failure_reported_try}, redeploying with a new token",
            cancel=_led(o).token,
        ),
    ),
    Row(
        "lost_driver_not_yet_stopped",
        lambda o: _failed_or_lost(o) and o.failure_already_reported,
        lambda o: _decision(
            Action.WAIT_FOR_STOP,
            "lost_driver_not_yet_stopped",
            f"{_failure_text(o)}; it stops itself once its lease ends: waiting until its heartbeat has "
            f"been silent for {o.timing.stopped_after:.0f}s before redeploying",
            token=_led(o).token,
        ),
    ),
    Row(
        "driver_failed",
        _failed_or_lost,
        lambda o: _decision(Action.REPORT_FAILURE, "driver_failed", _failure_text(o), token=_led(o).token),
    ),
    # -- a driver that may still run past its job_timeout (counted from the durable intent time):
    #    stop it and fail the try; a later try that finds it reported fences it (the fenced rows
    #    then wait until it has certainly stopped before anything is launched again).
    Row(
        "job_timeout",
        lambda o: o.timed_out and not o.failure_already_reported,
        lambda o: _decision(
            Action.REPORT_FAILURE, "job_timeout", _timeout_text(o) + "; stopping it", token=_rec(o).token
        ),
    ),
    Row(
        "job_timeout_reported",
        lambda o: o.timed_out,
        lambda o: _decision(
            Action.FENCE,
            "job_timeout_reported",
            _timeout_text(o) + f"; reported by try {_rec(o).failure_reported_try}, fencing it",
            token=_rec(o).token,
        ),
    ),
    # -- a live driver: re-attach (the Zeta fix: never deploy beside a running task)
    Row(
        "reconnect",
        lambda o: _status(o) is LedgerStatus.RUNNING,
        lambda o: _decision(
            Action.REATTACH,
            "reconnect",
            f"driver {_led(o).token} is running (heartbeat unchanged for {o.heartbeat_unchanged_for:.0f}s)",
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


def stop_driver_on_failure(try_number: int, max_tries: int | None) -> bool:
    """A try fails after it launched (or re-attached to) a driver: stop it? (``zeta.deploy.failure_stop``)

    With a retry left, the next try owns the driver through the durable intent record and
    re-attaches to it (stopping it would turn a passing hiccup into a failed driver and burn that
    retry). With none left, nothing would ever re-attach: stop it now rather than leave it to the
    run's cleanup or the sweep. An unknown ``max_tries`` counts as no retry.
    """
    return max_tries is None or try_number > max_tries


def fence_incarnation(observation: DeployObservation) -> int:
    """The incarnation a fenced record keeps (``zeta.deploy.fence_incarnation``).

    Only a fence because *this task* was cleared (``new_incarnation``) moves the record to the
    current incarnation: the old attempt's result must not be reused. Any other fence (a launch
    that never started or is stuck, a job timeout) keeps the record's own incarnation: the run's
    ``clear_number`` also rises when another task of the run is cleared, and a fenced driver that
    claimed and succeeded all the same produced this task's own result (``already_succeeded``).
    """
    record = observation.record
    assert isinstance(record, AttemptRecord)
    return observation.incarnation if observation.task_cleared_since_record else record.incarnation


def launch_timing(timing: Timing, record: object) -> Timing:
    """The timing an attempt is judged by: its driver's lease was fixed at its launch
    (``AttemptRecord.lost_after``), so today's ``lost_after`` does not apply to it. A lowered setting
    would otherwise count a driver stopped while its own, longer lease still runs."""
    if isinstance(record, AttemptRecord) and record.lost_after is not None and record.lost_after > 0:
        return dataclasses.replace(timing, lost_after=record.lost_after)
    return timing


def decide(observation: DeployObservation) -> Decision:
    """What the deploy task does next: the decision of the first row of ``DEPLOY_TABLE`` that applies
    (judged with the timing the attempt was launched with)."""
    observation = dataclasses.replace(observation, timing=launch_timing(observation.timing, observation.record))
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


def self_stop_wait_deadline(now: float, deleted_for: float, stopped_after: float, poll_interval: float) -> float:
    """The fallback wake-up of ``earlier_incarnation_cleanup_wait``'s deferral.

    The trigger wakes the task as soon as its own count (carried on from ``deleted_for``, on its
    own clock) reaches ``stopped_after``. This deadline, a moment on the task host's clock, only
    bounds the wait should that count be held back; it lies a full ``stopped_after`` (at least a
    poll) beyond the rest, so a skew or a slow hand-over never wakes the task before its count.
    """
    return now + max(stopped_after - deleted_for, 0.0) + max(stopped_after, poll_interval)


def job_deadline(intent_at: float, job_timeout: float | None) -> float | None:
    """The absolute moment a driver's ``job_timeout`` ends (None: no limit); from the durable intent time."""
    return None if job_timeout is None else intent_at + job_timeout


def timeout_wake_at(observation: DeployObservation, decision: Decision) -> float | None:
    """When the trigger of ``decision`` must wake the task for the job timeout (None: never).

    Only while waiting on a live or starting driver of the record's own token: a fenced token is
    already being stopped (waking at a passed deadline would only make the wait spin).
    """
    record = observation.record
    if (
        not isinstance(record, AttemptRecord)
        or record.phase is Phase.ABANDONED
        or record.token != decision.token
        or decision.action not in (Action.REATTACH, Action.WAIT_FOR_LAUNCH)
    ):
        return None
    return job_deadline(record.intent_at, observation.timing.job_timeout)


def trigger_reports_success(
    view: LedgerView,
    ledger_incarnation: int | None,
    record_incarnation: int,
    *,
    wait_for_stop: bool,
    attempt_deleted: bool,
    output_complete: bool,
) -> bool:
    """Whether the driver trigger may end its deploy task itself with the driver's result.

    Only where ``decide`` would answer ``already_succeeded`` for the try that deferred — the
    trigger has proved it is that deferral's trigger (``core.events.may_end_task_from_trigger``),
    so the task was not cleared since — and nothing else is left for a worker to do:

    * the ledger reads succeeded and names the record's incarnation (or none, an older driver);
    * the task waited on its own live or starting driver, not on a fenced one (``wait_for_stop``)
      nor on a deleted attempt of an earlier incarnation (``attempt_deleted``);
    * the trigger has logged the driver's whole output (``output_complete``): otherwise the
      resumed task logs the rest, masked.

    What the task's resume recorded besides the result — ``driver_ended`` in its task state store,
    which a trigger cannot write — is what the run's commit or ready set tells a later incarnation
    (``DeployObservation.end_reported_downstream``).
    """
    return (
        view is LedgerView.SUCCEEDED
        and ledger_incarnation in (None, record_incarnation)
        and not wait_for_stop
        and not attempt_deleted
        and output_complete
    )


def trigger_may_end_task(
    decision: Decision, record_token: str, *, deferrable: bool, has_outlets: bool, lineage_listener: bool
) -> bool:
    """Whether the trigger of this deferral may end the task itself once its driver succeeded
    (then ``trigger_reports_success`` decides at that moment).

    Only a deferral on the task's own live or starting driver (``reattach``/``wait_for_launch`` of
    the record's token: not a fenced one, not a deleted attempt), in the triggerer
    (``deferrable``), and only when ending in the triggerer skips nothing the worker's end of the
    task does: Airflow 3.3 registers no outlet (Asset) events and calls no task listener — the
    OpenLineage COMPLETE event of the task — for a task ended by a trigger event.
    """
    return (
        deferrable
        and decision.action in (Action.REATTACH, Action.WAIT_FOR_LAUNCH)
        and decision.token == record_token
        and not has_outlets
        and not lineage_listener
    )


def success_report(
    result: dict[str, Any], source: str, task_id: str, incarnation: int, deferral_mark: str | None = None
) -> dict[str, Any]:
    """The deploy task's return value for a succeeded driver: its source's ready-to-close report
    (G2), built the same way by the task (``already_succeeded``) and by its trigger. The trigger
    adds the mark of the deferral it stores the report under (``core.events.REPORT_DEFERRAL_FIELD``)."""
    report = {**result, "source": source, "task_id": task_id, "incarnation": incarnation}
    if deferral_mark is not None:
        report[REPORT_DEFERRAL_FIELD] = deferral_mark
    return report


def trigger_should_fire(
    view: LedgerView,
    now: float,
    missing_deadline: float,
    *,
    wait_for_stop: bool = False,
    unchanged_for: float = 0.0,
    stopped_after: float = float("inf"),
    process_gone: bool = False,
    timeout_at: float | None = None,
    attempt_deleted: bool = False,
) -> bool:
    """The driver trigger's rule: wake the task for anything but a live driver or a young launch.

    A running ledger keeps the trigger waiting; a terminal, lost or unreadable one wakes the task,
    which decides with ``decide``. A missing ledger wakes it only after ``missing_deadline`` (the
    launch grace), so the task can fence a launch that never started. An invisible attempt (the
    state root is not shared) wakes it at once: it fails, launching nothing.

    ``wait_for_stop``: the task already gave the driver up and waits for it to be *certainly
    stopped* before redeploying; a lost driver then wakes it only once its heartbeat has been
    silent for ``stopped_after`` (or its process is seen gone on its own host).

    ``timeout_at``: the driver's ``job_deadline``; a driver that may still run wakes the task once
    it has passed (the task then stops it, ``job_timeout``).

    ``attempt_deleted``: the task waits until the deleted attempt of an earlier incarnation has been
    seen deleted for ``stopped_after`` (``earlier_incarnation_cleanup_wait``; ``unchanged_for`` is
    that count, carried on from the task's). It wakes the task once the count gets there — the
    ``missing_deadline``, a moment on the task host's clock, is only a fallback — and at once if the
    attempt has files again (a late claim: the task decides anew).
    """
    if view is LedgerView.INVISIBLE:
        return True
    if attempt_deleted:
        return view is not LedgerView.MISSING or unchanged_for >= stopped_after or now >= missing_deadline
    if timeout_at is not None and now >= timeout_at and not wait_for_stop:
        return True
    if view is LedgerView.MISSING:
        return now >= missing_deadline
    if wait_for_stop and view in (LedgerView.RUNNING, LedgerView.LOST):
        return process_gone or unchanged_for >= stopped_after
    if view is LedgerView.RUNNING:
        return False
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


#: ``cancel_on_trigger_kill``'s answer for a task instance that no longer exists (its run was
#: deleted): nothing will ever wait on the driver again, and a run re-created under the same id
#: must not find it running beside its own.
TASK_INSTANCE_GONE = "task-instance-gone"


#: Task states that a user's action (or Airflow giving up on the task for good) leaves on a task
#: whose try still runs: marked failed, success or skipped, or removed from its DAG. Not
#: "restarting" (cleared while running): the next try sees the clear, fences the driver and
#: waits until it has stopped before it launches anew (``new_incarnation``).
ENDED_BY_USER_ACTION = frozenset({"failed", "success", "skipped", "removed"})


def cancel_on_worker_kill(task_state: str | None) -> bool:
    """Should a deploy task killed while it waits *in its worker* (``deferrable=False``) stop its driver?

    The task process gets the same SIGTERM (and ``on_kill``) when a user marks the task failed or
    success — the driver must not outlive the task then — and when its worker shuts down, when it
    was cleared while running, or when Airflow gave it up as a zombie that will be retried (state
    ``running``, ``restarting``, ``up_for_retry``, or reset to none): then the next try must find the
    driver and re-attach to it, and a cancel would make it run the job again (after a clear the
    next try fences the driver itself, before it launches anew). So only a state after
    which no try of this incarnation follows stops it; an unreadable state (``None``) keeps it, as
    in ``cancel_on_trigger_kill``.
    """
    return task_state in ENDED_BY_USER_ACTION or task_state == TASK_INSTANCE_GONE


#: Executor classes whose worker (pod) exits when its task defers: matched against the class names
#: of the executor's resolved class and its bases, never against the text of a configured name.
WORKER_EXITS_ON_DEFER = frozenset({"KubernetesExecutor"})


def deferral_refusal(
    executor: str | None, deferrable: bool, in_kubernetes_pod: bool, executor_classes: tuple[str, ...] = ()
) -> str | None:
    """Why this deploy cannot run as configured, or None. Checked before anything is launched.

    A deferred task's pod exits under the KubernetesExecutor (and any executor whose worker dies
    when its task defers), killing a client-mode driver started inside it: every try would end
    "lost". Such a task must keep its worker while the driver runs (``deferrable=False``).
    ``executor_classes`` are the names in the resolved executor class's MRO (an alias, a subclass
    and a module path are all recognised); without them, the name's last dotted part decides.
    """
    names = set(executor_classes) if executor_classes else {(executor or "").rsplit(".", 1)[-1]}
    if deferrable and in_kubernetes_pod and executor and names & WORKER_EXITS_ON_DEFER:
        return (
            f"ZetaSparkJobOperator cannot defer under {executor}: the task's pod exits when it defers "
            "and kills the Spark driver started inside it. Set deferrable=False on the task (or "
            "[zeta] default_deferrable = False) so the pod stays while the driver runs."
        )
    return None
