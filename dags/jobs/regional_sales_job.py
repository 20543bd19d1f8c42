"""PySpark job of the example pipeline: one region's sales for one day, deterministic.

Every (region, ds) has a known content — ``expected_rows(region, ds)`` — so a test or the demo can
check a published partition row by row. Appends to ``params["launch_log"]`` (when given) so a
reader can count how often the job really ran.
"""

from __future__ import annotations

import hashlib
import json
import time


def expected_rows(region: str, ds: str) -> list[dict]:
    seed = int(hashlib.sha256(f"{region}/{ds}".encode()).hexdigest(), 16)
    count = 20 + seed % 30
    return [
        {"region": region, "order_id": f"{region}-{ds}-{i:04d}", "amount_cents": (seed >> (i % 64)) % 100_000}
        for i in range(count)
    ]


def main() -> None:
    from pyspark.sql import SparkSession

    from airflow_provider_zeta.runtime import zeta_context

    ctx = zeta_context()
    launch_log = ctx.params.get("launch_log")
    if launch_log:
        with open(launch_log, "a") as log:
            log.write(json.dumps({"source": ctx.source, "token": ctx.token, "run_id": ctx.run_id, "at": time.time()}) + "\n")
    spark = SparkSession.builder.appName(f"regional_sales_{ctx.source}").getOrCreate()
    work_seconds = float(ctx.params.get("work_seconds") or 0)
    deadline = time.time() + work_seconds
    while time.time() < deadline:  # stands in for a long extract; checkpoints show progress
        time.sleep(1)
        ctx.checkpoint()
    rows = expected_rows(ctx.source, ctx.ds)
    df = spark.createDataFrame(rows, "region string, order_id string, amount_cents long")
    df.write.mode("overwrite").parquet(ctx.output_path)
    ctx.report(rows=df.count())
    ctx.checkpoint()


if __name__ == "__main__":
    main()
