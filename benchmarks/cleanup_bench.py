"""Cost of one pass of the cleanup DAG's task over 1,000 pending cleanup records, a few of them due.

Builds a local state root with ``--records`` runs (default 1,000), each with one attempt directory
(ledger + a staging file) and one pending cleanup record with its unclaimed waiter entry (as the
pipeline's cleanup task writes them): ``--due`` of them (default 10) past their due time, the
others due from an hour on, a minute apart. Then runs ``CarryOutCleanupsOperator`` — the real code —
on it, with the Airflow calls answered in-process (every run ``success``, incarnation 0), through
a counting subclass of the provider's ``StateStorage``:

* **first look**: ``execute`` from its start until it defers to the next due time: one run of the
  cleanup DAG takes every unclaimed entry (it becomes the waiter of all the records) and carries
  out the due ones on the way;
* **a wake**: the clock moves to the due time of ``--due`` more records, then ``resume`` — what the
  task does when its wait ends — until it defers again.

Counted per pass: directory listings (``list_dir``), file reads (``read_bytes``, ``exists``) and
deletions, and the wall time. No Airflow API round trips are included: add three per due record
for a deployment (run count, state, incarnation), and three more just before each deletion.
``benchmarks/cleanup_cost_bench.py`` measures those, the triggerer, and 100 waiting runs.

Usage: ``python benchmarks/cleanup_bench.py [--records N] [--due K] [--rounds R] [--markdown]``
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any
from unittest import mock

from airflow_provider_zeta import janitor
from airflow_provider_zeta.core.cleanup import CleanupRecord, Leftovers, RunStatus, new_record
from airflow_provider_zeta.core.ledger import Ledger, LedgerStatus
from airflow_provider_zeta.core.paths import LEDGER_FILE, attempt_dir
from airflow_provider_zeta.operators.cleanup import enqueue_waiter_entry
from airflow_provider_zeta.storage import StateStorage, register_run

DAG = "bench"
OWNER = "pipe.cleanup"


class CountingStorage(StateStorage):
    """The provider's storage class, counting the calls that reach the filesystem."""

    calls: Counter = Counter()

    def list_dir(self, relative: str) -> list[str]:
        self.calls["list"] += 1
        return super().list_dir(relative)

    def read_bytes(self, relative: str) -> bytes | None:
        self.calls["read"] += 1
        return super().read_bytes(relative)

    def exists(self, relative: str) -> bool:
        self.calls["read"] += 1
        return super().exists(relative)

    def delete_tree(self, relative: str) -> bool:
        self.calls["delete"] += 1
        return super().delete_tree(relative)

    def write_atomic(self, relative: str, data: bytes, make_parents: bool = True) -> None:
        self.calls["write"] += 1
        super().write_atomic(relative, data, make_parents)


def run_id_of(i: int) -> str:
    return f"scheduled__2026-01-01T00:00:00+00:00-{i:05d}"


def build(root: str, records: int, due: int, now: float) -> StateStorage:
    state = StateStorage.from_url(root)
    for i in range(records):
        run_id = run_id_of(i)
        register_run(state, DAG, run_id)
        attempt = attempt_dir(DAG, run_id, "pipe.deploy_src", -1, f"tok{i:012d}")
        state.write_atomic(f"{attempt}/{LEDGER_FILE}", Ledger(f"tok{i:012d}", LedgerStatus.SUCCEEDED, 1, 2).to_json())
        state.write_atomic(f"{attempt}/output/part-0.json", b"[]")
        record = make_record(run_id, attempt, now, due_at=now - 60 if i < due else due_time(now, i))
        enqueue_waiter_entry(state, record)  # as the pipeline's cleanup task does, before the record file
        janitor.write_record_file(state, record)
    return state


def due_time(now: float, i: int) -> float:
    """Record ``i``'s due time: a minute apart, so that the task defers between two of them."""
    return now + 3600 + 60 * i


def make_record(run_id: str, attempt: str, now: float, due_at: float) -> CleanupRecord:
    record = new_record(DAG, run_id, 0, OWNER, now - 3600, 3600, Leftovers((attempt,), {}), tasks=["pipe.deploy_src"])
    return record.with_changes(due_at=due_at)


class Deferred(Exception):
    pass


@contextlib.contextmanager
def provider_patched(root: str) -> Iterator[None]:
    from airflow_provider_zeta.operators import cleanup as operator_module

    settings = mock.Mock(state_root=root)
    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(operator_module, "open_state_storage", CountingStorage.from_url))
        stack.enter_context(mock.patch.object(operator_module.ZetaSettings, "load", return_value=settings))
        stack.enter_context(
            mock.patch("airflow_provider_zeta.operators.sweep.run_status", return_value=RunStatus("success", 0))
        )
        yield


def one_pass(call: Any) -> dict[str, Any]:
    """Run ``call`` (execute or resume) until the task defers; count and time it."""
    CountingStorage.calls.clear()
    started = time.perf_counter()
    deferred_until = None
    try:
        call()
    except Deferred as deferral:
        deferred_until = deferral.args[0]
    wall = time.perf_counter() - started
    return {**{k: CountingStorage.calls[k] for k in ("list", "read", "delete", "write")}, "wall_s": wall,
            "deferred_until": deferred_until}


def measure(records: int, due: int) -> dict[str, Any]:
    root = tempfile.mkdtemp(prefix="zeta-cleanup-bench-")
    try:
        return _measure(root, records, due)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _measure(root: str, records: int, due: int) -> dict[str, Any]:
    from airflow_provider_zeta.operators import cleanup as operator_module
    from airflow_provider_zeta.operators.cleanup import CarryOutCleanupsOperator

    now = time.time()
    state = build(root, records, due, now)
    operator = CarryOutCleanupsOperator(task_id="carry_out")
    context: dict[str, Any] = {"ti": mock.Mock(dag_id="zeta_cleanup", run_id="bench"), "triggering_asset_events": {}}

    def defer(*, trigger: Any, method_name: str, kwargs: dict | None = None, **_: Any) -> None:
        context["resume_kwargs"] = kwargs or {}
        raise Deferred(trigger.moment)

    operator.defer = defer  # type: ignore[method-assign]
    with provider_patched(root):
        first = one_pass(lambda: operator.execute(context))
        pending_after_first = len(pending_records(state))
        # The next due times arrive: the clock moves to the last of the next ``due`` records.
        clock = [due_time(now, 2 * due - 1) + 0.5]

        def sleep(seconds: float) -> None:
            clock[0] += max(seconds, 0.0)

        fake_time = mock.Mock(time=lambda: clock[0], sleep=sleep)
        with mock.patch.object(operator_module, "time", fake_time):
            wake = one_pass(lambda: operator.resume(context, None, **context.get("resume_kwargs", {})))
        pending_after_wake = len(pending_records(state))
    assert pending_after_first == records - due, pending_after_first
    assert pending_after_wake == records - 2 * due, pending_after_wake
    return {"records": records, "due": due, "first_look": first, "wake": wake}


def pending_records(state: StateStorage) -> list[CleanupRecord]:
    return [
        r
        for dag_id, run_id in janitor.list_runs(state)
        for r in janitor.read_records(state, dag_id, run_id)
        if isinstance(r, CleanupRecord)
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--due", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3, help="fresh state roots measured; wall times are medians")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    logging.disable(logging.INFO)  # the provider's log lines (one per record carried out)
    with contextlib.redirect_stdout(sys.stderr):  # the task's log lines; stdout is the result
        rounds = [measure(args.records, args.due) for _ in range(max(1, args.rounds))]
    result = rounds[0]
    for key in ("first_look", "wake"):
        counts = {tuple(r[key][k] for k in ("list", "read", "delete")) for r in rounds}
        assert len(counts) == 1, f"the counts differ between rounds: {counts}"
        result[key]["wall_s"] = statistics.median(r[key]["wall_s"] for r in rounds)
    result["rounds"] = len(rounds)
    if not args.markdown:
        print(json.dumps(result, indent=2))
        return
    print(f"machine: {platform.machine()}, python {platform.python_version()}, local state root")
    print()
    print(
        f"{result['records']} pending records, {result['due']} due at each look; calls counted through "
        f"`StateStorage`; wall time the median of {result['rounds']} fresh state roots"
    )
    print()
    print("| pass | listings | reads | deletions | wall time |")
    print("|---|---|---|---|---|")
    for name, key in (("first look (execute, until it defers)", "first_look"), ("a wake (resume, until it defers)", "wake")):
        row = result[key]
        print(f"| {name} | {row['list']} | {row['read']} | {row['delete']} | {row['wall_s']:.2f} s |")


if __name__ == "__main__":
    main()
