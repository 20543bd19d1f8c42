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

    Each run waits (deferred, no worker slot) for the records its triggering events name and every
    record pending when it starts, and carries them out at their due times. Events that arrive while ``max_active_runs`` runs wait
    collapse into the next run, which takes them all, soonest first; keep ``max_active_runs`` above
    the number of cleanups you expect to wait at once (runs of a backfill within one window), or a
    record due sooner than every waiting run's is carried out late: by the first waiting run to list
    the records again, within ``rescan_interval``. ``operator_class`` is the task's
    class, a subclass of ``CarryOutCleanupsOperator`` (the tests' arms crash windows).
    ``rescan_interval``: the longest a waiting run goes without listing the pending records again
    (``CarryOutCleanupsOperator``).
    """
    dag_kwargs.setdefault("start_date", _START)
    dag_kwargs.setdefault("tags", ["zeta", "maintenance"])
    with DAG(dag_id, schedule=[CLEANUP_ASSET], catchup=False, max_active_runs=max_active_runs, **dag_kwargs) as dag:
        operator_class(task_id="carry_out", recheck_interval=recheck_interval, rescan_interval=rescan_interval)
    return dag
