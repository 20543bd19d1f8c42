"""A state root in an object store: the driver's output reaches the task's log there too.

Real parts: an S3 server (moto's, a separate process on 127.0.0.1) holds ``[zeta] state_root``
(``s3://zeta_s3@<bucket>/state``, through the Amazon provider's ``ObjectStoragePath`` filesystem
and an Airflow connection; the driver opens it with s3fs and its own credentials from the
environment), and real Airflow components (api-server, scheduler, dag-processor, triggerer;
SQLite, LocalExecutor) run one deploy task whose driver is a real separate process (the fake
spark-submit runs the provider's bootstrap). Before the log shipper, the driver's output stayed in
the worker's temporary directory and no line of it reached the task's log.

The oracle is the job's own output, as the shipped chunk objects hold it on the store: every line of it
reaches the task's log (streamed while the task waits deferred, the rest when the driver ends), the
bare connection password replaced by Airflow's masker.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import PROJECT_ROOT, _finish, spark_env
from tests.test_monitoring import task_log_api
from zeta_harness.cluster import AirflowCluster, free_port

DAGS = PROJECT_ROOT / "tests" / "dags_object_store"
DAG_ID, TASK_ID = "object_store_output", "chatty"
SECRET = "s3-root-Conn-pw-91c3e7"
BUCKET = "zeta-state"
KEY, SECRET_KEY = "zeta-test-key", "zeta-test-secret-key-5f0d"
LINES = 6000  # ~530 KB of output: several of the shipper's 256 KiB chunks

pytestmark = pytest.mark.xdist_group("object_store_cluster")


@pytest.fixture(scope="module")
def s3_endpoint():
    """A moto S3 server in its own process, with one empty bucket."""
    moto_server = shutil.which("moto_server", path=os.path.dirname(sys.executable)) or shutil.which("moto_server")
    if moto_server is None:
        pytest.fail("moto_server is missing: `make test` installs it (the test extra)")
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    log = tempfile.NamedTemporaryFile(prefix="moto-", suffix=".log", delete=False)
    server = subprocess.Popen([moto_server, "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=2)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto_server did not start: {Path(log.name).read_text()[-2000:]}") from None
                time.sleep(0.2)
        import boto3

        boto3.client(
            "s3", endpoint_url=endpoint, aws_access_key_id=KEY, aws_secret_access_key=SECRET_KEY, region_name="us-east-1"
        ).create_bucket(Bucket=BUCKET)
        yield endpoint
    finally:
        server.terminate()
        server.wait(timeout=30)
        os.unlink(log.name)


@pytest.fixture(scope="module")
def cluster(s3_endpoint, request):
    env = {
        **spark_env(fake=True),
        "AIRFLOW__ZETA__STATE_ROOT": f"s3://zeta_s3@{BUCKET}/state",
        "AIRFLOW_CONN_ZETA_S3": json.dumps(
            {
                "conn_type": "aws",
                "login": KEY,
                "password": SECRET_KEY,
                "extra": {"endpoint_url": s3_endpoint, "region_name": "us-east-1"},
            }
        ),
        # The driver's own credentials (it cannot resolve Airflow connections): s3fs reads them,
        # and the endpoint, from its environment.
        "AWS_ACCESS_KEY_ID": KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_ENDPOINT_URL": s3_endpoint,
        "AWS_DEFAULT_REGION": "us-east-1",
        # The job prints this connection's password bare: Airflow's masker must replace it.
        "AIRFLOW_CONN_ZETA_SECRET": json.dumps({"conn_type": "generic", "login": "u", "password": SECRET}),
    }
    failures_before = request.session.testsfailed
    cluster = AirflowCluster(DAGS, db="sqlite", extra_env=env)
    try:
        cluster.start()
    except BaseException:
        _finish(cluster, True, "startup of the object-store cluster")
        raise
    yield cluster
    _finish(cluster, request.session.testsfailed > failures_before, "tests/test_object_store.py")


def s3_keys(endpoint: str, prefix: str = "") -> dict[str, int]:
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=KEY, aws_secret_access_key=SECRET_KEY, region_name="us-east-1")
    keys: dict[str, int] = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
        keys.update({item["Key"]: item["Size"] for item in page.get("Contents", [])})
    return keys


def s3_read(endpoint: str, key: str) -> bytes:
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=KEY, aws_secret_access_key=SECRET_KEY, region_name="us-east-1")
    return client.get_object(Bucket=BUCKET, Key=key)["Body"].read()


def test_driver_output_on_an_object_store_state_root_reaches_the_task_log_masked(cluster, s3_endpoint, tmp_path):
    cluster.wait_for_dag(DAG_ID)
    release = tmp_path / "release"
    run_id = cluster.trigger_run(DAG_ID, "2026-05-01T00:00:00Z", conf={"lines": LINES, "release_file": str(release)})
    admin = cluster.token()

    def streamed() -> str | None:
        found = [t for t in cluster.task_instances(DAG_ID, run_id) if t["task_id"] == TASK_ID]
        if not found or found[0]["state"] != "deferred":
            return None
        log = task_log_api(cluster, admin, DAG_ID, run_id, TASK_ID)
        return "chatty job: waiting for the release" in log and log

    # While the task waits deferred, its trigger streams the shipped chunks into the task's log.
    while_deferred = cluster.wait_for(streamed, 240, "the driver's output in the deferred task's log", interval=2)
    assert cluster.task_instance(DAG_ID, run_id, TASK_ID)["state"] == "deferred"
    release.touch()
    ti = cluster.wait_for_task(DAG_ID, run_id, TASK_ID, {"success"}, timeout=240)
    assert ti["try_number"] == 1
    served = task_log_api(cluster, admin, DAG_ID, run_id, TASK_ID)

    # The oracle: the job's whole output, as the shipped chunk objects hold it on the store (read
    # here with boto3, in order; the launching host keeps no copy of it, in its temporary
    # directory or anywhere else outside the state root).
    keys = s3_keys(s3_endpoint, "state/runs/")
    (ledger_key,) = [k for k in keys if k.endswith("/ledger.json") and f"/{TASK_ID}/" in k]
    local = Path(tempfile.gettempdir(), "zeta-driver-logs", f"{ledger_key.split('/')[-2]}.log")
    assert not local.exists()
    chunks = sorted(k for k in keys if "/driver.log.d/" in k and not k.endswith("/end"))
    output = b"".join(s3_read(s3_endpoint, k) for k in chunks).decode()
    printed = [line for line in output.splitlines() if line.startswith("chatty job:") or line == SECRET]
    assert SECRET in printed and "chatty job: done" in printed and len(printed) == LINES + 5
    for line in printed:
        shown = "***" if line == SECRET else line
        assert f"[driver] {shown}" in served, line
    assert SECRET not in served and SECRET not in while_deferred
    assert "chatty job: line 00000" in while_deferred  # streamed before the driver ended

    # On the store: the shipped chunks, closed by the end marker, and the job's output; no
    # driver.log (nothing appends to an object).
    assert len(chunks) >= 2 and any(k.endswith("/driver.log.d/end") for k in keys)
    (end_key,) = [k for k in keys if k.endswith("/driver.log.d/end")]
    assert int(s3_read(s3_endpoint, end_key)) == sum(keys[k] for k in chunks) == len(output.encode())
    assert any(k.endswith("/output/part-0.json") for k in keys)
    assert not any(k.endswith("/driver.log") for k in keys)
