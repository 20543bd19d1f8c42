"""A Structured Streaming query that commits a micro-batch every second until told to stall.

While ``stall_file`` exists, each micro-batch hangs inside foreachBatch, so nothing commits and no
progress event is posted (the driver and its heartbeat stay alive). When ``stop_file`` exists, the
query stops and the job reports the rows it saw.
"""

import os
import time

from pyspark.sql import SparkSession

from airflow_provider_zeta.runtime import zeta_context

ctx = zeta_context()
stall, stop = ctx.params["stall_file"], ctx.params["stop_file"]
spark = SparkSession.builder.getOrCreate()
seen = {"rows": 0}


def commit(batch, batch_id):
    while os.path.exists(stall) and not os.path.exists(stop):
        time.sleep(0.5)  # a hung micro-batch: nothing commits while it waits
    seen["rows"] += batch.count()


query = (
    spark.readStream.format("rate")
    .option("rowsPerSecond", 5)
    .load()
    .writeStream.foreachBatch(commit)
    .option("checkpointLocation", ctx.output_path + "/_checkpoint")
    .trigger(processingTime="1 second")
    .start()
)
while not os.path.exists(stop):
    query.awaitTermination(1)
query.stop()
ctx.report(rows=seen["rows"])
