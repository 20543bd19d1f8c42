"""A careless job: prints credentials into its driver output, in every form issue 15 found leaking.

The lines come from a JSON file the test writes (``lines_file``: the rows of
``tests/unit/test_redaction.py``); then the bare password of the ``zeta_secret`` connection on a line
of its own (only Airflow's value masker can catch that one). It keeps running, checkpointing, until
``release_file`` exists, so the trigger streams its output while it runs.
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
print("leaky job: printed everything", flush=True)
while not os.path.exists(params["release_file"]):
    time.sleep(0.5)
    ctx.checkpoint()
ctx.report(rows=1)
print("leaky job: done", flush=True)
