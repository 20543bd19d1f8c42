"""A careless job: prints credentials into its driver output, in every form that was found leaking.

The lines come from a JSON file the test writes (``lines_file``: the rows of
``tests/unit/test_redaction.py``); then the bare password of the ``zeta_secret`` connection on a line
of its own (only Airflow's value masker can catch that one), and two values only the worker
knows (an ``env_vars`` token, the password of a connection defined in ``env_vars``), also bare.
It keeps running, checkpointing, until ``release_file`` exists, so the trigger streams its output
while it runs; then it prints about 2.5 MiB and the token once more, more than the trigger drains
at the end.
"""

import json
import os
import time

from airflow_provider_zeta.runtime import zeta_context

ctx = zeta_context()
params = ctx.params
with open(params["lines_file"]) as handle:
    lines = json.load(handle)
print("leaky job: start", flush=True)
for line in lines:
    print(line, flush=True)
password = json.loads(os.environ["AIRFLOW_CONN_ZETA_SECRET"])["password"]
print("leaky job: the next line is a bare connection password", flush=True)
print(password, flush=True)
print("leaky job: the next lines are secrets only the worker knows", flush=True)
print(os.environ["LEAKY_API_TOKEN"], flush=True)
print(json.loads(os.environ["AIRFLOW_CONN_ZETA_WORKER_ONLY"])["password"], flush=True)
print("leaky job: printed everything", flush=True)
while not os.path.exists(params["release_file"]):
    time.sleep(0.5)
    ctx.checkpoint()
# More than the trigger drains once the driver ended (about 1 MiB): the resumed task logs the rest.
for i in range(32_000):
    print(f"leaky job: chatty line {i:05d} " + "-" * 56)
print("leaky job: the last chatty line; the token once more:", flush=True)
print(os.environ["LEAKY_API_TOKEN"], flush=True)
ctx.report(rows=1)
print("leaky job: done", flush=True)
