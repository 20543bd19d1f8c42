"""A backfill of the example pipeline through this provider vs the same jobs through the stock operators.

One embedded Airflow (PostgreSQL by default, ``--db sqlite`` for the embedded default; LocalExecutor,
local Spark) with the DAGs of ``dags/`` that
``pipeline_bench.py`` uses: ``zeta_regional_sales`` (``zeta_pipeline``; here with
``cleanup_delay=600``) and ``zeta_regional_sales_baseline`` (one stock ``SparkSubmitOperator`` per
region, the same job with ``--standalone``), both with ``max_active_runs=2``, and the maintenance
DAGs (``zeta_cleanup`` carries the provider's delayed cleanups out at their due times).

Each round backfills both DAGs over the same ``--dates`` fresh dates (``POST /backfills``,
``max_active_runs=2``), one after the other, the order alternating (provider then stock, stock then
provider, ...). Measured per backfill: the wall time from its creation to every run of it in a
terminal state and the published data of every date on disk (the provider's partition with its
commit marker, the stock job's Parquet files of each region). Also per run: where its time went
(the hops below) and, for the provider, the cleanup its teardown recorded: due ``cleanup_delay``
after the run, carried out by the cleanup DAG then, so the run does not wait for it.

A round in which a side re-ran anything (a task with a second try, a job launched twice for one run,
as a spurious orphan reset of a busy 2-core machine causes) is reported and left out of the medians:
it measures the retry, not the pipeline. So is a round in which an Airflow component died (on SQLite
the scheduler has died of Airflow's own ``ObjectDeletedError`` right after a ``POST /backfills``
answered 503 "database is locked"): the component is restarted, as a supervisor would, and the round
is named with the reason. Up to ``--extra-rounds`` more rounds replace such rounds.

Usage: ``python benchmarks/backfill_bench.py [--db postgres|sqlite] [--dates 6] [--rounds 3] [--extra-rounds 1] [--work-seconds 20] [--markdown]``
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
from collections import Counter
from pathlib import Path
from typing import Any

from pipeline_bench import BASELINE, HOPS, PROVIDER, PROVIDER_STEPS, REGIONS, ROOT, cluster_env, epoch, hops

from airflow_provider_zeta.core.cleanup import RECORD_KEY

# The test harness (zeta_harness/) is not installed with the provider: it is imported from the
# repository root, whatever directory this script is run from (pipeline_bench's ROOT).
sys.path.insert(0, str(ROOT))

from zeta_harness import chaos  # noqa: E402
from zeta_harness.cluster import AirflowCluster, ClusterError  # noqa: E402
from zeta_harness.published import read_partition  # noqa: E402

MAX_ACTIVE_RUNS = 2
CLEANUP_DELAY_S = 600
FIRST_DATE = dt.date(2026, 3, 1)
CLEANUP_DAG = "zeta_cleanup"
CLEANUP_TASK = "regional_sales.cleanup"
SIDES = (PROVIDER, BASELINE)
LABELS = {PROVIDER: "this provider", BASELINE: "stock SparkSubmitOperator"}
# ---------------------------------------------------------------------- pure helpers (tests/unit)


def round_dates(round_: int, dates: int, first: dt.date = FIRST_DATE) -> list[str]:
    """The round's dates (``YYYY-MM-DD``): fresh ones each round, the same for both sides."""
    return [(first + dt.timedelta(days=round_ * dates + i)).isoformat() for i in range(dates)]


def side_order(round_: int) -> tuple[str, str]:
    """Provider then stock in even rounds, stock then provider in odd ones (A B, B A, A B, ...)."""
    return (PROVIDER, BASELINE) if round_ % 2 == 0 else (BASELINE, PROVIDER)


def reruns(task_instances: list[dict], launches: list[dict], expected_launches: int) -> list[str]:
    """Why a side's backfill does not count: a task with more than one try, a job launched more than
    once for one run (launch-log entries without ``end``, keyed by ``run_id`` and ``source``), or
    not the expected number of launches."""
    found = [
        f"{ti.get('dag_run_id')} {ti['task_id']}: try {ti['try_number']}"
        for ti in task_instances
        if (ti.get("try_number") or 0) > 1
    ]
    per_job = Counter((entry.get("run_id"), entry["source"]) for entry in launches if "end" not in entry)
    found += [f"{run} {source}: launched {count} times" for (run, source), count in sorted(per_job.items()) if count > 1]
    launched = sum(per_job.values())
    if launched != expected_launches and not any(count > 1 for count in per_job.values()):
        found.append(f"{launched} launches, expected {expected_launches}")
    return found


def run_entries(entries: list[dict], key: str) -> list[dict]:
    """The launch-log entries of one run: its start entries (``run_id`` = ``key``) and the end
    entries of their tokens (an end entry names its token, not its run)."""
    tokens = {e["token"] for e in entries if "end" not in e and e.get("run_id") == key}
    return [e for e in entries if e.get("token") in tokens]


def max_concurrent(spans: list[tuple[float, float]]) -> int:
    """The most intervals (start, end) open at one moment; an interval ending as another starts does not overlap it."""
    moments = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans], key=lambda m: (m[0], m[1]))
    most = now = 0
    for _, step in moments:
        now += step
        most = max(most, now)
    return most


def summarize(rounds: list[dict]) -> dict[str, Any]:
    """Medians per side over the rounds in which neither side re-ran anything, and their ratio."""
    counted = [r for r in rounds if not r.get("void") and not any(r["sides"][side]["reruns"] for side in SIDES)]
    walls = {side: [r["sides"][side]["wall_s"] for r in counted] for side in SIDES}
    median = {side: statistics.median(walls[side]) if walls[side] else None for side in SIDES}
    provider, baseline = median[PROVIDER], median[BASELINE]
    ratio = provider / baseline if provider is not None and baseline else None
    return {"counted": [r["round"] for r in counted], "median": median, "ratio": ratio}


# ---------------------------------------------------------------------- against the cluster


def published_on_disk(output: Path, ds: str, provider: bool) -> bool:
    """Every region of ``ds`` has data files; the provider's partition also its commit marker."""
    partition = read_partition(output, ds)
    if not partition.exists or set(partition.sources) != set(REGIONS):
        return False
    if not all(source.files for source in partition.sources.values()):
        return False
    return partition.marker is not None if provider else True


def backfill_runs(cluster: AirflowCluster, dag_id: str, dates: list[str]) -> list[dict]:
    runs = cluster.api("GET", f"/dags/{dag_id}/dagRuns?limit=500")["dag_runs"]
    return sorted(
        (r for r in runs if r["run_type"] == "backfill" and (r.get("logical_date") or "")[:10] in dates),
        key=lambda r: r["logical_date"],
    )


def backfill_once(cluster: AirflowCluster, dag_id: str, dates: list[str], output: Path, log: Path, work_seconds: float, timeout: float) -> dict:
    provider = dag_id == PROVIDER
    body = {
        "dag_id": dag_id,
        "from_date": f"{dates[0]}T00:00:00Z",
        "to_date": f"{dates[-1]}T00:00:00Z",
        "max_active_runs": MAX_ACTIVE_RUNS,
        "dag_run_conf": {"launch_log": str(log), "work_seconds": work_seconds},
    }
    started = time.monotonic()
    backfill = chaos.create_backfill(cluster, body)

    def done() -> list[dict] | None:
        # A component that died ends the benchmark with its log (the scheduler once died of an
        # Airflow IntegrityError creating a backfill run's task instances on SQLite, and the
        # benchmark waited on for its whole timeout).
        cluster._assert_components_alive()
        runs = backfill_runs(cluster, dag_id, dates)
        failed = [r["dag_run_id"] for r in runs if r["state"] == "failed"]
        if failed:
            raise ClusterError(f"{dag_id}: runs failed: {failed}; {[cluster._ti_summary(dag_id, run) for run in failed]}")
        if len(runs) < len(dates) or any(r["state"] != "success" for r in runs):
            return None
        return runs if all(published_on_disk(output, ds, provider) for ds in dates) else None

    runs = cluster.wait_for(done, timeout, f"{dag_id}: backfill of {dates[0]}..{dates[-1]} done and published", interval=1)
    wall = time.monotonic() - started
    finished_at = time.time()
    # Not timed: the scheduler marks the backfill complete (a new backfill of the DAG needs that),
    # and the figures read back from the API.
    cluster.wait_for(
        lambda: cluster.api("GET", f"/backfills/{backfill['id']}").get("completed_at"), 300, f"backfill {backfill['id']} complete", interval=2
    )
    entries = chaos.entries(log)
    task_instances: list[dict] = []
    per_run = []
    for run in runs:
        tis = cluster.task_instances(dag_id, run["dag_run_id"])
        task_instances += tis
        key = run["dag_run_id"] if provider else run["logical_date"][:10]  # the stock job logs its ds as run_id
        item: dict[str, Any] = {"run_id": run["dag_run_id"], "ds": run["logical_date"][:10], **hops(run, tis, run_entries(entries, key), provider)}
        item["span"] = (epoch(run["start_date"]), epoch(run["end_date"]))
        if provider:
            record = cluster.task_state(dag_id, run["dag_run_id"], CLEANUP_TASK, RECORD_KEY) or {}
            item["cleanup_due_at"] = record.get("due_at")
            item["cleanup_window_s"] = (record["due_at"] - record["created_at"]) if "due_at" in record and "created_at" in record else None
            item["cleanup_due_after_end_s"] = record["due_at"] - item["span"][1] if "due_at" in record else None
        per_run.append(item)
    result: dict[str, Any] = {
        "dag": dag_id,
        "backfill_id": backfill["id"],
        "dates": dates,
        "wall_s": wall,
        "runs": per_run,
        "most_runs_at_once": max_concurrent([r["span"] for r in per_run]),
        "launches": sum(1 for e in entries if "end" not in e),
        "reruns": reruns(task_instances, entries, len(dates) * len(REGIONS)),
    }
    if provider:
        dues = [r["cleanup_due_at"] for r in per_run if r["cleanup_due_at"] is not None]
        result["first_cleanup_due_after_done_s"] = min(dues) - finished_at if dues else None
        run_ids = {r["run_id"] for r in per_run}
        try:
            events = cluster.asset_events(200, source_dag_id=dag_id)
            result["cleanup_events"] = sum(1 for e in events if e.get("source_run_id") in run_ids and "zeta_cleanup" in (e.get("extra") or {}))
        except ClusterError as error:  # a figure, not the measurement: report it missing
            print(f"  asset events unavailable: {error}", file=sys.stderr)
            result["cleanup_events"] = None
    return result


def check_dags(cluster: AirflowCluster) -> None:
    """Wait for both sides' DAGs and the cleanup DAG; each side must run MAX_ACTIVE_RUNS at once."""
    for dag_id in (*SIDES, CLEANUP_DAG):
        dag = cluster.wait_for_dag(dag_id)
        if dag_id != CLEANUP_DAG and dag.get("max_active_runs") != MAX_ACTIVE_RUNS:
            raise ClusterError(f"{dag_id}: max_active_runs {dag.get('max_active_runs')}, expected {MAX_ACTIVE_RUNS}")


def run_round(cluster: AirflowCluster, round_: int, args, outputs: dict[str, Path], home: Path) -> dict[str, Any]:
    """One interleaved round: a backfill of each side, in the round's order. A round in which a
    cluster component died is void: the component is restarted and the backfill let finish."""
    dates = round_dates(round_, args.dates)
    item: dict[str, Any] = {"round": round_ + 1, "order": side_order(round_), "sides": {}}
    for dag_id in side_order(round_):
        print(f"round {round_ + 1}: {dag_id} backfill of {dates[0]}..{dates[-1]}", file=sys.stderr, flush=True)
        try:
            side = backfill_once(cluster, dag_id, dates, outputs[dag_id], home / f"launches-{round_ + 1}-{dag_id}.jsonl", args.work_seconds, args.timeout)
        except ClusterError as error:
            dead = [name for name, component in cluster.components.items() if not component.alive()]
            if not dead:
                raise
            item["void"] = f"{', '.join(dead)} died during the {LABELS[dag_id]} backfill"
            print(f"  void: {item['void']}: {str(error)[:300]}", file=sys.stderr, flush=True)
            cluster.print_logs(40)
            for name in dead:
                cluster.start_component(name)
            cluster.wait_healthy()
            settle(cluster, dag_id, dates)
            break
        print(f"  {side['wall_s']:.0f} s; re-ran: {side['reruns'] or 'nothing'}", file=sys.stderr, flush=True)
        item["sides"][dag_id] = side
    return item


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dates", type=int, default=6, help="dates per backfill")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds to count (one backfill per side each)")
    parser.add_argument("--extra-rounds", type=int, default=1, help="rounds run at most to replace rounds that do not count")
    parser.add_argument("--work-seconds", type=float, default=20, help="how long each job works (as pipeline_bench)")
    parser.add_argument("--timeout", type=float, default=3600, help="bound of one backfill, seconds")
    parser.add_argument("--db", choices=("postgres", "sqlite"), default="postgres", help="metadata database")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="zeta-backfill-bench-"))
    last = dt.date.fromisoformat(round_dates(args.rounds + args.extra_rounds - 1, args.dates)[-1])
    env = {
        **cluster_env(home),
        # A backfill needs a periodic schedule; the end date keeps the scheduler from adding runs of its own.
        "ZETA_EXAMPLE_SCHEDULE": "@daily",
        "ZETA_BASELINE_SCHEDULE": "@daily",
        "ZETA_EXAMPLE_END_DATE": (last + dt.timedelta(days=1)).isoformat(),
        "ZETA_EXAMPLE_MAX_ACTIVE_RUNS": str(MAX_ACTIVE_RUNS),
        "ZETA_EXAMPLE_CLEANUP_DELAY": str(CLEANUP_DELAY_S),
        "AIRFLOW__ZETA__CLEANUP_RETENTION": str(CLEANUP_DELAY_S),
    }
    outputs = {PROVIDER: home / "out" / "provider", BASELINE: home / "out" / "baseline"}
    # Parallelism 8: two stock runs hold six worker slots, so the executor never caps either side.
    cluster = AirflowCluster(ROOT / "dags", db=args.db, home=home, extra_env=env, parallelism=8)
    rounds: list[dict] = []
    try:
        cluster.start()
        check_dags(cluster)
        for round_ in range(args.rounds + args.extra_rounds):
            if len(summarize(rounds)["counted"]) >= args.rounds:
                break
            rounds.append(run_round(cluster, round_, args, outputs, home))
    except BaseException:
        print(f"failed; the rounds done: {json.dumps(rounds)}\nthe cluster's home: {home}", file=sys.stderr)
        cluster.print_logs(40)
        raise
    finally:
        cluster.stop()
    print(json.dumps(rounds), file=sys.stderr)  # the raw figures, for a closer look
    if args.markdown:
        report(rounds, args)
    else:
        print(json.dumps({"summary": summarize(rounds), "rounds": rounds}, indent=2))
    return 0


def settle(cluster: AirflowCluster, dag_id: str, dates: list[str], timeout: float = 900) -> None:
    """After a void round: let the interrupted backfill finish (or fail) so the next round starts alone."""
    def ended() -> bool:
        runs = backfill_runs(cluster, dag_id, dates)
        return all(r["state"] in ("success", "failed") for r in runs)

    cluster.wait_for(ended, timeout, f"{dag_id}: the interrupted backfill ended", interval=2)
    for backfill in cluster.api("GET", f"/backfills?dag_id={dag_id}").get("backfills", []):
        if not backfill.get("completed_at"):
            cluster.wait_for(
                lambda b=backfill: cluster.api("GET", f"/backfills/{b['id']}").get("completed_at"), 300, "backfill complete", interval=2
            )


def _s(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f} s"


def report(rounds: list[dict], args) -> None:
    summary = summarize(rounds)
    counted = set(summary["counted"])
    void = [r for r in rounds if r.get("void")]
    rounds = [r for r in rounds if not r.get("void")]
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}, "
        f"{args.db} metadata database; "
        f"backfills of {args.dates} dates, max_active_runs {MAX_ACTIVE_RUNS} (DAGs and backfills), provider "
        f"cleanup_delay {CLEANUP_DELAY_S} s; {len(rounds)} interleaved round(s), jobs working {args.work_seconds:.0f} s each"
    )
    print()
    print(f"| wall time, backfill created → all runs ended and data published | {LABELS[PROVIDER]} | {LABELS[BASELINE]} | counted |")
    print("|---|---|---|---|")
    for r in rounds:
        reasons = "; ".join(f"{LABELS[side]} re-ran: {', '.join(r['sides'][side]['reruns'])}" for side in SIDES if r["sides"][side]["reruns"])
        order = " then ".join("provider" if side == PROVIDER else "stock" for side in r["order"])
        print(f"| round {r['round']} ({order}) | {_s(r['sides'][PROVIDER]['wall_s'])} | {_s(r['sides'][BASELINE]['wall_s'])} | "
              f"{'yes' if r['round'] in counted else 'no: ' + reasons} |")
    for r in void:
        print(f"| round {r['round']} | void: {r['void']} | | no |")
    median = summary["median"]
    print(f"| **median** ({len(counted)} of {len(rounds) + len(void)} rounds) | **{_s(median[PROVIDER])}** | **{_s(median[BASELINE])}** | |")
    ratio = "n/a" if summary["ratio"] is None else f"{summary['ratio']:.2f}"
    print(f"| **ratio** provider / stock (target ≤ 1.10) | **{ratio}** | 1 | |")
    most = {side: max((r["sides"][side]["most_runs_at_once"] for r in rounds), default=0) for side in SIDES}
    print(f"| most runs active at once | {most[PROVIDER]} | {most[BASELINE]} | |")
    print()
    print("Where a run's time went, median over the runs of the counted rounds (seconds):")
    print()
    print(f"| hop | {LABELS[PROVIDER]} | {LABELS[BASELINE]} |")
    print("|---|---|---|")
    for hop in (*HOPS[:4], *PROVIDER_STEPS, HOPS[4], "queued → ended", "started → ended"):
        cells = []
        for side in SIDES:
            values = [run[hop] for r in rounds if r["round"] in counted for run in r["sides"][side]["runs"] if hop in run]
            cells.append(f"{statistics.median(values):.1f}" if values else "—")
        print(f"| {hop} | {cells[0]} | {cells[1]} |")
    print()
    print("Per run, started → ended (s), in date order:")
    print()
    print(f"| round | {LABELS[PROVIDER]} | {LABELS[BASELINE]} |")
    print("|---|---|---|")
    for r in rounds:
        cells = [", ".join(f"{run['started → ended']:.0f}" for run in r["sides"][side]["runs"]) for side in SIDES]
        print(f"| {r['round']} | {cells[0]} | {cells[1]} |")
    print()
    runs = [run for r in rounds for run in r["sides"][PROVIDER]["runs"]]
    longest = max(run["queued → ended"] for run in runs)
    dues = [run["cleanup_due_after_end_s"] for run in runs if run.get("cleanup_due_after_end_s") is not None]
    windows = {round(run["cleanup_window_s"]) for run in runs if run.get("cleanup_window_s") is not None}
    events = [r["sides"][PROVIDER].get("cleanup_events") for r in rounds]
    ahead = [r["sides"][PROVIDER].get("first_cleanup_due_after_done_s") for r in rounds]
    print(
        f"Retention outside the run: the longest provider run took {longest:.0f} s from queued to ended, against a "
        f"{CLEANUP_DELAY_S} s cleanup window. "
        + (f"Each of the {len(runs)} runs ended with its cleanup recorded (window {', '.join(map(str, sorted(windows)))} s), "
           f"due {min(dues):.0f}–{max(dues):.0f} s after the run's end" if dues and len(dues) == len(runs)
           else f"Only {len(dues)} of {len(runs)} runs had a cleanup record")
        + ("; announced with an Asset event: " + ("n/a" if None in events else f"{sum(e or 0 for e in events)} of {len(runs)}"))
        + ("; when each backfill was done, its first cleanup was still "
           + ("n/a" if None in ahead else f"{min(a for a in ahead if a is not None):.0f} s or more") + " away.")
    )


if __name__ == "__main__":
    sys.exit(main())
