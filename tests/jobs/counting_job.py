"""A test job that proves how often it ran: it appends to a launch log the test reads.

Works with and without Spark (``job_params["spark"]``): with Spark it writes real Parquet rows,
without it a JSON file. Runs for ``seconds`` (checkpointing each second) or until ``release_file``
exists, then reports its rows. ``fail`` (or ``fail_source`` naming its source) makes it raise.
``leak_connection_env`` (an ``AIRFLOW_CONN_*`` variable) makes it print that connection's password
into its driver log. The launch log is the test's own count of
driver launches, independent of the provider's bookkeeping; a job that finishes also logs an
``end`` entry with its token. Both entries carry wall-clock timestamps (``at`` / ``end``) and the
identity of the host the driver ran on (``host``: hostname; ``pid_namespace``: the kernel's PID
namespace, unique per host of the multi-host test), so a test can tell where each driver ran and
measure whether two drivers of one task were alive at the same moment.

``progress_log`` (opt-in): the job also appends to that file of its own a line with its token and
wall time every half second while it waits (``progress``), the moment it starts writing its output
(``staging``, with the output path) and once its report returned (``reported``): what a frozen
driver wrote after its replacement started is read there, not in the provider's ledger. The
progress line is the first thing the job does after each sleep, before it calls the provider.
``token_column`` (opt-in, with Spark) adds the attempt token to every row written.
"""

import json
import os
import socket
import sys
import time

from airflow_provider_zeta.runtime import zeta_context


def expected_row_count(source: str) -> int:
    return 3 + sum(map(ord, source)) % 10


def _launches() -> list:
    with open(params["launch_log"]) as log:
        return [entry for entry in (json.loads(line) for line in log if line.strip()) if "end" not in entry]


def _host() -> dict:
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        namespace = None
    return {"host": socket.gethostname(), "pid_namespace": namespace}


ctx = zeta_context()
params = ctx.params
progress_fd = None
if params.get("progress_log"):
    # One O_APPEND write per line: a line is in the file whole, or not at all.
    progress_fd = os.open(params["progress_log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)


def progress(event: str, **extra) -> None:
    if progress_fd is not None:
        line = {"token": ctx.token, "source": ctx.source, "event": event, "at": time.time(), **extra}
        os.write(progress_fd, (json.dumps(line) + "\n").encode())


with open(params["launch_log"], "a") as log:
    log.write(
        json.dumps(
            {
                "token": ctx.token,
                "pid": os.getpid(),
                "at": time.time(),
                "task": ctx.task_id,
                "source": ctx.source,
                "run_id": ctx.run_id,
                "incarnation": ctx.incarnation,
                "ds": ctx.ds,
                "partition": ctx.partition,
                **_host(),
            }
        )
        + "\n"
    )

if params.get("leak_connection_env"):
    # A careless job: it prints a connection's password into its driver log, in the forms jobs and
    # tools do. The monitoring page must serve that log redacted (tests/test_monitoring.py).
    conn = json.loads(os.environ[params["leak_connection_env"]])
    login, password = conn.get("login", ""), conn["password"]
    for stream in (sys.stdout, sys.stderr):
        print(
            f"[job] connecting with --password {password}; password={password}; "
            f"Authorization: Basic {password}; postgresql://{login}:{password}@db:5432/x",
            file=stream,
            flush=True,
        )

use_spark = str(params.get("spark", "")).lower() in ("1", "true", "yes")
spark = None
if use_spark:
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.getOrCreate()  # the real driver is up while the job "works"

deadline = time.time() + float(params.get("seconds", 3))
release = params.get("release_file")
if params.get("release_dir"):
    release = os.path.join(params["release_dir"], ctx.source)  # one release switch per source
while (time.time() < deadline) if not release else not os.path.exists(release):
    time.sleep(0.5)
    progress("progress")
    ctx.checkpoint()

rows = int(params.get("rows") or 0) or expected_row_count(ctx.source)
if str(params.get("fail", "")).lower() in ("1", "true", "yes") or params.get("fail_source") == ctx.source:
    raise RuntimeError("the job failed on purpose")
output = ctx.output_path.removeprefix("file://")
progress("staging", output=output)
if spark is not None:
    df = spark.range(rows).withColumnRenamed("id", "n")
    if str(params.get("token_column", "")).lower() in ("1", "true", "yes"):
        from pyspark.sql.functions import lit

        df = df.withColumn("token", lit(ctx.token))
    df.write.mode("overwrite").parquet(ctx.output_path)
    rows = df.count()
else:
    os.makedirs(output, exist_ok=True)
    with open(os.path.join(output, "part-0.json"), "w") as out:
        json.dump([{"n": n, "source": ctx.source, "token": ctx.token} for n in range(rows)], out)
if params.get("fail_first_of") == ctx.source and len([e for e in _launches() if e["task"] == ctx.task_id]) == 1:
    # The first attempt of this source stages its output, then fails: that output is stale and
    # must never be published.
    raise RuntimeError(f"first attempt of {ctx.source} fails after staging its output")
ctx.report(rows=rows)
progress("reported")
if spark is not None:
    spark.stop()  # the driver's Spark side ends before its end entry: the entry bounds its lifetime
with open(params["launch_log"], "a") as log:
    log.write(json.dumps({"token": ctx.token, "source": ctx.source, "end": time.time(), **_host()}) + "\n")
