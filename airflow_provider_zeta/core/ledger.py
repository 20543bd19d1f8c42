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
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

LEDGER_VERSION = 1


class LedgerStatus(str, Enum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
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

    def to_json(self) -> bytes:
        data = asdict(self)
        data["status"] = self.status.value
        data["v"] = LEDGER_VERSION
        return json.dumps(data, sort_keys=True).encode()

    def heartbeat_age(self, now: float) -> float:
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


def classify_ledger(ledger: Ledger | None, now: float, lost_after: float, process_gone: bool = False) -> LedgerView:
    """A terminal ledger is terminal whatever else is seen (G6); a stale or processless one is lost."""
    if ledger is None:
        return LedgerView.MISSING
    if ledger.status.terminal:
        return LedgerView(ledger.status.value)
    if process_gone or ledger.heartbeat_age(now) > lost_after:
        return LedgerView.LOST
    return LedgerView.RUNNING


# ---------------------------------------------------------------------- the deploy task's record

ATTEMPT_RECORD_PREFIX = "zeta_attempt_try_"


def attempt_record_key(try_number: int) -> str:
    return f"{ATTEMPT_RECORD_PREFIX}{try_number}"


class Phase(str, Enum):
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

    def to_value(self) -> dict[str, Any]:
        data = asdict(self)
        data["phase"] = self.phase.value
        return data

    def with_changes(self, **changes: Any) -> AttemptRecord:
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
        )
    except KeyError as missing:
        raise CorruptState(f"task state {where} lacks the field {missing}; delete the key to decide afresh") from None
    except (TypeError, ValueError) as error:
        raise CorruptState(f"task state {where} has an invalid value ({error}); delete the key to decide afresh") from None
