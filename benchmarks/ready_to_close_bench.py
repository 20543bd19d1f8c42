"""Cost of ready-to-close at 10, 100 and 1000 sources (issue: ready-to-close and completed point).

Measures, per source count N:

* one **report**: the deploy task's return value — number of store writes and bytes written;
* one **sensor evaluation** (``RunObserver.observe`` + ``core.ready.evaluate``), cold (every source
  just finished: a report read and a ledger read each) and warm (nothing new since the last poll),
  counting calls to Airflow (task states, XCom reads) and reading real ledgers from a local state
  root. The Airflow calls are answered in-process, so the wall time is the provider's own cost
  (parsing, verification, storage reads) without the API server's round trip, which the call
  counts let you add (one task-state call per poll; one XCom read per newly finished source).

Usage: ``python benchmarks/ready_to_close_bench.py [--markdown]``
"""

from __future__ import annotations

import json
import platform
import sys
import tempfile
import time
from unittest import mock

from airflow_provider_zeta.core.ledger import Ledger, LedgerStatus
from airflow_provider_zeta.core.paths import LEDGER_FILE, attempt_dir
from airflow_provider_zeta.storage import StateStorage

DAG, RUN = "bench", "scheduled__2026-01-01T00:00:00+00:00"


def build(n: int, root: str):
    storage = StateStorage.from_url(root)
    expected, reports, states = {}, {}, {}
    for i in range(n):
        source, task_id, token = f"src{i:04d}", f"pipe.deploy_src{i:04d}", f"tok{i:012d}"
        output = f"file://{root}/{attempt_dir(DAG, RUN, task_id, -1, token)}/output"
        ledger = Ledger(token=token, status=LedgerStatus.SUCCEEDED, started_at=1, heartbeat_at=2, output_path=output, rows=100)
        storage.write_atomic(f"{attempt_dir(DAG, RUN, task_id, -1, token)}/{LEDGER_FILE}", ledger.to_json())
        expected[source] = task_id
        states[task_id] = "success"
        reports[task_id] = {**ledger.result(), "source": source, "task_id": task_id, "incarnation": 0}
    return expected, reports, states


def measure(n: int) -> dict:
    from airflow_provider_zeta.sensors.ready_to_close import RunObserver

    root = tempfile.mkdtemp(prefix="zeta-bench-")
    expected, reports, states = build(n, root)
    calls = {"task_states": 0, "xcom_reads": 0}

    def get_task_states(**kwargs):
        calls["task_states"] += 1
        return {RUN: dict(states)}

    def get_one(**kwargs):
        calls["xcom_reads"] += 1
        return reports[kwargs["task_id"]]

    report_bytes = len(json.dumps(next(iter(reports.values()))).encode())
    with mock.patch("airflow.sdk.execution_time.task_runner.RuntimeTaskInstance.get_task_states", side_effect=get_task_states), \
         mock.patch("airflow.sdk.execution_time.xcom.XCom.get_one", side_effect=get_one), \
         mock.patch("airflow_provider_zeta.sensors.ready_to_close.open_state_storage", return_value=StateStorage.from_url(root)):
        observer = RunObserver(DAG, RUN, expected, root)
        started = time.perf_counter()
        cold = observer.observe(0, time.time() + 3600)
        cold_s = time.perf_counter() - started
        cold_calls = dict(calls)
        calls.update(task_states=0, xcom_reads=0)
        started = time.perf_counter()
        warm = observer.observe(0, time.time() + 3600)
        warm_s = time.perf_counter() - started
    assert cold.verdict.value == warm.verdict.value == "all_ready"
    return {
        "n": n,
        "report_writes": 1,
        "report_bytes": report_bytes,
        "cold_s": cold_s,
        "cold_calls": cold_calls,
        "warm_s": warm_s,
        "warm_calls": dict(calls),
        "ready_set_bytes": len(json.dumps(cold.ready_set(0)).encode()),
    }


def main() -> int:
    rows = [measure(n) for n in (10, 100, 1000)]
    print(f"machine: {platform.machine()}, {platform.processor() or 'cpu'}, python {platform.python_version()}")
    print("| sources | writes per report | bytes per report | cold evaluation | calls (states / XCom reads / ledger reads) | warm evaluation | calls | ready set bytes |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['n']} | {r['report_writes']} | {r['report_bytes']} | {r['cold_s'] * 1000:.1f} ms | "
            f"{r['cold_calls']['task_states']} / {r['cold_calls']['xcom_reads']} / {r['n']} | {r['warm_s'] * 1000:.2f} ms | "
            f"{r['warm_calls']['task_states']} / {r['warm_calls']['xcom_reads']} / 0 | {r['ready_set_bytes']} |"
        )
    worst = max(r["cold_s"] for r in rows)
    print(f"\nslowest evaluation: {worst:.3f} s (target: under 1 s at 1000 sources)")
    return 0 if worst < 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
