"""The example pipeline through this provider vs the same PySpark jobs through the stock operators.

One embedded Airflow (SQLite, LocalExecutor, local Spark), both DAGs from ``dags/``:
``zeta_regional_sales`` (``zeta_pipeline``) and ``zeta_regional_sales_baseline`` (one stock
``SparkSubmitOperator`` per region, the same job with ``--standalone``). Measures, side by side in
one run, because absolute times on these machines drift:

1. **overhead**: wall time from trigger to "data published" (the provider's completed point; the
   baseline's run end), ``--rounds`` interleaved pairs (the order alternates), median ratio;
2. **re-done work** after ``kill -9`` of the scheduler while the three jobs run: Spark
   driver-seconds executed beyond one clean run per source (from the jobs' own launch log);
3. **resume time** after a scheduler, a triggerer and a worker kill: from the restart (or the kill,
   for a worker, which nothing restarts) to the pipeline's next task state change; and what the
   kill cost in the end: the run's wall time to published data minus the median clean run's.

Usage: ``python benchmarks/pipeline_bench.py [--rounds 3] [--work-seconds 20] [--markdown]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

from airflow_provider_zeta.testing import chaos
from airflow_provider_zeta.testing.cluster import AirflowCluster

ROOT = Path(__file__).resolve().parent.parent
PROVIDER, BASELINE = "zeta_regional_sales", "zeta_regional_sales_baseline"
REGIONS = ("emea", "amer", "apac")


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


def run_once(cluster, dag_id, ds, log, work_seconds, kill=None) -> dict:
    started = time.monotonic()
    run_id = cluster.trigger_run(dag_id, f"{ds}T00:00:00Z", conf={"launch_log": str(log), "work_seconds": work_seconds})
    resume = None
    if kill is not None:
        cluster.wait_for(lambda: len({e["source"] for e in starts(log)}) == 3, 600, "three jobs running", interval=1)
        time.sleep(3)  # well inside the jobs' work
        before = states(cluster, dag_id, run_id)
        restarted, killed = kill(cluster)
        cluster.wait_for(lambda: states(cluster, dag_id, run_id) != before, 900, "progress after the kill", interval=0.5)
        resume = time.monotonic() - restarted if killed else None  # nothing was killed: no resume to time
    cluster.wait_for(lambda: published(cluster, dag_id, run_id), 1200, f"{dag_id} published", interval=1)
    wall = time.monotonic() - started
    total, redone = driver_seconds(log, time.time())
    retried = [f"{ti['task_id']}: try {ti['try_number']}" for ti in cluster.task_instances(dag_id, run_id) if (ti.get("try_number") or 0) > 1]
    return {
        "dag": dag_id, "ds": ds, "wall_s": wall, "launches": len(starts(log)), "driver_s": total, "redone_s": redone,
        "resume_s": resume, "retried": retried,
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
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--work-seconds", type=float, default=20)
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--overhead-only", action="store_true", help="only the clean interleaved rounds, no kills")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="zeta-bench-"))
    cluster = AirflowCluster(ROOT / "dags", db="sqlite", home=home, extra_env=cluster_env(home), parallelism=6)
    results: list[dict] = []
    try:
        cluster.start()
        day = 1
        for round_ in range(args.rounds):
            order = (PROVIDER, BASELINE) if round_ % 2 == 0 else (BASELINE, PROVIDER)
            for dag_id in order:
                results.append({"kind": "plain", **run_once(cluster, dag_id, f"2026-02-{day:02d}", home / f"l{day}.jsonl", args.work_seconds)})
                day += 1
        kills = () if args.overhead_only else (("scheduler", kill_component("scheduler")), ("triggerer", kill_component("triggerer")), ("worker", kill_workers))
        for name, kill in kills:
            for dag_id in (PROVIDER, BASELINE):
                results.append({"kind": name, **run_once(cluster, dag_id, f"2026-02-{day:02d}", home / f"l{day}.jsonl", args.work_seconds, kill)})
                day += 1
    finally:
        cluster.stop()
    print(json.dumps(results), file=sys.stderr)  # the raw figures, for a closer look
    report(results, args)
    return 0


def report(results: list[dict], args) -> None:
    if not args.markdown:
        print(json.dumps(results, indent=2))
        return
    # A round is one provider run and one stock run; it counts only when neither re-ran anything.
    plain_runs = [r for r in results if r["kind"] == "plain"]
    rounds = [plain_runs[i : i + 2] for i in range(0, len(plain_runs), 2)]
    counted = [pair for pair in rounds if not any(reran(r) for r in pair)]
    plain = {dag: [r["wall_s"] for pair in counted for r in pair if r["dag"] == dag] for dag in (PROVIDER, BASELINE)}
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}; "
          f"{args.rounds} interleaved rounds, jobs working {args.work_seconds:.0f} s each")
    print()
    print("| | this provider | stock SparkSubmitOperator |")
    print("|---|---|---|")
    for number, pair in enumerate(rounds, 1):
        by_dag = {r["dag"]: r for r in pair}
        why = "; ".join(f"{r['dag']} re-ran: {', '.join(reran(r))}" for r in pair if reran(r))
        print(f"| round {number} ({'counted' if not why else 'left out: ' + why}) | {by_dag[PROVIDER]['wall_s']:.0f} s | {by_dag[BASELINE]['wall_s']:.0f} s |")
    if not counted:
        print("| **no round counted**: every round re-ran something | | |")
        return
    clean = {dag: statistics.median(plain[dag]) for dag in plain}
    ratio = clean[PROVIDER] / clean[BASELINE]
    print(f"| wall time to published data, median (runs) | {clean[PROVIDER]:.1f} s ({len(plain[PROVIDER])}) | {clean[BASELINE]:.1f} s ({len(plain[BASELINE])}) |")
    print(f"| **ratio** (target ≤ 1.05) | **{ratio:.3f}** | 1 |")
    for kind in ("scheduler", "triggerer", "worker"):
        row = {r["dag"]: r for r in results if r["kind"] == kind}
        if not row:
            continue
        p, b = row[PROVIDER], row[BASELINE]
        print(f"| `kill -9` {kind}: launches / re-done driver-seconds | {p['launches']} / {p['redone_s']:.0f} s | {b['launches']} / {b['redone_s']:.0f} s |")
        def resume(r):
            return "no worker held (deferred)" if r["resume_s"] is None else f"{r['resume_s']:.1f} s"

        print(f"| `kill -9` {kind}: resume (to next task state change) | {resume(p)} | {resume(b)} |")
        print(f"| `kill -9` {kind}: wall time to published data, more than a clean run | "
              f"{p['wall_s'] - clean[PROVIDER]:+.0f} s | {b['wall_s'] - clean[BASELINE]:+.0f} s |")


if __name__ == "__main__":
    sys.exit(main())
