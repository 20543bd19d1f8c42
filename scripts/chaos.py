"""`make chaos`: the chaos soak — the example pipeline and its stock-operator baseline under kills.

For each database (SQLite, then PostgreSQL when a server answers) it starts one embedded Airflow on
``dags/``, and runs ``--scenarios`` chaos scenarios (``airflow_provider_zeta.testing.chaos``) of the
example pipeline ``zeta_regional_sales`` (real PySpark) — each a run plus a backfill of three
dates that reprocesses the first, with ``--kills`` random ``kill -9`` — and the same scenarios,
same seeds, of ``zeta_regional_sales_baseline`` (the same job through the stock
``SparkSubmitOperator``). Prints one table (Markdown with ``--markdown``) and exits non-zero when
a guarantee of the provider broke. The baseline's figures are reported, not checked.

Usage: ``python scripts/chaos.py [--scenarios 3] [--kills 10] [--seed N] [--db sqlite,postgres] [--markdown]``
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import statistics
import sys
import tempfile
from pathlib import Path

from airflow_provider_zeta.testing.chaos import run_scenario
from airflow_provider_zeta.testing.cluster import AirflowCluster, postgres_available

ROOT = Path(__file__).resolve().parent.parent
REGIONS = ("emea", "amer", "apac")
PROVIDER, BASELINE = "zeta_regional_sales", "zeta_regional_sales_baseline"


def job_module():
    spec = importlib.util.spec_from_file_location("regional_sales_job", ROOT / "dags" / "jobs" / "regional_sales_job.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read_rows(folder: Path) -> list[dict]:
    import pyarrow.parquet as pq

    files = [p for p in folder.glob("*.parquet")] + [p for p in folder.glob("*part-*") if p.suffix != ".crc"]
    rows = []
    for path in sorted(set(files)):
        if path.name.startswith((".", "_")):
            continue
        rows += pq.read_table(path).to_pylist()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenarios", type=int, default=3)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--seed", type=int, default=int(os.environ.get("ZETA_CHAOS_SEED") or random.SystemRandom().randrange(1, 10**6)))
    parser.add_argument("--db", default="sqlite,postgres")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    print(f"chaos soak, seed {args.seed} (replay: --seed {args.seed})", flush=True)
    job = job_module()
    reports = []
    for db in args.db.split(","):
        if db == "postgres" and not postgres_available():
            if os.environ.get("CI") == "true":
                raise SystemExit("PostgreSQL is not reachable at 127.0.0.1:5432 (CI=true: not skipped)")
            print("PostgreSQL not reachable: skipped", flush=True)
            continue
        home = Path(tempfile.mkdtemp(prefix=f"zeta-chaos-{db}-"))
        outputs = {PROVIDER: home / "out" / "provider", BASELINE: home / "out" / "baseline"}
        cluster = AirflowCluster(
            ROOT / "dags",
            db=db,
            home=home,
            extra_env={
                "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[1]"}),
                "ZETA_EXAMPLE_OUTPUT": str(outputs[PROVIDER]),
                "ZETA_BASELINE_OUTPUT": str(outputs[BASELINE]),
                "ZETA_EXAMPLE_SCHEDULE": "@daily",
                "ZETA_BASELINE_SCHEDULE": "@daily",
                "ZETA_SWEEP_SCHEDULE": "@yearly",
                "AIRFLOW__ZETA__CLEANUP_RETENTION": "15",
                "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
            },
            parallelism=6,
        )
        try:
            cluster.start()
            for dag_id in (PROVIDER, BASELINE):
                cluster.wait_for_dag(dag_id)
            for index in range(args.scenarios):
                seed = args.seed + index
                month = 5 + index  # distinct dates per scenario
                dates = [f"2026-{month:02d}-0{day}" for day in (1, 2, 3)]
                for dag_id in (PROVIDER, BASELINE):
                    report = run_scenario(
                        cluster,
                        dag_id=dag_id,
                        dates=dates,
                        output=outputs[dag_id],
                        sources=REGIONS,
                        expected_rows=lambda source, ds: job.expected_rows(source, ds),
                        read_rows=read_rows,
                        kills=args.kills,
                        seed=seed,
                        conf={"work_seconds": 15},
                        retention_s=15,
                        bound_s=1500,
                        kill_window_s=120,
                        provider=dag_id == PROVIDER,
                        log=lambda text: print(text, flush=True),
                    )
                    reports.append(report)
        finally:
            cluster.stop()
    table(reports, args)
    broken = [v for r in reports if r.dag_id == PROVIDER for v in r.violations]
    if broken:
        print("\nBROKEN GUARANTEES:\n  " + "\n  ".join(broken))
        return 1
    return 0


def table(reports, args) -> None:
    def figures(dag_id: str) -> dict:
        rs = [r for r in reports if r.dag_id == dag_id]
        resumes = {c: [k.resume_s for r in rs for k in r.kills if k.component == c and k.resume_s is not None] for c in ("scheduler", "triggerer", "worker")}
        return {
            "scenarios": len(rs),
            "runs": sum(r.runs for r in rs),
            "kills": sum(len(r.kills) for r in rs),
            "launches": sum(r.launches for r in rs),
            "extra": sum(r.extra_launches for r in rs),
            "redeploys": sum(r.redeploys_after_death for r in rs),
            "dup": sum(r.duplicate_rows for r in rs),
            "lost": sum(r.lost_rows for r in rs),
            "half": sum(r.half_visible for r in rs),
            "orphans": sum(len(r.leftovers) + r.drivers_alive for r in rs),
            "violations": sum(len(r.violations) for r in rs),
            "resume": {c: (f"{statistics.median(v):.0f} / {max(v):.0f} s" if v else "–") for c, v in resumes.items()},
            "dbs": sorted({r.db for r in rs}),
        }

    p, b = figures(PROVIDER), figures(BASELINE)
    print()
    print(f"Command: `python scripts/chaos.py --scenarios {args.scenarios} --kills {args.kills} --seed {args.seed} --db {args.db}`")
    print()
    print("| | this provider (`zeta_pipeline`) | stock `SparkSubmitOperator` |")
    print("|---|---|---|")
    rows = [
        ("databases", ", ".join(p["dbs"]), ", ".join(b["dbs"])),
        ("scenarios / runs", f"{p['scenarios']} / {p['runs']}", f"{b['scenarios']} / {b['runs']}"),
        ("kills survived (`kill -9`)", p["kills"], b["kills"]),
        ("driver launches (3 per run, reprocessed date twice)", p["launches"], b["launches"]),
        ("extra launches of a job that had run to its end", p["extra"], b["extra"]),
        ("redeploys after a driver that really died", p["redeploys"], b["redeploys"]),
        ("duplicate or foreign rows in the published table", p["dup"], b["dup"]),
        ("lost rows", p["lost"], b["lost"]),
        ("partitions seen half-published by a reader", p["half"], b["half"]),
        ("orphans after the retention window (leftovers, live drivers)", p["orphans"], b["orphans"]),
    ]
    for component in ("scheduler", "triggerer", "worker"):
        rows.append((f"resume after a {component} kill, median / max", p["resume"][component], b["resume"][component]))
    for label, left, right in rows:
        print(f"| {label} | {left} | {right} |")
    print(f"\nprovider guarantee violations: {p['violations']}")


if __name__ == "__main__":
    sys.exit(main())
