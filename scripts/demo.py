"""`make demo`: run the example DAG on a real, embedded Airflow and say what happened.

Starts api-server, scheduler, dag-processor and triggerer on a fresh SQLite metadata DB with the
LocalExecutor (the embedded default), runs the ``zeta_hello`` example DAG for one logical date,
prints each task's outcome, and stops everything. Exits non-zero when the run does not succeed.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from airflow_provider_zeta.testing.cluster import AirflowCluster, ClusterError

ROOT = Path(__file__).resolve().parent.parent
DAG_ID = "zeta_hello"
LOGICAL_DATE = "2026-01-01T00:00:00+00:00"


def main() -> int:
    started = time.monotonic()
    cluster = AirflowCluster(ROOT / "dags", db="sqlite")
    print(f"Starting Airflow (api-server, scheduler, dag-processor, triggerer) in {cluster.home} ...", flush=True)
    try:
        cluster.start()
        print(f"  Airflow is up at {cluster.api_url} after {time.monotonic() - started:.0f}s", flush=True)
        cluster.wait_for_dag(DAG_ID)
        run_id = cluster.trigger_run(DAG_ID, LOGICAL_DATE)
        print(f"Triggered {DAG_ID} for logical date {LOGICAL_DATE}: run {run_id}", flush=True)
        run = cluster.wait_for_run(DAG_ID, run_id, timeout=300)
        print(f"Run {run_id} ended {run['state'].upper()}; tasks:")
        for ti in sorted(cluster.task_instances(DAG_ID, run_id), key=lambda t: t["start_date"] or ""):
            result = cluster.xcom(DAG_ID, run_id, ti["task_id"])
            shown = f" -> {result!r}" if result is not None else ""
            print(f"  {ti['task_id']:<20} {ti['state']:<8} try {ti['try_number']}{shown}")
        print(f"Done in {time.monotonic() - started:.0f}s.")
        return 0
    except ClusterError as error:
        print(f"DEMO FAILED: {error}", file=sys.stderr)
        cluster.print_logs(tail_lines=40)
        return 1
    finally:
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
