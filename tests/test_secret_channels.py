"""Real components: a fake-driver job prints its connection's secrets in many forms and fails its
first try with the password in its error; the second try succeeds. No channel but the task log
carries driver text, and the task log of every try, the task instance (details, tries, rendered
fields), its XComs and the component logs on disk hold neither a secret nor any 10-character
fragment of one.

The oracle is independent of the provider: the secret literals below, searched for in what the REST
API serves and in the cluster's files. The job's raw ``driver.log`` must hold them (so the check
can fail).
"""

from __future__ import annotations

import json
import urllib.parse

from tests.conftest import spark_env

DAG_ID = "secret_channels"
PASSWORD = "Tr0ub4dor&3+x/y=z!Qq7-chan"
S3_SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYchanKEY"
SECRETS = [PASSWORD, S3_SECRET]

JOB = r'''
import json, os, sys
from urllib.parse import quote
conn = json.loads(os.environ["AIRFLOW_CONN_ZETA_LEAK"])
pw, s3 = conn["password"], conn["extra"]["s3_secret_key"]
lines = [
    pw,
    f"password={pw} user=scott",
    f"jdbc:postgresql://db/sales?user=scott&password={pw}&ssl=true",
    json.dumps({"password": pw}),
    json.dumps(json.dumps({"password": pw})),
    f"mysql -u scott -p{pw} sales",
    f"encoded {quote(pw, safe='')}",
    f"<name>fs.s3a.secret.key</name><value>{s3}</value>",
    repr([("spark.hadoop.fs.s3a.secret.key", s3)]),
    f"java.sql.SQLException: Access denied (using password: {pw})",
    "x" * (8 * 1024 - 9) + pw + " after the cut",
]
for line in lines:
    print(line, flush=True)
marker = os.path.join(os.environ["ZETA_LEAK_DIR"], "failed-once")
if not os.path.exists(marker):
    open(marker, "w").close()
    raise SystemExit(f"cannot connect with password {pw} and key {s3}")
'''

DAG = '''
from datetime import datetime, timedelta, timezone
from airflow.sdk import DAG
from airflow_provider_zeta import ZetaSparkJobOperator

with DAG(dag_id="secret_channels", schedule=None, start_date=datetime(2026, 1, 1, tzinfo=timezone.utc), catchup=False):
    ZetaSparkJobOperator(
        task_id="leaky",
        application=JOB_PATH,
        retries=1,
        retry_delay=timedelta(seconds=1),
        conf={"spark.hadoop.fs.s3a.secret.key": S3_SECRET},
        env_vars={"ZETA_LEAK_DIR": LEAK_DIR},
    )
'''


def fragments(secret: str, size: int = 10) -> list[str]:
    return [secret[i : i + size] for i in range(len(secret) - size + 1)]


def leaks(text: str) -> list[str]:
    return sorted({f for secret in SECRETS for f in fragments(secret) if f in text})


def test_driver_secrets_reach_no_channel_but_the_masked_task_log(airflow_cluster, tmp_path):
    dags = tmp_path / "dags"
    dags.mkdir()
    job = tmp_path / "leaky_job.py"
    job.write_text(JOB)
    (dags / "secret_channels.py").write_text(
        f"JOB_PATH = {str(job)!r}\nLEAK_DIR = {str(tmp_path)!r}\nS3_SECRET = {S3_SECRET!r}\n" + DAG
    )
    connection = {"conn_type": "generic", "login": "scott", "password": PASSWORD, "extra": {"s3_secret_key": S3_SECRET}}
    cluster = airflow_cluster(dags, extra_env={**spark_env(fake=True), "AIRFLOW_CONN_ZETA_LEAK": json.dumps(connection)})
    cluster.wait_for_dag(DAG_ID)
    run_id = cluster.trigger_run(DAG_ID, "2026-04-01T00:00:00Z")
    run = cluster.wait_for_run(DAG_ID, run_id, states={"success", "failed"}, timeout=300)
    ti = cluster.task_instance(DAG_ID, run_id, "leaky")
    assert run["state"] == "success" and int(ti["try_number"]) == 2, (run, ti)

    # The oracle can fail: the job printed both secrets into its raw output.
    raw = "\n".join(p.read_text(errors="replace") for p in cluster.home.rglob("driver.log"))  # under the state root
    assert PASSWORD in raw and S3_SECRET in raw, "the job's raw output lacks the secrets: the oracle cannot fail"

    quoted = urllib.parse.quote(run_id, safe="")
    base = f"/dags/{DAG_ID}/dagRuns/{quoted}/taskInstances/leaky"
    channels: dict[str, str] = {}
    for try_number in (1, 2):
        log = cluster.api("GET", f"{base}/logs/{try_number}?full_content=true")
        channels[f"task log of try {try_number} (REST)"] = json.dumps(log, ensure_ascii=False)
    assert "zeta.deploy.driver_failed" in channels["task log of try 1 (REST)"]
    assert "[driver] " in channels["task log of try 1 (REST)"]
    channels["task instance"] = json.dumps(cluster.api("GET", base), ensure_ascii=False)
    channels["tries"] = json.dumps(cluster.api("GET", f"{base}/tries"), ensure_ascii=False)
    xcoms = cluster.api("GET", f"{base}/xcomEntries")
    values = [cluster.api("GET", f"{base}/xcomEntries/{urllib.parse.quote(e['key'], safe='')}?deserialize=true", expect=(200, 404))
              for e in xcoms.get("xcom_entries", [])]
    channels["xcoms"] = json.dumps([xcoms, values], ensure_ascii=False, default=str)
    for path in sorted((cluster.home / "component-logs").glob("*.log")):
        channels[f"component log {path.name}"] = path.read_text(errors="replace")
    leaked = {name: leaks(text) for name, text in channels.items() if leaks(text)}
    assert not leaked, (sorted(leaked), leaked)
