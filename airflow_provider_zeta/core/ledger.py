"""The driver ledger and the deploy task's attempt record: schemas, parsing, classification.

Pure data and pure functions: no storage, no Airflow, no clock. Adapters read bytes and the time,
call these functions, and act on what they return.

The ledger is a small JSON document per attempt, written only by the driver (replaced atomically on
every write), read by the coordinator. The attempt record is written only by the deploy task, one
task-state-store key per try (``attempt_record_key(try_number)``): a try never overwrites another
try's record, so an orphaned try that is still alive cannot clobber what the current try decided.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

LEDGER_VERSION = 1


class LedgerStatus(str, Enum):
    """A driver's status, as its ledger says."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        """Whether the driver has ended (any status but running)."""
        return self is not LedgerStatus.RUNNING


class CorruptState(ValueError):
    """A stored value that cannot be trusted. The message names the value and what to do."""


@dataclass(frozen=True)
class Ledger:
    """What a driver says about itself. Times are epoch seconds."""

    token: str
    status: LedgerStatus
    started_at: float
    heartbeat_at: float
    ended_at: float | None = None
    output_path: str | None = None
    rows: int | None = None
    last_checkpoint_at: float | None = None
    checkpoints: int = 0
    error: str | None = None
    pid: int | None = None
    host: str | None = None
    spark_app_id: str | None = None
    spark_ui_url: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    # Whose attempt this is, so that a listing or the sweep can tell without the task's state.
    dag_id: str | None = None
    run_id: str | None = None
    task_id: str | None = None
    source: str | None = None
    incarnation: int | None = None
    # Counts the driver's ledger writes. With ``heartbeat_at`` it makes the heartbeat *mark* an
    # observer compares between two reads: liveness is "the mark changed", never "the driver's
    # timestamp looks recent" (the driver's clock is not the observer's).
    beat: int = 0
    host_id: str | None = None  # boot id + PID namespace + its init's start (processes.host_id)

    @property
    def heartbeat_mark(self) -> str:
        """An opaque value that changes with every ledger write of the driver."""
        return f"{self.beat}/{self.heartbeat_at!r}"
    # What the attempt left in its staging directory when it finished (relative name -> bytes),
    # recorded by the driver with its terminal ``succeeded`` status; the completed point publishes
    # the staging only if it still matches. None in ledgers of running attempts and older drivers.
    files: dict[str, int] | None = None

    def to_json(self) -> bytes:
        """The ledger as the bytes of its file (sorted JSON, with the ledger format version)."""
        data = asdict(self)
        data["status"] = self.status.value
        data["v"] = LEDGER_VERSION
        return json.dumps(data, sort_keys=True).encode()

    def heartbeat_age(self, now: float) -> float:
        """Seconds from the ledger's heartbeat to ``now``, never negative."""
        return max(0.0, now - self.heartbeat_at)

    def result(self) -> dict[str, Any]:
        """The deploy task's return value for a succeeded driver."""
        return {
            "token": self.token,
            "output_path": self.output_path,
            "rows": self.rows,
            "spark_app_id": self.spark_app_id,
            "metrics": self.metrics,
        }


def parse_ledger(raw: bytes | None, expected_token: str, where: str) -> Ledger | None:
    """Parse a ledger read from ``where``; ``None`` when there is none yet.

    Raises ``CorruptState`` for a truncated/non-JSON document, a missing field, an unknown status,
    or a ledger that belongs to another attempt token.
    """
    if raw is None:
        return None
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as error:
        raise CorruptState(
            f"driver ledger {where} is not valid JSON ({error}; {len(raw)} bytes). It is written "
            "atomically, so this is outside damage: inspect it, then delete it to let the task "
            "redeploy, or restore it."
        ) from None
    if not isinstance(data, dict):
        raise CorruptState(f"driver ledger {where} holds {type(data).__name__}, not an object")
    try:
        ledger = Ledger(
            token=str(data["token"]),
            status=LedgerStatus(data["status"]),
            started_at=float(data["started_at"]),
            heartbeat_at=float(data["heartbeat_at"]),
            ended_at=None if data.get("ended_at") is None else float(data["ended_at"]),
            output_path=data.get("output_path"),
            rows=None if data.get("rows") is None else int(data["rows"]),
            last_checkpoint_at=None if data.get("last_checkpoint_at") is None else float(data["last_checkpoint_at"]),
            checkpoints=int(data.get("checkpoints") or 0),
            error=data.get("error"),
            pid=data.get("pid"),
            host=data.get("host"),
            spark_app_id=data.get("spark_app_id"),
            spark_ui_url=data.get("spark_ui_url"),
            metrics=dict(data.get("metrics") or {}),
            dag_id=data.get("dag_id"),
            run_id=data.get("run_id"),
            task_id=data.get("task_id"),
            source=data.get("source"),
            incarnation=None if data.get("incarnation") is None else int(data["incarnation"]),
            beat=int(data.get("beat") or 0),
            host_id=data.get("host_id"),
            files=None if data.get("files") is None else {str(k): int(v) for k, v in dict(data["files"]).items()},
        )
    except KeyError as missing:
        raise CorruptState(f"driver ledger {where} lacks the field {missing}") from None
    except (TypeError, ValueError) as error:
        raise CorruptState(f"driver ledger {where} has an invalid value: {error}") from None
    if ledger.token != expected_token:
        raise CorruptState(
            f"driver ledger {where} belongs to attempt {ledger.token!r}, not {expected_token!r}: "
            "two attempts share a path, which the provider never does. Check [zeta] state_root."
        )
    return ledger


class LedgerView(str, Enum):
    """How the coordinator classifies a ledger at a moment (the trigger's firing rule)."""

    MISSING = "missing"
    RUNNING = "running"
    LOST = "lost"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    # The attempt's intent file is missing where the launching side wrote it: this observer does
    # not see the launching side's state root (not shared storage), so the ledger cannot be judged.
    INVISIBLE = "invisible"


#: Views after which the driver writes no more output: its task may read the rest of it to the
#: end (a cut last line is complete). Any other wake-up leaves the output to the next trigger.
OUTPUT_ENDED_VIEWS = frozenset({LedgerView.SUCCEEDED, LedgerView.FAILED, LedgerView.CANCELLED})


def driver_output_ended(view: object) -> bool:
    """Whether a driver trigger's event (its ``view``) says the driver's output is complete."""
    return view in {v.value for v in OUTPUT_ENDED_VIEWS}


def classify_ledger(
    ledger: Ledger | None,
    now: float,
    lost_after: float,
    process_gone: bool = False,
    unchanged_for: float | None = None,
) -> LedgerView:
    """A terminal ledger is terminal whatever else is seen (G6); a silent or processless one is lost.

    ``unchanged_for`` is how long the same heartbeat mark has been seen, by observers' own clocks
    (``HeartbeatSeen.silent_for``). Without it (a one-off read, e.g. the monitoring page) the
    heartbeat timestamp's age is used as a display estimate; coordination always passes it.
    """
    if ledger is None:
        return LedgerView.MISSING
    if ledger.status.terminal:
        return LedgerView(ledger.status.value)
    silent = ledger.heartbeat_age(now) if unchanged_for is None else unchanged_for
    if process_gone or silent > lost_after:
        return LedgerView.LOST
    return LedgerView.RUNNING


# ---------------------------------------------------------------------- liveness by observation

#: A driver must renew its heartbeat within this fraction of ``lost_after`` (its *lease*), by its
#: own boot clock (CLOCK_BOOTTIME, counting suspended time) from the start of its last successful
#: write, or be ended (runtime/lease.py).
LEASE_FRACTION = 0.7
#: A silent driver counts as *certainly stopped* (a redeploy may start) only after the observer has
#: seen no heartbeat change for this many ``lost_after``: past the lease, plus a margin for the
#: driver's watchdog period, its exit, and clock-rate differences.
STOPPED_AFTER_FACTOR = 1.25


def driver_lease(lost_after: float) -> float:
    """How long a driver may go without renewing its heartbeat before it must stop itself."""
    return LEASE_FRACTION * lost_after


def lease_timing_error(heartbeat_interval: float, lost_after: float, heartbeat_name: str, lost_after_name: str) -> str | None:
    """Why a heartbeat interval cannot keep a driver's lease (``zeta.settings.lease_timing``), or None.

    The driver renews its lease with each heartbeat write; the lease is ``LEASE_FRACTION`` of
    ``lost_after``. A heartbeat interval of that or more stops every driver by its own lease (a
    healthy driver ended, redeployed, ended again): refused when the settings are read.
    """
    if heartbeat_interval <= 0 or lost_after <= 0:
        return f"{heartbeat_name} ({heartbeat_interval:g}s) and {lost_after_name} ({lost_after:g}s) must both be positive"
    if heartbeat_interval < LEASE_FRACTION * lost_after:
        return None
    return (
        f"{heartbeat_name} ({heartbeat_interval:g}s) must be less than {LEASE_FRACTION} x {lost_after_name} "
        f"({LEASE_FRACTION * lost_after:g}s): a driver stops itself when no heartbeat renewed its lease "
        f"for {LEASE_FRACTION} x {lost_after_name}. Lower {heartbeat_name} or raise {lost_after_name}."
    )


#: Longest token, mark or clock identity a persisted observation may carry: the stored value stays
#: small whatever it is handed (tokens are 16 hex digits, marks "<beat>/<float>", clocks ~60 chars).
_SEEN_TEXT_LIMIT = 200

#: The "mark" of an attempt seen deleted (``core.deploy.DeployObservation.attempt_deleted``): how
#: long it has stayed deleted is measured like a heartbeat that never changes. No ledger's
#: ``heartbeat_mark`` (``<beat>/<time>``) can start so.
ATTEMPT_DELETED_MARK = "(attempt deleted)"


def attempt_deleted_mark(incarnation: int) -> str:
    """The mark for an attempt seen deleted by a try of ``incarnation``: a count one incarnation
    kept is never carried on by the next (a later deletion starts its own count)."""
    return f"{ATTEMPT_DELETED_MARK} incarnation {incarnation}"


@dataclass(frozen=True)
class HeartbeatSeen:
    """How long a driver's heartbeat mark has been seen unchanged, and on which clock.

    Liveness combines observers (task tries on worker hosts, the trigger on the triggerer host)
    without ever comparing their clocks. An observation says: at moment ``at`` *of clock*
    ``clock`` (one host's monotonic clock), the mark ``mark`` had been seen unchanged for
    ``silent_for`` seconds — a duration, which every observer may add to. Only an observer reading
    the same clock may count the time elapsed since ``at``; any other continues from ``silent_for``
    and counts on with its own clock from the moment it took the observation over. The time between
    the hand-over and the take-over is not counted: a skew can only stretch a wait, never shorten it.

    Persisted by the observer (task state ``zeta_heartbeat_seen``, trigger kwargs and events) so a
    worker crash or a triggerer restart continues the measurement; a value it cannot read (another
    shape, e.g. the older ``since`` timestamp) counts as no observation: the count starts afresh.
    """

    token: str
    mark: str
    silent_for: float
    at: float
    clock: str

    def to_value(self) -> dict[str, Any]:
        """The observation as a persisted value."""
        return asdict(self)

    @classmethod
    def from_value(cls, value: Any) -> HeartbeatSeen | None:
        """Parse a persisted value; anything unusable counts as "never seen" (restarts the count)."""
        if not isinstance(value, dict):
            return None
        try:
            seen = cls(
                token=_bounded_text(value["token"]),
                mark=_bounded_text(value["mark"]),
                silent_for=float(value["silent_for"]),
                at=float(value["at"]),
                clock=_bounded_text(value["clock"]),
            )
        except (KeyError, TypeError, ValueError):
            return None
        if not (math.isfinite(seen.silent_for) and math.isfinite(seen.at) and seen.silent_for >= 0):
            return None
        return seen

    def silence(self, clock: str, now: float) -> float:
        """The mark's silence at ``now`` read on ``clock``: time since ``at`` counts only on the same clock."""
        if clock == self.clock and now >= self.at:
            return self.silent_for + (now - self.at)
        return self.silent_for

    def matches(self, token: str, mark: str) -> bool:
        """Whether this observation is of ``token`` with heartbeat mark ``mark``."""
        return self.token == token and self.mark == mark


def _bounded_text(value: Any) -> str:
    if not isinstance(value, str) or len(value) > _SEEN_TEXT_LIMIT:
        raise ValueError("not a short string")
    return value


def continue_observation(
    stored: HeartbeatSeen | None,
    reported: HeartbeatSeen | None,
    token: str,
    mark: str,
    clock: str,
    now: float,
) -> HeartbeatSeen:
    """The observation after reading ``mark`` at ``now`` on ``clock`` (this observer's own clock).

    ``stored`` is what this observer (or an earlier try of the task) kept, ``reported`` what another
    observer handed over (the trigger's event). Each one that saw the current mark of this token is
    a lower bound of the mark's true silence, measured on its own clock; the longest one carries
    the measurement on. A new mark, another token, or no usable observation starts at 0 — so an
    observer with nothing carried over never judges a driver lost before it has itself seen the
    mark unchanged for ``lost_after``.

    The result is re-based on ``clock`` at ``now`` (``silent_for`` is the silence now): it is what
    this observer persists and hands on.
    """
    silences = [seen.silence(clock, now) for seen in (stored, reported) if seen and seen.matches(token, mark)]
    return HeartbeatSeen(token, mark, silent_for=max(silences, default=0.0), at=now, clock=clock)


def observe_heartbeat(seen: HeartbeatSeen | None, token: str, mark: str, clock: str, now: float) -> HeartbeatSeen:
    """One observer's next observation: ``continue_observation`` with nothing reported."""
    return continue_observation(seen, None, token, mark, clock, now)


# ---------------------------------------------------------------------- the deploy task's record

ATTEMPT_RECORD_PREFIX = "zeta_attempt_try_"


def attempt_record_key(try_number: int) -> str:
    """Task-state-store key of the attempt record of try ``try_number``."""
    return f"{ATTEMPT_RECORD_PREFIX}{try_number}"


class Phase(str, Enum):
    """How far an attempt got, as its attempt record says."""

    INTENT = "intent"  # token chosen and stored; the driver may or may not have been launched
    LAUNCHED = "launched"  # the launch call returned a handle
    ABANDONED = "abandoned"  # the token was fenced with a cancel marker: it must never run


@dataclass(frozen=True)
class AttemptRecord:
    """What one try of the deploy task knows about one attempt token."""

    token: str
    incarnation: int
    try_number: int
    phase: Phase
    intent_at: float
    launch_try: int  # the try that chose the token (a later try may re-attach to it)
    host: str | None = None
    pid: int | None = None
    pid_start: float | None = None
    failure_reported_try: int | None = None
    # The task instance's max_tries when the token was chosen. Airflow raises max_tries when (and
    # only when) this task is cleared; the run-wide clear_number also rises when *other* tasks of
    # the run are cleared, so it cannot tell whether this task was asked to re-run.
    max_tries: int | None = None
    # The launching host (processes.host_id: boot id + PID namespace + init start, not the hostname): a handle
    # is only checked on that host; anywhere else only the ledger can tell.
    host_id: str | None = None
    # The launching try wrote the attempt's intent file to the state root before this record: an
    # observer that finds this flag but not the file does not share the launching side's state root.
    intent_on_storage: bool = False
    # A try saw this attempt's driver end (terminal ledger: its result taken or its failure
    # reported). Its files may be deleted later by the run's cleanup; a later incarnation then
    # finds neither ledger nor intent file, and that is no sign of an unshared state root.
    driver_ended: bool = False
    # The identity of the state root the launch wrote to (storage.state_root_identity): an
    # observer that finds the attempt gone takes that as the run's cleanup only on the same root.
    state_root_id: str | None = None
    # The lease timing the driver was launched with (its spec): its lease is 0.7 x this lost_after
    # whatever the settings say later, so observers judge this attempt by these (None: an older
    # record; today's settings judge it).
    lost_after: float | None = None
    heartbeat_interval: float | None = None

    def to_value(self) -> dict[str, Any]:
        """The record as a task-state-store value."""
        data = asdict(self)
        data["phase"] = self.phase.value
        return data

    def with_changes(self, **changes: Any) -> AttemptRecord:
        """A copy of the record with ``changes`` applied."""
        data = asdict(self)
        data.update(changes)
        return AttemptRecord(**data)


def parse_attempt_record(value: Any, where: str) -> AttemptRecord | None:
    """Parse a task-state-store value; ``None`` when the key is unset. Raises ``CorruptState``."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise CorruptState(
            f"task state {where} holds {type(value).__name__}, not an attempt record. Delete the key "
            "(REST API: DELETE .../state-store/<key>) to let the task decide afresh."
        )
    try:
        return AttemptRecord(
            token=str(value["token"]),
            incarnation=int(value["incarnation"]),
            try_number=int(value["try_number"]),
            phase=Phase(value["phase"]),
            intent_at=float(value["intent_at"]),
            launch_try=int(value["launch_try"]),
            host=value.get("host"),
            pid=None if value.get("pid") is None else int(value["pid"]),
            pid_start=None if value.get("pid_start") is None else float(value["pid_start"]),
            failure_reported_try=(
                None if value.get("failure_reported_try") is None else int(value["failure_reported_try"])
            ),
            max_tries=None if value.get("max_tries") is None else int(value["max_tries"]),
            host_id=value.get("host_id"),
            intent_on_storage=bool(value.get("intent_on_storage", False)),
            driver_ended=bool(value.get("driver_ended", False)),
            state_root_id=None if value.get("state_root_id") is None else str(value["state_root_id"]),
            lost_after=None if value.get("lost_after") is None else float(value["lost_after"]),
            heartbeat_interval=None if value.get("heartbeat_interval") is None else float(value["heartbeat_interval"]),
        )
    except KeyError as missing:
        raise CorruptState(f"task state {where} lacks the field {missing}; delete the key to decide afresh") from None
    except (TypeError, ValueError) as error:
        raise CorruptState(f"task state {where} has an invalid value ({error}); delete the key to decide afresh") from None
