"""Cost of the delayed cleanup's carrying-out with 1,000 pending records across 100 runs.

Builds, in a temporary directory, a local state root and an Airflow metadata database (SQLite,
Airflow's own models), then:

1. ``--runs`` pipeline runs (default 100), each with ``--pipelines`` cleanup tasks (default 10):
   the real ``DelayedCleanupOperator`` records 1,000 cleanups, due one to two hours ahead, spread
   evenly. After each pipeline run a run of the cleanup DAG starts (the real
   ``CarryOutCleanupsOperator``, its first look) and defers: 100 waiting runs.
2. **Triggerer CPU while they wait**: the 100 deferrals' triggers (Airflow's ``DateTimeTrigger``,
   as the task serialized them) run in one asyncio event loop, as the triggerer runs them, for
   ``--seconds`` (default 60); this process's CPU time over that span.
3. **Per carry-out**: a simulated clock moves from one deferral's moment to the next and the run
   whose moment it is resumes (``resume``, as after its trigger fired) until every record is
   carried out. Counted per carry-out: calls into the state root (``StateStorage``: listings,
   reads, writes, moves, deletions), Airflow execution-API requests the task makes, SQL statements
   the metadata database executes to answer them (SQLAlchemy ``before_cursor_execute`` on the
   engine the in-process execution API uses, as the API server would), and task resumes (a worker
   slot each in a deployment). The simulated clock skips the waits; nothing here is timed but the
   CPU of step 2.

Usage: ``python benchmarks/cleanup_cost_bench.py [--runs 100] [--pipelines 10] [--seconds 60] [--markdown]``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import platform
import resource
import sys
import tempfile
import time
from collections import Counter, defaultdict
from types import SimpleNamespace
from typing import Any
from unittest import mock

WORK = tempfile.mkdtemp(prefix="zeta-cleanup-cost-")
os.environ["AIRFLOW_HOME"] = WORK
os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = f"sqlite:///{WORK}/airflow.db"
os.environ["AIRFLOW__ZETA__STATE_ROOT"] = f"{WORK}/state"
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "false")

DAG = "bench"
CLEANUP_DAG = "zeta_cleanup"
START = time.time()


class Deferred(Exception):
    pass


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Counted:
    storage: Counter = Counter()  # the counting storage's own counter, once it is imported
    api: Counter = Counter()
    sql = 0


def counting_storage_class():
    # The test harness is not installed with the provider: it is imported from the repository root.
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from zeta_harness.counting_storage import CountingStorage

    Counted.storage = CountingStorage.calls
    return CountingStorage


def metadata_database(pipeline_runs: list[str], cleanup_runs: list[str]) -> None:
    """Airflow's tables on a SQLite file, with the runs the tasks ask about."""
    from airflow import settings
    from airflow.models import import_all_models
    from sqlalchemy import event, insert
    from sqlalchemy.engine import Engine

    import_all_models()
    from airflow.models.base import Base
    from airflow.models.dagrun import DagRun

    Base.metadata.create_all(settings.engine)
    after = dt_now()
    rows = [
        {"dag_id": DAG, "run_id": r, "run_type": "manual", "state": "success", "run_after": after} for r in pipeline_runs
    ] + [
        {"dag_id": CLEANUP_DAG, "run_id": r, "run_type": "asset_triggered", "state": "running", "run_after": after}
        for r in cleanup_runs
    ]
    with settings.engine.begin() as connection:
        connection.execute(insert(DagRun), rows)

    def count(*_: Any) -> None:
        Counted.sql += 1

    event.listen(Engine, "before_cursor_execute", count)


def dt_now():
    import datetime as dt

    return dt.datetime.now(dt.UTC)


class InProcessComms:
    """The task's requests to its supervisor, answered as the supervisor does: through the
    execution API client, here served in-process (``InProcessExecutionAPI``) from the database."""

    def __init__(self) -> None:
        from airflow.api_fastapi.execution_api.app import InProcessExecutionAPI
        from airflow.sdk.api.client import Client

        self.client = Client(base_url="http://in-process.invalid./", token="", transport=InProcessExecutionAPI().transport)

    def send(self, msg: Any = None, **kwargs: Any) -> Any:
        from airflow.sdk.execution_time.comms import DagRunResult, GetDagRun, GetDagRunState, GetDRCount
        from airflow.sdk.execution_time.supervisor import handle_get_dag_run_state, handle_get_dr_count

        msg = msg if msg is not None else kwargs["msg"]
        Counted.api[type(msg).__name__] += 1
        if isinstance(msg, GetDRCount):
            return handle_get_dr_count(self.client, msg)[0]
        if isinstance(msg, GetDagRunState):
            return handle_get_dag_run_state(self.client, msg)[0]
        if isinstance(msg, GetDagRun):
            return DagRunResult.from_api_response(self.client.dag_runs.get_detail(msg.dag_id, msg.run_id))
        raise NotImplementedError(type(msg).__name__)


class Bench:
    def __init__(self, runs: int, pipelines: int) -> None:
        self.runs, self.pipelines = runs, pipelines
        self.root = os.environ["AIRFLOW__ZETA__STATE_ROOT"]
        self.deferrals: dict[str, dict] = {}
        self.clock: float | None = None

    def pipeline_run_ids(self) -> list[str]:
        return [f"manual__2026-01-01T00:00:00+00:00-{i:04d}" for i in range(self.runs)]

    def cleanup_run_ids(self) -> list[str]:
        return [f"asset_triggered__2026-01-01T00:00:00+00:00-{i:04d}" for i in range(self.runs)]

    @contextlib.contextmanager
    def provider(self):
        from airflow.sdk.execution_time import task_runner

        from airflow_provider_zeta.operators import cleanup as operator_module

        bench = self

        class Clock:
            @staticmethod
            def time() -> float:
                return bench.clock if bench.clock is not None else time.time()

            @staticmethod
            def sleep(seconds: float) -> None:
                if bench.clock is not None:
                    bench.clock += max(seconds, 0.0)
                else:
                    time.sleep(seconds)

        settings = mock.Mock(state_root=self.root, cleanup_retention=600.0)
        with contextlib.ExitStack() as stack:
            stack.enter_context(mock.patch.object(operator_module, "open_state_storage", counting_storage_class().from_url))
            stack.enter_context(mock.patch.object(operator_module.ZetaSettings, "load", return_value=settings))
            stack.enter_context(mock.patch.object(operator_module, "time", Clock))
            stack.enter_context(mock.patch.object(task_runner, "SUPERVISOR_COMMS", InProcessComms(), create=True))
            yield

    def record_cleanups(self, index: int, run_id: str) -> None:
        """The cleanup tasks of one pipeline run: ``pipelines`` records, due 1 to 2 hours ahead."""
        from airflow_provider_zeta.core.paths import attempt_dir
        from airflow_provider_zeta.operators.cleanup import DelayedCleanupOperator
        from airflow_provider_zeta.storage import StateStorage, register_run

        state = StateStorage.from_url(self.root)
        register_run(state, DAG, run_id)
        total = self.runs * self.pipelines
        for p in range(self.pipelines):
            deploy = f"p{p:02d}.deploy"
            attempt = attempt_dir(DAG, run_id, deploy, -1, f"tok{index:04d}{p:02d}")
            state.write_atomic(f"{attempt}/output/part-0.parquet", b"x" * 64)
            ledger = {"token": f"tok{index:04d}{p:02d}", "status": "succeeded", "started_at": 1, "heartbeat_at": 2}
            state.write_atomic(f"{attempt}/ledger.json", json.dumps(ledger).encode())
            store: dict = {}
            context = {
                "ti": SimpleNamespace(dag_id=DAG, run_id=run_id, get_dag=lambda d: SimpleNamespace(is_paused=False)),
                "dag_run": SimpleNamespace(clear_number=0),
                "task_state_store": SimpleNamespace(get=store.get, set=store.__setitem__),
                "outlet_events": defaultdict(SimpleNamespace),
            }
            # Due times spread evenly over the second hour from the start, in announcement order.
            due = START + 3600 + 3600 * (index * self.pipelines + p) / total
            task = DelayedCleanupOperator(
                task_id=f"p{p:02d}.cleanup", task_ids=[deploy], output_roots=[], retention=max(due - time.time(), 0.0)
            )
            task.execute(context)

    def waiter(self, run_id: str, resume: bool, event: Any = None) -> dict[str, Any] | None:
        """The cleanup DAG's task of run ``run_id``: its first look or a resume, until it defers
        (its deferral is kept) or ends (its summary is returned)."""
        from airflow_provider_zeta.operators.cleanup import CarryOutCleanupsOperator

        operator = CarryOutCleanupsOperator(task_id="carry_out")

        def defer(*, trigger, method_name, kwargs=None, **_):
            self.deferrals[run_id] = {"trigger": trigger, "kwargs": kwargs or {}}
            raise Deferred()

        operator.defer = defer  # type: ignore[method-assign]
        from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

        ti = SimpleNamespace(
            dag_id=CLEANUP_DAG,
            run_id=run_id,
            get_dr_count=RuntimeTaskInstance.get_dr_count,
            get_dagrun_state=RuntimeTaskInstance.get_dagrun_state,
        )
        context = {"ti": ti, "triggering_asset_events": {}}
        try:
            if resume:
                return operator.resume(context, event, **self.deferrals[run_id]["kwargs"])
            return operator.execute(context)
        except Deferred:
            return None

    def build(self) -> dict[str, Any]:
        first_looks = []
        with self.provider():
            for index, (run_id, waiter) in enumerate(zip(self.pipeline_run_ids(), self.cleanup_run_ids(), strict=True)):
                self.record_cleanups(index, run_id)
                Counted.storage.clear()
                Counted.api.clear()
                sql0 = Counted.sql
                self.waiter(waiter, resume=False)
                first_looks.append(
                    {"storage": sum(Counted.storage.values()), "api": sum(Counted.api.values()), "sql": Counted.sql - sql0}
                )
        waiting = sum(len(d["kwargs"].get("waiting", [])) for d in self.deferrals.values())
        return {
            "deferred_runs": len(self.deferrals),
            "records_waited_for": waiting,
            "first_look_of_the_first_run": first_looks[0],
            "first_look_of_the_last_run": first_looks[-1],
        }

    def triggerer_cpu(self, seconds: float, rescan_interval: float | None = None) -> dict[str, Any]:
        """The deferrals' triggers in one event loop, as the triggerer runs them; with
        ``rescan_interval``, each lists the unclaimed entries that often, its first look right away."""
        import importlib

        from airflow_provider_zeta.triggers import cleanup_wait

        triggers = []
        for deferral in self.deferrals.values():
            classpath, kwargs = deferral["trigger"].serialize()  # what the triggerer re-creates
            if rescan_interval is not None:
                kwargs = {**kwargs, "rescan_interval": rescan_interval, "created_at": time.time() - rescan_interval}
            module, name = classpath.rsplit(".", 1)
            triggers.append(getattr(importlib.import_module(module), name)(**kwargs))
        looks = [0]
        unclaimed = cleanup_wait.CleanupWaitTrigger.unclaimed

        def counted(trigger: Any) -> int:
            looks[0] += 1
            return unclaimed(trigger)

        async def run_all() -> tuple[float, float, int]:
            tasks = [asyncio.ensure_future(_first_event(t)) for t in triggers]
            await asyncio.sleep(1.0)  # warm-up: every trigger started and asleep
            cpu0, wall0 = cpu_s(), time.monotonic()
            await asyncio.sleep(seconds)
            cpu, wall = cpu_s() - cpu0, time.monotonic() - wall0
            fired = sum(1 for t in tasks if t.done())
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            return cpu, wall, fired

        with mock.patch.object(cleanup_wait.CleanupWaitTrigger, "unclaimed", counted):
            cpu, wall, fired = asyncio.run(run_all())
        moments = [t.moment - time.time() for t in triggers]
        return {
            "trigger_class": type(triggers[0]).__name__ if triggers else None,
            "triggers": len(triggers),
            "cpu_s": cpu,
            "wall_s": wall,
            "cpu_share": cpu / wall,
            "fired": fired,
            "listings": looks[0],
            "next_wake_s": (min(moments), max(moments)),
        }

    def carry_out_all(self) -> dict[str, Any]:
        """Resume the waiting runs at their moments on a simulated clock until nothing is left."""
        per_resume: list[dict[str, Any]] = []
        carried = 0
        with self.provider():
            while self.deferrals:
                run_id, deferral = min(self.deferrals.items(), key=lambda item: item[1]["trigger"].moment)
                self.clock = max(self.clock or 0.0, deferral["trigger"].moment)
                Counted.storage.clear()
                Counted.api.clear()
                sql0 = Counted.sql
                summary = self.waiter(run_id, resume=True, event={"woke_for": "due"})
                done = self.deferrals.get(run_id) is deferral  # not deferred again: it ended
                if done or summary is not None:
                    self.deferrals.pop(run_id, None)
                # What this resume carried out is the records gone from its wait.
                before = {tuple(k[:4]) for k in deferral["kwargs"].get("waiting", [])}
                after = set() if run_id not in self.deferrals else {
                    tuple(k[:4]) for k in self.deferrals[run_id]["kwargs"].get("waiting", [])
                }
                n = len(before - after)
                carried += n
                per_resume.append(
                    {
                        "carried": n,
                        "storage": sum(Counted.storage.values()),
                        "api": sum(Counted.api.values()),
                        "sql": Counted.sql - sql0,
                    }
                )
        self.clock = None
        waking = [r for r in per_resume if r["carried"]]
        idle = [r for r in per_resume if not r["carried"]]

        def per(rows: list[dict[str, Any]], name: str) -> tuple[float, int]:
            total = sum(r["carried"] for r in rows)
            return (sum(r[name] for r in rows) / total if total else 0.0, max((r[name] for r in rows), default=0))

        return {
            "carried_out": carried,
            "resumes": len(per_resume),
            "resumes_carrying_out": len(waking),
            "rescan_resumes": len(idle),
            "per_carry_out": {name: per(waking, name) for name in ("storage", "api", "sql")},
            "per_rescan": {
                name: (sum(r[name] for r in idle) / len(idle) if idle else 0.0, max((r[name] for r in idle), default=0))
                for name in ("storage", "api", "sql")
            },
        }


async def _first_event(trigger: Any) -> Any:
    async for event in trigger.run():
        return event


def pending_left(root: str) -> int:
    from airflow_provider_zeta import janitor
    from airflow_provider_zeta.storage import StateStorage

    state = StateStorage.from_url(root)
    return sum(len(janitor.read_records(state, d, r)) for d, r in janitor.list_runs(state))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--pipelines", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # the provider's and the triggers' log lines
    bench = Bench(args.runs, args.pipelines)
    with contextlib.redirect_stdout(sys.stderr):  # the tasks' log lines; stdout is the result
        metadata_database(bench.pipeline_run_ids(), bench.cleanup_run_ids())
        built = bench.build()
        waiting = {"pending": pending_left(bench.root), **built}
        cpu = bench.triggerer_cpu(args.seconds)
        cpu_short = bench.triggerer_cpu(args.seconds, rescan_interval=12.0)
        costs = bench.carry_out_all()
        left = pending_left(bench.root)
    assert waiting["pending"] == args.runs * args.pipelines, waiting
    assert costs["carried_out"] == args.runs * args.pipelines and left == 0, (costs, left)
    result = {"waiting": waiting, "triggerer": cpu, "triggerer_rescan_12s": cpu_short, "carry_out": costs}
    if not args.markdown:
        print(json.dumps(result, indent=2, default=str))
        return
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}; "
          f"local state root, SQLite metadata database")
    print()
    print(f"{waiting['pending']} pending records across {args.runs} runs ({args.pipelines} cleanup tasks each); "
          f"{built['deferred_runs']} runs of the cleanup DAG waiting, each the waiter of {args.pipelines} records")
    print()
    print("| while they wait | value |")
    print("|---|---|")
    print(f"| triggers in the triggerer's loop | {cpu['triggers']} `{cpu['trigger_class']}` |")
    print(f"| process CPU over {cpu['wall_s']:.0f} s | {cpu['cpu_s']:.3f} s ({100 * cpu['cpu_share']:.2f} % of one core) |")
    print(f"| listings of the unclaimed entries in that time | {cpu['listings']} (each trigger lists every 600 s) |")
    print(f"| triggers fired | {cpu['fired']} |")
    lo, hi = cpu["next_wake_s"]
    print(f"| next wake of a waiting run | {lo:.0f}–{hi:.0f} s ahead |")
    print(f"| the same triggers listing every 12 s (the shortest interval): process CPU over "
          f"{cpu_short['wall_s']:.0f} s | {cpu_short['cpu_s']:.3f} s ({100 * cpu_short['cpu_share']:.2f} % of one core), "
          f"{cpu_short['listings']} listings, {cpu_short['fired']} fired |")
    print()
    print("| per carry-out (mean / most in one resume) | storage calls | execution-API requests | SQL statements |")
    print("|---|---|---|---|")
    pc, pr = costs["per_carry_out"], costs["per_rescan"]
    print(f"| a resume that carries out records | {pc['storage'][0]:.1f} / {pc['storage'][1]} | "
          f"{pc['api'][0]:.1f} / {pc['api'][1]} | {pc['sql'][0]:.1f} / {pc['sql'][1]} |")
    if costs["rescan_resumes"]:
        print(f"| a resume that carried nothing out (per resume) | {pr['storage'][0]:.1f} / {pr['storage'][1]} | "
              f"{pr['api'][0]:.1f} / {pr['api'][1]} | {pr['sql'][0]:.1f} / {pr['sql'][1]} |")
    print()
    print(f"{costs['carried_out']} records carried out in {costs['resumes']} resumes of the waiting runs "
          f"({costs['resumes_carrying_out']} carried something out, {costs['rescan_resumes']} nothing)")
    print()
    print(f"| first look of a new run of the cleanup DAG (takes {args.pipelines} records) | storage calls | "
          "execution-API requests | SQL statements |")
    print("|---|---|---|---|")
    for name, key in (("the first run (no other waiter)", "first_look_of_the_first_run"),
                      (f"the {args.runs}th run ({args.runs - 1} other waiters)", "first_look_of_the_last_run")):
        row = built[key]
        print(f"| {name} | {row['storage']} | {row['api']} | {row['sql']} |")


if __name__ == "__main__":
    main()
