"""Cost of one sweep over 10,000 cleanup records, and of one cleanup record (issue: benchmarks, item 4).

Builds a local state root with ``--runs`` ended runs (default 10,000), each with one attempt
directory (ledger + a staging file) and one pending cleanup record past its due time, then times
the sweep's own work — list the runs, read each run's records, list its leftovers and drivers,
``plan_sweep``, carry the record out — with the Airflow calls (run state, two per run) answered
in-process, so the figure is the provider's own cost; add two API round trips per run for a
deployment. Also reports the size of a cleanup record and its task-state-store writes for 10, 100
and 1000 sources.

Usage: ``python benchmarks/cleanup_sweep_bench.py [--runs N] [--markdown]``
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time

from airflow_provider_zeta import janitor
from airflow_provider_zeta.core.cleanup import Leftovers, RunView, new_record, plan_sweep, record_store_values
from airflow_provider_zeta.core.ledger import Ledger, LedgerStatus
from airflow_provider_zeta.core.paths import LEDGER_FILE, attempt_dir
from airflow_provider_zeta.storage import StateStorage, register_run

DAG = "bench"


def build(root: str, runs: int) -> StateStorage:
    state = StateStorage.from_url(root)
    for i in range(runs):
        run_id = f"scheduled__2026-01-01T00:00:00+00:00-{i:05d}"
        register_run(state, DAG, run_id)
        attempt = attempt_dir(DAG, run_id, "pipe.deploy_src", -1, f"tok{i:012d}")
        state.write_atomic(f"{attempt}/{LEDGER_FILE}", Ledger(f"tok{i:012d}", LedgerStatus.SUCCEEDED, 1, 2).to_json())
        state.write_atomic(f"{attempt}/output/part-0.json", b"[]")
        record = new_record(DAG, run_id, 0, "pipe.cleanup", 0, 1, Leftovers((attempt,), {}))
        janitor.write_record_file(state, record)
    return state


def sweep(state: StateStorage) -> dict:
    started = time.perf_counter()
    runs = janitor.list_runs(state)
    listed = time.perf_counter()
    deleted = 0
    for dag_id, run_id in runs:
        leftovers, attempts = janitor.find_leftovers(state, dag_id, run_id, StateStorage.from_url)
        view = RunView(
            dag_id, run_id, "success", tuple(janitor.read_records(state, dag_id, run_id)), leftovers,
            tuple(janitor.driver_views(state, attempts)),
        )
        plan = plan_sweep(view, time.time(), 3600)
        for record in plan.carry_out:
            deleted += janitor.carry_out(state, record, StateStorage.from_url)
            janitor.delete_record_files(state, [record])
        if plan.forget_run:
            janitor.forget_run(state, dag_id, run_id)
    ended = time.perf_counter()
    return {"runs": len(runs), "deleted": deleted, "list_s": listed - started, "total_s": ended - started}


def record_sizes() -> list[dict]:
    rows = []
    for sources in (10, 100, 1000):
        run_id = "scheduled__2026-01-01T00:00:00+00:00"
        paths = tuple(attempt_dir(DAG, run_id, f"pipe.deploy_src{i:04d}", -1, f"{i:016x}") for i in range(sources))
        record = new_record(DAG, run_id, 0, "pipe.cleanup", 0, 3600, Leftovers(paths, {}))
        values = record_store_values(record)
        rows.append(
            {
                "sources": sources,
                "record_file_bytes": len(record.to_json()),
                "store_writes": len(values),
                "largest_store_value": max(len(json.dumps(v)) for _, v in values),
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="zeta-sweep-bench-")
    built = time.perf_counter()
    state = build(root, args.runs)
    built = time.perf_counter() - built
    result = sweep(state)
    assert result["deleted"] == args.runs, result
    assert janitor.list_runs(state) == [], "the sweep left runs behind"
    sizes = record_sizes()
    if not args.markdown:
        print(json.dumps({"build_s": built, **result, "record_sizes": sizes}, indent=2))
        return
    print(f"machine: {platform.machine()}, python {platform.python_version()}, local state root")
    print()
    print("| records past due | listing | whole sweep (plan + delete) | per run | Airflow calls per run |")
    print("|---|---|---|---|---|")
    print(
        f"| {result['runs']} | {result['list_s']:.2f} s | {result['total_s']:.1f} s | "
        f"{1000 * result['total_s'] / max(1, result['runs']):.2f} ms | 2 (run count, run state) |"
    )
    print()
    print("| sources | record file | task-state-store writes | largest value (limit 65,535 B) |")
    print("|---|---|---|---|")
    for row in sizes:
        print(f"| {row['sources']} | {row['record_file_bytes']} B | {row['store_writes']} | {row['largest_store_value']} B |")


if __name__ == "__main__":
    main()
