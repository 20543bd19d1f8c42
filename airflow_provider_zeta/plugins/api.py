"""The plugin's FastAPI app, mounted on the Airflow API server under ``/zeta``. Read-only.

Endpoints (every one needs an authenticated Airflow user; anonymous requests get 401/403; no
OpenAPI schema or docs are served):

``GET /zeta/api/runs?section=running|retained|ended&dag_id=&limit=&offset=``
    Pipeline runs of the DAGs whose runs the user may read (``get_authorized_dag_ids`` of the
    configured auth manager, then ``batch_is_authorized_dag`` with ``DagAccessEntity.RUN``, as
    Airflow's own DAG-run list requires), newest first, one section at a time, paginated. Driver
    errors and Spark UI links only for DAGs whose task logs the user may read (``TASK_LOGS``).
    Every answer also carries ``overdue_cleanups``: of those DAGs, how many cleanup records are
    still pending more than ``core.cleanup.OVERDUE_GRACE`` past their due time, per DAG and in
    total, how late the most overdue one is, each unreadable record on its own row, and what to do
    (``Monitor.overdue``).
``GET /zeta/api/run?dag_id=&run_id=``
    One run; 403 without read access to the DAG's runs (``requires_access_dag``), 404 if unknown.
    Each pipeline carries its completed point's audit outcome (``audits``: passed, failed sources,
    when) and each source its audit results (``audits``: audit, passed, numbers, message), from the
    completed point's XCom ``zeta_audit_results``; ``null`` / ``[]`` without audits.
``GET /zeta/api/rows?dag_id=``
    Rows per source of each pipeline over the DAG's last ``ROWS_CHART_RUNS`` runs, oldest first
    (``core.audits.rows_history``): published rows, or the rows of a run whose audit refused the
    publish. The DAG's page (``/zeta/ui?dag_id=``) draws them as a chart.
``GET /zeta/driver?dag_id=&run_id=&task_id=&map_index=``
    The deploy task's current driver: a redirect to the Spark History Server (when configured), to
    its live Spark UI (only on the host the launcher recorded or an allow-listed one), or to the
    task's log in the Airflow UI, which holds the driver's output masked by Airflow. Needs access
    to the DAG's task logs. The driver's log file is never served.
``GET /zeta/ui?...``
    The HTML page (``page.py``); refreshes itself. The overview (not the page of one run) shows
    the overdue cleanups above the sections.

What is read: Airflow's metadata DB (dag runs and the provider's task instances, recognised by
their operator class) through the API server's own session, and the state root (ledgers, cleanup
records) through ``[zeta] state_root``. Nothing is written. The rules are ``core.monitor``.

Cost: bounded per request, whatever the history (see ``Monitor``): one listing of ``runs/<dag>/``
per DAG, the state of the runs that are active or still have data (read once per request), and the
ended section paged in SQL.
"""

# No ``from __future__ import annotations``: FastAPI must see the real annotation objects of the
# route functions, which are defined inside ``build_app`` (their names are not module globals).
import logging
import time
from collections.abc import Iterable, Set
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from airflow_provider_zeta.airflow_internals import (
    auth_manager,
    dag_access_dependency,
    dag_model,
    dag_run_model,
    dag_run_state_column,
    dag_team_names,
    session_dependency,
    task_instance_model,
    task_state_store_model,
    user_dependency,
    xcom_model,
)
from airflow_provider_zeta.core.audits import AUDIT_RESULTS_XCOM, parse_outcome, rows_history
from airflow_provider_zeta.core.cleanup import (
    ACTIVE_RUN_STATES,
    CLEANUP_DAG_ID,
    CleanupRecord,
    OverdueSummary,
    RecordSeen,
    RunPhase,
    overdue_summary,
    parse_cleanup_record,
)
from airflow_provider_zeta.core.freshness import describe_age
from airflow_provider_zeta.core.incarnation import REFUSAL_KEY, current_refusal
from airflow_provider_zeta.core.ledger import CorruptState, Ledger, LedgerStatus
from airflow_provider_zeta.core.monitor import (
    ROLES,
    RunFacts,
    RunStatus,
    Section,
    TaskRow,
    finite_or_none,
    history_link,
    known_section,
    page_bounds,
    redirect_target,
    run_status,
    section_order,
    without_log_details,
)
from airflow_provider_zeta.core.paths import (
    ATTEMPTS_DIR,
    CLEANUP_DIR,
    RUNS_DIR,
    run_dir,
    safe_segment,
)
from airflow_provider_zeta.plugins.links import driver_link_path, task_log_path

if TYPE_CHECKING:
    from airflow.api_fastapi.auth.managers.models.batch_apis import IsAuthorizedDagRequest
    from fastapi import FastAPI

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------- reading


class StateReader:
    """Reads ledgers and cleanup records of runs from the state root (read-only)."""

    def __init__(self, state_root: str) -> None:
        from airflow_provider_zeta.settings import open_state_storage

        self.storage = open_state_storage(state_root)

    def run_dirs(self, dag_id: str) -> set[str]:
        """The names of the run directories of ``dag_id`` on the state root."""
        return set(self.storage.list_dir(f"{RUNS_DIR}/{safe_segment(dag_id)}"))

    def facts(
        self,
        dag_id: str,
        run_id: str,
        run_state: str | None,
        tasks: list[TaskRow],
        records: list[CleanupRecord | CorruptState] | None = None,
    ) -> RunFacts:
        """What the state root holds of one run; ``records``: its cleanup records, when already read."""
        from airflow_provider_zeta.observers import read_attempt_ledgers

        base = run_dir(dag_id, run_id)
        ledgers: dict[tuple[str, int], list[Ledger | CorruptState]] = {}
        attempt_paths: list[str] = []
        for task in tasks:
            if task.role != "deploy":
                continue
            found = read_attempt_ledgers(self.storage, dag_id, run_id, task.task_id, task.map_index, strict=True)
            ledgers[(task.task_id, task.map_index)] = found
        # Every attempt directory on storage is a leftover, whichever task wrote it.
        attempts = f"{base}/{ATTEMPTS_DIR}"
        for task_dir in self.storage.list_dir(attempts):
            for map_dir in self.storage.list_dir(f"{attempts}/{task_dir}"):
                for token in self.storage.list_dir(f"{attempts}/{task_dir}/{map_dir}"):
                    attempt_paths.append(f"{attempts}/{task_dir}/{map_dir}/{token}")
        if records is None:
            records = [record for _, record in self.records(base)]
        return RunFacts(dag_id, run_id, run_state, tasks, ledgers, records, attempt_paths)

    def records(self, base: str) -> list[tuple[str, CleanupRecord | CorruptState]]:
        """The cleanup records in ``<base>/cleanup/`` (a run's directory, relative to the state
        root), each with its path; one that cannot be read is a ``CorruptState`` in its place."""
        from airflow_provider_zeta.observers import read_state_file

        found: list[tuple[str, CleanupRecord | CorruptState]] = []
        for name in self.storage.list_dir(f"{base}/{CLEANUP_DIR}"):
            if not name.endswith(".json"):
                continue  # a temporary file of an interrupted atomic write
            relative = f"{base}/{CLEANUP_DIR}/{name}"
            where = self.storage.url_of(relative)
            record: CleanupRecord | CorruptState | None
            try:
                record = parse_cleanup_record(read_state_file(self.storage, relative), where)
            except CorruptState as error:
                record = error
            except (RecursionError, OverflowError):
                record = CorruptState(f"cleanup record {where} holds a value out of range or nested too deeply")
            if record is not None:
                found.append((relative, record))
        return found


_RUN_COLUMNS = ("id", "dag_id", "run_id", "state", "logical_date", "run_after", "start_date", "end_date")


def _zeta_runs_query(dag_ids: Iterable[str]):
    """``SELECT`` of the runs of ``dag_ids`` that have a task of the provider (small columns only)."""
    from sqlalchemy import and_, exists, select

    DagRun = dag_run_model()
    TaskInstance = task_instance_model()

    has_zeta_task = exists().where(
        and_(
            TaskInstance.dag_id == DagRun.dag_id,
            TaskInstance.run_id == DagRun.run_id,
            TaskInstance.operator.in_(list(ROLES)),
        )
    )
    return select(
        DagRun.id,
        DagRun.dag_id,
        DagRun.run_id,
        dag_run_state_column(),
        DagRun.logical_date,
        DagRun.run_after,
        DagRun.start_date,
        DagRun.end_date,
    ).where(DagRun.dag_id.in_(sorted(dag_ids)), has_zeta_task)


def _newest_first(query):
    DagRun = dag_run_model()

    return query.order_by(DagRun.run_after.desc(), DagRun.id.desc())


def _rows(session, query) -> list[dict[str, Any]]:
    return [dict(zip(_RUN_COLUMNS, row, strict=True)) for row in session.execute(query).all()]


def _like_escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("%", "\\%")


def _present_runs_condition(present: dict[str, set[str]]):
    """SQL that selects runs whose directory ``runs/<dag>/<safe_segment(run_id)>`` exists.

    ``safe_segment`` keeps a safe run id as it is and otherwise writes ``<id with each unsafe
    character as _>[:80]-<hash>``; in SQL ``LIKE`` an ``_`` matches any one character, so the
    pattern of a directory name matches its run id (and maybe a few more, which the caller drops by
    comparing ``safe_segment`` again). Bounded by the directories, not by the runs in history.
    """
    from sqlalchemy import and_, false, or_

    DagRun = dag_run_model()

    clauses = []
    for dag_id, names in present.items():
        if not names:
            continue
        exact = sorted(names)
        patterns = []
        for name in exact:
            head, _, digest = name.rpartition("-")
            if head and len(digest) == 8:
                patterns.append(_like_escape(head) + ("%" if len(head) >= 80 else ""))
        run_match = [DagRun.run_id.in_(exact)] + [DagRun.run_id.like(p, escape="\\") for p in patterns]
        clauses.append(and_(DagRun.dag_id == dag_id, or_(*run_match)))
    return or_(*clauses) if clauses else false()


def _task_rows(session, runs: list[dict[str, Any]]) -> dict[tuple[str, str], list[TaskRow]]:
    from sqlalchemy import select

    TaskInstance = task_instance_model()

    found: dict[tuple[str, str], list[TaskRow]] = {(r["dag_id"], r["run_id"]): [] for r in runs}
    if not runs:
        return found
    query = select(
        TaskInstance.dag_id,
        TaskInstance.run_id,
        TaskInstance.task_id,
        TaskInstance.map_index,
        TaskInstance.operator,
        TaskInstance.state,
        TaskInstance.try_number,
    ).where(
        TaskInstance.dag_id.in_(sorted({r["dag_id"] for r in runs})),
        TaskInstance.run_id.in_(sorted({r["run_id"] for r in runs})),
        TaskInstance.operator.in_(list(ROLES)),
    )
    refusals = _refusals(session, runs)
    for dag_id, run_id, task_id, map_index, operator, state, try_number in session.execute(query).all():
        key = (dag_id, run_id)
        if key in found:
            tries = int(try_number or 0)
            refusal = current_refusal(refusals.get((dag_id, run_id, task_id, int(map_index))), state, tries)
            found[key].append(TaskRow(task_id, operator, state, int(map_index), tries, refusal))
    return found


def _refusals(session, runs: list[dict[str, Any]]) -> dict[tuple[str, str, str, int], Any]:
    """The deploy tasks' refusal records (``core.incarnation.REFUSAL_KEY``) of ``runs``, from
    Airflow's task state store: written by the tasks, not by the jobs."""
    import json

    from sqlalchemy import select

    TaskStateStoreModel = task_state_store_model()

    query = select(
        TaskStateStoreModel.dag_id,
        TaskStateStoreModel.run_id,
        TaskStateStoreModel.task_id,
        TaskStateStoreModel.map_index,
        TaskStateStoreModel.value,
    ).where(
        TaskStateStoreModel.dag_id.in_(sorted({r["dag_id"] for r in runs})),
        TaskStateStoreModel.run_id.in_(sorted({r["run_id"] for r in runs})),
        TaskStateStoreModel.key == REFUSAL_KEY,
    )
    found: dict[tuple[str, str, str, int], Any] = {}
    for dag_id, run_id, task_id, map_index, value in session.execute(query).all():
        try:
            found[(dag_id, run_id, task_id, int(map_index))] = json.loads(value) if isinstance(value, str) else value
        except ValueError:
            continue
    return found


#: How many of a DAG's latest runs its page charts the rows of.
ROWS_CHART_RUNS = 20


def _xcom_values(session, runs: list[dict[str, Any]], keys: tuple[str, ...], operator: str) -> list[tuple[str, str, str, str, Any]]:
    """(dag id, run id, task id, key, value) of the XComs ``keys`` of ``runs``' tasks of ``operator``
    (one query; values as stored: JSON text)."""
    from sqlalchemy import and_, select

    TaskInstance = task_instance_model()
    XComModel = xcom_model()

    if not runs:
        return []
    query = (
        select(XComModel.dag_id, XComModel.run_id, XComModel.task_id, XComModel.key, XComModel.value)
        .join(
            TaskInstance,
            and_(
                TaskInstance.dag_id == XComModel.dag_id,
                TaskInstance.run_id == XComModel.run_id,
                TaskInstance.task_id == XComModel.task_id,
                TaskInstance.map_index == XComModel.map_index,
            ),
        )
        .where(
            XComModel.dag_id.in_(sorted({r["dag_id"] for r in runs})),
            XComModel.run_id.in_(sorted({r["run_id"] for r in runs})),
            XComModel.key.in_(list(keys)),
            TaskInstance.operator == operator,
        )
    )
    return [tuple(row) for row in session.execute(query).all()]


def _audit_outcomes(session, runs: list[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """The completed points' audit outcomes (XCom ``zeta_audit_results``) of ``runs``: written by
    the tasks from what the drivers reported and the audit job read, never driver text."""
    found: dict[tuple[str, str], list[dict[str, Any]]] = {(r["dag_id"], r["run_id"]): [] for r in runs}
    for dag_id, run_id, task_id, _, value in _xcom_values(session, runs, (AUDIT_RESULTS_XCOM,), "CompletedPointOperator"):
        outcome = parse_outcome(value)
        if outcome is not None and (dag_id, run_id) in found:
            found[(dag_id, run_id)].append({**outcome, "task_id": task_id})
    return found


def _pipeline_audits(outcomes: list[dict[str, Any]], pipeline: str) -> dict[str, Any] | None:
    for outcome in outcomes:
        if outcome.get("pipeline_id") == pipeline or outcome.get("task_id") == f"{pipeline}.completed_point":
            return outcome
    return None


def _audit_view(result: Any) -> dict[str, Any] | None:
    if not isinstance(result, dict):
        return None
    numbers = result.get("numbers") if isinstance(result.get("numbers"), dict) else {}
    return {
        "audit": str(result.get("audit")),
        "passed": result.get("passed") is True,
        "numbers": numbers,
        "message": str(result.get("message") or ""),
    }


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def run_json(
    status: RunStatus, row: dict[str, Any], now: float, log_access: bool, audits: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """One run as the API returns it; ``log_access``: the user may read the DAG's task logs;
    ``audits``: the run's audit outcomes (``_audit_outcomes``), shown per pipeline and source."""
    pipelines = []
    for pipeline in status.pipelines:
        outcome = _pipeline_audits(audits or [], pipeline.pipeline)
        results = outcome.get("results") if outcome is not None else []
        sources = []
        for source in pipeline.sources:
            data = asdict(source if log_access else without_log_details(source))
            data["ready"] = source.ready
            data["driver_link"] = (
                driver_link_path(status.dag_id, status.run_id, source.task_id, source.map_index) if log_access else None
            )
            # Only finite numbers reach the JSON (Starlette refuses NaN and infinities: a 500).
            data["heartbeat_age"] = finite_or_none(source.heartbeat_age)
            data["checkpoint_age"] = finite_or_none(source.checkpoint_age)
            data["heartbeat_age_text"] = describe_age(data["heartbeat_age"])
            data["checkpoint_age_text"] = describe_age(data["checkpoint_age"])
            data["audits"] = [
                view
                for view in (_audit_view(r) for r in results if isinstance(r, dict) and r.get("source") == source.source)
                if view is not None
            ] if isinstance(results, list) else []
            sources.append(data)
        pipelines.append(
            {
                "pipeline": pipeline.pipeline,
                "phase": pipeline.phase.value,
                "phase_text": pipeline.phase_text,
                "ready": pipeline.ready,
                "total": pipeline.total,
                "outcome": pipeline.outcome,
                "sources": sources,
                "audits": None if outcome is None else {
                    "passed": outcome.get("passed") is True,
                    "failed_sources": [str(s) for s in outcome.get("failed_sources") or []],
                    "at": finite_or_none(outcome.get("at")) if isinstance(outcome.get("at"), (int, float)) else None,
                    "results": len(results) if isinstance(results, list) else 0,
                },
            }
        )
    due_at = finite_or_none(status.cleanup_due_at)
    due_in = None if due_at is None else finite_or_none(max(0.0, due_at - now))
    return {
        "dag_id": status.dag_id,
        "run_id": status.run_id,
        "run_state": status.run_state,
        "logical_date": _iso(row.get("logical_date")),
        "run_after": _iso(row.get("run_after")),
        "start_date": _iso(row.get("start_date")),
        "end_date": _iso(row.get("end_date")),
        "section": status.section.value,
        "retention": status.retention.value,
        "cleanup_due_at": due_at,
        "cleanup_due_in": due_in,
        "pipelines": pipelines,
        "error": status.error,
    }


def overdue_json(summary: OverdueSummary | None, error: str | None = None) -> dict[str, Any]:
    """The overdue overview as the API returns it (``summary`` ``None``: it could not be made)."""
    if summary is None:
        return {"count": 0, "most_late_s": None, "most_late_text": "-", "grace_s": None, "sweep_records": 0,
                "dags": [], "unreadable": [], "hint": None, "error": error}
    most_late = finite_or_none(summary.total.most_late_s) if summary.total.count else None
    return {
        "count": summary.total.count,
        "most_late_s": most_late,
        "most_late_text": describe_age(most_late),
        "grace_s": finite_or_none(summary.grace),
        "sweep_records": summary.sweep_records,
        "dags": [
            {
                "dag_id": row.dag_id,
                "count": row.count,
                "most_late_s": finite_or_none(row.most_late_s),
                "most_late_text": describe_age(finite_or_none(row.most_late_s)),
            }
            for row in summary.dags
        ],
        # Only where the record is: its text may quote what was written into it (see _error_status).
        "unreadable": [{"dag_id": dag_id, "where": where, "error": "cannot be read"} for dag_id, where in summary.unreadable],
        "hint": summary.hint,
        "error": error,
    }


class Monitor:
    """One request's view: the user's DAGs, their runs, and their statuses.

    Cost of a request, whatever the history (``tests/unit/test_monitor_listing_cost.py``):

    * storage: one listing of ``runs/<dag>/`` per readable DAG (which runs still have data), then
      the ledgers and cleanup records of the runs that are active or still have a directory — the
      runs the running and retained sections are made of, which the delayed cleanup bounds to the
      retention window — read once per request, whatever number of sections is shown;
    * SQL: one query for those runs, and for the ended section (Airflow no longer shows the run
      active and its directory is gone: nothing of it is left to read) a ``COUNT`` and one page with
      ``LIMIT``/``OFFSET`` in the database; one query for the provider's task rows of the runs shown.
      A run of the ended section is never read from storage.
    """

    def __init__(self, session, dag_ids: set[str], log_dag_ids: Set[str] = frozenset()) -> None:
        from airflow_provider_zeta.settings import ZetaSettings

        self.session = session
        self.dag_ids = dag_ids  # the user may read these DAGs' runs
        self.log_dag_ids = log_dag_ids  # ... and their task logs (driver errors, Spark UI links)
        self.settings = ZetaSettings.load()
        self.reader = StateReader(self.settings.state_root)
        self.now = time.time()
        self._present: dict[str, set[str]] | None = None
        self._live: list[tuple[dict[str, Any], RunStatus]] | None = None
        # The cleanup records read for the runs' statuses, per run directory: the overdue overview
        # reuses them instead of reading them again.
        self._seen: dict[tuple[str, str], list[RecordSeen]] = {}
        self._overdue: dict[str, Any] | None = None

    def present_runs(self) -> dict[str, set[str]]:
        """Run directories on the state root, per readable DAG: the request's one storage pass."""
        if self._present is None:
            self._present = {dag_id: self.reader.run_dirs(dag_id) for dag_id in sorted(self.dag_ids)}
        return self._present

    def _status(self, row: dict[str, Any], tasks: list[TaskRow], read_storage: bool = True) -> RunStatus:
        """The run's status; a run whose state cannot be read shows as an error on its own row."""
        try:
            if read_storage:
                records = self._read_records(row["dag_id"], run_dir(row["dag_id"], row["run_id"]), row["state"])
                facts = self.reader.facts(row["dag_id"], row["run_id"], row["state"], tasks, records)
            else:
                facts = RunFacts(row["dag_id"], row["run_id"], row["state"], tasks)
            return run_status(facts, self.now, self.settings.driver_lost_after)
        except Exception as error:  # one run's bad state must not break the page for everyone
            return self._error_status(row, error)

    @staticmethod
    def _error_status(row: dict[str, Any], error: BaseException) -> RunStatus:
        """A run shown as an error on its own row. Only the exception's class is shown and logged:
        its text may quote what a job wrote (a value of its ledger), which this process cannot mask."""
        log.warning(
            "zeta.monitor.run_unreadable: run %s of %s cannot be shown (%s)", row["run_id"], row["dag_id"], type(error).__name__
        )
        return RunStatus(
                dag_id=row["dag_id"],
                run_id=row["run_id"],
                run_state=row["state"],
                section=Section.RUNNING if row["state"] in ACTIVE_RUN_STATES else Section.RETAINED,
                retention=RunPhase.RUNNING,
                cleanup_due_at=None,
                pipelines=(),
                error=f"its state on the state root cannot be read ({type(error).__name__})",
            )

    def _read_records(self, dag_id: str, base: str, run_state: str | None) -> list[CleanupRecord | CorruptState]:
        """The cleanup records of the run directory ``base``, kept for the overdue overview. If they
        cannot be listed, the overview shows that directory as unreadable, and the error is raised."""
        try:
            found = self.reader.records(base)
        except Exception as error:
            self._seen[(dag_id, base)] = [
                RecordSeen(dag_id, run_state, CorruptState(type(error).__name__), f"{base}/{CLEANUP_DIR}")
            ]
            raise
        self._seen[(dag_id, base)] = [RecordSeen(dag_id, run_state, record, where) for where, record in found]
        return [record for _, record in found]

    def _cleanup_dag(self) -> tuple[bool | None, bool | None]:
        """(deployed, paused) of the cleanup DAG as Airflow's ``dag`` table has it; (None, None)
        when it cannot be read. A stale row (its file gone) is not deployed."""
        from sqlalchemy import select

        DagModel = dag_model()
        try:
            row = self.session.execute(
                select(DagModel.is_paused, DagModel.is_stale).where(DagModel.dag_id == CLEANUP_DAG_ID)
            ).first()
        except Exception as error:  # the hint then names the three possibilities
            log.warning("zeta.monitor.cleanup_dag_unreadable: %s", type(error).__name__)
            return None, None
        if row is None or row.is_stale:
            return False, None
        return True, bool(row.is_paused)

    def overdue(self) -> dict[str, Any]:
        """The overview's overdue cleanups of the readable DAGs (``core.cleanup.overdue_summary``).

        Cost: none beyond the listing's own for the runs it shows (their records were read for
        their statuses); a run directory no listed run owns (its run was deleted from Airflow) costs
        one listing of its ``cleanup/`` and one read per record. The cleanup DAG has no cheaper
        index either: it lists the pending records the same way. One unreadable record or
        directory is a row of its own; nothing here fails the request.
        """
        if self._overdue is None:
            try:
                self.live_statuses()
                for dag_id, names in sorted(self.present_runs().items()):
                    for name in sorted(names):
                        base = f"{RUNS_DIR}/{safe_segment(dag_id)}/{name}"
                        if (dag_id, base) not in self._seen:
                            try:
                                self._read_records(dag_id, base, None)  # no run in Airflow: run_gone
                            except Exception as error:  # shown as unreadable on its own row
                                log.warning(
                                    "zeta.monitor.records_unreadable: %s (%s)", base, type(error).__name__
                                )
                seen = [entry for entries in self._seen.values() for entry in entries]
                summary = overdue_summary(seen, self.now)
                if summary.total.count > summary.sweep_records:
                    # Only then is the cleanup DAG's row read: the hint says which of missing,
                    # paused or failing it is.
                    summary = overdue_summary(seen, self.now, cleanup_dag=self._cleanup_dag())
                self._overdue = overdue_json(summary)
            except Exception as error:  # the overview must not break the page
                log.warning("zeta.monitor.overdue_unreadable: %s", type(error).__name__)
                self._overdue = overdue_json(None, error=f"overdue cleanups cannot be read ({type(error).__name__})")
        return self._overdue

    def live_statuses(self) -> list[tuple[dict[str, Any], RunStatus]]:
        """Statuses of the runs that are active or still have data: computed once per request."""
        if self._live is None:
            if not self.dag_ids:
                self._live = []
                return self._live
            from sqlalchemy import or_

            present = self.present_runs()
            query = _zeta_runs_query(self.dag_ids).where(
                or_(dag_run_state_column().in_(sorted(ACTIVE_RUN_STATES)), _present_runs_condition(present))
            )
            rows = [
                r
                for r in _rows(self.session, _newest_first(query))
                if known_section(r["state"], safe_segment(r["run_id"]) in present.get(r["dag_id"], ())) is None
            ]
            tasks = _task_rows(self.session, rows)
            self._live = [(row, self._status(row, tasks[(row["dag_id"], row["run_id"])])) for row in rows]
        return self._live

    def _ended_page(self, limit: int, offset: int) -> tuple[int, list[tuple[dict[str, Any], RunStatus]]]:
        """The ended section: runs ended by their live status (few, bounded like the live runs) and,
        paged in SQL, runs Airflow shows ended whose directory is gone."""
        from sqlalchemy import and_, func, not_, select

        ended_live = [(row, status) for row, status in self.live_statuses() if status.section is Section.ENDED]
        if not self.dag_ids:
            return 0, []
        gone = _zeta_runs_query(self.dag_ids).where(
            and_(not_(dag_run_state_column().in_(sorted(ACTIVE_RUN_STATES))), not_(_present_runs_condition(self.present_runs())))
        )
        # A run the LIKE patterns matched although its directory is another run's is not live: it
        # is ended like the others (``live_statuses`` dropped it), so it is counted and paged here.
        live_ids = {row["id"] for row, _ in self.live_statuses()}
        near_misses = self._near_misses(live_ids)
        total_gone = self.session.execute(select(func.count()).select_from(gone.subquery())).scalar_one() + len(near_misses)
        limit, offset = page_bounds(total_gone + len(ended_live), limit, offset)
        # Merge newest first: the few live-ended runs and near misses are interleaved with one SQL
        # page that is long enough to cover their possible positions.
        extra = sorted(ended_live, key=lambda item: _order_key(item[0])) + [(r, None) for r in near_misses]
        sql_offset = max(0, offset - len(extra))
        sql_rows = _rows(self.session, _newest_first(gone).limit(offset + limit - sql_offset).offset(sql_offset))
        preceding = self._count_newer(gone, [row for row, _ in extra]) if extra else {}
        merged: list[tuple[int, dict[str, Any], RunStatus | None]] = []
        for position, row in enumerate(sql_rows, start=sql_offset):
            merged.append((position + sum(1 for r, _ in extra if _order_key(r) < _order_key(row)), row, None))
        for index, (row, status) in enumerate(sorted(extra, key=lambda item: _order_key(item[0]))):
            merged.append((preceding[row["id"]] + index, row, status))
        chosen = sorted((item for item in merged if offset <= item[0] < offset + limit), key=lambda item: item[0])
        missing = [row for _, row, status in chosen if status is None]
        tasks = _task_rows(self.session, missing)
        page = [
            (row, status or self._status(row, tasks[(row["dag_id"], row["run_id"])], read_storage=False))
            for _, row, status in chosen
        ]
        return total_gone + len(ended_live), page

    def _near_misses(self, live_ids: set[int]) -> list[dict[str, Any]]:
        """Runs the directory patterns matched that are not live (see ``_present_runs_condition``)."""
        if not self.dag_ids:
            return []
        from sqlalchemy import and_, not_

        query = _zeta_runs_query(self.dag_ids).where(
            and_(not_(dag_run_state_column().in_(sorted(ACTIVE_RUN_STATES))), _present_runs_condition(self.present_runs()))
        )
        return [row for row in _rows(self.session, query) if row["id"] not in live_ids]

    def _count_newer(self, gone, rows: list[dict[str, Any]]) -> dict[int, int]:
        """For each run of ``rows``: how many runs of ``gone`` come before it, newest first."""
        from sqlalchemy import and_, func, or_, select

        DagRun = dag_run_model()

        counts = {}
        for row in rows:
            newer = gone.where(
                or_(
                    DagRun.run_after > row["run_after"],
                    and_(DagRun.run_after == row["run_after"], DagRun.id > row["id"]),
                )
            )
            counts[row["id"]] = self.session.execute(select(func.count()).select_from(newer.subquery())).scalar_one()
        return counts

    def section(self, section: Section, limit: int, offset: int) -> dict[str, Any]:
        """One page of a section's runs as the API returns it, with the total and the page's bounds."""
        if section is Section.ENDED:
            total, page = self._ended_page(limit, offset)
            limit, offset = page_bounds(total, limit, offset)
        else:
            chosen = [(row, status) for row, status in self.live_statuses() if status.section is section]
            chosen.sort(key=lambda item: section_order(section, item[1]))
            limit, offset = page_bounds(len(chosen), limit, offset)
            page = chosen[offset : offset + limit]
            total = len(chosen)
        # The page's runs' audit outcomes: one query, for the runs shown only.
        audits = _audit_outcomes(self.session, [row for row, _ in page])
        return {
            "section": section.value,
            "total": total,
            "limit": limit,
            "offset": offset,
            "generated_at": self.now,
            "runs": [self._run_json(status, row, audits[(row["dag_id"], row["run_id"])]) for row, status in page],
            "overdue_cleanups": self.overdue(),
        }

    def _run_json(self, status: RunStatus, row: dict[str, Any], audits: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """``run_json``, or the run as an error on its own row if a value cannot be shown."""
        log_access = row["dag_id"] in self.log_dag_ids
        try:
            return run_json(status, row, self.now, log_access, audits)
        except Exception as error:  # one run's bad state must not break the page for everyone
            return run_json(self._error_status(row, error), row, self.now, log_access)

    def run(self, dag_id: str, run_id: str) -> dict[str, Any] | None:
        """One run as the API returns it; ``None`` when the DAG is not the user's to see or the run is
        not one of the provider's."""
        DagRun = dag_run_model()

        if dag_id not in self.dag_ids:
            return None
        rows = _rows(self.session, _zeta_runs_query([dag_id]).where(DagRun.run_id == run_id))
        if not rows:
            return None
        row = rows[0]
        status = self._status(row, _task_rows(self.session, rows)[(dag_id, run_id)])
        return self._run_json(status, row, _audit_outcomes(self.session, rows)[(dag_id, run_id)])

    def rows_history(self, dag_id: str, runs: int = ROWS_CHART_RUNS) -> dict[str, Any]:
        """Rows per source of each pipeline over the DAG's last ``runs`` runs, oldest first: two
        queries (the runs, their completed points' XComs), whatever the history."""
        if dag_id not in self.dag_ids:
            return {"dag_id": dag_id, "pipelines": {}}
        rows = _rows(self.session, _newest_first(_zeta_runs_query([dag_id])).limit(runs))
        values = _xcom_values(self.session, rows, ("return_value", AUDIT_RESULTS_XCOM), "CompletedPointOperator")
        per_run: dict[str, tuple[list[Any], list[Any]]] = {row["run_id"]: ([], []) for row in rows}
        for _, run_id, _, key, value in values:
            if run_id in per_run:
                per_run[run_id][0 if key == "return_value" else 1].append(value)
        ordered = [(row["run_id"], *per_run[row["run_id"]]) for row in reversed(rows)]
        return {
            "dag_id": dag_id,
            "pipelines": {
                pipeline: [
                    {"run_id": p.run_id, "rows": dict(p.rows), "status": p.status, "failed_sources": list(p.failed_sources)}
                    for p in points
                ]
                for pipeline, points in rows_history(ordered).items()
            },
        }

    def current_ledger(self, dag_id: str, run_id: str, task_id: str, map_index: int) -> Ledger | CorruptState | None:
        """The ledger of one deploy task's current attempt; an unreadable one as its ``CorruptState``."""
        from airflow_provider_zeta.core.freshness import current_ledger
        from airflow_provider_zeta.observers import read_attempt_ledgers

        return current_ledger(read_attempt_ledgers(self.reader.storage, dag_id, run_id, task_id, map_index, strict=True))

    def launcher_hosts(self, dag_id: str, run_id: str, task_id: str, map_index: int, token: str) -> list[str]:
        """The host the launcher recorded for ``token`` (the deploy task's attempt record in
        Airflow's task state store, written by the task, not by the job) and the addresses that
        name resolves to."""
        import json
        import socket

        from sqlalchemy import select

        TaskStateStoreModel = task_state_store_model()

        from airflow_provider_zeta.core.ledger import ATTEMPT_RECORD_PREFIX

        query = select(TaskStateStoreModel.value).where(
            TaskStateStoreModel.dag_id == dag_id,
            TaskStateStoreModel.run_id == run_id,
            TaskStateStoreModel.task_id == task_id,
            TaskStateStoreModel.map_index == map_index,
            TaskStateStoreModel.key.like(ATTEMPT_RECORD_PREFIX + "%"),
        )
        hosts: set[str] = set()
        for (value,) in self.session.execute(query).all():
            try:
                record = json.loads(value) if isinstance(value, str) else value
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("token") == token and isinstance(record.get("host"), str):
                hosts.add(record["host"])
        addresses: set[str] = set()
        for host in hosts:
            try:
                # sockaddr[0] is the address text for IPv4 and IPv6 (typing also admits other families' ints).
                addresses |= {str(info[4][0]) for info in socket.getaddrinfo(host, None)}
            except OSError:
                pass
        return sorted(hosts | addresses)


def _order_key(row: dict[str, Any]) -> tuple:
    """Newest first, as ``_newest_first``: a smaller key comes first."""
    run_after = row.get("run_after")
    return (-(run_after.timestamp() if run_after is not None else float("-inf")), -int(row["id"]))


# ---------------------------------------------------------------------------- the app


def _authorized_dags(user, session, dag_ids: set[str], access_entity) -> set[str]:
    """The DAGs of ``dag_ids`` whose ``access_entity`` the user may read: one batch call to the auth
    manager, then one per DAG only if the batch is refused."""
    from airflow.api_fastapi.auth.managers.models.resource_details import DagDetails

    if not dag_ids:
        return set()
    manager = auth_manager()
    teams = dag_team_names(sorted(dag_ids), session)

    def request(dag: str) -> "IsAuthorizedDagRequest":
        return {"method": "GET", "access_entity": access_entity, "details": DagDetails(id=dag, team_name=teams.get(dag))}

    if manager.batch_is_authorized_dag([request(dag) for dag in sorted(dag_ids)], user=user):
        return set(dag_ids)
    return {dag for dag in dag_ids if manager.batch_is_authorized_dag([request(dag)], user=user)}


def _monitor_for(user, session, dag_id: str | None) -> Monitor:
    """A view limited as Airflow's own DAG-run list is: DAGs the user may read *and* whose runs he
    may read; driver errors and Spark UI links only where he may also read task logs."""
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity

    readable = set(auth_manager().get_authorized_dag_ids(user=user, method="GET"))
    if dag_id:
        readable &= {dag_id}
    runs = _authorized_dags(user, session, readable, DagAccessEntity.RUN)
    return Monitor(session, runs, _authorized_dags(user, session, runs, DagAccessEntity.TASK_LOGS))


def _parse_section(value: str) -> Section:
    """The ``section`` query parameter; 400 for an unknown one."""
    from fastapi import HTTPException

    try:
        return Section(value)
    except ValueError:
        raise HTTPException(400, f"section must be one of {[s.value for s in Section]}, got {value!r}") from None


def _driver_ledger(monitor: Monitor, dag_id: str, run_id: str, task_id: str, map_index: int) -> Ledger | CorruptState | None:
    """The ledger of the task's current driver attempt (None: no attempt yet); an unreadable
    attempt tree is a ``CorruptState``, logged: the task log still has the driver's output."""
    try:
        return monitor.current_ledger(dag_id, run_id, task_id, map_index)
    except Exception as error:  # an unreadable attempt tree: the task log still has the output
        log.warning("zeta.monitor.driver_link.unreadable: %s.%s run %s (%s)", dag_id, task_id, run_id, type(error).__name__)
        return CorruptState("unreadable")


def _spark_target(
    monitor: Monitor, ledger: Ledger | CorruptState, dag_id: str, run_id: str, task_id: str, map_index: int
) -> tuple[str | None, str]:
    """The driver link's Spark target and its rule (``/driver``): the History Server, else the
    running driver's Spark UI on the launcher's or an allow-listed host; else None and
    ``task_log`` (with why, when a Spark UI was refused)."""
    target, rule = None, "task_log"
    if isinstance(ledger, Ledger):
        history = history_link(monitor.settings.spark_history_server_url, ledger.spark_app_id)
        if history:
            target, rule = history, "history_server"
        elif ledger.status is LedgerStatus.RUNNING and ledger.spark_ui_url is not None:
            hosts = monitor.launcher_hosts(dag_id, run_id, task_id, map_index, ledger.token)
            target, why = redirect_target(ledger.spark_ui_url, hosts, monitor.settings.spark_ui_allowed_hosts)
            rule = why if target else f"task_log ({why})"
    return target, rule


def _one_run_sections(monitor: Monitor, dag_id: str, run_id: str, limit: int) -> dict[Section, dict[str, Any]]:
    """The page of one run: every section empty but the run's own, which holds the run (when found)."""
    found = monitor.run(dag_id, run_id)
    sections: dict[Section, dict[str, Any]] = {
        s: {"section": s.value, "total": 0, "limit": limit, "offset": 0, "runs": []} for s in Section
    }
    if found is not None:
        section = Section(found["section"])
        sections[section] = {"section": section.value, "total": 1, "limit": limit, "offset": 0, "runs": [found]}
    return sections


def _ui_html(
    monitor: Monitor,
    query: dict[str, str],
    dag_id: str | None,
    run_id: str | None,
    limit: int,
    offsets: dict[Section, int],
    fragment: bool,
) -> str:
    """The page (``/ui``): the overview with its overdue cleanups, a DAG's page with its rows
    charts above its runs, or the page of one run; only its content when ``fragment``."""
    from airflow_provider_zeta.plugins import page

    overdue = None  # the overview's overdue cleanups; the page of one run does not show them
    if run_id and dag_id:
        sections = _one_run_sections(monitor, dag_id, run_id, limit)
    else:
        sections = {s: monitor.section(s, limit, offsets[s]) for s in Section}
        overdue = monitor.overdue()
    content = page.render_sections(sections, query, monitor.now, dag_id=dag_id, run_id=run_id, overdue=overdue)
    if dag_id and not run_id:
        # The DAG's page: rows per source over its last runs, above its runs.
        content = page.render_rows_charts(monitor.rows_history(dag_id)) + content
    return content if fragment else page.render_page(content)


def build_app():
    """The plugin's FastAPI app: the JSON API (``/api/runs``, ``/api/run``), the driver link's target
    (``/driver``) and the page (``/ui``)."""
    from typing import Annotated

    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
    from fastapi import Depends, FastAPI, HTTPException, Query, Request
    from fastapi.responses import HTMLResponse, PlainTextResponse, RedirectResponse

    # The annotations Airflow's own routes use: FastAPI resolves them to the request's metadata DB
    # session and authenticated user.
    SessionDep = session_dependency()  # noqa: N806
    GetUserDep = user_dependency()  # noqa: N806

    # No OpenAPI schema nor docs: they would be served without authentication.
    app = FastAPI(
        title="Zeta pipelines",
        description="Read-only monitoring of airflow-provider-zeta pipelines (phase, ready k of N, drivers).",
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
    )

    @app.get("/api/runs")
    def list_runs(
        user: GetUserDep,
        session: SessionDep,
        section: str = "running",
        dag_id: str | None = None,
        limit: Annotated[int, Query(ge=1, le=100)] = 25,
        offset: Annotated[int, Query(ge=0)] = 0,
    ) -> dict[str, Any]:
        return _monitor_for(user, session, dag_id).section(_parse_section(section), limit, offset)

    @app.get("/api/run", dependencies=[Depends(dag_access_dependency("GET", DagAccessEntity.RUN))])
    def get_run(user: GetUserDep, session: SessionDep, dag_id: str, run_id: str) -> dict[str, Any]:
        logs = _authorized_dags(user, session, {dag_id}, DagAccessEntity.TASK_LOGS)
        found = Monitor(session, {dag_id}, logs).run(dag_id, run_id)
        if found is None:
            raise HTTPException(404, f"no run {run_id!r} of DAG {dag_id!r} with tasks of the zeta provider")
        return found

    @app.get("/api/rows", dependencies=[Depends(dag_access_dependency("GET", DagAccessEntity.RUN))])
    def get_rows(user: GetUserDep, session: SessionDep, dag_id: str) -> dict[str, Any]:
        return Monitor(session, {dag_id}).rows_history(dag_id)

    @app.get("/driver", dependencies=[Depends(dag_access_dependency("GET", DagAccessEntity.TASK_LOGS))])
    def driver(request: Request, user: GetUserDep, session: SessionDep, dag_id: str, run_id: str, task_id: str, map_index: int = -1):
        """Where the deploy task's "Spark driver" link leads, first match wins (logged as
        ``zeta.monitor.driver_link.<rule>``): ``history_server`` (``[zeta] spark_history_server_url``
        set and the driver recorded its application id), ``launcher_host`` / ``allow_listed`` (the
        driver runs and its Spark UI is on the host the launcher recorded, or on an allow-listed
        host), else ``task_log``: the task's log in the Airflow UI, where the trigger streamed the
        driver's output through Airflow's masker. The driver's log file itself is never served."""
        monitor = Monitor(session, {dag_id})
        ledger = _driver_ledger(monitor, dag_id, run_id, task_id, map_index)
        if ledger is None:
            return PlainTextResponse(f"{dag_id}.{task_id} has no driver attempt in run {run_id} yet.", status_code=404)
        target, rule = _spark_target(monitor, ledger, dag_id, run_id, task_id, map_index)
        if target is None:
            target = task_log_path(_ui_base(request), dag_id, run_id, task_id, map_index)
        log.info("zeta.monitor.driver_link.%s: %s.%s run %s", rule.split(" ")[0], dag_id, task_id, run_id)
        return RedirectResponse(target, status_code=307)

    @app.get("/ui", response_class=HTMLResponse)
    def ui(
        request: Request,
        user: GetUserDep,
        session: SessionDep,
        dag_id: str | None = None,
        run_id: str | None = None,
        limit: Annotated[int, Query(ge=1, le=100)] = 10,
        running_offset: Annotated[int, Query(ge=0)] = 0,
        retained_offset: Annotated[int, Query(ge=0)] = 0,
        ended_offset: Annotated[int, Query(ge=0)] = 0,
        fragment: bool = False,
    ) -> HTMLResponse:
        monitor = _monitor_for(user, session, dag_id)
        offsets = {Section.RUNNING: running_offset, Section.RETAINED: retained_offset, Section.ENDED: ended_offset}
        return HTMLResponse(_ui_html(monitor, dict(request.query_params), dag_id, run_id, limit, offsets, fragment))

    return app


def _ui_base(request) -> str:
    """The Airflow UI's base path as seen from this app (mounted at ``<base>/zeta``)."""
    root = (request.scope.get("root_path") or "").rstrip("/")
    return root[: -len("/zeta")] if root.endswith("/zeta") else ""


class LazyApp:
    """An ASGI app that builds the FastAPI app on its first request.

    Airflow imports plugins in every component, including task workers; building the app (and
    importing the API server's security module) only pays off in the API server.
    """

    def __init__(self) -> None:
        self._app: FastAPI | None = None

    async def __call__(self, scope, receive, send) -> None:
        """Build the app on the first request, then hand every request to it."""
        if self._app is None:
            self._app = build_app()
        await self._app(scope, receive, send)
