"""The example pipeline through this provider vs the same PySpark jobs through the stock operators.

One embedded Airflow (SQLite, LocalExecutor, local Spark), both DAGs from ``dags/``:
``zeta_regional_sales`` (``zeta_pipeline``) and ``zeta_regional_sales_baseline`` (one stock
``SparkSubmitOperator`` per region, the same job with ``--standalone``). Measures, side by side in
one run, because absolute times on these machines drift:

1. **overhead**: wall time from a run's queued moment to "data published" (the provider's completed
   point ended; the baseline's last task ended), from Airflow's own dates, ``--rounds`` interleaved
   pairs (the order alternates), median ratio, and where the time went (hops, below). These runs
   use Airflow's default health thresholds, after one uncounted warm-up run of each side; a round in
   which a side re-ran anything (a second try, a second launch) is named and left out, and up to
   ``--extra-rounds`` more rounds replace it;
2. **re-done work** after ``kill -9`` of the scheduler while the three jobs run: Spark
   driver-seconds executed beyond one clean run per source (from the jobs' own launch log);
3. **resume time** after a scheduler, a triggerer and a worker kill: from the restart (or the kill,
   for a worker, which nothing restarts) to the pipeline's next task state change; and what the
   kill cost in the end: the run's wall time to published data minus the median clean run's.

Usage: ``python benchmarks/pipeline_bench.py [--rounds 7] [--warmup 1] [--extra-rounds 2] [--work-seconds 20] [--overhead-only] [--markdown]``
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

# The test harness (zeta_harness/) is not installed with the provider: it is imported from the
# repository root, whatever directory this script is run from.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from zeta_harness import chaos  # noqa: E402
from zeta_harness.cluster import AirflowCluster  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PROVIDER, BASELINE = "zeta_regional_sales", "zeta_regional_sales_baseline"
REGIONS = ("emea", "amer", "apac")
PUBLISH_TASK = "regional_sales.completed_point"

#: Where a run's time goes, as consecutive moments: queued (triggered, or created by a backfill), started (a
#: ``max_active_runs`` slot), its last job's first line, its last job's last line (the jobs' launch
#: log), data published (the provider's completed point; the last stock task's end), run ended.
HOPS = (
    "queued → started (waiting for a run slot)",
    "started → last job started (scheduling, spark-submit, JVM)",
    "→ last job ended (the jobs)",
    "→ published",
    "→ run ended",
)

#: The provider's "→ published" hop in steps: its deploy tasks' triggers notice the ledgers and the
#: tasks resume, the ready-to-close sensor notices, the completed point publishes.
PROVIDER_STEPS = (
    "of which: last job ended → last deploy task ended",
    "of which: → ready-to-close ended",
    "of which: → completed point ended",
)


def epoch(iso: str | None) -> float | None:
    if not iso:
        return None
    return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def hops(run: dict, task_instances: list[dict], launches: list[dict], provider: bool) -> dict[str, float]:
    """The run's time per hop (``HOPS``) and in all (``queued → ended``, ``started → ended``), seconds.

    ``launches`` are the launch-log entries of this run; the moments come from the API's run and
    task dates (ISO) and the jobs' own log (epoch seconds)."""
    if provider:
        published = max(epoch(ti["end_date"]) or 0.0 for ti in task_instances if ti["task_id"] == PUBLISH_TASK)
    else:
        published = max(epoch(ti["end_date"]) or 0.0 for ti in task_instances if ti["task_id"].startswith("submit_"))
    queued, started, ended = epoch(run["queued_at"]), epoch(run["start_date"]), epoch(run["end_date"])
    assert queued is not None and started is not None and ended is not None, f"run {run['dag_run_id']} has no dates"
    points = [
        queued,
        started,
        max(e["at"] for e in launches if "end" not in e),
        max(e["end"] for e in launches if "end" in e),
        published,
        ended,
    ]
    result = {name: later - earlier for name, earlier, later in zip(HOPS, points[:-1], points[1:], strict=True)}
    result["queued → ended"] = ended - queued
    result["started → ended"] = ended - started
    if provider:  # the provider's "→ published", step by step
        def end_of(prefix: str) -> float:
            return max(epoch(ti["end_date"]) or 0.0 for ti in task_instances if ti["task_id"].startswith(prefix))

        deploys, ready = end_of("regional_sales.deploy"), end_of("regional_sales.ready_to_close")
        result[PROVIDER_STEPS[0]] = deploys - points[3]
        result[PROVIDER_STEPS[1]] = ready - deploys
        result[PROVIDER_STEPS[2]] = published - ready
    return result




def cluster_env(home: Path) -> dict[str, str]:
    """The embedded cluster's settings for both DAGs of ``dags/``: local Spark, outputs under ``home``,
    manual runs only (``benchmarks/backfill_bench.py`` starts from these too)."""
    return {
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[1]"}),
        "ZETA_EXAMPLE_OUTPUT": str(home / "out" / "provider"),
        "ZETA_BASELINE_OUTPUT": str(home / "out" / "baseline"),
        "ZETA_EXAMPLE_SCHEDULE": "",
        "ZETA_SWEEP_SCHEDULE": "@yearly",
        "AIRFLOW__ZETA__CLEANUP_RETENTION": "5",
        # the stock operator runs `spark-submit` from PATH: the one pip put beside this Python
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
    }


def starts(log: Path) -> list[dict]:
    return [e for e in chaos.entries(log) if "end" not in e]


def driver_seconds(log: Path, until: float) -> tuple[float, float]:
    """(all driver-seconds, re-done driver-seconds) from a launch log.

    A launch runs from its start to its ``end`` entry, or — killed or replaced — to the next launch
    of the same source or ``until``. Re-done = all minus the last completed launch of each source.
    """
    by_source: dict[str, list[dict]] = {}
    for entry in chaos.entries(log):
        by_source.setdefault(entry["source"], []).append(entry)
    total = redone = 0.0
    for items in by_source.values():
        launches = [e for e in items if "end" not in e]
        ends = {e["token"]: e["end"] for e in items if "end" in e}
        spans = []
        for i, launch in enumerate(launches):
            stop = ends.get(launch["token"])
            if stop is None:
                stop = launches[i + 1]["at"] if i + 1 < len(launches) else until
            spans.append(stop - launch["at"])
        total += sum(spans)
        redone += sum(spans) - (spans[-1] if spans else 0.0)
    return total, redone


def published(cluster: AirflowCluster, dag_id: str, run_id: str) -> bool:
    if dag_id == PROVIDER:
        return cluster.task_instance(dag_id, run_id, "regional_sales.completed_point")["state"] == "success"
    run = cluster.api("GET", f"/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}")
    if run["state"] == "failed":
        raise RuntimeError(f"{dag_id} {run_id} failed")
    return run["state"] == "success"


def states(cluster: AirflowCluster, dag_id: str, run_id: str) -> dict:
    return {ti["task_id"]: ti["state"] for ti in cluster.task_instances(dag_id, run_id)}


def run_dict(cluster: AirflowCluster, dag_id: str, run_id: str) -> dict:
    return cluster.api("GET", f"/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}")


def run_once(cluster, dag_id, ds, log, work_seconds, kill=None) -> dict:
    """One run of ``dag_id``, waited for until it ended (untimed after its data is published, so the
    next run starts alone). ``wall_s``: queued → data published, from Airflow's own dates (the
    provider's completed point's end; the last stock task's end), not from this script's polling."""
    started = time.monotonic()
    # The same work on both sides: no checkpoints while the provider's job works (the stock job
    # has none; each is a ledger write and a trigger look), the row count known, not counted.
    conf = {"launch_log": str(log), "work_seconds": work_seconds, "checkpoint_seconds": 0}
    run_id = cluster.trigger_run(dag_id, f"{ds}T00:00:00Z", conf=conf)
    resume = None
    if kill is not None:
        cluster.wait_for(lambda: len({e["source"] for e in starts(log)}) == 3, 600, "three jobs running", interval=1)
        time.sleep(3)  # well inside the jobs' work
        before = states(cluster, dag_id, run_id)
        restarted, killed = kill(cluster)
        cluster.wait_for(lambda: states(cluster, dag_id, run_id) != before, 900, "progress after the kill", interval=0.5)
        resume = time.monotonic() - restarted if killed else None  # nothing was killed: no resume to time
    cluster.wait_for(lambda: published(cluster, dag_id, run_id), 1200, f"{dag_id} published", interval=1)
    polled = time.monotonic() - started
    run = cluster.wait_for(
        lambda: (r := run_dict(cluster, dag_id, run_id))["state"] in ("success", "failed") and r, 600, f"{dag_id} {run_id} ended", interval=1
    )
    total, redone = driver_seconds(log, time.time())
    task_instances = cluster.task_instances(dag_id, run_id)
    retried = [f"{ti['task_id']}: try {ti['try_number']}" for ti in task_instances if (ti.get("try_number") or 0) > 1]
    try:
        run_hops = hops(run, task_instances, chaos.entries(log), dag_id == PROVIDER)
    except (AssertionError, KeyError, ValueError) as error:  # e.g. a killed job never logged its end
        print(f"  {dag_id} {run_id}: no hops ({error!r}); wall time as polled", file=sys.stderr, flush=True)
        run_hops = {}
    wall = sum(run_hops[hop] for hop in HOPS[:4]) if run_hops else polled
    return {
        "dag": dag_id, "ds": ds, "run_id": run_id, "wall_s": wall, "polled_wall_s": polled, "hops": run_hops,
        "launches": len(starts(log)), "driver_s": total, "redone_s": redone, "resume_s": resume, "retried": retried,
    }


def reran(result: dict) -> list[str]:
    """Why a clean run does not count: a task with a second try (a spurious orphan reset of a busy
    2-core machine re-runs the stock job and resets its clock), or a job launched more than once."""
    return list(result.get("retried") or []) + ([f"{result['launches']} launches for {len(REGIONS)} jobs"] if result["launches"] != len(REGIONS) else [])


def kill_component(name):
    def kill(cluster):
        cluster.kill(name)
        time.sleep(2)
        cluster.start_component(name)
        return time.monotonic(), 1

    return kill


def kill_workers(cluster):
    """SIGKILL every LocalExecutor worker and its task processes; nothing restarts them."""
    killed = chaos.kill_workers(cluster)
    print(f"  kill -9 {len(killed)} worker(s)", file=sys.stderr, flush=True)
    return time.monotonic(), len(killed)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds to count")
    parser.add_argument("--warmup", type=int, choices=(0, 1), default=1, help="one uncounted run of each side first")
    parser.add_argument("--extra-rounds", type=int, default=2, help="rounds run at most to replace rounds in which a side re-ran")
    parser.add_argument("--work-seconds", type=float, default=20)
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--overhead-only", action="store_true", help="only the clean interleaved rounds, no kills")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="zeta-bench-"))
    results: list[dict] = []
    # The clean rounds on Airflow's default thresholds (scheduler and triggerer health 30 s, task
    # heartbeat timeout 300 s): on 2 loaded cores a short threshold can make the scheduler reset its
    # own running tasks, re-running a stock job (the round is then left out, not counted).
    cluster = AirflowCluster(
        ROOT / "dags", db="sqlite", home=home / "clean", extra_env=cluster_env(home / "clean"), parallelism=6,
        health_threshold_s=30, task_heartbeat_timeout_s=300,
    )
    try:
        cluster.start()
        day = 1
        # One run of each side first, not counted: a fresh cluster's first runs pay one-off costs
        # (the first parse and serialization of each DAG, cold caches) that no later run does.
        for dag_id in (PROVIDER, BASELINE)[: 2 * args.warmup]:
            result = run_once(cluster, dag_id, f"2026-01-{day:02d}", home / f"w{day}.jsonl", args.work_seconds)
            results.append({"kind": "warmup", **result})
            print(f"warm-up: {dag_id} {result['wall_s']:.1f} s", file=sys.stderr, flush=True)
            day += 1
        for round_ in range(args.rounds + args.extra_rounds):
            if len(counted_rounds(results)) >= args.rounds:
                break
            order = (PROVIDER, BASELINE) if round_ % 2 == 0 else (BASELINE, PROVIDER)
            for dag_id in order:
                result = run_once(cluster, dag_id, f"2026-02-{day:02d}", home / f"l{day}.jsonl", args.work_seconds)
                results.append({"kind": "plain", "round": round_ + 1, **result})
                print(f"round {round_ + 1}: {dag_id} {result['wall_s']:.1f} s; re-ran: {reran(result) or 'nothing'}", file=sys.stderr, flush=True)
                day += 1
    finally:
        cluster.stop()
    if not args.overhead_only:
        # The kills on the embedded cluster's short thresholds, so that a dead component is noticed
        # in seconds (what "resume" measures).
        cluster = AirflowCluster(ROOT / "dags", db="sqlite", home=home / "kills", extra_env=cluster_env(home / "kills"), parallelism=6)
        try:
            cluster.start()
            for name, kill in (("scheduler", kill_component("scheduler")), ("triggerer", kill_component("triggerer")), ("worker", kill_workers)):
                for dag_id in (PROVIDER, BASELINE):
                    results.append({"kind": name, **run_once(cluster, dag_id, f"2026-02-{day:02d}", home / f"l{day}.jsonl", args.work_seconds, kill)})
                    day += 1
        finally:
            cluster.stop()
    print(json.dumps(results), file=sys.stderr)  # the raw figures, for a closer look
    report(results, args)
    return 0


def counted_rounds(results: list[dict]) -> list[list[dict]]:
    """The clean rounds (one provider and one stock run each) in which neither side re-ran anything."""
    rounds: dict[int, list[dict]] = {}
    for result in results:
        if result["kind"] == "plain":
            rounds.setdefault(result["round"], []).append(result)
    return [pair for pair in rounds.values() if len(pair) == 2 and not any(reran(r) for r in pair)]


def report(results: list[dict], args) -> None:
    if not args.markdown:
        print(json.dumps(results, indent=2))
        return
    plain_runs = [r for r in results if r["kind"] == "plain"]
    rounds: dict[int, list[dict]] = {}
    for result in plain_runs:
        rounds.setdefault(result["round"], []).append(result)
    counted = counted_rounds(results)
    plain = {dag: [r["wall_s"] for pair in counted for r in pair if r["dag"] == dag] for dag in (PROVIDER, BASELINE)}
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}; "
          f"{len(rounds)} interleaved rounds, jobs working {args.work_seconds:.0f} s each")
    print()
    print("| wall time, run queued → data published | this provider | stock SparkSubmitOperator |")
    print("|---|---|---|")
    print_round_rows(results, rounds)
    if not counted:
        print("| **no round counted**: every round re-ran something | | |")
        return
    clean = {dag: statistics.median(plain[dag]) for dag in plain}
    ratio = clean[PROVIDER] / clean[BASELINE]
    print(f"| **median** ({len(counted)} counted rounds) | **{clean[PROVIDER]:.1f} s** | **{clean[BASELINE]:.1f} s** |")
    print(f"| **ratio** provider / stock (target ≤ 1.05) | **{ratio:.3f}** | 1 |")
    print_kill_rows(results, clean)
    print()
    print("Where a clean run's time went, median over the runs of the counted rounds (seconds):")
    print()
    print("| hop | this provider | stock SparkSubmitOperator |")
    print("|---|---|---|")
    print_hop_rows(counted)


def print_round_rows(results: list[dict], rounds: dict[int, list[dict]]) -> None:
    """The table's warm-up row and one row per round: its order, whether it counted, its wall times."""
    warmup = {r["dag"]: r for r in results if r["kind"] == "warmup"}
    if warmup:
        cells = [f"{warmup[dag]['wall_s']:.1f} s" if dag in warmup else "—" for dag in (PROVIDER, BASELINE)]
        print(f"| warm-up (the cluster's first run of each DAG; not counted) | {cells[0]} | {cells[1]} |")
    for number, pair in rounds.items():
        by_dag = {r["dag"]: r for r in pair}
        order = " then ".join("provider" if r["dag"] == PROVIDER else "stock" for r in pair)
        why = "; ".join(f"{'provider' if r['dag'] == PROVIDER else 'stock'} re-ran: {', '.join(reran(r))}" for r in pair if reran(r))
        cells = [f"{by_dag[dag]['wall_s']:.1f} s" if dag in by_dag else "—" for dag in (PROVIDER, BASELINE)]
        print(f"| round {number} ({order}; {'counted' if not why else 'left out: ' + why}) | {cells[0]} | {cells[1]} |")


def _resume(r: dict) -> str:
    return "no worker held (deferred)" if r["resume_s"] is None else f"{r['resume_s']:.1f} s"


def print_kill_rows(results: list[dict], clean: dict[str, float]) -> None:
    """The table's rows of each `kill -9` run: launches and re-done driver time, resume, extra wall time."""
    for kind in ("scheduler", "triggerer", "worker"):
        row = {r["dag"]: r for r in results if r["kind"] == kind}
        if not row:
            continue
        p, b = row[PROVIDER], row[BASELINE]
        print(f"| `kill -9` {kind}: launches / re-done driver-seconds | {p['launches']} / {p['redone_s']:.0f} s | {b['launches']} / {b['redone_s']:.0f} s |")
        print(f"| `kill -9` {kind}: resume (to next task state change) | {_resume(p)} | {_resume(b)} |")
        print(f"| `kill -9` {kind}: wall time to published data, more than a clean run | "
              f"{p['wall_s'] - clean[PROVIDER]:+.0f} s | {b['wall_s'] - clean[BASELINE]:+.0f} s |")


def print_hop_rows(counted: list[list[dict]]) -> None:
    """One row per hop: its median over the clean runs of the counted rounds, per side."""
    for hop in (*HOPS[:4], *PROVIDER_STEPS, HOPS[4]):
        cells = []
        for dag in (PROVIDER, BASELINE):
            values = [r["hops"][hop] for pair in counted for r in pair if r["dag"] == dag and hop in r["hops"]]
            cells.append(f"{statistics.median(values):.2f}" if values else "—")
        print(f"| {hop} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    sys.exit(main())
