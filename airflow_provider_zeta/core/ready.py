"""Ready-to-close (G2): which sources of a run have staged their output, and what to do about it.

Theory of operation
-------------------
A source's deploy task reports ready-to-close by *returning* its report (its XCom
``return_value``): source, incarnation, attempt token, output path, row count. That is one durable
write per report, made the moment the source finishes, whatever the number of sources — never a
rewrite of a growing set. Airflow wipes a task's XComs whenever that task starts afresh (retry,
clear, orphan reset: the new try deletes the keys present when it starts), so the report of a task
in ``success`` belongs to the source's latest run — unless a driver trigger of an earlier try,
current when it checked, stored its report after that start: such a report names an earlier
deferral and is refused (``stale_store_problem``). (A deploy task's driver trigger stores the
report a moment before it ends the task; while the task is still ``deferred`` its report counts
only under the stricter rule of ``REPORTED_WHILE_DEFERRED``.)

The sensor (and its trigger) evaluate the run with ``evaluate``: one read of all source task
states plus one XCom read per source that finished since the last evaluation (the trigger also
reads the stored report of a deferred source whose driver it saw end). A source counts as
ready when its task is ``success`` and its report is valid and not from a newer incarnation, or —
one triggerer beat sooner — when its task is still ``deferred`` and its report is already stored
under the task's latest deferral, of this very incarnation, names an attempt the trigger saw end,
and is verified (see ``REPORTED_WHILE_DEFERRED``). A
source whose task ended ``failed``/``upstream_failed`` (no retries left) fails the wait at once,
naming the source; so does the absolute deadline. A report of a task in ``success`` whose attempt
cannot be verified (its driver ledger is gone, unreadable, not ``succeeded``, or names another
output or row count) also fails the wait at once, naming the source and the attempt token: the
report exists only because its task succeeded, so nothing will change by waiting — only clearing
the source runs it again (a deferred task's report that does not verify only leaves it waiting).
Nothing here does I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from airflow_provider_zeta.core.cleanup import state_name, task_state_key
from airflow_provider_zeta.core.events import REPORT_DEFERRAL_FIELD, event_is_for
from airflow_provider_zeta.core.ledger import CorruptState
from airflow_provider_zeta.core.submit_options import SPARK_SUBMIT_OPTIONS

#: Task states after which a source will never report in this incarnation.
SOURCE_FAILED_STATES = frozenset({"failed", "upstream_failed", "skipped", "removed"})

#: A deploy task in this state may have made its report already. Its driver trigger, once the
#: driver succeeded, proves it is the trigger the task waits on (``core.events``), stores the report
#: as the task's return value — durable from that moment (G2) — and then yields ``TaskSuccessEvent``,
#: which Airflow 3.3 applies at the triggerer's next beat (its runner hands events over once a
#: second). Waiting for ``success`` would cost the ready-to-close wait that beat, and one more of
#: its own. Such a report counts only when (``StoredWhileDeferred``) it names this incarnation, it
#: was stored under the task's latest deferral (its mark, ``core.events.REPORT_DEFERRAL_FIELD``: a
#: stale trigger that stored late, after a clear and a new deferral, names an older one), its
#: attempt is one the waiting trigger saw end, and that attempt verifies (ledger ``succeeded``,
#: same output and rows). Anything less leaves the source waiting for its task to end, and is judged
#: then. Only ``success`` (or a failed state) ends a source's wait otherwise: a report of a task in
#: any other state may be a leftover that its next start wipes.
REPORTED_WHILE_DEFERRED = frozenset({"deferred"})


@dataclass(frozen=True)
class StoredWhileDeferred:
    """What was read of a source whose task is ``deferred`` and whose driver was seen ending: the
    report stored as the task's return value (raw), the task's latest deferral mark (its XCom
    ``core.events.DEPLOY_DEFERRAL_XCOM``), and the attempt tokens seen turning terminal."""

    raw: Any
    latest_mark: object
    ended_tokens: frozenset[str]


@dataclass(frozen=True)
class Report:
    """A source's report that its driver succeeded: the attempt, its output and the incarnation it ran for."""

    source: str
    task_id: str
    incarnation: int
    token: str
    output_path: str
    rows: int | None

    def to_value(self) -> dict[str, Any]:
        """The report as an XCom value."""
        return {
            "source": self.source,
            "task_id": self.task_id,
            "incarnation": self.incarnation,
            "token": self.token,
            "output_path": self.output_path,
            "rows": self.rows,
        }


def parse_report(value: Any, source: str, task_id: str) -> Report:
    """Parse a source's report (its deploy task's return value). Raises ``CorruptState``."""
    where = f"the ready-to-close report of source {source!r} (XCom return_value of task {task_id!r})"
    if not isinstance(value, Mapping):
        raise CorruptState(f"{where} is {type(value).__name__}, not a report: is {task_id!r} a ZetaSparkJobOperator?")
    try:
        report = Report(
            source=str(value.get("source") or source),
            task_id=task_id,
            incarnation=int(value["incarnation"]),
            token=str(value["token"]),
            output_path=str(value["output_path"]),
            rows=None if value.get("rows") is None else int(value["rows"]),
        )
    except KeyError as missing:
        raise CorruptState(f"{where} lacks {missing}") from None
    except (TypeError, ValueError) as error:
        raise CorruptState(f"{where} has an invalid value: {error}") from None
    if report.source != source:
        raise CorruptState(f"{where} names source {report.source!r}: two sources share task {task_id!r}?")
    if not report.token or not report.output_path:
        raise CorruptState(f"{where} has an empty token or output path")
    return report


#: Marks a mapped deploy task instance in a source's task reference: ``<task id>[<map index>]``.
#: Airflow task ids never hold ``[``, so the reference of an unmapped task is its task id alone.
_MAP_OPEN, _MAP_CLOSE = "[", "]"


def task_ref(task_id: str, map_index: int | None = -1) -> str:
    """How the ready-to-close wait names a source's deploy task instance: its task id when it is not
    mapped (``map_index`` -1 or None: what a report, a ready set and a sensor's decision record held
    before mapping existed), ``<task id>[<map index>]`` for one map index of a mapped task."""
    if map_index is None or int(map_index) < 0:
        return task_id
    return f"{task_id}{_MAP_OPEN}{int(map_index)}{_MAP_CLOSE}"


def split_task_ref(ref: str) -> tuple[str, int]:
    """(task id, map index) of a ``task_ref`` (map index -1: not mapped). Raises ``ValueError`` for
    a reference that opens a map index it does not close with a number."""
    if not ref.endswith(_MAP_CLOSE) or _MAP_OPEN not in ref:
        if _MAP_OPEN in ref or _MAP_CLOSE in ref:
            raise ValueError(f"task reference {ref!r} is neither a task id nor '<task id>[<map index>]'")
        return ref, -1
    task_id, _, index = ref[: -len(_MAP_CLOSE)].rpartition(_MAP_OPEN)
    if not task_id or not index.isdigit():
        raise ValueError(f"task reference {ref!r} is neither a task id nor '<task id>[<map index>]'")
    return task_id, int(index)


def task_state_name(ref: str) -> str:
    """The name Airflow's task-states call gives the task instance of ``ref``: the task id, or
    ``<task id>_<map index>`` for a mapped instance (``airflow_internals.run_task_states``;
    ``core.cleanup.task_state_key``)."""
    return task_state_key(*split_task_ref(ref))


def ref_task_ids(refs: Any) -> list[str]:
    """The task ids to ask the task states of, once each, for the task references ``refs``."""
    return sorted({split_task_ref(ref)[0] for ref in refs})


def ref_states(refs: Any, states: Mapping[str, Any]) -> dict[str, Any]:
    """Task reference -> state, from the states Airflow returned by its own names (``task_state_name``)."""
    return {ref: states.get(task_state_name(ref)) for ref in refs}


#: The keys a per-source entry of a mapped source list may hold besides the spark-submit options
#: (``core.submit_options.SPARK_SUBMIT_OPTIONS``).
MAPPED_ENTRY_KEYS = ("source", "application", "application_args")


def mapped_source_names(value: Any, where: str) -> list[str]:
    """The source names of a mapped source list, in map-index order: the list an upstream task
    returned, of names or of per-source dicts with a ``source`` key (``zeta_pipeline(sources=XComArg)``).
    Map index ``i`` of the mapped deploy task is the list's entry ``i`` (Airflow expands a list in
    its order). Raises ``ValueError`` naming ``where`` and the bad entry: not a list, an entry without
    a name, a name holding ``/`` or ``=`` (it is a path segment of the partition), a name twice."""
    value = stored_document(value)
    if value is None:
        raise ValueError(f"{where}: the mapped source list is missing (did the upstream task return a list?)")
    if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__iter__"):
        raise ValueError(f"{where}: the mapped source list must be a list of names or of per-source dicts, not {type(value).__name__}")
    names: list[str] = []
    for index, entry in enumerate(value):
        name = entry.get("source") if isinstance(entry, Mapping) else entry
        if not isinstance(name, str) or not name or "/" in name or "=" in name:
            raise ValueError(
                f"{where}: entry {index} of the mapped source list ({entry!r:.100}) names no valid source: a "
                "source is a non-empty name without '/' or '=' (or a dict with such a 'source')"
            )
        if name in names:
            raise ValueError(f"{where}: source {name!r} is twice in the mapped source list (entries {names.index(name)} and {index})")
        names.append(name)
    return names


def mapped_expected(task_id: str, value: Any, where: str) -> dict[str, str]:
    """Source name -> task reference of the mapped deploy task ``task_id`` for the run's mapped
    source list (``mapped_source_names``): what the ready-to-close wait expects."""
    return {name: task_ref(task_id, index) for index, name in enumerate(mapped_source_names(value, where))}


def mapped_entry_kwargs(entry: Any, application: str | None, defaults: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The deploy task arguments of one entry of a mapped source list: a name, or a dict with
    ``source`` and optionally ``application``, ``application_args`` and spark-submit options
    (``core.submit_options.SPARK_SUBMIT_OPTIONS``). ``application`` is the pipeline's
    default; ``defaults`` its options for every source, which an entry's own override. Raises
    ``ValueError`` naming the entry and what is wrong."""
    if isinstance(entry, Mapping):
        unknown = sorted(set(entry) - set(MAPPED_ENTRY_KEYS) - set(SPARK_SUBMIT_OPTIONS))
        if unknown:
            raise ValueError(
                f"{where}: source entry {entry.get('source')!r} holds {unknown}; an entry may hold "
                f"{list(MAPPED_ENTRY_KEYS)} and the spark-submit options {list(SPARK_SUBMIT_OPTIONS)}"
            )
        own = dict(entry)
    else:
        own = {"source": entry}
    name = own.get("source")
    if not isinstance(name, str) or not name or "/" in name or "=" in name:
        raise ValueError(f"{where}: source entry {entry!r:.100} names no valid source (non-empty, without '/' or '=')")
    chosen = own.pop("application", None) or application
    if not chosen:
        raise ValueError(f"{where}: source {name!r} has no application: give the pipeline's 'application' or the entry's")
    args = own.pop("application_args", None)
    kwargs = {**dict(defaults), **own, "application": chosen}
    kwargs["application_args"] = [str(arg) for arg in (args or [])]
    return kwargs


class Verdict(str, Enum):
    """What the ready-to-close evaluation concludes about a run's sources."""

    ALL_READY = "all_ready"
    WAITING = "waiting"
    SOURCE_FAILED = "source_failed"
    DEADLINE = "deadline_passed"
    CORRUPT = "corrupt_report"
    UNVERIFIABLE = "unverifiable_report"


def sensor_event_is_for(event: object, own: Mapping[str, Any]) -> bool:
    """Whether a woken ready-to-close sensor may act on ``event`` (``core.events``): it is for this
    task instance and carries one of this sensor's verdicts (an event of another kind of trigger,
    run under a reused id, carries other verdicts or none)."""
    if not event_is_for(event, own, required=("verdict",)):
        return False
    return event is None or (isinstance(event, Mapping) and event.get("verdict") in {v.value for v in Verdict})


@dataclass(frozen=True)
class Evaluation:
    """The ready-to-close evaluation of a run: its verdict and where each source stands."""

    verdict: Verdict
    ready: dict[str, Report] = field(default_factory=dict)
    missing: tuple[str, ...] = ()
    failed: dict[str, str] = field(default_factory=dict)  # source -> task state
    problems: tuple[str, ...] = ()
    unverifiable: tuple[str, ...] = ()  # reports whose attempt cannot be verified, and why
    # How many sources the run expects; None: those counted above (a corrupt report is in none of them).
    total: int | None = None

    @property
    def expected_count(self) -> int:
        """The number of sources the run waits for, a source with a corrupt report included."""
        if self.total is not None:
            return self.total
        return len(self.ready) + len(self.missing) + len(self.failed) + len(self.unverifiable)

    def progress_from(self, before: Evaluation | None) -> str | None:
        """What changed since ``before``, naming only the sources that changed (None: nothing did).

        The trigger logs this on every change instead of ``message``: a log line per change that
        grows with the change, not with the number of sources (``message`` lists everyone missing).
        """
        if before is not None and before.verdict is self.verdict and before.ready.keys() == self.ready.keys():
            if before.failed == self.failed and before.unverifiable == self.unverifiable and before.problems == self.problems:
                return None
        old_ready = set(before.ready) if before is not None else set()
        gained = sorted(set(self.ready) - old_ready)
        lost = sorted(old_ready - set(self.ready))
        parts = [f"{len(self.ready)} of {self.expected_count} sources ready"]
        if gained:
            parts.append("newly ready: " + _names(gained))
        if lost:
            parts.append("no longer ready (re-running): " + _names(lost))
        if self.verdict is not Verdict.WAITING:
            parts.append(self.message)  # the final verdict, once
        return "; ".join(parts)

    @property
    def message(self) -> str:
        """The evaluation in one line: how many sources are ready, and what is waited for or what failed."""
        base = f"{len(self.ready)} of {self.expected_count} sources ready"
        if self.verdict is Verdict.SOURCE_FAILED:
            names = _names([f"{s} ({state})" for s, state in sorted(self.failed.items())])
            return f"{base}; source(s) failed with no retries left: {names}"
        if self.verdict is Verdict.CORRUPT:
            return f"{base}; " + "; ".join(self.problems)
        if self.verdict is Verdict.UNVERIFIABLE:
            return f"{base}; reported attempt(s) cannot be verified: " + "; ".join(self.unverifiable)
        if self.verdict is Verdict.DEADLINE:
            return f"{base}; deadline passed, still missing: {_names(self.missing)}"
        if self.missing:
            return f"{base}; waiting for: {_names(self.missing)}"
        return base

    def ready_set(self, incarnation: int) -> dict[str, Any]:
        """The consolidated ready set: the completed point's only input."""
        return {
            "incarnation": incarnation,
            "sources": {name: report.to_value() for name, report in sorted(self.ready.items())},
        }


#: A message names at most this many sources: a log line must not grow with a 1000-source run.
MAX_NAMES_IN_MESSAGE = 20


def _names(names: Any) -> str:
    names = list(names)
    shown = ", ".join(names[:MAX_NAMES_IN_MESSAGE])
    more = len(names) - MAX_NAMES_IN_MESSAGE
    return f"{shown} and {more} more" if more > 0 else shown


def attempt_problem(report: Report, ledger: Any) -> str | None:
    """Why a report's attempt cannot be published (None when it can): the token must be known —
    its driver's ledger exists and says ``succeeded`` — and the output and row count must be that
    attempt's. Every message names the source and the attempt token."""
    from airflow_provider_zeta.core.ledger import Ledger, LedgerStatus

    head = f"source {report.source!r}, attempt {report.token}"
    if isinstance(ledger, CorruptState):
        return f"{head}: {ledger}"
    if not isinstance(ledger, Ledger):
        return (
            f"{head}: unknown attempt token (no driver ledger: the attempt never started, or the run's "
            "delayed cleanup already deleted it) — clear the source's deploy task to run it again"
        )
    if ledger.status is not LedgerStatus.SUCCEEDED:
        return f"{head}: the attempt did not succeed ({ledger.status.value})"
    if ledger.output_path != report.output_path:
        return f"{head}: report names output {report.output_path!r}, the ledger {ledger.output_path!r}"
    if ledger.rows != report.rows:
        return f"{head}: report says {report.rows} rows, the driver ledger {ledger.rows}"
    return None


def stale_store_problem(report: Report, raw: Any, latest_mark: object) -> str | None:
    """Why a report of a task in ``success`` is not that task's (None when it may be): a report a
    driver trigger stored names the deferral it was stored under (``REPORT_DEFERRAL_FIELD``), and
    that deferral must be the task's latest. A trigger that proved itself current and then stored
    so late that the task had meanwhile been cleared, run again and succeeded overwrote the new
    try's report with its own: waiting cannot bring the new one back. A report without a mark (the
    task returned it itself) has nothing to check."""
    mark = raw.get(REPORT_DEFERRAL_FIELD) if isinstance(raw, Mapping) else None
    if mark is None or mark == latest_mark:
        return None
    return (
        f"source {report.source!r}, attempt {report.token}: the report was stored by the trigger of an "
        "earlier deferral of its task, after the task was run again (a late write over the new try's "
        "report) — clear the source's deploy task to run it again"
    )


def evaluate(
    expected: Mapping[str, str],
    task_states: Mapping[str, str | None],
    reports: Mapping[str, Any],
    incarnation: int,
    now: float,
    deadline: float,
    unverified: Mapping[str, str] | None = None,
    stored_while_deferred: Mapping[str, StoredWhileDeferred] | None = None,
) -> Evaluation:
    """Evaluate one run.

    ``expected``: source name -> task id. ``task_states``: task id -> state. ``reports``: task id ->
    raw XCom value (absent/None when the task has not reported). ``unverified``: source -> why its
    report's attempt cannot be published (see ``attempt_problem``); such a report fails the wait at
    once (``unverifiable_report``): waiting cannot fix it, only a re-run of the source can.

    A report from an older incarnation counts only while its source task is ``success``: the source
    was then not re-run in this incarnation (only downstream tasks were cleared). A source that is
    re-running has had its XComs wiped, and any leftover value is ignored because its state is not
    ``success``. A source whose task is still ``deferred`` counts as ready when
    ``stored_while_deferred`` (task id -> what was read) holds a report that may count already
    (``REPORTED_WHILE_DEFERRED``; ``unverified`` names its problem, if any); otherwise it is missing,
    never corrupt or unverifiable: its task has not ended, and its end decides.
    """
    unverified = dict(unverified or {})
    if not expected:
        raise ValueError("a ready-to-close wait needs at least one expected source")
    ready: dict[str, Report] = {}
    missing: list[str] = []
    failed: dict[str, str] = {}
    problems: list[str] = []
    unverifiable: list[str] = []
    for source, task_id in sorted(expected.items()):
        stored = (stored_while_deferred or {}).get(task_id)
        kind, found = _judge_source(
            source, task_id, task_states.get(task_id), reports.get(task_id), incarnation, unverified.get(source), stored
        )
        if kind is _SourceKind.READY:
            ready[source] = found
        elif kind is _SourceKind.FAILED:
            failed[source] = found
        elif kind is _SourceKind.UNVERIFIABLE:
            unverifiable.append(found)
        else:
            if found is not None:
                problems.append(found)
            if kind is _SourceKind.MISSING:
                missing.append(source)
    verdict = _verdict(problems, unverifiable, failed, missing, now, deadline)
    return Evaluation(verdict, ready, tuple(missing), failed, tuple(problems), tuple(unverifiable), total=len(expected))


class _SourceKind(Enum):
    """Where one source stands in an evaluation (``_judge_source``)."""

    READY = "ready"
    MISSING = "missing"  # with a problem when its task succeeded without a report
    FAILED = "failed"
    CORRUPT = "corrupt"  # the problem says why
    UNVERIFIABLE = "unverifiable"


def _judge_source(
    source: str,
    task_id: str,
    state: str | None,
    raw: Any,
    incarnation: int,
    unverified_because: str | None,
    stored: StoredWhileDeferred | None,
) -> tuple[_SourceKind, Any]:
    """One source's standing (``evaluate`` documents the rules) and what goes with it: the report,
    the failed task's state, a problem or the reason its attempt cannot be verified."""
    if state in SOURCE_FAILED_STATES:
        return _SourceKind.FAILED, str(state_name(state))
    if state in REPORTED_WHILE_DEFERRED:
        early = None if stored is None else _report_stored_while_deferred(stored, source, task_id, incarnation, unverified_because is not None)
        return (_SourceKind.MISSING, None) if early is None else (_SourceKind.READY, early)
    if state != "success" or raw is None:
        # Not finished in this incarnation yet (or a value left by another XCom backend).
        if state == "success":
            return _SourceKind.MISSING, f"source {source!r}: task {task_id!r} succeeded without a ready-to-close report"
        return _SourceKind.MISSING, None
    try:
        report = parse_report(raw, source, task_id)
    except CorruptState as error:
        return _SourceKind.CORRUPT, str(error)
    if report.incarnation > incarnation:
        return _SourceKind.CORRUPT, (
            f"source {source!r} reported incarnation {report.incarnation}, newer than this run's "
            f"{incarnation}: the run was cleared while the wait ran"
        )
    if unverified_because is not None:
        return _SourceKind.UNVERIFIABLE, unverified_because
    return _SourceKind.READY, report


def _verdict(
    problems: Sequence[str], unverifiable: Sequence[str], failed: Mapping[str, str], missing: Sequence[str], now: float, deadline: float
) -> Verdict:
    """The run's verdict from its sources' standings, the most serious first."""
    if problems:
        return Verdict.CORRUPT
    if unverifiable:
        return Verdict.UNVERIFIABLE
    if failed:
        return Verdict.SOURCE_FAILED
    if not missing:
        return Verdict.ALL_READY
    return Verdict.DEADLINE if now >= deadline else Verdict.WAITING


def _report_stored_while_deferred(stored: StoredWhileDeferred, source: str, task_id: str, incarnation: int, unverified: bool) -> Report | None:
    """The report of a source whose task is still deferred, when it may count already (see
    ``REPORTED_WHILE_DEFERRED``); None: wait for the task to end."""
    if stored.raw is None or unverified or not isinstance(stored.raw, Mapping):
        return None
    mark = stored.raw.get(REPORT_DEFERRAL_FIELD)
    # Stored under the task's latest deferral: a trigger that proved itself current, then stored
    # late — after a clear and a new try that deferred — names an older mark.
    if not isinstance(mark, str) or not mark or mark != stored.latest_mark:
        return None
    try:
        report = parse_report(stored.raw, source, task_id)
    except CorruptState:
        return None
    # Only this incarnation's, and only an attempt the waiting trigger saw end.
    if report.incarnation != incarnation or report.token not in stored.ended_tokens:
        return None
    return report


def stored_document(value: Any) -> Any:
    """A return value as the task returned it. Pushed by a trigger with ``TaskSuccessEvent(xcoms=...)``
    (a deploy task's report, the sensor's ready set), Airflow 3.3.2 stores the XCom JSON-encoded
    once more, so it reads back as the document's JSON text; anything else is returned as it is."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value  # not a document: its parser says so
    return value


def parse_ready_set(value: Any) -> tuple[int, dict[str, Report]]:
    """Parse the sensor's ready set (the completed point's input). Raises ``CorruptState``."""
    value = stored_document(value)
    if not isinstance(value, Mapping) or not isinstance(value.get("sources"), Mapping):
        raise CorruptState(
            f"the ready set is {type(value).__name__} without 'sources': the completed point must "
            "read the ReadyToCloseSensor's return value"
        )
    try:
        incarnation = int(value["incarnation"])
    except (KeyError, TypeError, ValueError):
        raise CorruptState("the ready set has no valid 'incarnation'") from None
    sources = {}
    for name, raw in value["sources"].items():
        if not isinstance(raw, Mapping):
            raise CorruptState(f"the ready set entry of source {name!r} is not a report")
        sources[name] = parse_report(raw, name, str(raw.get("task_id", "")))
    if not sources:
        raise CorruptState("the ready set holds no source: nothing to publish")
    return incarnation, sources


def ready_set_names(value: Any, task_id: str, token: str) -> bool:
    """Whether a sensor's ready set (its return value, as read back) holds the report of task
    ``task_id`` with attempt ``token``. The sensor's evaluation read that token's ledger succeeded
    before it put the report in (``evaluate``), so the driver ended; tokens are never reused. A
    missing or unreadable ready set proves nothing (False)."""
    if value is None:
        return False
    try:
        _, sources = parse_ready_set(value)
    except CorruptState:
        return False
    return any(report.task_id == task_id and report.token == token for report in sources.values())


def wait_deadline(stored: Any, now: float, timeout: float, max_tries: int | None) -> tuple[dict[str, Any], bool]:
    """The sensor's absolute deadline and whether it must be (re)stored.

    Fixed at the sensor's first try and kept across retries, restarts and re-deferrals, so nothing
    stretches it. Renewed only when this sensor task is cleared — its ``max_tries`` rose — so a run
    cleared or reprocessed long after its first try gets a fresh wait instead of an expired one.
    Raises ``CorruptState`` for a stored value that is not a deadline.
    """
    fresh = {"deadline": now + timeout, "max_tries": max_tries}
    if stored is None:
        return fresh, True
    if isinstance(stored, (int, float)) and not isinstance(stored, bool):
        stored = {"deadline": float(stored), "max_tries": None}
    if not isinstance(stored, Mapping):
        raise CorruptState(f"the stored ready-to-close deadline is {stored!r}, not a deadline; delete the key to restart the wait")
    try:
        record = {
            "deadline": float(stored["deadline"]),
            "max_tries": None if stored.get("max_tries") is None else int(stored["max_tries"]),
        }
    except (KeyError, TypeError, ValueError):
        raise CorruptState(f"the stored ready-to-close deadline {stored!r} is unreadable; delete the key to restart the wait") from None
    if max_tries is not None and record["max_tries"] is not None and max_tries > record["max_tries"]:
        return fresh, True  # the sensor itself was cleared: a new wait
    return record, False
