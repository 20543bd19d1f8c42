"""A job that talks a lot on a state root in an object store (tests/test_object_store.py).

Prints a start line, a connection's password bare (Airflow's masker must replace it by value in the
task's log), and ``lines`` numbered lines (enough for several of the shipper's chunks); waits for
``release_file`` (so the test sees the output streamed while the task waits deferred); writes one
JSON file of output through fsspec to its attempt's ``output_path`` (an s3:// URL here), as a job
that does not use Spark writes to an object store; prints a last line and reports.
"""

import json
import os
import time

import fsspec

from airflow_provider_zeta.runtime import zeta_context

ctx = zeta_context()
params = ctx.params
print("chatty job: start", flush=True)
print("chatty job: the next line is a bare connection password", flush=True)
print(json.loads(os.environ[params["leak_connection_env"]])["password"], flush=True)
for number in range(int(params["lines"])):
    print(f"chatty job: line {number:05d} " + "." * 60)
print("chatty job: waiting for the release", flush=True)
while not os.path.exists(params["release_file"]):
    time.sleep(0.2)
    ctx.checkpoint()
with fsspec.open(f"{ctx.output_path}/part-0.json", "w") as out:
    json.dump([{"n": n} for n in range(3)], out)
print("chatty job: done", flush=True)
ctx.report(rows=3)
