"""The maintenance DAG: the sweep on a schedule (see ``operators/sweep.py``)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from airflow.sdk import DAG

from airflow_provider_zeta.operators.sweep import ZetaSweepOperator


def zeta_sweep_dag(
    dag_id: str = "zeta_sweep", schedule: Any = dt.timedelta(minutes=15), retention: float | None = None, **dag_kwargs: Any
) -> DAG:
    """A DAG with one ``ZetaSweepOperator`` task, one run at a time, no catch-up."""
    dag_kwargs.setdefault("start_date", dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc))
    dag_kwargs.setdefault("tags", ["zeta", "maintenance"])
    with DAG(dag_id, schedule=schedule, catchup=False, max_active_runs=1, **dag_kwargs) as dag:
        ZetaSweepOperator(task_id="sweep", retention=retention)
    return dag
