"""A test job that proves how often it ran: it appends to a launch log the test reads.

Works with and without Spark (``job_params["spark"]``): with Spark it writes real Parquet rows,
without it a JSON file. Runs for ``seconds`` (checkpointing each second) or until ``release_file``
exists, then reports its rows. ``fail`` makes it raise. The launch log is the test's own count of
driver launches, independent of the provider's bookkeeping.
"""

import json
import os
import time

from airflow_provider_zeta.runtime import zeta_context

ctx = zeta_context()
params = ctx.params
with open(params["launch_log"], "a") as log:
    log.write(json.dumps({"token": ctx.token, "pid": os.getpid(), "at": time.time(), "task": ctx.task_id}) + "\n")

use_spark = str(params.get("spark", "")).lower() in ("1", "true", "yes")
spark = None
if use_spark:
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.getOrCreate()  # the real driver is up while the job "works"

deadline = time.time() + float(params.get("seconds", 3))
release = params.get("release_file")
while (time.time() < deadline) if not release else not os.path.exists(release):
    time.sleep(0.5)
    ctx.checkpoint()

if str(params.get("fail", "")).lower() in ("1", "true", "yes"):
    raise RuntimeError("the job failed on purpose")

rows = int(params.get("rows", 7))
output = ctx.output_path.removeprefix("file://")
if spark is not None:
    df = spark.range(rows).withColumnRenamed("id", "n")
    df.write.mode("overwrite").parquet(ctx.output_path)
    rows = df.count()
else:
    os.makedirs(output, exist_ok=True)
    with open(os.path.join(output, "part-0.json"), "w") as out:
        json.dump([{"n": n} for n in range(rows)], out)
ctx.report(rows=rows)
