"""PySpark job of the example pipeline: one region's sales for one day, deterministic.

Every (region, ds) has a known content — ``expected_rows(region, ds)`` — so a test or the demo can
check a published partition row by row. Appends to ``params["launch_log"]`` (when given) a line
when it starts and one when it ends (entries with ``"end"``), so a reader can count how often the
job really ran and for how long. ``--standalone`` runs it without the provider (the baseline).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time


def expected_rows(region: str, ds: str) -> list[dict]:
    seed = int(hashlib.sha256(f"{region}/{ds}".encode()).hexdigest(), 16)
    count = 20 + seed % 30
    return [
        {"region": region, "order_id": f"{region}-{ds}-{i:04d}", "amount_cents": (seed >> (i % 64)) % 100_000}
        for i in range(count)
    ]


def main_standalone(argv: list[str]) -> None:
    """The same job as a plain PySpark application, for the stock ``SparkSubmitOperator`` baseline.

    It writes straight into ``{output}/ds={ds}/source={region}`` (overwrite), as such pipelines
    usually do: no staging, no commit — what the benchmarks and the chaos suite compare against.
    """
    import argparse

    from pyspark.sql import SparkSession

    parser = argparse.ArgumentParser()
    parser.add_argument("--region", required=True)
    parser.add_argument("--ds", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--launch-log", default="")
    parser.add_argument("--work-seconds", type=float, default=0)
    args = parser.parse_args(argv)
    started = time.time()
    _log(args.launch_log, {"source": args.region, "token": f"pid-{os.getpid()}", "run_id": args.ds, "at": started})
    spark = SparkSession.builder.appName(f"regional_sales_baseline_{args.region}").getOrCreate()
    time.sleep(args.work_seconds)
    rows = expected_rows(args.region, args.ds)
    df = spark.createDataFrame(rows, "region string, order_id string, amount_cents long")
    df.write.mode("overwrite").parquet(f"{args.output}/ds={args.ds}/source={args.region}")
    _log(args.launch_log, {"source": args.region, "token": f"pid-{os.getpid()}", "end": time.time(), "started": started})


def _log(path: str, entry: dict) -> None:
    if path:
        with open(path, "a") as log:
            log.write(json.dumps(entry) + "\n")


def main() -> None:
    from pyspark.sql import SparkSession

    from airflow_provider_zeta.runtime import zeta_context

    ctx = zeta_context()
    launch_log = ctx.params.get("launch_log")
    started = time.time()
    _log(launch_log, {"source": ctx.source, "token": ctx.token, "run_id": ctx.run_id, "incarnation": ctx.incarnation, "at": started})
    spark = SparkSession.builder.appName(f"regional_sales_{ctx.source}").getOrCreate()
    work_seconds = float(ctx.params.get("work_seconds") or 0)
    # A checkpoint rewrites the ledger (at most once a second) and wakes the driver trigger for a
    # look; 0: none while working, as the stock baseline job (the overhead benchmark's setting).
    every = float(ctx.params.get("checkpoint_seconds", 1) or 0)
    deadline = time.time() + work_seconds
    while time.time() < deadline:  # stands in for a long extract; checkpoints show progress
        if every <= 0:
            time.sleep(deadline - time.time())
            break
        time.sleep(min(every, max(0.0, deadline - time.time())))
        ctx.checkpoint()
    rows = expected_rows(ctx.source, ctx.ds)
    df = spark.createDataFrame(rows, "region string, order_id string, amount_cents long")
    df.write.mode("overwrite").parquet(ctx.output_path)
    # The job knows its row count; a job that does not can report df.count(), one more Spark job.
    ctx.report(rows=len(rows))
    ctx.checkpoint()
    _log(launch_log, {"source": ctx.source, "token": ctx.token, "end": time.time(), "started": started})


if __name__ == "__main__":
    if "--standalone" in sys.argv:
        main_standalone([a for a in sys.argv[1:] if a != "--standalone"])
    else:
        main()
