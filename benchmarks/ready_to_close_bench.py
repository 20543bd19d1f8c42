"""Cost of ready-to-close at 10, 100 and 1000 sources (issue: ready-to-close and completed point).

Measures, per source count N:

* one **report**: the deploy task's return value — number of store writes and bytes written;
* one **sensor evaluation** (``RunObserver.observe`` + ``core.ready.evaluate``), cold (every source
  just finished: a report read and a ledger read each) and warm (nothing new since the last poll),
  counting calls to Airflow (task states, XCom reads) and reading real ledgers from a local state
  root. The Airflow calls are answered in-process, so the wall time is the provider's own cost
  (parsing, verification, storage reads) without the API server's round trip, which the call
  counts let you add (one task-state call per poll; one XCom read per newly finished source).

And the whole wait at N sources finishing one per poll (``--wait``): the
trigger (``ReadyToCloseTrigger.run``, for real) started from the reports the sensor verified before
it deferred, counting per poll the Airflow calls and ledger reads, the bytes it logs in all, and
what the sensor's wake costs at the end (the event carries the ready set: one task-state call to
check nothing re-ran, one store write per source ready since the deferral).

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
    from airflow_provider_zeta.observers import RunObserver

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
         mock.patch("airflow_provider_zeta.observers.open_state_storage", return_value=StateStorage.from_url(root)):
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


def measure_wait(n: int, already: int) -> dict:
    """N sources; ``already`` finished before the sensor deferred; then one more per trigger poll."""
    import asyncio

    from airflow_provider_zeta.observers import RunObserver
    from airflow_provider_zeta.sensors.ready_to_close import MAX_VERIFIED_IN_TRIGGER
    from airflow_provider_zeta.triggers.ready_to_close import ReadyToCloseTrigger

    root = tempfile.mkdtemp(prefix="zeta-bench-wait-")
    expected, reports, _ = build(n, root)
    tasks = list(expected.values())
    finished = {"count": already}
    calls = {"task_states": 0, "xcom_reads": 0, "ledger_reads": 0}
    per_poll: list[int] = []
    storage = StateStorage.from_url(root)
    real_read = StateStorage.read_bytes

    def read_bytes(self, relative):
        if relative.endswith(LEDGER_FILE):
            calls["ledger_reads"] += 1
            per_poll[-1] += 1 if per_poll else 0
        return real_read(self, relative)

    def get_task_states(**kwargs):
        calls["task_states"] += 1
        per_poll.append(1)
        states = {t: ("success" if i < finished["count"] else "running") for i, t in enumerate(tasks)}
        finished["count"] += 1
        return {RUN: states}

    def get_one(**kwargs):
        calls["xcom_reads"] += 1
        per_poll[-1] += 1
        return reports[kwargs["task_id"]]

    class Lines:
        def __init__(self):
            self.bytes = self.lines = 0

        def info(self, message, *args):
            self.lines += 1
            self.bytes += len(message % args)

        warning = error = debug = info

    log = Lines()

    async def no_sleep(*_):
        return None

    with mock.patch("airflow.sdk.execution_time.task_runner.RuntimeTaskInstance.get_task_states", side_effect=get_task_states), \
         mock.patch("airflow.sdk.execution_time.xcom.XCom.get_one", side_effect=get_one), \
         mock.patch("airflow_provider_zeta.observers.open_state_storage", return_value=storage), \
         mock.patch.object(StateStorage, "read_bytes", read_bytes), \
         mock.patch.object(ReadyToCloseTrigger, "log", new_callable=mock.PropertyMock, return_value=log), \
         mock.patch("asyncio.sleep", no_sleep):
        # The sensor's first evaluation on a worker (what it hands to the trigger)...
        observer = RunObserver(DAG, RUN, expected, root)
        first = observer.observe(0, time.time() + 3600)
        first_calls = dict(calls)
        first_calls["store_writes"] = len(first.ready)  # _record_progress: one write per ready source, no read
        calls.update(task_states=0, xcom_reads=0, ledger_reads=0)
        per_poll.clear()
        trigger = ReadyToCloseTrigger(
            dag_id=DAG, run_id=RUN, sources=expected, incarnation=0, deadline=time.time() + 3600,
            poll_interval=1, state_root=root, verified=observer.verified_reports(limit=MAX_VERIFIED_IN_TRIGGER),
            recorded=sorted(first.ready),
        )

        async def wait():
            return [event async for event in trigger.run()]

        started = time.perf_counter()
        events = asyncio.run(wait())
        wait_s = time.perf_counter() - started
    assert len(events) == 1 and events[0].payload["verdict"] == "all_ready"
    assert len(events[0].payload["ready_set"]["sources"]) == n
    return {
        "n": n,
        "already": already,
        "first": first_calls,
        "polls": calls["task_states"],
        "trigger_calls": dict(calls),
        "max_per_poll": max(per_poll),
        "log_lines": log.lines,
        "log_bytes": log.bytes,
        "kwargs_bytes": len(json.dumps(trigger.serialize()[1]).encode()),
        "wait_s": wait_s,
        "wake_writes": len(events[0].payload["ready_since_deferral"]),
        "event_bytes": len(json.dumps(events[0].payload).encode()),
    }


def print_wait(rows: list[dict]) -> None:
    print("\n### The whole wait: sources finishing one per trigger poll\n")
    print("| sources | finished before deferral | sensor's first evaluation (states / XCom / ledger / store writes) | trigger polls | trigger calls in all (states / XCom / ledger) | most calls in one poll | log lines / bytes in all | trigger kwargs bytes | sensor wake at the end (states / XCom / ledger / store writes) | event bytes | wall time |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        f, t = r["first"], r["trigger_calls"]
        print(
            f"| {r['n']} | {r['already']} | {f['task_states']} / {f['xcom_reads']} / {f['ledger_reads']} / {f['store_writes']} | "
            f"{r['polls']} | {t['task_states']} / {t['xcom_reads']} / {t['ledger_reads']} | {r['max_per_poll']} | "
            f"{r['log_lines']} / {r['log_bytes']} | {r['kwargs_bytes']} | 1 / 0 / 0 / {r['wake_writes']} | {r['event_bytes']} | {r['wait_s']:.2f} s |"
        )


def main() -> int:
    if "--wait" in sys.argv:
        print(f"machine: {platform.machine()}, {platform.processor() or 'cpu'}, python {platform.python_version()}")
        print_wait([measure_wait(n, already) for n, already in ((100, 0), (1000, 0), (1000, 150), (1000, 900))])
        return 0
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
