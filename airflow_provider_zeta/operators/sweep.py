"""ZetaSweepOperator: clean what no cleanup task will, and stop drivers nobody waits for (G4, G5, G8).

Purpose
    The delayed cleanup is recorded by a task of the run and carried out by the cleanup DAG. When
    the task never runs — the run was marked failed or success by hand, the cleanup task was
    removed, the run was deleted —, when no cleanup DAG run carries a record out, or when a driver
    outlives its task (killed while the task briefly ran, a trigger that never got to it), this
    operator finds the leftovers in the state root and deals with them. Schedule it (the shipped
    ``dags/zeta_maintenance.py`` runs it every 15 minutes) or call it from your own maintenance DAG.

How it works
    For every run directory in the state root (``runs/<dag>/<run>/run.json`` names the run), it asks
    Airflow for the run's state and, for runs with drivers still alive, their tasks' states, reads the
    run's cleanup records and lists its leftovers, and follows ``core.cleanup.plan_sweep``:

    * ``run_active``: the run's own cleanup owns its data; only drivers of tasks that already
      finished are stopped;
    * ``past_due``: records of the run's current incarnation past their due time are carried out,
      with the same path checks as the cleanup DAG;
    * ``newer_incarnation_ended``: a past-due record of an older incarnation nobody adopted (the
      run was cleared without its cleanup) is renewed, not carried out (``core.cleanup.decide_due``);
    * ``record_leftovers``: a run that ended without a record gets one (owner ``sweep``, due after
      the retention window), carried out by a later sweep;
    * ``retained``: kept until the due time; ``nothing_left``: the run's bookkeeping is removed;
    * ``corrupt_record``: reported, nothing deleted.

    Just before deleting a run's data it asks for the run's state again, so a run cleared a moment
    ago is left to its new incarnation.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_zeta.airflow_internals import fetch_dag_run
from airflow_provider_zeta.core.cleanup import (
    ACTIVE_RUN_STATES,
    CleanupRecord,
    RunStatus,
    RunView,
    SweepPlan,
    plan_sweep,
    state_name,
)
from airflow_provider_zeta.core.durations import Duration, check_duration_unless_template, duration_or_default
from airflow_provider_zeta.janitor import (
    carry_out,
    delete_record_files,
    driver_views,
    find_leftovers,
    forget_run,
    list_runs,
    read_records,
    stop_drivers,
    write_record_file,
)
from airflow_provider_zeta.settings import ZetaSettings, open_state_storage

if TYPE_CHECKING:
    from airflow.sdk import Context


class ZetaSweepOperator(BaseOperator):
    """Sweep the state root: stop orphaned drivers, carry out overdue cleanups, record leftovers.

    :param retention: window given to leftovers found without a record (``timedelta`` or seconds); default
        ``[zeta] cleanup_retention``.
    :param fail_on_corrupt: fail the task (after doing everything else) when a record was unreadable.
    """

    ui_color = "#c0c0c0"

    def __init__(self, *, retention: Duration | None = None, fail_on_corrupt: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        check_duration_unless_template(retention, f"{self.task_id}: 'retention'", allow_zero=True)
        self.retention = retention
        self.fail_on_corrupt = fail_on_corrupt

    def execute(self, context: Context) -> dict[str, Any]:
        """Look at every run of the state root but this one: stop stray drivers, carry out and write
        records as ``plan_sweep`` says, forget runs with nothing left; return a summary."""
        settings = ZetaSettings.load()
        name = f"{self.task_id}: 'retention'"
        retention = duration_or_default(self.retention, settings.cleanup_retention, name, allow_zero=True)
        state = open_state_storage(settings.state_root)
        ti = context["ti"]
        rules: Counter[str] = Counter()
        phases: dict[str, list[str]] = {}
        corrupt: list[str] = []
        stopped: list[str] = []
        deleted = 0
        for dag_id, run_id in list_runs(state):
            if (dag_id, run_id) == (ti.dag_id, ti.run_id):
                continue
            view = _run_view(ti, state, dag_id, run_id)
            plan = plan_sweep(view, time.time(), retention)
            rules[plan.rule] += 1
            phases.setdefault(plan.phase.value, []).append(f"{dag_id}/{run_id}")
            self.log.info("zeta.sweep.%s: %s %s: %s", plan.rule, dag_id, run_id, plan.reason)
            if plan.rule == "corrupt_record":
                corrupt.append(plan.reason)
            if plan.stop:
                stopped += stop_drivers(state, plan.stop)
            deleted += self._carry_out_plan(ti, state, view, plan)
        summary = {
            "rules": dict(rules),
            "phases": {phase: sorted(runs) for phase, runs in phases.items()},
            "stopped_drivers": sorted(stopped),
            "deleted_paths": deleted,
            "corrupt": corrupt,
        }
        self.log.info("zeta.sweep: %s", summary)
        if corrupt and self.fail_on_corrupt:
            raise AirflowFailException(f"[zeta.sweep.corrupt_record] {len(corrupt)} run(s) not cleaned: {corrupt}")
        return summary


    def _carry_out_plan(self, ti: Any, state: Any, view: RunView, plan: SweepPlan) -> int:
        """Do what ``plan`` says to the run of ``view`` after its drivers were stopped: carry out its
        due records, forget the run, write, renew and drop record files. How many paths were deleted."""
        dag_id, run_id = view.dag_id, view.run_id
        deleted = 0
        if plan.carry_out or plan.forget_run:
            for record in plan.carry_out:
                # Asked again before each record: a run cleared a moment ago is left alone.
                if _run_state(ti, dag_id, run_id) in ACTIVE_RUN_STATES:
                    self.log.info("zeta.sweep: %s %s was cleared meanwhile; left to its new incarnation", dag_id, run_id)
                    break
                deleted += carry_out(state, record, open_state_storage)
                delete_record_files(state, [record])
            else:
                if plan.forget_run and _run_state(ti, dag_id, run_id) not in ACTIVE_RUN_STATES:
                    delete_record_files(state, [r for r in view.records if isinstance(r, CleanupRecord)])
                    forget_run(state, dag_id, run_id)
        if plan.write is not None:  # after the carry-out: it may replace a due sweep record's file
            write_record_file(state, plan.write)
        for record in plan.renew:  # a newer incarnation read these attempts: a new window first,
            write_record_file(state, record)
        delete_record_files(state, plan.drop)  # then the files of the records it took over
        return deleted


def _run_view(ti: Any, state: Any, dag_id: str, run_id: str) -> RunView:
    """What the sweep knows of one run: its Airflow state, records, leftovers and drivers."""
    status = run_status(ti, dag_id, run_id)
    run_state = None if status is None else status.state
    leftovers, attempts = find_leftovers(state, dag_id, run_id, open_state_storage)
    task_states = _task_states(ti, dag_id, run_id) if run_state in ACTIVE_RUN_STATES and attempts else None
    return RunView(
        dag_id,
        run_id,
        run_state,
        tuple(read_records(state, dag_id, run_id)),
        leftovers,
        tuple(driver_views(state, attempts, task_states)),
        clear_number=None if status is None else status.clear_number,
    )

#: The Airflow Variable holding this deployment's id: created once, by the first completed point that
#: finds none, and kept in the metadata database, so two deployments sharing a state root (a
#: migration, staging reading prod's configuration) never share it. Set
#: ``AIRFLOW_VAR_ZETA_DEPLOYMENT_ID`` (or a secrets backend) to pin it.
DEPLOYMENT_VARIABLE = "zeta_deployment_id"


def metadata_db_identity() -> str | None:
    """This deployment's id (``DEPLOYMENT_VARIABLE``), created when absent; ``None`` when it cannot
    be read or written. Two first completed points may both create one: the later write stays, and
    a marker naming the other never matches it (never taken for deleted: the safe direction)."""
    import logging
    import secrets

    from airflow.sdk import Variable

    try:
        value = Variable.get(DEPLOYMENT_VARIABLE, default=None)
        if not value:
            Variable.set(
                DEPLOYMENT_VARIABLE,
                secrets.token_hex(12),
                description="airflow-provider-zeta: this deployment's id (never change or copy it to another deployment)",
            )
            value = Variable.get(DEPLOYMENT_VARIABLE, default=None)
    except Exception as error:  # an API error, or no task runner: no identity, never "deleted"
        logging.getLogger(__name__).warning("zeta.publish: the deployment id (Variable %s) is unavailable: %s", DEPLOYMENT_VARIABLE, error)
        return None
    return str(value).strip() or None if value else None


def deployment_identity(state_root_id: str | None) -> str:
    """Which deployment wrote a commit marker: the state root's identity and the metadata
    database's (``metadata_db_identity``). A run is asked about (``owner_run_deleted``) only in the
    deployment whose database holds it; ``""`` (unknown) never matches."""
    db_id = metadata_db_identity()
    return f"{state_root_id}@{db_id}" if state_root_id and db_id else ""


def run_exists(ti: Any, dag_id: str, run_id: str) -> bool:
    """Whether Airflow still has the run (not deleted by a user, ``airflow db clean`` or a refused
    backfill's clean-up), asked through the Task SDK's execution API."""
    return ti.get_dr_count(dag_id=dag_id, run_ids=[run_id]) > 0


def _run_state(ti: Any, dag_id: str, run_id: str) -> str | None:
    """The run's Airflow state, or None when the run does not exist (deleted)."""
    if not run_exists(ti, dag_id, run_id):
        return None
    return state_name(ti.get_dagrun_state(dag_id=dag_id, run_id=run_id))


def run_status(ti: Any, dag_id: str, run_id: str) -> RunStatus | None:
    """The run's Airflow state and current incarnation (``clear_number``), or None when the run
    does not exist (deleted). Through the Task SDK's execution API (tasks cannot use the ORM)."""
    state = _run_state(ti, dag_id, run_id)
    if state is None:
        return None
    # The SDK's own fetch of a run (what ``AssetEvent.source_dag_run`` uses); it carries clear_number.
    dag_run = fetch_dag_run(dag_id=dag_id, run_id=run_id)
    return RunStatus(state, int(getattr(dag_run, "clear_number", 0) or 0))


def _task_states(ti: Any, dag_id: str, run_id: str) -> dict[str, str | None]:
    """The run's task states by Airflow's own names: the task id, ``<task id>_<map index>`` for a
    mapped instance (``core.cleanup.task_state_key``, which ``janitor.driver_views`` looks them up by)."""
    states = ti.get_task_states(dag_id=dag_id, run_ids=[run_id]).get(run_id, {})
    return {task_id: state_name(state or None) for task_id, state in states.items()}
