"""The maintenance DAGs: the delayed cleanup's carrying-out on its Asset, and the sweep on a schedule.

Deploy both (``dags/zeta_maintenance.py`` does): pipelines only *record* their cleanups and end;

* ``zeta_cleanup_dag`` carries each record out at its due time (``operators/cleanup.py``), one
  deferred wait per cleanup, visible in the grid; scheduled on ``CLEANUP_ASSET``, which every
  pipeline's cleanup task emits;
* ``zeta_sweep_dag`` stops drivers nobody waits for, gives unrecorded leftovers a window, and
  carries out records whose cleanup DAG run never came (``operators/sweep.py``).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from airflow.sdk import DAG

from airflow_provider_zeta.core.cleanup import DEFAULT_RESCAN_INTERVAL
from airflow_provider_zeta.operators.cleanup import CLEANUP_ASSET, DEFAULT_CLEANUP_DAG_ID, CarryOutCleanupsOperator
from airflow_provider_zeta.operators.sweep import ZetaSweepOperator

_START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def zeta_sweep_dag(
    dag_id: str = "zeta_sweep", schedule: Any = dt.timedelta(minutes=15), retention: float | None = None, **dag_kwargs: Any
) -> DAG:
    """A DAG with one ``ZetaSweepOperator`` task, one run at a time, no catch-up."""
    dag_kwargs.setdefault("start_date", _START)
    dag_kwargs.setdefault("tags", ["zeta", "maintenance"])
    with DAG(dag_id, schedule=schedule, catchup=False, max_active_runs=1, **dag_kwargs) as dag:
        ZetaSweepOperator(task_id="sweep", retention=retention)
    return dag


def zeta_cleanup_dag(
    dag_id: str = DEFAULT_CLEANUP_DAG_ID,
    max_active_runs: int = 64,
    recheck_interval: float = 15.0,
    rescan_interval: float = DEFAULT_RESCAN_INTERVAL,
    operator_class: type[CarryOutCleanupsOperator] = CarryOutCleanupsOperator,
    **dag_kwargs: Any,
) -> DAG:
    """A DAG scheduled on ``CLEANUP_ASSET`` with one ``CarryOutCleanupsOperator`` task.

    Each pending cleanup record has one waiter: the run that claimed its waiter entry (a rename out
    of ``cleanup_waiters/_unclaimed/`` in the state root). A run claims, at its first look, the
    unclaimed entries and those of runs no longer queued or running, then waits (deferred, no worker
    slot) only for its own records' due times and carries each out then; it never reads the records
    other live runs wait for. Its trigger looks for unclaimed entries every ``rescan_interval`` and
    wakes the task early only when there is one. Events that arrive while ``max_active_runs`` runs
    wait collapse into the next run; an entry no run claims meanwhile is claimed by the first
    waiting run to look, within ``rescan_interval``, so keep ``max_active_runs`` above the number of
    cleanup runs you expect to wait at once (the runs of a backfill within one retention window).
    ``operator_class`` is the task's class, a subclass of ``CarryOutCleanupsOperator`` (the tests'
    arms crash windows). ``recheck_interval``: time between looks at a run whose newer incarnation
    is still active (``CarryOutCleanupsOperator``).
    """
    dag_kwargs.setdefault("start_date", _START)
    dag_kwargs.setdefault("tags", ["zeta", "maintenance"])
    with DAG(dag_id, schedule=[CLEANUP_ASSET], catchup=False, max_active_runs=max_active_runs, **dag_kwargs) as dag:
        operator_class(task_id="carry_out", recheck_interval=recheck_interval, rescan_interval=rescan_interval)
    return dag
