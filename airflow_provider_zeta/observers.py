"""Observers: what a waiting sensor reads of a run, in its worker and in its trigger alike.

Purpose
    ``ReadyToCloseSensor`` and ``CheckpointFreshnessSensor`` evaluate once in a worker, then defer
    on a trigger that runs the *same* evaluation in the triggerer. Both sides need the same reads;
    this module holds them, below both: sensors and triggers import it, it imports neither (so a
    trigger never loads a sensor's module, and no import circle forms). The monitoring plugin reads
    attempt ledgers through it too. It does I/O (Airflow's task API, the state root), so it is not
    part of ``core``, which stays I/O-free; every decision is still ``core``'s.

How it works
    An observer reads, the core decides:

    - ``RunObserver`` (ready-to-close, G2) reads what ``core.ready.evaluate`` needs for one run: the
      states of the run's source deploy tasks (one task-state call), the report (XCom
      ``return_value``) of each source in ``success``, and the ledger of the attempt that report
      names, to verify it (``core.ready.attempt_problem``). It remembers the reports it read, so a
      poll costs one task-state call plus one XCom and one ledger read per source that finished
      since the previous poll; a source seen in any other state is forgotten (a rerun wipes its
      XComs). A source still ``deferred`` whose driver the trigger saw end (the cheap look below)
      has its stored report and its latest deferral mark read as well, at every look, unremembered:
      its trigger stores the report a beat before the task ends
      (``core.ready.REPORTED_WHILE_DEFERRED``). ``ended_drivers`` is its cheap look: which drivers of the sources not yet reported
      have a terminal ledger (a directory listing and a stat per attempt, a ledger read only when
      its file changed; local state roots only), so the trigger calls the API soon after a driver
      ends instead of on a blind backoff (``core.pacing``).
    - ``JobWatch`` (checkpoint freshness, G7) reads what ``core.freshness.judge_freshness`` needs for
      one job: the deploy task's state, then every attempt's ledger (``read_attempt_ledgers``), in
      that order, so a job that ends between the two reads is judged by its ledger, never as stale.
    - ``look_at_attempt`` (the deploy task and its driver trigger, G1/G6) reads one attempt of a
      deploy task: the process check, then the ledger, then — no ledger — the intent file, and
      counts how long the heartbeat mark (or the attempt's absence) has been seen unchanged. The
      operator turns the look into a ``core.deploy.DeployObservation`` for ``decide``, the trigger
      into a ``core.ledger.classify_ledger`` view for ``trigger_should_fire``. What differs
      between the two is passed in: how the process is checked (the operator also scans this
      host's process table, ``processes.process_view``; the trigger, every look, only the recorded
      handle, ``handle_view``), how a mark's silence is counted (the operator carries it on through
      the task state store and the trigger's event, the trigger in its own memory), and what is
      known of the attempt (the operator reads its record from the task state store, the trigger
      has what the task handed it in its kwargs). ``latest_attempt_record`` is the operator's
      record source; ``claimed_tokens`` what it reads when there is no record.

    Observers are built from plain values (ids, the state root's URL, a threshold, the reports a
    sensor already verified), so a trigger rebuilds one from its kwargs after a triggerer restart;
    what an observer remembers is a cache, and losing it costs reads, never a wrong verdict. Their
    methods block (HTTP to the API server, storage reads): triggers call them through
    ``sync_to_async``. Airflow is imported only inside the methods that call it.

    Every ledger and record is read with ``read_state_file``: the job can write its attempt
    directory, so a symbolic link, hard link, FIFO or oversized file there is refused (reported as
    ``CorruptState``), never followed, waited on or read whole.

What it does not do
    Decide (the verdicts are ``core.ready``, ``core.freshness`` and ``core.deploy``), or write
    anything itself: recording progress in the task state store and failing the task are the
    sensors' and the deploy task's part (the deploy task's mark counter, which it passes in, keeps
    its count in the task state store).
"""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_zeta.airflow_internals import run_task_states, xcom_get
from airflow_provider_zeta.core.cleanup import task_state_key
from airflow_provider_zeta.core.deploy import ProcessView, latest_record
from airflow_provider_zeta.core.events import DEPLOY_DEFERRAL_XCOM, DEPLOY_EARLY_REPORT_XCOM, REPORT_DEFERRAL_FIELD
from airflow_provider_zeta.core.freshness import FreshnessJudgement, current_ledger, judge_freshness
from airflow_provider_zeta.core.ledger import (
    AttemptRecord,
    CorruptState,
    HeartbeatSeen,
    Ledger,
    attempt_record_key,
    parse_attempt_record,
    parse_ledger,
)
from airflow_provider_zeta.core.monitor import MAX_LEDGER_BYTES, ledger_document_problem
from airflow_provider_zeta.core.paths import INTENT_FILE, LEDGER_FILE, attempt_dir, task_attempts_dir
from airflow_provider_zeta.core.ready import (
    REPORTED_WHILE_DEFERRED,
    Evaluation,
    StoredWhileDeferred,
    attempt_problem,
    evaluate,
    parse_report,
    ref_states,
    ref_task_ids,
    split_task_ref,
    stale_store_problem,
    stored_document,
)
from airflow_provider_zeta.processes import ProcessHandle, handle_alive
from airflow_provider_zeta.settings import open_state_storage
from airflow_provider_zeta.storage import StateStorage, stat_signature

#: The report fields the ready set carries: all a sensor hands its trigger of a verified report.
REPORT_FIELDS = ("source", "task_id", "incarnation", "token", "output_path", "rows")


#: The largest state file (ledger, cleanup record) a reader takes; a larger one is refused.
MAX_STATE_FILE_BYTES = MAX_LEDGER_BYTES


def read_state_file(storage: StateStorage, relative: str, max_bytes: int = MAX_STATE_FILE_BYTES) -> bytes | None:
    """A small state file a job may have tampered with, read without trusting it: ``None`` when
    absent, ``CorruptState`` (naming the file and the reason, never its content) when refused.

    The job runs as the user the readers run as and can write its attempt directory, so on a
    local state root a file is refused when it is

    * reached through a symbolic link anywhere below the state root (its real path is not the
      path asked for), or is one itself (``O_NOFOLLOW``): it would be read from outside the root;
    * not a regular file (``O_NONBLOCK`` and ``S_ISREG``: a FIFO would block the reading thread
      for good, a device never ends);
    * hard-linked (``st_nlink != 1``): some other file of the same filesystem linked in;
    * larger than ``max_bytes`` (checked on the open file, then at most ``max_bytes + 1`` read).

    Checks are made on the opened descriptor, and the path is compared with it afterwards, so a
    swap between check and open is refused too. On an object store (no links, no FIFOs) one
    ranged read of at most ``max_bytes + 1`` bytes.
    """
    where = storage.url_of(relative)
    local = storage.local_path(relative)
    if local is None:
        return _read_remote_state_file(storage, relative, where, max_bytes)
    return _read_local_state_file(storage, local, where, max_bytes)


def _read_remote_state_file(storage: StateStorage, relative: str, where: str, max_bytes: int) -> bytes | None:
    """``read_state_file`` on an object store: one ranged read, never more than ``max_bytes + 1``
    bytes over the wire."""
    try:
        data = storage.fs.cat_file(storage.path(relative), start=0, end=max_bytes + 1)
    except FileNotFoundError:
        return None
    if len(data) > max_bytes:
        raise CorruptState(f"{where} is larger than {max_bytes} bytes: not read")
    return data


def _read_local_state_file(storage: StateStorage, local: str, where: str, max_bytes: int) -> bytes | None:
    """``read_state_file`` on a local state root: every check made on the opened descriptor."""
    root = os.path.realpath(storage.root)
    expected = os.path.normpath(os.path.join(root, os.path.relpath(local, storage.root)))
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(local, flags)
    except FileNotFoundError:
        return None
    except OSError as error:  # ELOOP: a symbolic link; anything else: unreadable
        reason = "is a symbolic link" if os.path.islink(local) else f"cannot be opened ({type(error).__name__})"
        raise CorruptState(f"{where} {reason}: not read") from None
    with os.fdopen(fd, "rb") as handle:
        opened = os.fstat(handle.fileno())
        problem = _opened_state_file_problem(opened, local, expected, max_bytes)
        if problem is not None:
            raise CorruptState(f"{where} {problem}: not read")
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise CorruptState(f"{where} is larger than {max_bytes} bytes: not read")
    return data


def _opened_state_file_problem(opened: os.stat_result, local: str, expected: str, max_bytes: int) -> str | None:
    """Why the opened file (``opened``: its ``fstat``) must not be read, or None. ``expected`` is
    the real path ``local`` must have below the state root."""
    if not stat.S_ISREG(opened.st_mode):
        return "is not a regular file"
    if opened.st_nlink != 1:
        return f"has {opened.st_nlink} hard links"
    if os.path.realpath(local) != expected:
        return "is reached through a symbolic link"
    try:
        same = os.path.samestat(opened, os.stat(expected, follow_symlinks=False))
    except OSError:
        same = False
    if not same:
        return "changed while it was opened"
    if opened.st_size > max_bytes:
        return f"is larger than {max_bytes} bytes"
    return None


def _refused(where: str, why: str) -> CorruptState:
    return CorruptState(f"driver ledger {where} {why}")


def parse_ledger_strictly(raw: bytes, token: str, where: str) -> Ledger:
    """``parse_ledger`` for a reader that shows what it read (the monitoring plugin): the document
    must also pass ``core.monitor.ledger_document_problem`` (finite times, integers in range,
    text where text belongs), and every refusal names the field, never the value the job wrote."""
    try:
        data = json.loads(raw)
    except RecursionError:
        raise _refused(where, "is nested too deeply") from None
    except (ValueError, UnicodeDecodeError):
        raise _refused(where, f"is not valid JSON ({len(raw)} bytes)") from None
    problem = ledger_document_problem(data, token)
    if problem:
        raise _refused(where, problem)
    try:
        ledger = parse_ledger(raw, token, where)
    except (CorruptState, RecursionError, OverflowError, TypeError, ValueError):
        raise _refused(where, "is not a valid ledger") from None
    assert ledger is not None
    return ledger


def read_attempt_ledgers(
    storage, dag_id: str, run_id: str, task_id: str, map_index: int, strict: bool = False
) -> list[Ledger | CorruptState]:
    """Every attempt's ledger of one deploy task (a token directory without a ledger is skipped).

    Each is read with ``read_state_file`` (no symlink, FIFO, hard link or oversized file).
    ``strict``: parsed with ``parse_ledger_strictly`` (for a reader that shows the values)."""
    base = task_attempts_dir(dag_id, run_id, task_id, map_index)
    found: list[Ledger | CorruptState] = []
    for token in storage.list_dir(base):
        relative = f"{base}/{token}/{LEDGER_FILE}"
        where = storage.url_of(relative)
        try:
            raw = read_state_file(storage, relative)
            if raw is None:
                continue
            ledger = parse_ledger_strictly(raw, token, where) if strict else parse_ledger(raw, token, where)
        except CorruptState as error:
            found.append(error)
            continue
        except (RecursionError, OverflowError):
            found.append(_refused(where, "holds a value out of range or nested too deeply"))
            continue
        if ledger is not None:
            found.append(ledger)
    return found


class RunObserver:
    """Reads what ``core.ready.evaluate`` needs, for one run; usable in a task and in a trigger.

    Remembers reports it already read and verified, so a poll costs one task-state call plus one
    XCom read (and one ledger read) per source that finished since the previous poll.
    """

    def __init__(
        self,
        dag_id: str,
        run_id: str,
        expected: Mapping[str, str],
        state_root: str,
        verified: Mapping[str, Any] | None = None,
    ) -> None:
        """``verified``: task id -> raw report already read and verified (by the sensor, before it
        deferred): not read again while its task stays ``success``."""
        self.dag_id = dag_id
        self.run_id = run_id
        self.expected = dict(expected)
        self.state_root = state_root
        self._reports: dict[str, Any] = dict(verified or {})  # task id -> raw report, for sources seen in success
        self._unverified: dict[str, str] = {}
        self._storage: StateStorage | None = None
        self._ledger_ends: dict[str, tuple[Any, bool]] = {}  # ledger path -> (stat signature, terminal?)
        self.unreported = len(self.expected)  # sources the last ended_drivers listed
        # (task id, token) of the ledgers ended_drivers saw turn terminal: first seen running (or
        # not written yet), later terminal. A ledger already terminal when first seen (a driver
        # that ended before this observer looked, a cleared run's earlier attempt) is not in it.
        self.seen_ending: set[tuple[str, str]] = set()

    def verified_reports(self, limit: int = 0) -> dict[str, Any]:
        """Task id -> report of sources read and verified so far, for the trigger's kwargs.

        Only the fields the ready set carries, and at most ``limit`` sources (0: all), so the
        trigger row stays bounded whatever N; the trigger reads the others once when it starts.
        """
        unverified_tasks = {self.expected[source] for source in self._unverified}
        kept: dict[str, Any] = {}
        for task_id, raw in sorted(self._reports.items()):
            if task_id in unverified_tasks or not isinstance(raw, Mapping):
                continue
            if limit and len(kept) >= limit:
                break
            kept[task_id] = {key: raw.get(key) for key in REPORT_FIELDS if key in raw}
        return kept

    def _ledger_problem(self, source: str, task_id: str, raw: Any) -> str | None:
        try:
            report = parse_report(raw, source, task_id)
        except CorruptState:
            return None  # evaluate() reports it as corrupt
        if self._storage is None:
            self._storage = open_state_storage(self.state_root)
        relative = f"{attempt_dir(self.dag_id, self.run_id, *split_task_ref(task_id), report.token)}/{LEDGER_FILE}"
        ledger: Ledger | CorruptState | None
        try:
            ledger = parse_ledger(read_state_file(self._storage, relative), report.token, self._storage.url_of(relative))
        except CorruptState as error:
            ledger = error
        except (RecursionError, OverflowError):
            ledger = _refused(self._storage.url_of(relative), "holds a value out of range or nested too deeply")
        return attempt_problem(report, ledger)

    def _stale_store_problem(self, source: str, task_id: str, raw: Any) -> str | None:
        """``core.ready.stale_store_problem`` for a report of a task in ``success``: its deferral
        mark against the task's latest (read only for a report that names one)."""
        if not isinstance(raw, Mapping) or raw.get(REPORT_DEFERRAL_FIELD) is None:
            return None
        try:
            report = parse_report(raw, source, task_id)
        except CorruptState:
            return None  # evaluate() reports it as corrupt
        latest = self._xcom(DEPLOY_DEFERRAL_XCOM, task_id)
        return stale_store_problem(report, raw, latest)

    def _xcom(self, key: str, ref: str) -> Any:
        """An XCom of the source task instance ``ref`` (``core.ready.task_ref``: mapped or not)."""
        task_id, map_index = split_task_ref(ref)
        return xcom_get(key=key, dag_id=self.dag_id, run_id=self.run_id, task_id=task_id, map_index=map_index)

    def ledgers_watchable(self) -> bool:
        """Whether ``ended_drivers`` can look: the state root is local (NFS included); on an object
        store a listing per source would be an HTTP request each."""
        if self._storage is None:
            self._storage = open_state_storage(self.state_root)
        return self._storage.is_local

    def ended_drivers(self) -> frozenset[tuple[str, str]] | None:
        """(task id, token) of every terminal ledger of the sources not yet seen reported; ``None``
        when the state root is not local. Those it saw turn terminal go to ``seen_ending``. Reads the local files directly (``os``), not through
        fsspec: it runs every half second or so (``core.pacing.listing_interval``), and only a
        changed ledger (its stat) is read again. ``unreported`` is then how many sources it
        listed."""
        if not self.ledgers_watchable():
            return None
        assert self._storage is not None
        ended: set[tuple[str, str]] = set()
        self.unreported = 0
        for source, task_id in self.expected.items():
            if task_id in self._reports and source not in self._unverified:
                continue
            self.unreported += 1
            attempts = task_attempts_dir(self.dag_id, self.run_id, *split_task_ref(task_id))
            base = self._storage.local_path(attempts)
            assert base is not None
            try:
                tokens = os.listdir(base)
            except OSError:
                continue  # not launched yet
            for token in tokens:
                path = os.path.join(base, token, LEDGER_FILE)
                signature = stat_signature(path)
                known = self._ledger_ends.get(path)
                if known is None or known[0] != signature:
                    was_terminal = None if known is None else known[1]
                    known = (signature, self._ledger_terminal(f"{attempts}/{token}/{LEDGER_FILE}", token))
                    self._ledger_ends[path] = known
                    if was_terminal is False and known[1]:
                        self.seen_ending.add((task_id, token))
                if known[1]:
                    ended.add((task_id, token))
        return frozenset(ended)

    def _ledger_terminal(self, relative: str, token: str) -> bool:
        assert self._storage is not None
        try:
            ledger = parse_ledger(read_state_file(self._storage, relative), token, relative)
        except (OSError, CorruptState, RecursionError, OverflowError):
            return False  # the full look reads it again and says what is wrong
        return ledger is not None and ledger.status.terminal

    def observe(self, incarnation: int, deadline: float, ended: frozenset[tuple[str, str]] | None = None) -> Evaluation:
        """Read and evaluate the run. ``ended``: (task id, token) of the ledgers the trigger saw turn
        terminal (``seen_ending``); the stored report of such a task that is still ``deferred`` (and,
        when there is one, the task's latest deferral mark) is read too (``core.ready.REPORTED_WHILE_DEFERRED``: its trigger
        stores the report a beat before the task ends). They are read again at every look until
        the task is ``success``: not remembered, so a clear in between cannot leave a report the
        task no longer has."""
        states_by_run = run_task_states(dag_id=self.dag_id, task_ids=ref_task_ids(self.expected.values()), run_ids=[self.run_id])
        states = ref_states(self.expected.values(), states_by_run.get(self.run_id, {}))
        ended_tokens: dict[str, set[str]] = {}
        for task_id, token in ended or ():
            ended_tokens.setdefault(task_id, set()).add(token)
        early: dict[str, StoredWhileDeferred] = {}  # task id -> its report stored while it is deferred
        early_unverified: dict[str, str] = {}
        for source, task_id in self.expected.items():
            if states.get(task_id) in REPORTED_WHILE_DEFERRED and task_id in ended_tokens:
                raw = self._xcom(DEPLOY_EARLY_REPORT_XCOM, task_id)
                if raw is not None:
                    mark = self._xcom(DEPLOY_DEFERRAL_XCOM, task_id)
                    early[task_id] = StoredWhileDeferred(raw, mark, frozenset(ended_tokens[task_id]))
                    problem = self._ledger_problem(source, task_id, raw)
                    if problem:
                        early_unverified[source] = problem
            if states.get(task_id) != "success":
                # A source that runs again has its XComs wiped: forget what we read of it.
                self._reports.pop(task_id, None)
                self._unverified.pop(source, None)
                continue
            if task_id in self._reports and source not in self._unverified:
                continue
            raw = stored_document(self._xcom("return_value", task_id))
            if raw is None:
                continue
            self._reports[task_id] = raw
            problem = self._stale_store_problem(source, task_id, raw) or self._ledger_problem(source, task_id, raw)
            if problem:
                self._unverified[source] = problem
            else:
                self._unverified.pop(source, None)
        return evaluate(
            self.expected, states, self._reports, incarnation, time.time(), deadline, {**self._unverified, **early_unverified}, early
        )


class JobWatch:
    """Reads what ``judge_freshness`` needs for one job; usable in a task and in a trigger."""

    def __init__(
        self,
        dag_id: str,
        run_id: str,
        job_task_id: str,
        map_index: int,
        state_root: str,
        threshold: float,
        first_checkpoint_threshold: float | None = None,
    ):
        self.dag_id = dag_id
        self.run_id = run_id
        self.job_task_id = job_task_id
        self.map_index = int(map_index)
        self.state_root = state_root
        self.threshold = float(threshold)
        self.first_checkpoint_threshold = None if first_checkpoint_threshold is None else float(first_checkpoint_threshold)
        self._storage: StateStorage | None = None

    @property
    def job(self) -> str:
        """The job in messages: ``dag_id.task_id``, with its map index when mapped."""
        suffix = f"[{self.map_index}]" if self.map_index >= 0 else ""
        return f"{self.dag_id}.{self.job_task_id}{suffix}"

    def task_state(self) -> str | None:
        """The job task's current Airflow state, through the execution API."""
        states = run_task_states(dag_id=self.dag_id, task_ids=[self.job_task_id], run_ids=[self.run_id]).get(self.run_id, {})
        return states.get(task_state_key(self.job_task_id, self.map_index))

    def ledger(self) -> Ledger | CorruptState | None:
        """The ledger of the job's current attempt (the state root is opened on first use)."""
        if self._storage is None:
            self._storage = open_state_storage(self.state_root)
        return current_ledger(
            read_attempt_ledgers(self._storage, self.dag_id, self.run_id, self.job_task_id, self.map_index)
        )

    def judge(self) -> FreshnessJudgement:
        """Judge the job's checkpoint freshness now."""
        # Task state first: a job that ended between the two reads is then judged by its ledger as
        # "between attempts" (watching), never as stale.
        state = self.task_state()
        return judge_freshness(
            self.job, state, self.ledger(), time.time(), self.threshold, self.first_checkpoint_threshold
        )


# ---------------------------------------------------------------------- one deploy attempt

#: How a deploy observer checks the driver process of a token (and its recorded handle).
ProcessCheck = Callable[[str, "ProcessHandle | None"], ProcessView]
#: How a deploy observer counts a mark it reads for a token: (token, mark) -> how long that mark
#: has been seen unchanged (``core.ledger.HeartbeatSeen``), on that observer's own clock.
MarkCounter = Callable[[str, str], HeartbeatSeen]


def handle_view(token: str, handle: ProcessHandle | None) -> ProcessView:
    """The recorded handle's own check (``processes.handle_alive``), without scanning the process
    table for the token: ``GONE`` only when the handle's process is known to have exited."""
    alive = None if handle is None else handle_alive(handle)
    if alive is None:
        return ProcessView.UNKNOWN
    return ProcessView.ALIVE if alive else ProcessView.GONE


@dataclass(frozen=True)
class AttemptLook:
    """One look at a deploy attempt (``look_at_attempt``)."""

    #: What this host can tell of the driver process (checked before the ledger was read).
    process: ProcessView
    #: The attempt's ledger: ``None`` when absent, ``CorruptState`` when unreadable.
    ledger: Ledger | CorruptState | None
    #: Whether the intent file is visible; ``None`` when not looked for (a ledger was found, no
    #: intent file was written on this state root, or the attempt is already known deleted).
    intent_visible: bool | None = None
    #: The ledger's heartbeat mark as counted; ``None`` without a readable ledger.
    heartbeat: HeartbeatSeen | None = None
    #: The attempt's absence as counted (``core.ledger.ATTEMPT_DELETED_MARK``); ``None`` when not counted.
    deleted: HeartbeatSeen | None = None

    @property
    def heartbeat_silence(self) -> float:
        """How long the heartbeat mark has been seen unchanged (0 when not counted)."""
        return 0.0 if self.heartbeat is None else self.heartbeat.silent_for

    @property
    def deleted_for(self) -> float:
        """How long the attempt has been seen deleted (0 when not counted)."""
        return 0.0 if self.deleted is None else self.deleted.silent_for

    @property
    def unchanged_for(self) -> float:
        """How long the one mark counted at this look (the heartbeat's or the absence's) has been
        seen unchanged (0 when none was counted)."""
        counted = self.heartbeat or self.deleted
        return 0.0 if counted is None else counted.silent_for


def look_at_attempt(
    attempt: StateStorage,
    token: str,
    handle: ProcessHandle | None,
    *,
    check_process: ProcessCheck,
    count_mark: MarkCounter,
    intent_written: bool,
    deleted_mark: str | None,
    known_deleted: bool = False,
) -> AttemptLook:
    """Read the attempt of ``token`` (``attempt``: its directory on the state root).

    The process first, then the ledger: a driver that writes its terminal ledger and exits between
    the two reads is then seen as terminal, never as "running, process gone" (lost). A readable
    ledger's heartbeat mark is counted with ``count_mark``. Without a ledger:

    * ``known_deleted`` (the task already found the attempt deleted by its run's cleanup): its
      absence is counted with ``deleted_mark``, and nothing is looked for;
    * otherwise, when the launch wrote its intent file on this state root (``intent_written``),
      whether that file is visible; an invisible one has its absence counted with
      ``deleted_mark`` unless that is ``None`` (the observer reports it instead).
    """
    process = check_process(token, handle)
    try:
        ledger = parse_ledger(attempt.read_bytes(LEDGER_FILE), token, attempt.url_of(LEDGER_FILE))
    except CorruptState as error:
        return AttemptLook(process, error)
    if ledger is not None:
        return AttemptLook(process, ledger, heartbeat=count_mark(token, ledger.heartbeat_mark))
    if known_deleted:
        assert deleted_mark is not None
        return AttemptLook(process, None, deleted=count_mark(token, deleted_mark))
    if not intent_written:
        return AttemptLook(process, None)
    visible = attempt.exists(INTENT_FILE)
    counted = None if visible or deleted_mark is None else count_mark(token, deleted_mark)
    return AttemptLook(process, None, intent_visible=visible, deleted=counted)


def latest_attempt_record(store: Any, try_number: int, where: str) -> AttemptRecord | CorruptState | None:
    """The deploy task's latest attempt record in its task state store ``store`` (one key per try,
    tries 1 to ``try_number``: ``core.deploy.latest_record``); ``where`` names the task in errors."""
    records: dict[int, AttemptRecord | CorruptState | None] = {}
    for number in range(1, try_number + 1):
        key = attempt_record_key(number)
        try:
            records[number] = parse_attempt_record(store.get(key), f"{where}:{key}")
        except CorruptState as error:
            records[number] = error
    return latest_record(records)


def claimed_tokens(attempts: StateStorage) -> tuple[str, ...]:
    """The tokens under a task key's attempts directory (``attempts``) whose driver claimed a ledger."""
    return tuple(token for token in attempts.list_dir("") if attempts.exists(f"{token}/{LEDGER_FILE}"))
