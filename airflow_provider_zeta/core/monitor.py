"""What the monitoring page and its API show for a run: phase, ready k of N, per-source drivers.

Pure functions over plain records (task rows from Airflow's DB, ledgers and cleanup records from the
state root): no storage, no Airflow, no clock. ``plugins/monitor.py`` reads, calls ``run_status``,
and renders.

Theory of operation
-------------------
A DAG run holds one or more *pipelines*: the provider's tasks grouped by their TaskGroup (the part
of the task id before the last ``.``; ``zeta_pipeline`` makes one group per pipeline). Deploy tasks
of a group are its *sources*. Tasks are recognised by their operator class name, which Airflow keeps
on every task instance.

**Section.** Every run falls in exactly one section, decided by the sweep's own rule
(``core.cleanup.plan_sweep``, so the page and the sweep never disagree):

* ``running``  — the run is queued/running and its data is still being worked on;
* ``retained`` — the run's work is over and its data is kept only for the delayed cleanup: a
  cleanup record waits for its due time (also while Airflow still shows the run as running, its
  cleanup task deferred), is past due, or the run ended without a record yet;
* ``ended``    — nothing of the run is left on the state root but bookkeeping.

**Phase of a pipeline**, first match wins:

=============================  ==============================================================
phase                          when
=============================  ==============================================================
``cleaned``                    the run is in the ``ended`` section
``cleanup_due``                retained, a record waits: "cleanup due in 42m 10s"
``cleanup_overdue``            retained, a record is past due (the sweep carries it out)
``awaiting_cleanup``           retained, the run ended but no pending cleanup record exists yet
``failed``                     a deploy, ready-to-close or completed point task failed, or the run
``committed``                  the completed point succeeded
``ready``                      k >= 1 sources reported ready-to-close: "ready k of N"
``running``                    a driver of the pipeline is running
``deploying``                  otherwise (no driver has claimed its attempt yet)
=============================  ==============================================================

A source is *ready* when its deploy task succeeded: its return value is its ready-to-close report.
For retained runs the outcome (``committed``/``failed``) is kept beside the phase.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum

from airflow_provider_zeta.core.cleanup import (
    ACTIVE_RUN_STATES,
    CleanupRecord,
    DriverView,
    Leftovers,
    RecordStatus,
    RunPhase,
    RunView,
    plan_sweep,
)
from airflow_provider_zeta.core.freshness import checkpoint_age, current_ledger, describe_age
from airflow_provider_zeta.core.ledger import CorruptState, Ledger, classify_ledger
from airflow_provider_zeta.core.paths import attempt_dir
from airflow_provider_zeta.core.redaction import MASK, redact  # noqa: F401  (re-exported: the page's masking)

#: Operator class name (as Airflow stores it on a task instance) -> role in a pipeline.
ROLES: Mapping[str, str] = {
    "ZetaSparkJobOperator": "deploy",
    "ReadyToCloseSensor": "ready",
    "CompletedPointOperator": "commit",
    "DelayedCleanupOperator": "cleanup",
    "CheckpointFreshnessSensor": "freshness",
}
FAILED_TASK_STATES = frozenset({"failed", "upstream_failed"})


class Section(str, Enum):
    """The section of the monitoring page a run is listed in."""

    RUNNING = "running"
    RETAINED = "retained"
    ENDED = "ended"


class PipelinePhase(str, Enum):
    """Where one pipeline of a run stands, from its deploy to its cleanup."""

    DEPLOYING = "deploying"
    RUNNING = "running"
    READY = "ready"
    COMMITTED = "committed"
    FAILED = "failed"
    CLEANUP_DUE = "cleanup_due"
    CLEANUP_OVERDUE = "cleanup_overdue"
    AWAITING_CLEANUP = "awaiting_cleanup"
    CLEANED = "cleaned"


@dataclass(frozen=True)
class TaskRow:
    """One task instance of the run, as Airflow's DB has it."""

    task_id: str
    operator: str | None
    state: str | None
    map_index: int = -1
    try_number: int = 0
    #: Why the provider refused this try, as the deploy task recorded it for the try (a refusal
    #: names task ids to clear, never a job's text); ``None`` when it refused nothing.
    refusal: str | None = None

    @property
    def role(self) -> str | None:
        """The task's part in its pipeline (``ROLES``: deploy, ready, commit, ...); ``None`` for another operator."""
        return ROLES.get(self.operator or "")

    @property
    def pipeline(self) -> str:
        """The pipeline the task belongs to: its task group's prefix of the task id (``""`` outside a group)."""
        return self.task_id.rsplit(".", 1)[0] if "." in self.task_id else ""


@dataclass(frozen=True)
class SourceStatus:
    """One source of a pipeline as the page shows it: its deploy task and its driver."""

    source: str
    task_id: str
    map_index: int
    task_state: str | None
    driver: str  # running / lost / succeeded / failed / cancelled / missing / corrupt
    token: str | None
    attempts: int
    heartbeat_age: float | None
    checkpoint_age: float | None
    checkpoints: int
    rows: int | None
    spark_ui_url: str | None
    error: str | None
    #: The provider's refusal of the task's current try (``TaskRow.refusal``): shown to every
    #: reader of the run, since it holds no driver text.
    refusal: str | None = None

    @property
    def ready(self) -> bool:
        """Whether the source's deploy task succeeded."""
        return self.task_state == "success"


@dataclass(frozen=True)
class PipelineStatus:
    """One pipeline of a run as the page shows it: its phase, how many sources are ready, its outcome."""

    pipeline: str
    phase: PipelinePhase
    phase_text: str
    ready: int
    total: int
    outcome: str | None  # committed / failed, once known
    sources: tuple[SourceStatus, ...]


@dataclass(frozen=True)
class RunStatus:
    """One run as the page shows it: its section, its retention phase and its pipelines."""

    dag_id: str
    run_id: str
    run_state: str | None
    section: Section
    retention: RunPhase
    cleanup_due_at: float | None
    pipelines: tuple[PipelineStatus, ...]
    error: str | None = None  # the run's state could not be read: shown on its row, nothing else


@dataclass(frozen=True)
class RunFacts:
    """Everything ``run_status`` needs about one run, read by the adapter."""

    dag_id: str
    run_id: str
    run_state: str | None
    tasks: Sequence[TaskRow]
    # (task_id, map_index) -> every attempt's ledger found under that task's attempts directory
    ledgers: Mapping[tuple[str, int], Sequence[Ledger | CorruptState]] = field(default_factory=dict)
    records: Sequence[CleanupRecord | CorruptState] = ()
    # attempt directories on the state root, relative to it (what the cleanup will delete)
    attempt_paths: Sequence[str] = ()


# ---------------------------------------------------------------------------- secrets and links

_PLAIN_HTTP_URL = re.compile(r"(?i)^https?://[^\s\"'<>\\@]+$")
MAX_LINK_CHARS = 2000


def safe_link(url: object) -> str | None:
    """Only a plain http(s) URL reaches a page: no credentials (``@``), quotes, spaces or
    backslashes; anything else — a number or list from a malformed ledger included — is dropped."""
    if not isinstance(url, str) or len(url) > MAX_LINK_CHARS or not _PLAIN_HTTP_URL.match(url):
        return None
    if not link_host(url):  # no host, or one urlsplit refuses (``http://[worker-1]``)
        return None
    return url


def link_host(url: str) -> str:
    """The host of a URL that ``safe_link`` accepted, lower-cased, without port or brackets;
    ``""`` for one ``urlsplit`` cannot take apart (``http://[worker-1]``: brackets that hold no
    IPv6 address)."""
    from urllib.parse import urlsplit

    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""


def redirect_target(
    spark_ui_url: object, launcher_hosts: Sequence[str], allowed_hosts: Sequence[str]
) -> tuple[str | None, str]:
    """Where ``/zeta/driver`` may redirect for a running driver's Spark UI, and the rule that decided.

    The URL comes from the ledger, which the job can write: a redirect goes only to a host the
    launcher recorded for this attempt (its host name, or an address that name resolves to, passed in
    ``launcher_hosts``) or to a host of the ``[zeta] spark_ui_allowed_hosts`` allow-list. Rules:
    ``no_url``, ``not_plain_http``, ``host_not_allowed``, ``launcher_host``, ``allow_listed``.
    """
    if spark_ui_url is None:
        return None, "no_url"
    link = safe_link(spark_ui_url)
    if link is None:
        return None, "not_plain_http"
    host = link_host(link)
    if host and host in {h.lower() for h in launcher_hosts if h}:
        return link, "launcher_host"
    if host and host in {h.lower() for h in allowed_hosts if h}:
        return link, "allow_listed"
    return None, "host_not_allowed"


def history_link(history_server_url: str | None, spark_app_id: object) -> str | None:
    """The application's page on the Spark History Server, when one is configured and the app id is
    a plain Spark application id (it comes from the ledger, so it is checked, not trusted)."""
    base = safe_link(history_server_url) if history_server_url else None
    if base is None or not isinstance(spark_app_id, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_\-.]{0,199}", spark_app_id):
        return None
    return f"{base.rstrip('/')}/history/{spark_app_id}/"


# ---------------------------------------------------------------------------- what a job wrote

# The ledger is written by the driver, inside which the job runs: the job can write anything
# there. The page takes a ledger only when every field has the type and range the driver writes;
# anything else makes the source ``corrupt``, with a reason that names the field, never its value.

#: The largest ledger document the page reads (a driver's ledger is a few KiB; the staged file
#: list of a succeeded attempt may make it larger).
MAX_LEDGER_BYTES = 4 * 1024 * 1024
#: Times are epoch seconds: anything outside +-1e11 (year 5138) is not a time a driver wrote.
_MAX_TIME = 1e11
_MAX_INT = 2**63 - 1
_TIME_FIELDS = ("started_at", "heartbeat_at")
_OPTIONAL_TIME_FIELDS = ("ended_at", "last_checkpoint_at")
_OPTIONAL_INT_FIELDS = ("rows", "checkpoints", "beat", "incarnation", "pid")
_OPTIONAL_TEXT_FIELDS = (
    "output_path", "error", "host", "spark_app_id", "spark_ui_url", "dag_id", "run_id", "task_id", "source", "host_id"
)
_STATUSES = frozenset({"running", "succeeded", "failed", "cancelled"})


def _is_time(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and abs(value) <= _MAX_TIME


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and -_MAX_INT <= value <= _MAX_INT


def _optional(check: Callable[[object], bool]) -> Callable[[object], bool]:
    return lambda value: value is None or check(value)


def _is_sizes(value: object) -> bool:
    return isinstance(value, dict) and all(_is_count(v) for v in value.values())


#: The ledger fields ``ledger_document_problem`` checks, in order: (fields, what each must be, what
#: is said when it is not).
_FIELD_CHECKS: tuple[tuple[tuple[str, ...], Callable[[object], bool], str], ...] = (
    (_TIME_FIELDS, _is_time, "is not a finite epoch time"),
    (_OPTIONAL_TIME_FIELDS, _optional(_is_time), "is not a finite epoch time"),
    (_OPTIONAL_INT_FIELDS, _optional(_is_count), "is not an integer"),
    (_OPTIONAL_TEXT_FIELDS, _optional(lambda value: isinstance(value, str)), "is not text"),
    (("metrics",), _optional(lambda value: isinstance(value, dict)), "is not an object"),
    (("files",), _optional(_is_sizes), "is not an object of sizes"),
)


def ledger_document_problem(data: object, expected_token: str) -> str | None:
    """Why a decoded ledger document cannot be shown, or ``None``. Names a field and what it
    should hold, never the value found (which the job wrote, and may be a secret)."""
    if not isinstance(data, dict):
        return f"holds {type(data).__name__}, not an object"
    if data.get("token") != expected_token:
        return "its token is not its attempt directory's name"
    if data.get("status") not in _STATUSES:
        return "field 'status' is not a known status"
    for names, valid, problem in _FIELD_CHECKS:
        for name in names:
            if not valid(data.get(name)):
                return f"field {name!r} {problem}"
    return None


#: What the driver bootstrap itself writes as a ledger's error (no job text in them).
_PROVIDER_ERRORS = (
    re.compile(r"cancelled by the coordinator \(cancel marker\)"),
    re.compile(r"fenced before start: the coordinator gave up on this attempt"),
    re.compile(r"terminated by signal \d{1,3}"),
    re.compile(r"the job exited with status -?\d{1,6}"),
)
_EXCEPTION_CLASS = re.compile(
    r"(could not list the staged output: )?"
    r"([A-Za-z_][A-Za-z0-9_]{0,79}(?:Error|Exception|Exit|Interrupt|Warning|Failure|Timeout|Fault))(?::|$)"
)
#: Where the user reads what the page does not show.
IN_TASK_LOG = "the message is in the task log"


def error_summary(error: object) -> tuple[str | None, str]:
    """What the page shows of a ledger's ``error``, and the rule that decided (first match wins).

    The API server has no masker for the secrets a job was given, so the driver's free text is never
    shown, only structured facts; the task log holds the message, masked by Airflow:

    * ``no_error`` — none (or not text): nothing;
    * ``provider_text`` — a fixed text of the driver bootstrap (cancelled, fenced, a signal, an exit
      status): shown as it is;
    * ``exception_class`` — ``<Class>: ...`` as the bootstrap writes a job's exception: the class
      name and a pointer to the task log;
    * ``withheld`` — anything else: a pointer to the task log.

    Only the first 200 characters are looked at, so a huge error costs nothing.
    """
    if not isinstance(error, str) or not error:
        return None, "no_error"
    head = error[:200]
    if any(pattern.fullmatch(head) for pattern in _PROVIDER_ERRORS):
        return head, "provider_text"
    found = _EXCEPTION_CLASS.match(head)
    if found:
        prefix = "could not list the staged output: " if found.group(1) else ""
        return f"{prefix}{found.group(2)} ({IN_TASK_LOG})", "exception_class"
    return f"the driver reported an error ({IN_TASK_LOG})", "withheld"


def finite_or_none(value: object) -> float | None:
    """A number a JSON answer can carry: ``None`` for a missing, non-finite or non-numeric value."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def capped_text(text: object, limit: int = 500) -> str | None:
    """A provider-built message (a corrupt ledger's reason) for the page: cut first, then masked
    by form, so its cost does not grow with what a job wrote."""
    if text is None:
        return None
    cut = str(text)[: limit * 4]
    return (redact(cut) or "")[:limit] or None


# ---------------------------------------------------------------------------- rules


def _unreadable_source(task: TaskRow, attempts: int, driver: str, error: str | None) -> SourceStatus:
    return SourceStatus(
        source=task.task_id.rsplit(".", 1)[-1].removeprefix("deploy_"),
        task_id=task.task_id,
        map_index=task.map_index,
        task_state=task.state,
        driver=driver,
        token=None,
        attempts=attempts,
        heartbeat_age=None,
        checkpoint_age=None,
        checkpoints=0,
        rows=None,
        spark_ui_url=None,
        error=capped_text(error),
        refusal=capped_text(task.refusal),
    )


def source_status(task: TaskRow, ledgers: Sequence[Ledger | CorruptState], now: float, lost_after: float) -> SourceStatus:
    """The row of one deploy task. A ledger the job wrote with values of the wrong type (a number
    as ``error``, a list as ``spark_ui_url`` or ``source``) shows as ``corrupt`` on this row only,
    with the reason: it never breaks the run's other rows or the page."""
    try:
        return _source_status(task, ledgers, now, lost_after)
    except (TypeError, ValueError, AttributeError, OverflowError) as error:
        # The exception's text may quote a value the job wrote: only its class is shown.
        return _unreadable_source(task, len(ledgers), "corrupt", f"the driver ledger cannot be shown ({type(error).__name__})")


def _text_or_none(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _source_status(task: TaskRow, ledgers: Sequence[Ledger | CorruptState], now: float, lost_after: float) -> SourceStatus:
    current = current_ledger(ledgers)
    ledger = current if isinstance(current, Ledger) else None
    if ledger is None:
        driver = "corrupt" if current is not None else "missing"
        return _unreadable_source(task, len(ledgers), driver, None if current is None else str(current))
    running = not ledger.status.terminal
    rows = ledger.rows
    return SourceStatus(
        source=_text_or_none(ledger.source) or task.task_id.rsplit(".", 1)[-1].removeprefix("deploy_"),
        task_id=task.task_id,
        map_index=task.map_index,
        task_state=task.state,
        driver=classify_ledger(ledger, now, lost_after).value,
        token=str(ledger.token),
        attempts=len(ledgers),
        heartbeat_age=finite_or_none(ledger.heartbeat_age(now)) if running else None,
        checkpoint_age=finite_or_none(checkpoint_age(ledger, now)) if running else None,
        checkpoints=int(ledger.checkpoints),
        rows=None if rows is None else int(rows),
        spark_ui_url=safe_link(ledger.spark_ui_url) if running else None,
        error=error_summary(ledger.error)[0],
        refusal=capped_text(task.refusal),
    )


def without_log_details(source: SourceStatus) -> SourceStatus:
    """A source as shown to a user who may read the DAG's runs but not its task logs.

    The driver's error and its Spark UI link come from the driver (its log, its UI, which shows the
    job's configuration and logs): they need the same access as ``/zeta/driver`` (``TASK_LOGS``).
    """
    return replace(source, spark_ui_url=None, error=None)


def progress_phase(
    run_state: str | None, tasks: Sequence[TaskRow], sources: Sequence[SourceStatus]
) -> tuple[PipelinePhase, str | None]:
    """The phase of a pipeline whose run is still being worked on, and its outcome if known."""
    coordinating = [t for t in tasks if t.role in ("deploy", "ready", "commit")]
    if run_state == "failed" or any(t.state in FAILED_TASK_STATES for t in coordinating):
        return PipelinePhase.FAILED, "failed"
    commits = [t for t in tasks if t.role == "commit"]
    if commits and all(t.state == "success" for t in commits):
        return PipelinePhase.COMMITTED, "committed"
    if any(s.ready for s in sources):
        return PipelinePhase.READY, None
    if any(s.driver in ("running", "lost") for s in sources):
        return PipelinePhase.RUNNING, None
    return PipelinePhase.DEPLOYING, None


def phase_text(phase: PipelinePhase, ready: int, total: int, outcome: str | None, due_in: float | None) -> str:
    """The pipeline's phase as the page words it (sources ready, cleanup due time, outcome)."""
    prefix = f"{outcome} · " if outcome and phase not in (PipelinePhase.FAILED, PipelinePhase.COMMITTED) else ""
    if phase is PipelinePhase.READY:
        return f"ready {ready} of {total}"
    if phase is PipelinePhase.CLEANUP_DUE:
        return prefix + (f"cleanup due in {describe_age(due_in)}" if due_in is not None else "cleanup blocked (unreadable record)")
    if phase is PipelinePhase.CLEANUP_OVERDUE:
        return prefix + "cleanup overdue (the sweep carries it out)"
    if phase is PipelinePhase.AWAITING_CLEANUP:
        return prefix + "ended, cleanup not recorded yet"
    return prefix + phase.value


def _retention(facts: RunFacts, now: float) -> tuple[Section, RunPhase, float | None]:
    drivers = []
    task_states = {(t.task_id, t.map_index): t.state for t in facts.tasks}
    for (task_id, map_index), ledgers in facts.ledgers.items():
        for ledger in ledgers:
            if isinstance(ledger, Ledger):
                drivers.append(
                    DriverView(
                        token=ledger.token,
                        attempt_path=attempt_dir(facts.dag_id, facts.run_id, task_id, map_index, ledger.token),
                        task_id=task_id,
                        live=not ledger.status.terminal,
                        task_state=task_states.get((task_id, map_index)),
                    )
                )
    view = RunView(
        dag_id=facts.dag_id,
        run_id=facts.run_id,
        run_state=facts.run_state,
        records=tuple(facts.records),
        leftovers=Leftovers(state_paths=tuple(facts.attempt_paths)),
        drivers=tuple(drivers),
    )
    # Only the phase is used: the retention length matters for a record the sweep would write,
    # which the page never shows as a due time.
    plan = plan_sweep(view, now, retention=0.0)
    pending = [r for r in facts.records if isinstance(r, CleanupRecord) and r.status is RecordStatus.PENDING]
    due_at = min((r.due_at for r in pending), default=None)
    if plan.phase is RunPhase.RUNNING:
        return Section.RUNNING, plan.phase, None
    if plan.phase is RunPhase.CLEANED:
        return Section.ENDED, plan.phase, None
    return Section.RETAINED, plan.phase, due_at


def known_section(run_state: str | None, has_run_dir: bool) -> Section | None:
    """A run's section when it is known without reading the state root, else ``None``.

    A run Airflow no longer shows queued/running whose directory (``runs/<dag>/<run>/``) is gone
    has nothing left for a cleanup: it is ``ended`` (``run_status`` would say the same; the listing
    skips reading it). An active run, or one with its directory still there, needs ``run_status``.
    """
    if run_state not in ACTIVE_RUN_STATES and not has_run_dir:
        return Section.ENDED
    return None


def section_order(section: Section, status: RunStatus) -> tuple:
    """Sort key within a section (stable over the newest-first listing): retained runs by the
    soonest cleanup due time (runs without one last); the other sections keep the newest first."""
    if section is Section.RETAINED:
        return (status.cleanup_due_at is None, status.cleanup_due_at or 0.0)
    return ()


def run_status(facts: RunFacts, now: float, lost_after: float) -> RunStatus:
    """The status of one run at ``now``, from what was read of it (``RunFacts``)."""
    section, retention, due_at = _retention(facts, now)
    groups: dict[str, list[TaskRow]] = {}
    for task in facts.tasks:
        if task.role is not None:
            groups.setdefault(task.pipeline, []).append(task)
    pipelines = []
    for name, tasks in sorted(groups.items()):
        deploys = sorted((t for t in tasks if t.role == "deploy"), key=lambda t: (t.task_id, t.map_index))
        if not deploys:
            continue
        sources = tuple(
            source_status(t, facts.ledgers.get((t.task_id, t.map_index), ()), now, lost_after) for t in deploys
        )
        ready = sum(1 for s in sources if s.ready)
        phase, outcome = progress_phase(facts.run_state, tasks, sources)
        if outcome is None and facts.run_state in ("success", "failed"):
            # "committed" only when a completed point published: a successful run whose completed
            # point was skipped (no source mapped) published nothing.
            published = any(t.role == "commit" and t.state == "success" for t in tasks)
            outcome = "committed" if facts.run_state == "success" and published else facts.run_state
        due_in = None
        if section is Section.ENDED:
            phase = PipelinePhase.CLEANED
        elif section is Section.RETAINED:
            # A record waiting for its time wins over leftovers it does not list (a stray late
            # write): the sweep adds those to a record, the due time shown stays the record's.
            phase = {
                RunPhase.CLEANUP_DUE: PipelinePhase.CLEANUP_OVERDUE,
                RunPhase.UNRECORDED: PipelinePhase.AWAITING_CLEANUP if due_at is None else PipelinePhase.CLEANUP_DUE,
            }.get(retention, PipelinePhase.CLEANUP_DUE)
            if phase is PipelinePhase.CLEANUP_DUE and due_at is not None:
                due_in = max(0.0, due_at - now)
                if due_in == 0.0:
                    phase = PipelinePhase.CLEANUP_OVERDUE
        pipelines.append(
            PipelineStatus(
                pipeline=name,
                phase=phase,
                phase_text=phase_text(phase, ready, len(sources), outcome, due_in),
                ready=ready,
                total=len(sources),
                outcome=outcome,
                sources=sources,
            )
        )
    return RunStatus(
        dag_id=facts.dag_id,
        run_id=facts.run_id,
        run_state=facts.run_state,
        section=section,
        retention=retention,
        cleanup_due_at=due_at,
        pipelines=tuple(pipelines),
    )


def page_bounds(total: int, limit: int, offset: int, max_limit: int = 100) -> tuple[int, int]:
    """Clamp a requested page to ``1 <= limit <= max_limit`` and ``0 <= offset``."""
    limit = max(1, min(int(limit), max_limit))
    offset = max(0, int(offset))
    return limit, offset
