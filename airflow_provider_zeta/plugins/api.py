"""The plugin's FastAPI app, mounted on the Airflow API server under ``/zeta``. Read-only.

Endpoints (every one needs an authenticated Airflow user; anonymous requests get 401/403; no
OpenAPI schema or docs are served):

``GET /zeta/api/runs?section=running|retained|ended&dag_id=&limit=&offset=``
    Pipeline runs of the DAGs whose runs the user may read (``get_authorized_dag_ids`` of the
    configured auth manager, then ``batch_is_authorized_dag`` with ``DagAccessEntity.RUN``, as
    Airflow's own DAG-run list requires), newest first, one section at a time, paginated. Driver
    errors and Spark UI links only for DAGs whose task logs the user may read (``TASK_LOGS``).
``GET /zeta/api/run?dag_id=&run_id=``
    One run; 403 without read access to the DAG's runs (``requires_access_dag``), 404 if unknown.
``GET /zeta/driver?dag_id=&run_id=&task_id=&map_index=``
    The deploy task's current driver: a redirect to its Spark UI while it runs with one, else the
    redacted tail of its driver log. Needs access to the DAG's task logs.
``GET /zeta/ui?...``
    The HTML page (``page.py``); refreshes itself.

What is read: Airflow's metadata DB (dag runs and the provider's task instances, recognised by
their operator class) through the API server's own session, and the state root (ledgers, cleanup
records) through ``[zeta] state_root``. Nothing is written. The rules are ``core.monitor``.

Cost: the runs of the user's DAGs are read in one query (small columns); the state root is read for
runs still queued/running and for ended runs whose directory still exists — which the delayed
cleanup bounds to the retention window.
"""

# No ``from __future__ import annotations``: FastAPI must see the real annotation objects of the
# route functions, which are defined inside ``build_app`` (their names are not module globals).
import logging
import time
from dataclasses import asdict
from typing import Any, Iterable

from airflow_provider_zeta.core.cleanup import parse_cleanup_record
from airflow_provider_zeta.core.freshness import describe_age
from airflow_provider_zeta.core.ledger import CorruptState, Ledger, LedgerStatus
from airflow_provider_zeta.core.monitor import (
    ROLES,
    RunFacts,
    RunStatus,
    Section,
    TaskRow,
    known_section,
    page_bounds,
    redact,
    run_status,
    safe_link,
    section_order,
    without_log_details,
)
from airflow_provider_zeta.core.paths import (
    ATTEMPTS_DIR,
    CLEANUP_DIR,
    RUNS_DIR,
    attempt_dir,
    run_dir,
    safe_segment,
)
from airflow_provider_zeta.plugins.links import driver_link_path

log = logging.getLogger(__name__)

LOG_TAIL_BYTES = 64 * 1024


# ---------------------------------------------------------------------------- reading


class StateReader:
    """Reads ledgers and cleanup records of runs from the state root (read-only)."""

    def __init__(self, state_root: str) -> None:
        from airflow_provider_zeta.settings import open_state_storage

        self.storage = open_state_storage(state_root)

    def run_dirs(self, dag_id: str) -> set[str]:
        return set(self.storage.list_dir(f"{RUNS_DIR}/{safe_segment(dag_id)}"))

    def facts(self, dag_id: str, run_id: str, run_state: str | None, tasks: list[TaskRow]) -> RunFacts:
        from airflow_provider_zeta.sensors.checkpoint_freshness import read_attempt_ledgers

        base = run_dir(dag_id, run_id)
        ledgers: dict[tuple[str, int], list[Ledger | CorruptState]] = {}
        attempt_paths: list[str] = []
        for task in tasks:
            if task.role != "deploy":
                continue
            found = read_attempt_ledgers(self.storage, dag_id, run_id, task.task_id, task.map_index)
            ledgers[(task.task_id, task.map_index)] = found
        # Every attempt directory on storage is a leftover, whichever task wrote it.
        attempts = f"{base}/{ATTEMPTS_DIR}"
        for task_dir in self.storage.list_dir(attempts):
            for map_dir in self.storage.list_dir(f"{attempts}/{task_dir}"):
                for token in self.storage.list_dir(f"{attempts}/{task_dir}/{map_dir}"):
                    attempt_paths.append(f"{attempts}/{task_dir}/{map_dir}/{token}")
        records = []
        for name in self.storage.list_dir(f"{base}/{CLEANUP_DIR}"):
            if not name.endswith(".json"):
                continue
            where = self.storage.url_of(f"{base}/{CLEANUP_DIR}/{name}")
            try:
                record = parse_cleanup_record(self.storage.read_bytes(f"{base}/{CLEANUP_DIR}/{name}"), where)
            except CorruptState as error:
                record = error
            if record is not None:
                records.append(record)
        return RunFacts(dag_id, run_id, run_state, tasks, ledgers, records, attempt_paths)

    def driver_log_tail(self, dag_id: str, run_id: str, task_id: str, map_index: int, token: str) -> str | None:
        """The tail of the attempt's driver log; ``None`` when it is not on this host. The job can
        write into its attempt directory: a symbolic link or a path leading out of the state root
        is refused (``StateStorage.read_local_tail``), never followed."""
        relative = f"{attempt_dir(dag_id, run_id, task_id, map_index, token)}/driver.log"
        try:
            tail = self.storage.read_local_tail(relative, LOG_TAIL_BYTES)
        except PermissionError as refused:
            log.warning("zeta.monitor: driver log not shown: %s", refused)
            return "(the driver log is not a regular file inside the state root; not shown)\n"
        return None if tail is None else tail.decode(errors="replace")


def _run_rows(session, dag_ids: Iterable[str]) -> list[dict[str, Any]]:
    """Runs of ``dag_ids`` that have at least one task of the provider, newest first."""
    from sqlalchemy import and_, exists, select

    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance

    dag_ids = sorted(dag_ids)
    if not dag_ids:
        return []
    has_zeta_task = exists().where(
        and_(
            TaskInstance.dag_id == DagRun.dag_id,
            TaskInstance.run_id == DagRun.run_id,
            TaskInstance.operator.in_(list(ROLES)),
        )
    )
    query = (
        select(
            DagRun.id,
            DagRun.dag_id,
            DagRun.run_id,
            DagRun._state,
            DagRun.logical_date,
            DagRun.run_after,
            DagRun.start_date,
            DagRun.end_date,
        )
        .where(DagRun.dag_id.in_(dag_ids), has_zeta_task)
        .order_by(DagRun.run_after.desc(), DagRun.id.desc())
    )
    return [
        {
            "id": row[0],
            "dag_id": row[1],
            "run_id": row[2],
            "state": row[3],
            "logical_date": row[4],
            "run_after": row[5],
            "start_date": row[6],
            "end_date": row[7],
        }
        for row in session.execute(query).all()
    ]


def _task_rows(session, runs: list[dict[str, Any]]) -> dict[tuple[str, str], list[TaskRow]]:
    from sqlalchemy import select

    from airflow.models.taskinstance import TaskInstance

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
    for dag_id, run_id, task_id, map_index, operator, state, try_number in session.execute(query).all():
        key = (dag_id, run_id)
        if key in found:
            found[key].append(TaskRow(task_id, operator, state, int(map_index), int(try_number or 0)))
    return found


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def run_json(status: RunStatus, row: dict[str, Any], now: float, log_access: bool) -> dict[str, Any]:
    """One run as the API returns it; ``log_access``: the user may read the DAG's task logs."""
    pipelines = []
    for pipeline in status.pipelines:
        sources = []
        for source in pipeline.sources:
            data = asdict(source if log_access else without_log_details(source))
            data["ready"] = source.ready
            data["driver_link"] = (
                driver_link_path(status.dag_id, status.run_id, source.task_id, source.map_index) if log_access else None
            )
            data["heartbeat_age_text"] = describe_age(source.heartbeat_age)
            data["checkpoint_age_text"] = describe_age(source.checkpoint_age)
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
            }
        )
    due_in = None if status.cleanup_due_at is None else max(0.0, status.cleanup_due_at - now)
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
        "cleanup_due_at": status.cleanup_due_at,
        "cleanup_due_in": due_in,
        "pipelines": pipelines,
    }


class Monitor:
    """One request's view: the user's DAGs, their runs, and their statuses."""

    def __init__(self, session, dag_ids: set[str], log_dag_ids: set[str] = frozenset()) -> None:
        from airflow_provider_zeta.settings import ZetaSettings

        self.session = session
        self.dag_ids = dag_ids  # the user may read these DAGs' runs
        self.log_dag_ids = log_dag_ids  # ... and their task logs (driver errors, Spark UI links)
        self.settings = ZetaSettings.load()
        self.reader = StateReader(self.settings.state_root)
        self.now = time.time()

    def _statuses(self, rows: list[dict[str, Any]]) -> list[tuple[dict[str, Any], RunStatus]]:
        tasks = _task_rows(self.session, rows)
        return [
            (
                row,
                run_status(
                    self.reader.facts(row["dag_id"], row["run_id"], row["state"], tasks[(row["dag_id"], row["run_id"])]),
                    self.now,
                    self.settings.driver_lost_after,
                ),
            )
            for row in rows
        ]

    def section(self, section: Section, limit: int, offset: int) -> dict[str, Any]:
        rows = _run_rows(self.session, self.dag_ids)
        present = {dag_id: self.reader.run_dirs(dag_id) for dag_id in {r["dag_id"] for r in rows}}
        # The state root is read only for runs whose section it decides (core.monitor.known_section).
        known = {r["id"]: known_section(r["state"], safe_segment(r["run_id"]) in present[r["dag_id"]]) for r in rows}
        statuses = self._statuses([r for r in rows if known[r["id"]] is None])
        if section is Section.ENDED:
            ended_ids = {row["id"] for row, status in statuses if status.section is Section.ENDED}
            chosen = [r for r in rows if r["id"] in ended_ids or known[r["id"]] is Section.ENDED]
            limit, offset = page_bounds(len(chosen), limit, offset)
            page = self._statuses(chosen[offset : offset + limit])
            total = len(chosen)
        else:
            chosen_statuses = [(row, status) for row, status in statuses if status.section is section]
            chosen_statuses.sort(key=lambda item: section_order(section, item[1]))
            limit, offset = page_bounds(len(chosen_statuses), limit, offset)
            page = chosen_statuses[offset : offset + limit]
            total = len(chosen_statuses)
        return {
            "section": section.value,
            "total": total,
            "limit": limit,
            "offset": offset,
            "generated_at": self.now,
            "runs": [run_json(status, row, self.now, row["dag_id"] in self.log_dag_ids) for row, status in page],
        }

    def run(self, dag_id: str, run_id: str) -> dict[str, Any] | None:
        rows = [r for r in _run_rows(self.session, [dag_id]) if r["run_id"] == run_id]
        if not rows:
            return None
        row, status = self._statuses(rows)[0]
        return run_json(status, row, self.now, dag_id in self.log_dag_ids)

    def current_ledger(self, dag_id: str, run_id: str, task_id: str, map_index: int) -> Ledger | CorruptState | None:
        from airflow_provider_zeta.core.freshness import current_ledger
        from airflow_provider_zeta.sensors.checkpoint_freshness import read_attempt_ledgers

        return current_ledger(read_attempt_ledgers(self.reader.storage, dag_id, run_id, task_id, map_index))


# ---------------------------------------------------------------------------- the app


def build_app():
    from typing import Annotated

    from fastapi import Depends, FastAPI, HTTPException, Query, Request
    from fastapi.responses import HTMLResponse, PlainTextResponse, RedirectResponse

    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
    from airflow.api_fastapi.common.db.common import SessionDep
    from airflow.api_fastapi.core_api.security import GetUserDep, requires_access_dag

    from airflow_provider_zeta.plugins import page

    # No OpenAPI schema nor docs: they would be served without authentication.
    app = FastAPI(
        title="Zeta pipelines",
        description="Read-only monitoring of airflow-provider-zeta pipelines (phase, ready k of N, drivers).",
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
    )

    def authorized(user, session, dag_ids: set[str], access_entity) -> set[str]:
        """The DAGs of ``dag_ids`` whose ``access_entity`` the user may read: one batch call to the auth
        manager, then one per DAG only if the batch is refused."""
        from airflow.api_fastapi.auth.managers.models.resource_details import DagDetails
        from airflow.models.dag import DagModel

        if not dag_ids:
            return set()
        auth_manager = get_auth_manager()
        teams = DagModel.get_dag_id_to_team_name_mapping(sorted(dag_ids), session=session)

        def request(dag: str) -> dict[str, Any]:
            return {"method": "GET", "access_entity": access_entity, "details": DagDetails(id=dag, team_name=teams.get(dag))}

        if auth_manager.batch_is_authorized_dag([request(dag) for dag in sorted(dag_ids)], user=user):
            return set(dag_ids)
        return {dag for dag in dag_ids if auth_manager.batch_is_authorized_dag([request(dag)], user=user)}

    def monitor_for(user, session, dag_id: str | None) -> Monitor:
        """A view limited as Airflow's own DAG-run list is: DAGs the user may read *and* whose runs he
        may read; driver errors and Spark UI links only where he may also read task logs."""
        readable = set(get_auth_manager().get_authorized_dag_ids(user=user, method="GET"))
        if dag_id:
            readable &= {dag_id}
        runs = authorized(user, session, readable, DagAccessEntity.RUN)
        return Monitor(session, runs, authorized(user, session, runs, DagAccessEntity.TASK_LOGS))

    def parse_section(value: str) -> Section:
        try:
            return Section(value)
        except ValueError:
            raise HTTPException(400, f"section must be one of {[s.value for s in Section]}, got {value!r}") from None

    @app.get("/api/runs")
    def list_runs(
        user: GetUserDep,
        session: SessionDep,
        section: str = "running",
        dag_id: str | None = None,
        limit: Annotated[int, Query(ge=1, le=100)] = 25,
        offset: Annotated[int, Query(ge=0)] = 0,
    ) -> dict[str, Any]:
        return monitor_for(user, session, dag_id).section(parse_section(section), limit, offset)

    @app.get("/api/run", dependencies=[Depends(requires_access_dag("GET", DagAccessEntity.RUN))])
    def get_run(user: GetUserDep, session: SessionDep, dag_id: str, run_id: str) -> dict[str, Any]:
        logs = authorized(user, session, {dag_id}, DagAccessEntity.TASK_LOGS)
        found = Monitor(session, {dag_id}, logs).run(dag_id, run_id)
        if found is None:
            raise HTTPException(404, f"no run {run_id!r} of DAG {dag_id!r} with tasks of the zeta provider")
        return found

    @app.get("/driver", dependencies=[Depends(requires_access_dag("GET", DagAccessEntity.TASK_LOGS))])
    def driver(user: GetUserDep, session: SessionDep, dag_id: str, run_id: str, task_id: str, map_index: int = -1):
        monitor = Monitor(session, {dag_id})
        ledger = monitor.current_ledger(dag_id, run_id, task_id, map_index)
        if ledger is None:
            return PlainTextResponse(f"{dag_id}.{task_id} has no driver attempt in run {run_id} yet.", status_code=404)
        if isinstance(ledger, CorruptState):
            return PlainTextResponse(f"the driver ledger of {dag_id}.{task_id} cannot be read: {redact(str(ledger))}\n")
        ui = safe_link(ledger.spark_ui_url)
        if ui and ledger.status is LedgerStatus.RUNNING:
            return RedirectResponse(ui, status_code=307)
        tail = monitor.reader.driver_log_tail(dag_id, run_id, task_id, map_index, ledger.token)
        header = (
            f"driver of {dag_id}.{task_id} in run {run_id}: attempt {ledger.token}, {ledger.status.value}"
            f"{'' if ui else ' (no Spark UI)'}\n"
        )
        body = redact(tail) if tail is not None else "(the driver log is not on this host's filesystem)\n"
        return PlainTextResponse(header + "-" * 72 + "\n" + body)

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
        monitor = monitor_for(user, session, dag_id)
        offsets = {Section.RUNNING: running_offset, Section.RETAINED: retained_offset, Section.ENDED: ended_offset}
        if run_id and dag_id:
            found = monitor.run(dag_id, run_id) if dag_id in monitor.dag_ids else None
            sections = {
                s: {"section": s.value, "total": 0, "limit": limit, "offset": 0, "runs": []} for s in Section
            }
            if found is not None:
                section = Section(found["section"])
                sections[section] = {"section": section.value, "total": 1, "limit": limit, "offset": 0, "runs": [found]}
        else:
            sections = {s: monitor.section(s, limit, offsets[s]) for s in Section}
        content = page.render_sections(sections, dict(request.query_params), monitor.now, dag_id=dag_id, run_id=run_id)
        return HTMLResponse(content if fragment else page.render_page(content))

    return app


class LazyApp:
    """An ASGI app that builds the FastAPI app on its first request.

    Airflow imports plugins in every component, including task workers; building the app (and
    importing the API server's security module) only pays off in the API server.
    """

    def __init__(self) -> None:
        self._app = None

    async def __call__(self, scope, receive, send) -> None:
        if self._app is None:
            self._app = build_app()
        await self._app(scope, receive, send)
