"""Triggerer footprint of 500 concurrent deferred waits of this provider (ledger polling).

Runs ``--triggers`` real ``ZetaDriverTrigger.run()`` coroutines in one asyncio event loop — how
the triggerer runs them — against as many ledgers in a local state root, which a separate process
keeps heartbeating every 5 s like live drivers. After a warm-up it measures, over ``--seconds``,
this process's CPU time (all threads, including the ledger reads the triggers do in threads) and
its resident memory, with and without the triggers. The triggerer's own per-trigger bookkeeping
(database sync of trigger rows, every few seconds) is not included.

Usage: ``python benchmarks/triggerer_footprint_bench.py [--triggers 500] [--seconds 60] [--markdown]``
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import resource
import sys
import tempfile
import time

from airflow_provider_zeta.core.ledger import Ledger, LedgerStatus
from airflow_provider_zeta.core.paths import LEDGER_FILE, attempt_dir
from airflow_provider_zeta.storage import StateStorage

DAG, RUN = "bench", "scheduled__2026-01-01T00:00:00+00:00"


def token(i: int) -> str:
    return f"tok{i:012d}"


def relative(i: int) -> str:
    return attempt_dir(DAG, RUN, f"pipe.deploy_src{i:04d}", -1, token(i))


def heartbeat_forever(root: str, count: int, stop) -> None:
    state = StateStorage.from_url(root)
    while not stop.is_set():
        now = time.time()
        for i in range(count):
            ledger = Ledger(token(i), LedgerStatus.RUNNING, now - 60, now, pid=1)
            state.write_atomic(f"{relative(i)}/{LEDGER_FILE}", ledger.to_json())
        stop.wait(5)


def rss_mib() -> float:
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def measure(root: str, count: int, seconds: float, poll: float, stop_writer) -> dict:
    from airflow_provider_zeta.triggers.driver import ZetaDriverTrigger

    triggers = [
        ZetaDriverTrigger(
            state_root=root,
            attempt_dir=relative(i),
            token=token(i),
            lost_after=60,
            poll_interval=poll,
            missing_deadline=time.time() + 3600,
        )
        for i in range(count)
    ]
    idle_rss = rss_mib()
    started = time.time()

    finished_at: dict[int, float] = {}
    noticed_after: list[float] = []

    async def drain(i, trigger):
        async for event in trigger.run():
            if i not in finished_at:
                raise AssertionError(f"a trigger fired although its driver is alive: {event}")
            noticed_after.append(time.time() - finished_at[i])
            return

    tasks = [asyncio.create_task(drain(i, t)) for i, t in enumerate(triggers)]
    await asyncio.sleep(max(poll * 2, 10))  # warm-up: every trigger at its full poll interval
    cpu_before, wall_before = cpu_s(), time.time()
    await asyncio.sleep(seconds)
    cpu_used, wall = cpu_s() - cpu_before, time.time() - wall_before
    # Then every driver finishes (the heartbeat writer is stopped first, by the caller's event):
    # how long after its ledger turned "succeeded" did its trigger fire?
    stop_writer()
    storage = StateStorage.from_url(root)
    for i in range(count):
        now = time.time()
        ledger = Ledger(token(i), LedgerStatus.SUCCEEDED, now - 60, now, pid=1, output_path="/x", rows=1)
        storage.write_atomic(f"{relative(i)}/{LEDGER_FILE}", ledger.to_json())
        finished_at[i] = time.time()
        if i % 50 == 49:
            await asyncio.sleep(0)  # the writes take a while: let the triggers run meanwhile
    await asyncio.wait_for(asyncio.gather(*tasks), 120)
    noticed_after.sort()
    return {
        "triggers": count,
        "poll_interval_s": poll,
        "cpu_percent": 100 * cpu_used / wall,
        "noticed_median_s": noticed_after[len(noticed_after) // 2],
        "noticed_max_s": noticed_after[-1],
        "rss_idle_mib": idle_rss,
        "rss_mib": rss_mib(),
        "warmup_s": wall_before - started,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--triggers", type=int, default=500)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--poll-interval", type=float, default=5)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="zeta-bench-home-"))
    root = tempfile.mkdtemp(prefix="zeta-trigger-bench-")
    stop = multiprocessing.Event()
    writer = multiprocessing.Process(target=heartbeat_forever, args=(root, args.triggers, stop), daemon=True)
    writer.start()
    time.sleep(2)
    try:
        def stop_writer() -> None:
            stop.set()
            writer.join(10)

        # The triggers' own log lines go to stderr: stdout is the table (make bench writes it to the docs).
        sys.stdout.flush()
        real_stdout = os.dup(1)
        os.dup2(2, 1)
        try:
            result = asyncio.run(measure(root, args.triggers, args.seconds, args.poll_interval, stop_writer))
        finally:
            sys.stdout.flush()
            os.dup2(real_stdout, 1)
            os.close(real_stdout)
    finally:
        stop.set()
        writer.join(10)
    if not args.markdown:
        print(result)
        return
    print("| deferred waits | poll interval | CPU of the event loop process | finished driver noticed after (median / max) | memory (RSS) before → with the triggers |")
    print("|---|---|---|---|---|")
    print(
        f"| {result['triggers']} | {result['poll_interval_s']:.0f} s | {result['cpu_percent']:.1f} % of one core | "
        f"{result['noticed_median_s']:.2f} s / {result['noticed_max_s']:.2f} s | "
        f"{result['rss_idle_mib']:.0f} → {result['rss_mib']:.0f} MiB |"
    )


if __name__ == "__main__":
    main()
