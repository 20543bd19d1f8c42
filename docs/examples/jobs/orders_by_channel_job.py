"""README example job: one sales channel's order totals per product for the run's day.

An ordinary PySpark application; ``zeta_context()`` tells it which source and day it computes and
where to write. Replace ``orders_of_the_day`` with your own read (a table, files under a landing
path); the example makes deterministic orders so that it runs anywhere.
"""

from __future__ import annotations

import random

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from airflow_provider_zeta.runtime import zeta_context

PRODUCTS = ("coffee", "tea", "cocoa", "mugs")


def orders_of_the_day(spark: SparkSession, channel: str, ds: str, count: int) -> DataFrame:
    """``count`` made-up orders of ``channel`` on ``ds``, the same on every run."""
    rng = random.Random(f"{channel}/{ds}")
    rows = [(f"{channel}-{ds}-{i}", rng.choice(PRODUCTS), rng.randint(1, 5), rng.randint(200, 5000)) for i in range(count)]
    return spark.createDataFrame(rows, "order_id string, product string, quantity int, amount_cents int")


def main() -> None:
    """Compute this source's totals for the run's day into its staging path, then report."""
    ctx = zeta_context()
    spark = SparkSession.builder.appName(f"orders_by_channel_{ctx.source}").getOrCreate()
    orders = orders_of_the_day(spark, ctx.source, ctx.ds, int(ctx.params.get("orders_per_day", 500)))
    totals = orders.groupBy("product").agg(
        F.count("order_id").alias("orders"),
        F.sum("quantity").alias("quantity"),
        F.sum("amount_cents").alias("amount_cents"),
    )
    totals.write.mode("overwrite").parquet(ctx.output_path)  # this attempt's staging directory
    ctx.report(rows=totals.count())  # ready-to-close: the completed point publishes once all report
    spark.stop()


if __name__ == "__main__":
    main()
