"""Delayed cleanup (G4), its ownership guard (G5) and the sweep (G8): the rules, I/O-free.

Theory of operation
-------------------
Everything the provider writes for a run is either under ``runs/<dag>/<run>/`` in the state root
(attempt directories with ledger, cancel marker, staging output and driver log; registrations of
the output tables the run wrote into; cleanup records) or, inside such an output table, under
``_zeta_pending/<dag>/<run>/`` (partitions being assembled) and ``_zeta_tombstones/<dag>/<run>/``
(partitions the run replaced). See ``core/paths.py``.

When every other task of the run is done, the ``DelayedCleanupOperator`` (an Airflow teardown: it
runs whether the run succeeded or failed, and does not decide the run's state):

1. stops every driver of the run that has not ended (G8: nobody is waiting for it any more);
2. writes a **cleanup record**: owner (run key and incarnation), due time (now + retention, an
   absolute moment) and the exact paths to delete — first as a file
   ``runs/<dag>/<run>/cleanup/<task>-<incarnation>.json`` (the durable intent), then in its task
   state store (``decide_start``: a retry resumes the record, never a new window);
3. emits an Asset event naming the record, and ends. The run does not wait for the window.

The cleanup DAG (``CarryOutCleanupsOperator``), scheduled on that Asset, gives each record one
waiter ("one waiter per record" below), which waits for its due time (``decide_due``'s ``not_due``:
an absolute moment, so a restart never moves it) and then decides by the ownership guard below; the
sweep applies the same rule to past-due records.

Ownership (G5)
--------------
The run's incarnation is ``dag_run.clear_number``. An attempt is read by every incarnation whose
deploy task was not cleared, so a record of incarnation N is carried out only while N is the run's
current incarnation (``decide_due``):

* a newer incarnation is active: N's record waits (``newer_incarnation_active``);
* the newer incarnation's cleanup ran (the run was cleared with downstream): it **adopted** N's
  record (``new_record``: N's paths joined its record), so N's file is only dropped (``adopted``);
* the newer incarnation ended without a cleanup of its own (cleared without downstream: Airflow
  does not clear a teardown without its setup): N's paths and everything of the run no record
  covers — the newer staging, the tombstone of the partition it replaced — get a record of the
  current incarnation with a full window from now (``newer_incarnation_ended``).

A cleanup task's own record is only the one of the run's current incarnation (``owns``); older ones
are adopted. Adoption is per cleanup task: a DAG with two pipelines has two cleanup tasks, each
owning the attempts of its own tasks. Records list paths, never patterns: a token directory created
by a newer incarnation is in no older record, and tombstones and pending directories are per run,
so no record can name another run's data (``check_paths``).

Late arrivals
-------------
A driver that is still alive after its attempt was deleted finds its ledger gone and stops without
writing (``runtime/driver.py``): it never re-creates the directory. A completed point re-executed
after the cleanup finds its commit published and does nothing before it looks at the staging. What
is re-created anyway (a stray Spark write) is found by the sweep under the ended run and deleted.

The sweep
---------
``plan_sweep`` looks at one run: its Airflow state, its records, its leftovers on storage and its
drivers, and returns what to stop, what to carry out now, and what to record for later. A run that
ended without a cleanup record (marked failed by hand, cleanup task removed) gets a sweep record
with the same retention; retained runs are told apart from running ones by ``RunPhase``.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from enum import Enum
from typing import Any

from airflow_provider_zeta.core.ledger import CorruptState
from airflow_provider_zeta.core.paths import ATTEMPTS_DIR, run_dir, run_pending_dir, run_tombstones_dir

RECORD_VERSION = 1

#: Airflow run states in which the run's own tasks may still need its data.
ACTIVE_RUN_STATES = frozenset({"queued", "running"})
#: Task instance states after which a task will not look at its driver again (unless cleared).
FINISHED_TASK_STATES = frozenset({"success", "failed", "skipped", "upstream_failed", "removed"})


def state_name(state: Any) -> str | None:
    """``"running"`` for the Task SDK's ``DagRunState.RUNNING`` (any state enum, or a name). Not
    ``str()``: on Python 3.11 the ``str()`` of a ``(str, Enum)`` member is ``"DagRunState.RUNNING"``,
    which matches no state name — a running run would look ended to the sweep."""
    return None if state is None else str(getattr(state, "value", state))


def task_state_key(task_id: str, map_index: int | None = -1) -> str:
    """The name Airflow's task-states call (the Task SDK's ``get_task_states``, the execution API's
    ``/task-instances/states``) gives a task instance in its answer: the task id when it is not
    mapped (``map_index`` -1 or None), ``<task id>_<map index>`` for one map index of a mapped task.
    Every lookup in such an answer goes through this function."""
    if map_index is None or int(map_index) < 0:
        return task_id
    return f"{task_id}_{int(map_index)}"


class RecordStatus(str, Enum):
    """Whether a record's paths are still to be deleted or were deleted."""

    PENDING = "pending"
    CLEANED = "cleaned"


@dataclass(frozen=True)
class CleanupRecord:
    """What one cleanup (or the sweep) will delete for one run, and when. Times are epoch seconds.

    ``incarnation`` is ``None`` for a record the sweep wrote. ``state_paths`` are relative to the
    state root; ``outputs`` maps an output table root to paths relative to it.
    """

    dag_id: str
    run_id: str
    incarnation: int | None
    owner: str  # the cleanup task id, or "sweep"
    created_at: float
    due_at: float
    state_paths: tuple[str, ...] = ()
    outputs: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    status: RecordStatus = RecordStatus.PENDING
    adopted: tuple[int, ...] = ()  # incarnations whose records this one took over
    stopped_drivers: tuple[str, ...] = ()
    cleaned_at: float | None = None
    # Written by earlier versions of the provider (their ownership rule compared it); read, never used.
    task_max_tries: int | None = None
    # Which Airflow run wrote the record: a nonce the cleanup task keeps in its task state store
    # (``RUN_NONCE_KEY``), which lives and dies with the run. A run deleted and created again under
    # the same id (backfill ids are deterministic) has a new one, so its cleanup never takes the
    # deleted run's record for its own. ``None``: written by the sweep or an older version.
    run_nonce: str | None = None
    # The pipeline (TaskGroup) whose cleanup task wrote the record and the tasks whose attempts it
    # owns: two pipelines of one DAG writing one table share the run's pending and tombstone
    # directories, and each cleans only its own (by the commit markers there). ``None`` / ``()``:
    # the whole run (the sweep, a standalone cleanup task, older versions).
    pipeline_id: str | None = None
    tasks: tuple[str, ...] = ()

    def to_json(self) -> bytes:
        """The record as the bytes of its file (sorted JSON, with the record format version)."""
        data = asdict(self)
        data["status"] = self.status.value
        data["state_paths"] = list(self.state_paths)
        data["outputs"] = {root: list(paths) for root, paths in sorted(self.outputs.items())}
        data["adopted"] = list(self.adopted)
        data["stopped_drivers"] = list(self.stopped_drivers)
        data["tasks"] = list(self.tasks)
        data["v"] = RECORD_VERSION
        return json.dumps(data, sort_keys=True).encode()

    def to_value(self) -> dict[str, Any]:
        """The record as a task-state-store value (JSON)."""
        return json.loads(self.to_json())

    @property
    def paths_count(self) -> int:
        """How many paths the record deletes: its state paths and its output paths."""
        return len(self.state_paths) + sum(len(p) for p in self.outputs.values())

    def with_changes(self, **changes: Any) -> CleanupRecord:
        """A copy of the record with ``changes`` applied."""
        return replace(self, **changes)


def parse_cleanup_record(raw: bytes | str | Mapping[str, Any] | None, where: str) -> CleanupRecord | None:
    """Parse a record from a file's bytes or a task-state-store value; ``None`` when absent.

    Raises ``CorruptState`` (naming ``where``) for anything unreadable; the caller then deletes nothing.
    """
    if raw is None:
        return None
    try:
        data = raw if isinstance(raw, Mapping) else json.loads(raw)
        if not isinstance(data, Mapping):
            raise TypeError(f"holds {type(data).__name__}, not an object")
        outputs = data.get("outputs") or {}
        if not isinstance(outputs, Mapping):
            raise TypeError("'outputs' is not an object")
        record = CleanupRecord(
            dag_id=_field(data, "dag_id", str),
            run_id=_field(data, "run_id", str),
            incarnation=_field(data, "incarnation", lambda v: None if v is None else int(v)),
            owner=_field(data, "owner", str),
            created_at=_field(data, "created_at", float),
            due_at=_field(data, "due_at", float),
            state_paths=tuple(_strings(data.get("state_paths") or [], "state_paths")),
            outputs={str(root): tuple(_strings(paths, f"outputs[{root!r}]")) for root, paths in outputs.items()},
            status=RecordStatus(data.get("status", "pending")),
            adopted=tuple(int(i) for i in data.get("adopted") or []),
            stopped_drivers=tuple(_strings(data.get("stopped_drivers") or [], "stopped_drivers")),
            cleaned_at=_field(data, "cleaned_at", lambda v: None if v is None else float(v), required=False),
            task_max_tries=_field(data, "task_max_tries", lambda v: None if v is None else int(v), required=False),
            run_nonce=_field(data, "run_nonce", lambda v: None if v is None else str(v), required=False),
            pipeline_id=_field(data, "pipeline_id", lambda v: None if v is None else str(v), required=False),
            tasks=tuple(_strings(data.get("tasks") or [], "tasks")),
        )
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as error:
        raise CorruptState(
            f"cleanup record {where} is unreadable ({type(error).__name__}: {error}). Nothing was deleted. "
            "Inspect it: fix or delete it (the sweep then treats the run's leftovers as unrecorded)."
        ) from None
    check_paths(record, where)
    return record


def _field(data: Mapping[str, Any], name: str, convert: Any, required: bool = True) -> Any:
    if name not in data:
        if required:
            raise KeyError(name)
        return None
    try:
        return convert(data[name])
    except (TypeError, ValueError):
        raise ValueError(f"field {name!r} has an invalid value {data[name]!r}") from None


def _strings(values: Any, name: str) -> list[str]:
    if not isinstance(values, (list, tuple)) or not all(isinstance(v, str) for v in values):
        raise TypeError(f"{name!r} must be a list of strings")
    return list(values)


def _contained(path: str, prefix: str) -> bool:
    parts = path.split("/")
    return path.startswith(prefix + "/") and ".." not in parts and "" not in parts and "." not in parts


def check_paths(record: CleanupRecord, where: str = "cleanup record") -> None:
    """Refuse a record naming anything outside its own run's directories (``CorruptState``).

    State paths must lie under ``runs/<dag>/<run>/attempts/``; output paths under the run's own
    ``_zeta_pending/<dag>/<run>/`` or ``_zeta_tombstones/<dag>/<run>/``. A record is never trusted to
    delete a whole directory of another run, a published partition, or anything of the user's.
    """
    attempts = f"{run_dir(record.dag_id, record.run_id)}/{ATTEMPTS_DIR}"
    for path in record.state_paths:
        if not _contained(path, attempts):
            raise CorruptState(
                f"{where} names {path!r}, which is not an attempt directory of run {record.run_id!r} "
                f"(under {attempts}/). Nothing was deleted."
            )
    allowed = (run_pending_dir(record.dag_id, record.run_id), run_tombstones_dir(record.dag_id, record.run_id))
    for root, paths in record.outputs.items():
        for path in paths:
            if not any(_contained(path, prefix) for prefix in allowed):
                raise CorruptState(
                    f"{where} names {path!r} in {root}, which is neither a pending directory nor a "
                    f"tombstone of run {record.run_id!r}. Nothing was deleted."
                )


@dataclass(frozen=True)
class Leftovers:
    """What a run has on storage: attempt directories and, per output root, pending/tombstone dirs."""

    state_paths: tuple[str, ...] = ()
    outputs: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def minus(self, records: Sequence[CleanupRecord]) -> Leftovers:
        """What is left of these leftovers once the paths ``records`` cover are taken out."""
        covered_state = {p for r in records for p in r.state_paths}
        covered_out = {(root, p) for r in records for root, paths in r.outputs.items() for p in paths}
        outputs = {
            root: tuple(p for p in paths if (root, p) not in covered_out) for root, paths in self.outputs.items()
        }
        return Leftovers(
            tuple(p for p in self.state_paths if p not in covered_state),
            {root: paths for root, paths in outputs.items() if paths},
        )

    @property
    def empty(self) -> bool:
        """Whether nothing is left to delete."""
        return not self.state_paths and not any(self.outputs.values())


def merge_outputs(*groups: Mapping[str, Sequence[str]]) -> dict[str, tuple[str, ...]]:
    """The union of groups of output paths: each root's paths sorted, roots without a path left out."""
    merged: dict[str, set[str]] = {}
    for group in groups:
        for root, paths in group.items():
            merged.setdefault(root, set()).update(paths)
    return {root: tuple(sorted(paths)) for root, paths in sorted(merged.items()) if paths}


# -- the record in a task state store ------------------------------------------------------------

#: Task-state-store key of the record's header (owner, due time, status, digest of the lists).
RECORD_KEY = "zeta_cleanup"
#: Task-state-store key of the run's nonce (``CleanupRecord.run_nonce``), written before any record.
RUN_NONCE_KEY = "zeta_cleanup_run"
#: A task-state-store value holds at most 65,535 bytes; a record of a 1000-source run lists ~100 kB
#: of paths (and a run may have stopped thousands of drivers), so every list that grows with the
#: run goes into numbered keys of at most this many characters each; the header stays small.
STORE_CHUNK_CHARS = 48_000
#: The record's fields that grow with the run: stored in the chunks, never in the header.
CHUNKED_FIELDS = ("state_paths", "outputs", "stopped_drivers", "adopted", "tasks")


def record_chunk_key(index: int) -> str:
    """Task-state-store key of the record's path chunk number ``index``."""
    return f"{RECORD_KEY}_paths_{index}"


def record_store_values(record: CleanupRecord) -> list[tuple[str, Any]]:
    """The (key, value) writes that store ``record``: the path chunks first, the header last.

    The header names the number of chunks and the digest of their concatenation, so a reader
    never combines a header with chunks of another record. Its size does not depend on the run.
    """
    value = record.to_value()
    payload = json.dumps({name: value[name] for name in CHUNKED_FIELDS}, sort_keys=True)
    chunks = [payload[i : i + STORE_CHUNK_CHARS] for i in range(0, len(payload), STORE_CHUNK_CHARS)] or [""]
    header = {k: v for k, v in value.items() if k not in CHUNKED_FIELDS}
    header["paths_chunks"] = len(chunks)
    header["paths_digest"] = hashlib.sha256(payload.encode()).hexdigest()
    return [(record_chunk_key(i), {"data": chunk}) for i, chunk in enumerate(chunks)] + [(RECORD_KEY, header)]


def record_from_store(header: Any, read_chunk: Any, where: str) -> CleanupRecord | None:
    """Rebuild a record from its header and ``read_chunk(key)``; ``None`` when there is no header."""
    if header is None:
        return None
    if not isinstance(header, Mapping) or "paths_chunks" not in header:
        raise CorruptState(f"cleanup record {where} has no path index (paths_chunks). Nothing was deleted.")
    try:
        parts = [read_chunk(record_chunk_key(i)) for i in range(int(header["paths_chunks"]))]
        payload = "".join(str(part["data"]) for part in parts)
    except (TypeError, KeyError, ValueError):
        raise CorruptState(f"cleanup record {where}: a path chunk is missing or unreadable. Nothing was deleted.") from None
    if hashlib.sha256(payload.encode()).hexdigest() != header.get("paths_digest"):
        raise CorruptState(
            f"cleanup record {where}: its path chunks do not match the header's digest (a torn write). "
            "Nothing was deleted."
        )
    try:
        paths = json.loads(payload)
    except ValueError:
        raise CorruptState(f"cleanup record {where}: its paths are not valid JSON. Nothing was deleted.") from None
    return parse_cleanup_record({**header, **paths}, where)


# -- the cleanup task ---------------------------------------------------------------------------


class StartAction(str, Enum):
    """What a cleanup task does when it starts (``decide_start``)."""

    NEW = "new"  # write a new record (adopting older incarnations' records), then wait
    RESUME = "resume"  # a record of this incarnation exists: wait for its original due time
    ALREADY_CLEANED = "already_cleaned"  # this incarnation's cleanup already ran: nothing to do
    FAIL = "fail"  # a record cannot be trusted: delete nothing


@dataclass(frozen=True)
class StartDecision:
    """``decide_start``'s answer: the action, the rule that chose it and why."""

    action: StartAction
    rule: str
    reason: str
    record: CleanupRecord | None = None  # RESUME / ALREADY_CLEANED: the record to go on with


def owns(record: CleanupRecord, incarnation: int) -> bool:
    """Whether ``record`` is this cleanup task's own (not an older incarnation's, to adopt).

    Only a record of the run's current incarnation is. A run cleared elsewhere since the record was
    written (a source, the ready-to-close and the completed point cleared without their downstream
    cleanup) has a newer incarnation that may read the older attempts: its record is adopted into a
    new one with a full window, never carried out as written (an earlier rule kept a record
    as "own" when this task's ``max_tries`` was unchanged, and deleted at its due time the attempts
    of the sources that were not cleared, which the newer incarnation was publishing).
    """
    return record.incarnation == incarnation


def decide_start(
    incarnation: int,
    stored: CleanupRecord | CorruptState | None,
    on_file: CleanupRecord | CorruptState | None,
    run_nonce: str | None = None,
) -> StartDecision:
    """How a cleanup task of ``incarnation`` starts (first try, retry, or a re-run after a restart).

    ``stored`` is the record in the task's state store (which survives retries and clears);
    ``on_file`` is the record file of this incarnation. The file is written first, so a crash
    between the two writes leaves only the file: it is taken, and its due time stands. A torn write
    of the store (a crash between its path chunks and its header) also falls back to the file.

    The file is taken only when it names this run (``run_nonce``, kept in the task state store
    before any record is written): a file of a deleted run of the same id is not this run's
    record (``foreign_record_file``): a new record is written that adopts its paths.
    """
    if isinstance(stored, CorruptState) and not (isinstance(on_file, CleanupRecord) and on_file.incarnation == incarnation):
        return StartDecision(StartAction.FAIL, "corrupt_record", str(stored))
    if isinstance(stored, CleanupRecord):
        if stored.incarnation is not None and stored.incarnation > incarnation:
            return StartDecision(
                StartAction.FAIL,
                "future_record",
                f"the task state store holds the record of incarnation {stored.incarnation}, newer than this "
                f"try's {incarnation}: this try is stale. Nothing was deleted.",
            )
        if owns(stored, incarnation):
            if stored.status is RecordStatus.CLEANED:
                return StartDecision(
                    StartAction.ALREADY_CLEANED, "already_cleaned", "this incarnation's cleanup already ran", stored
                )
            return StartDecision(StartAction.RESUME, "resume_window", f"keeps the due time {stored.due_at:.0f}", stored)
    if isinstance(on_file, CorruptState):
        return StartDecision(StartAction.FAIL, "corrupt_record", str(on_file))
    if on_file is not None and run_nonce is not None and on_file.run_nonce != run_nonce:
        return StartDecision(
            StartAction.NEW,
            "foreign_record_file",
            f"the record file of incarnation {on_file.incarnation} was written by another run of this id (deleted "
            f"and created again): a new record of this run adopts its {on_file.paths_count} paths",
        )
    if on_file is not None and on_file.incarnation == incarnation:
        if on_file.status is RecordStatus.CLEANED:
            return StartDecision(
                StartAction.ALREADY_CLEANED, "already_cleaned", "the record file says this cleanup ran", on_file
            )
        return StartDecision(
            StartAction.RESUME, "resume_from_file", f"keeps the due time {on_file.due_at:.0f} of the record file", on_file
        )
    return StartDecision(StartAction.NEW, "open_window", "no record of this incarnation yet")


def new_record(
    dag_id: str,
    run_id: str,
    incarnation: int | None,
    owner: str,
    now: float,
    retention: float,
    leftovers: Leftovers,
    older: Sequence[CleanupRecord] = (),
    stopped_drivers: Sequence[str] = (),
    task_max_tries: int | None = None,
    run_nonce: str | None = None,
    pipeline_id: str | None = None,
    tasks: Sequence[str] = (),
) -> CleanupRecord:
    """A pending record over ``leftovers`` plus the paths of the ``older`` records it adopts.

    Its due time is now + ``retention``, or the latest due time of an adopted record when that is
    later: a path's due time never moves earlier (a retention lowered since the older record was
    written does not shorten the older paths' window).
    """
    pending_older = [r for r in older if r.status is RecordStatus.PENDING]
    return CleanupRecord(
        dag_id=dag_id,
        run_id=run_id,
        incarnation=incarnation,
        owner=owner,
        created_at=now,
        due_at=max([now + retention, *(r.due_at for r in pending_older)]),
        state_paths=tuple(sorted({*leftovers.state_paths, *(p for r in pending_older for p in r.state_paths)})),
        outputs=merge_outputs(leftovers.outputs, *(r.outputs for r in pending_older)),
        adopted=tuple(sorted({r.incarnation for r in older if r.incarnation is not None and r.incarnation != incarnation})),
        stopped_drivers=tuple(sorted(set(stopped_drivers))),
        task_max_tries=task_max_tries,
        run_nonce=run_nonce,
        pipeline_id=pipeline_id,
        tasks=tuple(sorted(set(tasks))),
    )


def owned_output_entry(entry_pipeline: str | None, pipeline_id: str | None) -> bool:
    """Whether a pending directory or tombstone of the run belongs to the cleanup of ``pipeline_id``.

    The entry's commit marker names the pipeline that assembled it (pending) or whose partition it
    replaced (a tombstone: replacing is only ever done over the same pipeline's partition). An entry
    whose marker names another pipeline is that pipeline's; one without a readable marker (an
    assembly cut short) is taken by every cleanup of the run (deleting twice is a no-op).
    """
    return pipeline_id is None or not entry_pipeline or entry_pipeline == pipeline_id


# -- is anything going to carry the record out? ------------------------------------------------


def cleanup_dag_problem(cleanup_dag_id: str, found: bool | None, paused: bool | None) -> tuple[str, str] | None:
    """(rule, reason) when no cleanup DAG will carry the run's record out at its due time, or ``None``.

    A pipeline's cleanup task only records; the cleanup DAG deletes. Without it (not deployed, or
    paused) staging data, driver logs and tombstones stay until a sweep runs, or forever when none
    is deployed either: the task says so in its log instead of ending as if all were well.
    ``found`` is ``None`` when Airflow could not be asked.
    """
    deploy = (
        "deploy dags/zeta_maintenance.py beside your pipelines (or call "
        "airflow_provider_zeta.maintenance.zeta_cleanup_dag() and zeta_sweep_dag() in a DAG file of yours)"
    )
    if found is None:
        return ("cleanup_dag_unknown", f"could not ask Airflow whether the cleanup DAG {cleanup_dag_id!r} is deployed")
    if not found:
        return (
            "cleanup_dag_missing",
            f"no DAG {cleanup_dag_id!r} is deployed: nothing deletes this run's staging data, driver logs and "
            f"tombstones at their due time (only a sweep, if one runs); {deploy}",
        )
    if paused:
        return (
            "cleanup_dag_paused",
            f"the cleanup DAG {cleanup_dag_id!r} is paused: this run's data is not deleted at its due time "
            "until it is unpaused (only a sweep, if one runs, deletes it meanwhile)",
        )
    return None


@dataclass(frozen=True)
class Overdue:
    """Pending records past their due time: how many, and how late the most overdue one is."""

    count: int = 0
    most_late_s: float = 0.0


def overdue_cleanups(records: Sequence[CleanupRecord], now: float, grace: float = 60.0) -> Overdue:
    """The records still pending ``grace`` seconds after their due time: what a cleanup DAG that is
    missing, paused or failing leaves behind (the monitoring page's "overdue cleanups")."""
    late = [now - r.due_at for r in records if r.status is RecordStatus.PENDING and now - r.due_at > grace]
    return Overdue(len(late), max(late, default=0.0))


# -- carrying a record out at its due time (the cleanup DAG, and the sweep for past-due ones) -------


@dataclass(frozen=True)
class RunStatus:
    """What Airflow says about a run when its record falls due: state and current incarnation."""

    state: str | None
    clear_number: int


class DueAction(str, Enum):
    """What to do with a record when it is looked at (``decide_due``)."""

    WAIT = "wait"  # not due yet: wait for ``until`` (absolute)
    CARRY_OUT = "carry_out"  # delete exactly the record's paths now
    RECHECK = "recheck"  # a newer incarnation is active: look again at ``until``
    DROP = "drop"  # a newer record of the same owner took the paths over: delete only this file
    RENEW = "renew"  # a newer incarnation ended without a record: ``record`` covers the paths anew


@dataclass(frozen=True)
class DueDecision:
    """``decide_due``'s answer: the action, the rule that chose it and why, and when to look again."""

    action: DueAction
    rule: str
    reason: str
    until: float | None = None
    record: CleanupRecord | None = None  # RENEW: the record to write (and wait for)


def decide_due(
    record: CleanupRecord,
    run: RunStatus | None,
    others: Sequence[CleanupRecord],
    uncovered: Leftovers,
    now: float,
    recheck_after: float,
) -> DueDecision:
    """What happens to a pending task record at ``now`` (G4, G5). First matching rule wins.

    ``run`` is ``None`` when the run no longer exists. ``others`` are the run's other records,
    ``uncovered`` the run's leftovers that no pending record covers. The rule that matters is the
    ownership guard: a record is carried out only when it belongs to the run's *current*
    incarnation. A record of an older incarnation may name an attempt that a newer incarnation
    still reads (a deploy task that was not cleared keeps its attempt), so it is never carried out
    as written: while the newer incarnation is active it waits; when that incarnation's own cleanup
    adopted it, it is dropped; when the newer incarnation ended without a cleanup of its own (its
    cleanup task was not cleared), its paths and everything the run left uncovered (the newer
    staging, the replaced partition's tombstone) get a new record with a full window from now.
    """
    if record.due_at > now:
        return DueDecision(DueAction.WAIT, "not_due", f"due at {record.due_at:.0f}", until=record.due_at)
    if run is None:
        return DueDecision(DueAction.CARRY_OUT, "run_gone", "the run no longer exists")
    if record.incarnation is None or record.incarnation >= run.clear_number:
        if run.state in ACTIVE_RUN_STATES:
            # The run's tasks run again although its incarnation did not change (a REST clear with
            # reset_dag_runs=false leaves clear_number as it was), or its last task just ended: either
            # way they may still read these attempts. Deleting later is safe; deleting now is not.
            return DueDecision(
                DueAction.RECHECK,
                "run_active",
                f"the run is {run.state}: its attempts may still be read; looked at again later",
                until=now + recheck_after,
            )
        return DueDecision(
            DueAction.CARRY_OUT, "due", f"incarnation {record.incarnation} is the run's current one ({run.clear_number})"
        )
    adopter = next(
        (
            r
            for r in others
            if r.owner == record.owner
            and r.incarnation is not None
            and r.incarnation > record.incarnation
            and record.incarnation in r.adopted
        ),
        None,
    )
    if adopter is not None:
        return DueDecision(
            DueAction.DROP, "adopted", f"incarnation {adopter.incarnation}'s record took over these paths"
        )
    if run.state in ACTIVE_RUN_STATES:
        return DueDecision(
            DueAction.RECHECK,
            "newer_incarnation_active",
            f"incarnation {run.clear_number} is {run.state} and may read these attempts; looked at again later",
            until=now + recheck_after,
        )
    window = max(record.due_at - record.created_at, 0.0)
    # Every pending record of this owner older than the current incarnation goes into the new one
    # (and a record of the current incarnation that an earlier renewal wrote is merged, not
    # overwritten), so renewing one record never drops another's paths.
    taken: dict[int, CleanupRecord] = {}
    for other in (record, *others):
        if other.owner == record.owner and other.status is RecordStatus.PENDING and other.incarnation is not None:
            if other.incarnation <= run.clear_number:
                taken.setdefault(other.incarnation, other)
    renewed = new_record(
        record.dag_id, record.run_id, run.clear_number, record.owner, now, window, uncovered, older=list(taken.values())
    )
    renewed = renewed.with_changes(
        run_nonce=record.run_nonce,
        pipeline_id=record.pipeline_id,
        tasks=record.tasks,
        adopted=tuple(i for i in renewed.adopted if i != run.clear_number),
        due_at=max([renewed.due_at] + [r.due_at for r in taken.values() if r.incarnation == run.clear_number]),
    )
    return DueDecision(
        DueAction.RENEW,
        "newer_incarnation_ended",
        f"incarnation {run.clear_number} read the run's attempts and ended without a cleanup of its own: "
        f"{renewed.paths_count} paths kept for another window, until {renewed.due_at:.0f}",
        until=renewed.due_at,
        record=renewed,
    )



def cleared_since(record: CleanupRecord, status: RunStatus | None) -> bool:
    """Whether the run was cleared after ``record`` fell due: ``status`` (asked again just before
    deleting) shows a clear number past the record's incarnation. The cleanup task then deletes
    nothing (``cleared_meanwhile``) and leaves the record to the run's new incarnation, which renews
    or adopts it at the next look. Never for the sweep's own records (no incarnation) or a run
    that no longer exists (``None``)."""
    return status is not None and record.incarnation is not None and status.clear_number > record.incarnation


#: Among the entries an interrupted publish holds (``held_by_interrupted_publish``): its intent
#: could not be read, so it names no tombstone and every tombstone of the run is held.
ALL_TOMBSTONES = "*"


def held_by_interrupted_publish(entry: str, is_tombstone: bool, held: set[str]) -> bool:
    """Whether a cleanup must keep ``entry`` (a pending directory, or a tombstone when
    ``is_tombstone``) of a run's leftovers in an output table: ``held`` lists the pending
    directories holding a publish intent (a publish on a store without atomic rename was
    interrupted there) and the tombstones those intents name, or ``ALL_TOMBSTONES`` for an intent
    that cannot be read. The completed point's next try needs both to roll the partition back or
    complete it; deleting either would leave a partition of mixed files with no marker, for good."""
    return entry in held or (is_tombstone and ALL_TOMBSTONES in held)

#: A pending cleanup-task record as the cleanup DAG names it: (dag_id, run_id, owner, incarnation).
#: One file per key (``cleanup/<owner>-<incarnation>.json`` in the run's directory).
RecordKey = tuple[str, str, str, int]

#: How often a waiting run of the cleanup DAG looks for records nobody waits for, seconds (its
#: trigger lists the unclaimed entries, in the triggerer, and wakes the task only when there is
#: one): a record whose announcement no run could take (``max_active_runs`` runs waiting) is taken
#: at most this late.
DEFAULT_RESCAN_INTERVAL = 600.0

# -- one waiter per record ------------------------------------------------------------------------
#
# Each pending cleanup-task record has one **waiter entry** under the state root, in exactly one
# folder of ``cleanup_waiters/``: ``_unclaimed/`` when written (the cleanup task writes it just
# before the record file), then the folder of the run of the cleanup DAG that took it — its waiter,
# the only one that waits for its due time and carries it out. Taking an entry is a rename from
# one folder into the taker's: on a filesystem with atomic rename exactly one taker gets it.
#
# A run of the cleanup DAG takes, at its first look, the unclaimed entries, its own (a retry), and
# those of waiters that are gone (``waiter_gone``: their run was marked success or failed by hand,
# or deleted; asked of Airflow in one request for all waiters, then one per waiter only when some
# are gone). While it waits, its trigger lists ``_unclaimed/`` every ``rescan_interval`` and wakes
# it only when an entry is there; the task then takes the unclaimed entries. It never reads the
# records or entries another live waiter holds: carrying out one record costs that record's run
# (its records, attempts and outputs) and its entry, plus, at a run's first look, one listing and
# one read per waiting run of the cleanup DAG (at most its ``max_active_runs``) — nothing that
# grows with the number of records pending.

#: The folder of the waiter entries, under the state root.
WAITERS_DIR = "cleanup_waiters"
#: The folder of the entries no run of the cleanup DAG has taken yet.
UNCLAIMED_WAITER = "_unclaimed"
#: In a waiter's folder: which run of the cleanup DAG it is ({"dag_id", "run_id"}), written first.
WAITER_INFO_FILE = "_waiter.json"


def waiter_entry_name(key: RecordKey) -> str:
    """The entry's file name: the same in every folder, so a rename moves it and a taker who lost
    the race finds its source gone."""
    return hashlib.sha256(json.dumps(list(key)).encode()).hexdigest()[:32] + ".json"


def waiter_folder_name(dag_id: str, run_id: str) -> str:
    """The folder of the waiter that is the run ``run_id`` of the cleanup DAG ``dag_id``."""
    return "w-" + hashlib.sha256(json.dumps([dag_id, run_id]).encode()).hexdigest()[:32]


def waiter_entry(key: RecordKey, due_at: float) -> bytes:
    """The bytes of a waiter entry: which record (``key``) is waited for, and its due time."""
    dag_id, run_id, owner, incarnation = key
    return json.dumps(
        {"dag_id": dag_id, "run_id": run_id, "owner": owner, "incarnation": incarnation, "due_at": due_at},
        sort_keys=True,
    ).encode()


def parse_waiter_entry(raw: bytes | None) -> tuple[RecordKey, float] | None:
    """(key, due time) of an entry; ``None`` when absent or unreadable (the record itself is the
    truth: an entry only says who waits for it and when to look)."""
    try:
        data = json.loads(raw or b"")
        key = (str(data["dag_id"]), str(data["run_id"]), str(data["owner"]), int(data["incarnation"]))
        due_at = float(data["due_at"])
    except (ValueError, TypeError, KeyError):
        return None
    return (key, due_at) if math.isfinite(due_at) else None


def waiter_info(dag_id: str, run_id: str) -> bytes:
    """The bytes of a waiter's info file: the run of the cleanup DAG that waits."""
    return json.dumps({"dag_id": dag_id, "run_id": run_id}, sort_keys=True).encode()


def parse_waiter_info(raw: bytes | None) -> tuple[str, str] | None:
    """(dag_id, run_id) of a waiter's info file; ``None`` when absent or unreadable."""
    try:
        data = json.loads(raw or b"")
        return str(data["dag_id"]), str(data["run_id"])
    except (ValueError, TypeError, KeyError):
        return None


def waiter_gone(run_state: str | None) -> bool:
    """Whether a waiter's records are taken over: its run of the cleanup DAG no longer exists or is
    neither queued nor running (it ended, was marked success or failed by hand: it will not wake
    for them). A waiter whose folder names no readable run is left alone (being created)."""
    return state_name(run_state) not in ACTIVE_RUN_STATES


@dataclass(frozen=True)
class CarryOutSchedule:
    """What a run of the cleanup DAG does at one look at the records it is the waiter of.

    ``due``: the records to look at now (``decide_due``), soonest due first. ``look_again_at``:
    when to look again (absolute); ``None`` when the run waits for nothing (it ends).
    """

    due: tuple[RecordKey, ...]
    look_again_at: float | None


def schedule_carry_out(
    waiting: Mapping[RecordKey, float], now: float, not_before: Mapping[RecordKey, float] | None = None
) -> CarryOutSchedule:
    """Which of the records a run of the cleanup DAG waits for it looks at now, and when it looks again.

    ``waiting`` maps the records this run is the waiter of to their due times (its own entries,
    never the records of other waiters). ``not_before`` holds the records looked at and left for
    later (``decide_due``'s ``until``: a run still active).

    * a record is due at its due time, or at its ``not_before`` if later;
    * the next look is the soonest of those moments; a run with nothing to wait for ends.

    The cost this buys: a look reads only the records that are due; a record of another waiter,
    due or not, costs this run nothing, and a run wakes only for its own records' moments (or
    when its trigger finds an unclaimed entry).
    """
    later = not_before or {}

    def moment(key: RecordKey) -> float:
        return max(waiting[key], later.get(key, waiting[key]))

    due = tuple(sorted((k for k in waiting if moment(k) <= now), key=lambda k: (waiting[k], k)))
    if due:
        return CarryOutSchedule(due, now)
    return CarryOutSchedule((), min((moment(k) for k in waiting), default=None))


# -- overdue cleanups: what a missing, paused or failing cleanup DAG leaves behind ---------------

#: The cleanup DAG's id as ``maintenance.zeta_cleanup_dag`` gives it (named in the overview's hint).
CLEANUP_DAG_ID = "zeta_cleanup"
#: The sweep DAG's id as ``maintenance.zeta_sweep_dag`` gives it.
SWEEP_DAG_ID = "zeta_sweep"
#: How long past its due time a pending record may be before the overview calls it overdue, seconds.
#: A record whose event no waiting run of the cleanup DAG names is taken at the next listing, up to
#: ``DEFAULT_RESCAN_INTERVAL`` late; a record is overdue only once that (and a minute) has passed,
#: so a working cleanup DAG never shows any.
OVERDUE_GRACE = DEFAULT_RESCAN_INTERVAL + 60.0


@dataclass(frozen=True)
class RecordSeen:
    """One record file as a listing found it: the DAG whose directory holds it (never the DAG the
    record names: a file is shown only to readers of its directory's DAG), its run's Airflow state
    (``None``: the run no longer exists), the record or why it cannot be read, and ``where`` (its
    path relative to the state root, or the run's directory when the run could not be read)."""

    dag_id: str
    run_state: str | None
    record: CleanupRecord | CorruptState
    where: str = ""


@dataclass(frozen=True)
class DagOverdue:
    """One DAG's overdue cleanups: ``count`` records pending more than the grace past their due
    time, the most overdue one ``most_late_s`` seconds late."""

    dag_id: str
    count: int
    most_late_s: float


@dataclass(frozen=True)
class OverdueSummary:
    """The overdue cleanups of the state root, by DAG, with what to do about them."""

    dags: tuple[DagOverdue, ...]  # the DAGs with an overdue record, most late first
    total: Overdue
    sweep_records: int  # how many of the total are the sweep's own records
    unreadable: tuple[tuple[str, str], ...]  # (dag_id, where) of each record that cannot be judged
    grace: float
    hint: str | None  # what to do; ``None`` when nothing is overdue or unreadable


def overdue_summary(
    seen: Sequence[RecordSeen],
    now: float,
    grace: float = OVERDUE_GRACE,
    cleanup_dag_id: str = CLEANUP_DAG_ID,
    cleanup_dag: tuple[bool | None, bool | None] | None = None,
) -> OverdueSummary:
    """The overview's overdue cleanups, per DAG and in total (``overdue_cleanups`` per DAG).

    A record of a run Airflow shows queued or running is not overdue whatever its due time: its
    tasks may still read its attempts, so the cleanup DAG looks at it again later (``decide_due``'s
    ``run_active`` / ``newer_incarnation_active``); that wait is the rule, not a missing cleanup.
    A record of a run that no longer exists is carried out at its due time (``run_gone``) and
    counts. ``cleanup_dag`` is (deployed, paused) of the cleanup DAG as Airflow knows it (``None``:
    not asked); the hint then says which of the three it is. Sweep records count too, told apart in ``sweep_records``: only the sweep carries them
    out. A record that cannot be read, or whose due time is not a finite moment, is listed in
    ``unreadable`` on its own and never counted.
    """
    by_dag: dict[str, list[CleanupRecord]] = {}
    unreadable: list[tuple[str, str]] = []
    for entry in seen:
        record = entry.record
        if isinstance(record, CorruptState) or not (math.isfinite(record.due_at) and math.isfinite(record.created_at)):
            unreadable.append((entry.dag_id, entry.where))
        elif entry.run_state not in ACTIVE_RUN_STATES:
            by_dag.setdefault(entry.dag_id, []).append(record)
    rows = []
    for dag_id, records in by_dag.items():
        overdue = overdue_cleanups(records, now, grace)
        if overdue.count:
            rows.append(DagOverdue(dag_id, overdue.count, overdue.most_late_s))
    rows.sort(key=lambda row: (-row.most_late_s, row.dag_id))
    total = Overdue(sum(r.count for r in rows), max((r.most_late_s for r in rows), default=0.0))
    sweep = overdue_cleanups([r for rs in by_dag.values() for r in rs if r.incarnation is None], now, grace).count
    hints = []
    if total.count > sweep:
        hints.append(_pending_past_due_hint(total.count - sweep, cleanup_dag_id, cleanup_dag))
    if sweep:
        hints.append(
            f"{sweep} of the sweep's own record(s) are past due: only the sweep ({SWEEP_DAG_ID!r}) carries "
            "them out, so it is missing, paused or failing."
        )
    if unreadable:
        hints.append(
            f"{len(unreadable)} cleanup record(s) cannot be read: nothing of their runs is deleted until each "
            "is fixed or deleted (the sweep then gives the run's leftovers a record of its own)."
        )
    unreadable.sort()
    return OverdueSummary(tuple(rows), total, sweep, tuple(unreadable), grace, " ".join(hints) or None)


def _pending_past_due_hint(count: int, cleanup_dag_id: str, cleanup_dag: tuple[bool | None, bool | None] | None) -> str:
    """``overdue_summary``'s hint for ``count`` pipeline records past due: what is wrong with the
    cleanup DAG (``cleanup_dag``: deployed, paused; ``None``: not asked), and that the sweep helps."""
    pending = f"{count} cleanup record(s) are pending past their due time: "
    sweep_note = f"the sweep ({SWEEP_DAG_ID!r}) carries overdue records out on its next run."
    problem = cleanup_dag_problem(cleanup_dag_id, *cleanup_dag) if cleanup_dag is not None else None
    if cleanup_dag is None or problem is not None and problem[0] == "cleanup_dag_unknown":
        return (
            f"{pending}the cleanup DAG {cleanup_dag_id!r} is missing, paused or failing. Deploy "
            f"dags/zeta_maintenance.py, unpause it or look at its failed runs; {sweep_note}"
        )
    if problem is not None:
        return f"{pending}{problem[1]}; {sweep_note}"
    return (
        f"{pending}the cleanup DAG {cleanup_dag_id!r} is deployed and not paused: look at its failed "
        f"runs; {sweep_note}"
    )

# -- the sweep ----------------------------------------------------------------------------------


class RunPhase(str, Enum):
    """How a listing shows a run the provider has data for."""

    RUNNING = "running"  # the run is queued or running
    RETAINED = "retained"  # the run ended; its data is kept until the cleanup's due time
    CLEANUP_DUE = "cleanup_due"  # the run ended and its cleanup is past due (the sweep will do it)
    UNRECORDED = "unrecorded"  # the run ended without a cleanup record (the sweep will write one)
    CLEANED = "cleaned"  # nothing of the run is left but bookkeeping


@dataclass(frozen=True)
class DriverView:
    """One driver attempt of a run as the sweep sees it: where it is and whether it may still run."""

    token: str
    attempt_path: str  # relative to the state root
    task_id: str
    live: bool  # no terminal ledger (running, or never claimed)
    task_state: str | None  # the Airflow state of the task instance that launched it, when known
    # The map index of that task instance (-1: not mapped; None: its attempt directory names none).
    map_index: int | None = -1


@dataclass(frozen=True)
class RunView:
    """What the sweep knows of one run: its state, its cleanup records, its leftovers and its drivers."""

    dag_id: str
    run_id: str
    run_state: str | None  # None: the run does not exist (deleted)
    records: tuple[CleanupRecord | CorruptState, ...] = ()
    leftovers: Leftovers = Leftovers()
    drivers: tuple[DriverView, ...] = ()
    # The run's current incarnation (``clear_number``); None when unknown (the records are then
    # taken as current, as before the ownership guard looked at it).
    clear_number: int | None = None


@dataclass(frozen=True)
class SweepPlan:
    """What the sweep does with one run (``plan_sweep``): the drivers to stop and the records to carry
    out, write, renew or drop."""

    rule: str
    reason: str
    phase: RunPhase
    stop: tuple[DriverView, ...] = ()  # drivers to cancel
    carry_out: tuple[CleanupRecord, ...] = ()  # records to carry out now
    write: CleanupRecord | None = None  # the sweep record to write
    renew: tuple[CleanupRecord, ...] = ()  # records of a newer incarnation to write (``decide_due``)
    drop: tuple[CleanupRecord, ...] = ()  # records adopted by a newer one: delete their files only
    forget_run: bool = False  # nothing left: delete the run's bookkeeping (run.json, registrations)
    retained_until: float | None = None


def plan_sweep(view: RunView, now: float, retention: float) -> SweepPlan:
    """What the sweep does for one run. First matching rule wins."""
    live = tuple(d for d in view.drivers if d.live)
    records = tuple(r for r in view.records if isinstance(r, CleanupRecord))
    pending = tuple(r for r in records if r.status is RecordStatus.PENDING)
    if view.run_state in ACTIVE_RUN_STATES:
        return _active_run_plan(view, live, pending)
    ended = "run_gone" if view.run_state is None else "run_ended"
    corrupt = [r for r in view.records if isinstance(r, CorruptState)]
    if corrupt:
        return SweepPlan(
            "corrupt_record",
            f"{ended}, but a record is unreadable; drivers stopped, nothing deleted: {corrupt[0]}",
            RunPhase.RETAINED,
            stop=live,
        )
    uncovered = view.leftovers.minus(pending)
    # Leftovers of a run get the longest window any of its records was given (the pipeline's own
    # cleanup_delay), never less than ``retention``: the sweep does not shorten a run's retention.
    retention = max([retention, *(max(r.due_at - r.created_at, 0.0) for r in records if r.incarnation is not None)])
    due_list, renew, drop = _past_due_decisions(_ended_run_status(view, records), records, pending, uncovered, now)
    if renew:
        uncovered = uncovered.minus(list(renew.values()))
    due = tuple(due_list)
    write = _sweep_record_to_write(view, pending, uncovered, now, retention)
    waiting = (
        [r.due_at for r in pending if r.due_at > now]
        + ([write.due_at] if write else [])
        + [r.due_at for r in renew.values()]
    )
    phase, rule, reason = _ended_run_phase(ended, bool(renew), due, write, waiting)
    forget = not waiting and (view.leftovers.empty or bool(due)) and write is None
    return SweepPlan(
        rule,
        reason,
        phase,
        stop=live,
        carry_out=due,
        write=write,
        renew=tuple(renew.values()),
        drop=tuple({id(r): r for r in drop}.values()),
        forget_run=forget,
        retained_until=min(waiting) if waiting else None,
    )


def _active_run_plan(view: RunView, live: tuple[DriverView, ...], pending: tuple[CleanupRecord, ...]) -> SweepPlan:
    """``plan_sweep``'s ``run_active``: the run's own cleanup owns its data; only drivers of
    finished tasks are stopped."""
    orphans = tuple(d for d in live if d.task_state in FINISHED_TASK_STATES)
    # Airflow shows a run as running while its cleanup waits out the window: a pending record
    # and no driver still running tells a retained run from a working one.
    retained = bool(pending) and len(live) == len(orphans)
    return SweepPlan(
        "run_active",
        f"run is {view.run_state}: its own cleanup owns its data"
        + (f"; {len(orphans)} driver(s) of finished tasks stopped" if orphans else ""),
        RunPhase.RETAINED if retained else RunPhase.RUNNING,
        stop=orphans,
        retained_until=min(r.due_at for r in pending) if retained else None,
    )


def _ended_run_status(view: RunView, records: tuple[CleanupRecord, ...]) -> RunStatus | None:
    """The ended run's status for the ownership guard (``decide_due``); None when the run is gone.
    Without a known ``clear_number`` the newest incarnation among the records is taken as current."""
    if view.run_state is None:
        return None
    known = [r.incarnation for r in records if r.incarnation is not None]
    return RunStatus(view.run_state, view.clear_number if view.clear_number is not None else max(known, default=0))


def _past_due_decisions(
    status: RunStatus | None,
    records: tuple[CleanupRecord, ...],
    pending: tuple[CleanupRecord, ...],
    uncovered: Leftovers,
    now: float,
) -> tuple[list[CleanupRecord], dict[str, CleanupRecord], list[CleanupRecord]]:
    """The ownership guard on the run's past-due records (``decide_due``): only those of the run's
    current incarnation are carried out; older ones are dropped (adopted) or renewed.

    Returns (to carry out, renewals by owner, to drop): a renewal takes over the records it adopts,
    which are dropped too when past due."""
    due_list: list[CleanupRecord] = []
    renew: dict[str, CleanupRecord] = {}
    drop: list[CleanupRecord] = []
    for candidate in sorted(pending, key=lambda r: r.due_at):
        if candidate.due_at > now:
            continue
        decision = decide_due(candidate, status, records, uncovered, now, recheck_after=0.0)
        if decision.action is DueAction.CARRY_OUT:
            due_list.append(candidate)
        elif decision.action is DueAction.DROP:
            drop.append(candidate)
        elif decision.action is DueAction.RENEW and decision.record is not None:
            renew.setdefault(decision.record.owner, decision.record)
    taken_over = {(r.owner, i) for r in renew.values() for i in r.adopted}
    drop += [r for r in pending if r.incarnation is not None and (r.owner, r.incarnation) in taken_over and r.due_at <= now]
    return due_list, renew, drop


def _sweep_record_to_write(
    view: RunView, pending: tuple[CleanupRecord, ...], uncovered: Leftovers, now: float, retention: float
) -> CleanupRecord | None:
    """The sweep record covering the run's leftovers no record covers, or None when there are none.

    Such leftovers (the cleanup never ran, a stray late write, a tombstone of a republish) always
    get a window of their own; they are never deleted on sight. A run has one sweep record and a
    record one due time: merging moves it to a full window from now, so the new leftovers get
    theirs and the older ones are kept longer, never less."""
    if uncovered.empty:
        return None
    sweep_record = next((r for r in pending if r.incarnation is None), None)
    if sweep_record is not None and sweep_record.due_at > now:
        return sweep_record.with_changes(
            state_paths=tuple(sorted({*sweep_record.state_paths, *uncovered.state_paths})),
            outputs=merge_outputs(sweep_record.outputs, uncovered.outputs),
            created_at=now,
            due_at=max(sweep_record.due_at, now + retention),
        )
    return new_record(view.dag_id, view.run_id, None, "sweep", now, retention, uncovered)


def _ended_run_phase(
    ended: str, renewed: bool, due: tuple[CleanupRecord, ...], write: CleanupRecord | None, waiting: list[float]
) -> tuple[RunPhase, str, str]:
    """(phase, rule, reason) of an ended run's sweep plan; the first that applies wins."""
    if renewed and not due:
        reason = f"{ended}; a newer incarnation read the run's attempts: kept for another window until {min(waiting):.0f}"
        return RunPhase.RETAINED, "newer_incarnation_ended", reason
    if due:
        reason = f"{ended}; {len(due)} record(s) past due carried out" + ("; new leftovers recorded" if write else "")
        return RunPhase.CLEANUP_DUE, "past_due", reason
    if write is not None:
        reason = f"{ended}; leftovers without a record get the retention window until {write.due_at:.0f}"
        return RunPhase.UNRECORDED, "record_leftovers", reason
    if waiting:
        return RunPhase.RETAINED, "retained", f"{ended}; kept until {min(waiting):.0f}"
    return RunPhase.CLEANED, "nothing_left", f"{ended}; nothing left"
