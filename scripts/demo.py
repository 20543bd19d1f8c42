"""`make demo`: the example pipeline on an embedded Airflow, with a scheduler crash in the middle.

Starts api-server, scheduler, dag-processor and triggerer on a fresh SQLite metadata DB with the
LocalExecutor and local Spark (the embedded default), runs ``zeta_regional_sales`` for one logical
date, kills the scheduler with SIGKILL while the three regional PySpark jobs run, restarts it, and
prints what a newcomer wants to know: the published partition, rows per source (checked against
the known content), driver launches per source (from the jobs' own launch log), time to resume,
and where the cleanup stands. Exits non-zero when a guarantee was broken.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path

# The test harness (zeta_harness/) is not installed with the provider: it is imported from the
# repository root, whatever directory this script is run from.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from zeta_harness.cluster import AirflowCluster, ClusterError  # noqa: E402
from zeta_harness.leftovers import leftovers_past_due, run_directory  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DAG_ID = "zeta_regional_sales"
DS = "2026-01-15"
REGIONS = ("emea", "amer", "apac")
RETENTION_S = 20


def load_job_module():
    spec = importlib.util.spec_from_file_location("regional_sales_job", ROOT / "dags" / "jobs" / "regional_sales_job.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def launches(log: Path) -> list[dict]:
    """The jobs' launch entries (each job also logs an ``end`` entry when it finishes)."""
    entries = [json.loads(line) for line in log.read_text().splitlines() if line.strip()] if log.exists() else []
    return [entry for entry in entries if "end" not in entry]


def say(text: str = "") -> None:
    print(text, flush=True)


def crash_and_restart_scheduler(cluster: AirflowCluster, run_id: str) -> tuple[float, float]:
    """Kill the scheduler with SIGKILL and restart it; (seconds until the new scheduler was in
    charge, seconds until the pipeline's next step), both from the restart."""
    schedulers_before = {row["id"] for row in cluster.db_query("SELECT id FROM job WHERE job_type = 'SchedulerJob'")}
    cluster.kill("scheduler")
    say("  kill -9 scheduler  <- crash while the jobs run")
    time.sleep(3)
    restarted = time.monotonic()
    cluster.start_component("scheduler")
    say("  scheduler restarted")
    cluster.wait_for(
        lambda: [
            row
            for row in cluster.db_query("SELECT id, state FROM job WHERE job_type = 'SchedulerJob'")
            if row["id"] not in schedulers_before and row["state"] == "running"
        ],
        300,
        "the new scheduler running",
        interval=0.5,
    )
    back_s = time.monotonic() - restarted
    states_before = {ti["task_id"]: ti["state"] for ti in cluster.task_instances(DAG_ID, run_id)}
    cluster.wait_for(
        lambda: {ti["task_id"]: ti["state"] for ti in cluster.task_instances(DAG_ID, run_id)} != states_before,
        600,
        "the pipeline to make progress after the restart",
    )
    return back_s, time.monotonic() - restarted


def check_rows(job, partition: Path, launch_log: Path) -> list[str]:
    """Print each region's published rows, expected rows and driver launches; the guarantees broken
    (rows other than the known content, a job launched other than once)."""
    import pyarrow.parquet as pq

    broken = []
    per_source = {e["source"]: 0 for e in launches(launch_log)}
    for entry in launches(launch_log):
        per_source[entry["source"]] += 1
    say("  source  rows  expected  driver launches")
    for region in REGIONS:
        table = pq.read_table(partition / f"source={region}")
        expected = job.expected_rows(region, DS)
        got = sorted(table.column("order_id").to_pylist())
        ok = got == sorted(r["order_id"] for r in expected)
        say(f"  {region:<6}  {table.num_rows:>4}  {len(expected):>8}  {per_source.get(region, 0):>15}{'' if ok else '   <- WRONG ROWS'}")
        if not ok:
            broken.append(f"{region}: published rows differ from the expected content")
        if per_source.get(region, 0) != 1:
            broken.append(f"{region}: {per_source.get(region, 0)} driver launches")
    return broken


def check_cleanup(
    cluster: AirflowCluster, state_root: Path, record_path: Path, record: dict, staging: list[Path], outputs: list[Path]
) -> list[str]:
    """Wait for the cleanup DAG to delete the run's staging and record, and print how it went; the
    guarantee broken when it was not carried out or left something past due."""
    # The run has ended; the cleanup DAG (dags/zeta_maintenance.py, scheduled on the Asset the
    # pipeline's cleanup task emits) deletes the staging at the due time, outside the run.
    ended_before_due = time.time() < record["due_at"]

    def carried_out():
        return None if record_path.exists() or any(p.exists() for p in staging) else time.time()

    try:
        cleaned_at = cluster.wait_for(carried_out, RETENTION_S + 180, "the cleanup DAG to delete the staging", interval=0.5)
    except ClusterError:
        cleaned_at = None
    left = leftovers_past_due(state_root, outputs)
    lateness = "not carried out" if cleaned_at is None else f"deleted {cleaned_at - record['due_at']:.1f}s after the due time"
    say(
        f"Cleanup: the record listed {len(staging)} attempt directories (ledger, staging, driver log) due "
        f"{RETENTION_S}s after the run's other tasks were done; the run ended "
        f"{'before' if ended_before_due else 'after'} that due time (the window does not hold it open); "
        f"the cleanup DAG {lateness}; left behind: {left or 'nothing'}."
    )
    if cleaned_at is None or left:
        return [f"cleanup incomplete: record {record_path} still there or staging left, leftovers {left}"]
    return []


def main() -> int:
    started = time.monotonic()
    home = Path(tempfile.mkdtemp(prefix="zeta-demo-"))
    output = home / "output" / "regional_sales"
    cluster = AirflowCluster(
        ROOT / "dags",
        db="sqlite",
        home=home,
        keep_home=bool(os.environ.get("ZETA_DEMO_KEEP")),
        extra_env={
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[1]"}),
            "ZETA_EXAMPLE_OUTPUT": str(output),
            "ZETA_EXAMPLE_SCHEDULE": "",  # only the demo's run, no scheduled one beside it
            # A short retention window, so that the demo shows the delayed cleanup happen.
            "AIRFLOW__ZETA__CLEANUP_RETENTION": str(RETENTION_S),
        },
        parallelism=6,
    )
    launch_log = cluster.home / "launches.jsonl"
    broken: list[str] = []
    say(f"Starting Airflow 3 (api-server, scheduler, dag-processor, triggerer; SQLite, LocalExecutor) in {cluster.home}")
    try:
        cluster.start()
        say(f"  up at {cluster.api_url} after {time.monotonic() - started:.0f}s")
        cluster.wait_for_dag(DAG_ID)
        run_id = cluster.trigger_run(
            DAG_ID, f"{DS}T00:00:00Z", conf={"launch_log": str(launch_log), "work_seconds": 25}
        )
        say(f"Triggered {DAG_ID} for ds={DS} (run {run_id}): three regional PySpark jobs, one output table")

        cluster.wait_for(lambda: len({e["source"] for e in launches(launch_log)}) == 3, 300, "all three jobs running", interval=2)
        say(f"  all three Spark jobs are running ({time.monotonic() - started:.0f}s)")
        back_s, resume_s = crash_and_restart_scheduler(cluster, run_id)
        cluster.wait_for_task(DAG_ID, run_id, "regional_sales.completed_point", {"success"}, timeout=900)
        say(f"Partition published after {time.monotonic() - started:.0f}s; the cleanup keeps the staging for {RETENTION_S}s")
        state_root = cluster.home / "zeta-state"
        record_path = cluster.wait_for(
            lambda: next((run_directory(state_root, DAG_ID, run_id) / "cleanup").glob("*.json"), None),
            120,
            "the cleanup record",
        )
        record = json.loads(record_path.read_text())
        staging = [state_root / p for p in record["state_paths"]]
        run = cluster.wait_for_run(DAG_ID, run_id, timeout=900)
        say(f"Run ended {run['state'].upper()} after {time.monotonic() - started:.0f}s.\n")

        job = load_job_module()
        commit = cluster.xcom(DAG_ID, run_id, "regional_sales.completed_point")
        partition = output / f"ds={DS}"
        say(f"Published partition: {partition}")
        say(f"  commit {commit['commit_id']} (rule {commit['rule']}), Asset event emitted with rows {commit['rows']}")
        broken += check_rows(job, partition, launch_log)
        say(
            f"\nAfter the restart the new scheduler was in charge in {back_s:.0f}s; the pipeline's next step "
            f"came {resume_s:.0f}s after the restart (the jobs kept running through the crash: nothing re-ran)."
        )
        broken += check_cleanup(cluster, state_root, record_path, record, staging, [output])
        if run["state"] != "success":
            broken.append(f"run ended {run['state']}")
    except ClusterError as error:
        say(f"DEMO FAILED: {error}")
        cluster.print_logs(tail_lines=40)
        return 1
    finally:
        cluster.stop()
    if broken:
        say("\nGUARANTEE BROKEN: " + "; ".join(broken))
        return 1
    say("\nAll guarantees held: each job ran once, the partition was published once with exactly the expected rows.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
