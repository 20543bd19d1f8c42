"""Real components: a fake-driver job prints its connection's secrets in every printed form of
``tests/secret_forms.py`` (the unit matrix's list) and fails its first try with the password in its
error; the second try succeeds. No channel but the task log carries driver text:

- the task log of every try (REST) holds no secret nor any 10-character fragment of one, but for
  the documented limits (base64, hex, a value the job splits over two lines), which reach it as
  printed — the log is cut at the job's marker lines, so each form is judged alone;
- the task instance (details, rendered fields), its tries, XComs, the retry e-mail received by a
  real SMTP server, the ``on_retry_callback``'s and a listener's view of the first try's exception,
  every route of the monitoring plugin read as the admin and as a viewer, the task's extra links
  and the components' own logs on disk hold no fragment of any of them, limits included.

The oracle is independent of the provider: the secret literals, searched for in what the REST API,
the plugin and the SMTP server serve and in the cluster's files. The job's raw ``driver.log`` must
hold them (so the check can fail).
"""

from __future__ import annotations

import urllib.parse

from tests.secret_forms import (
    FORMS,
    LIMITS,
    PASSWORD,
    RECIPIENT,
    S3_SECRET,
    channel_leaks,
    forms_in,
    limits_shown,
    plugin_channels,
    readable_json,
    readable_mail,
    run_leaky_dag,
    task_log_leaks,
)

DAG_ID = "secret_channels"
TASK_ID = "leaky"

#: The first try fails with the connection's secrets in its error; the second succeeds.
FAIL_ONCE = r'''
marker = os.path.join(os.environ["ZETA_LEAK_DIR"], "failed-once")
if not os.path.exists(marker):
    open(marker, "w").close()
    conn = json.loads(os.environ["AIRFLOW_CONN_ZETA_LEAK"])
    raise SystemExit(f"cannot connect with password {conn['password']} and key {conn['extra']['s3_secret_key']}")
'''

DAG = '''
from datetime import datetime, timedelta, timezone
from airflow.sdk import DAG
from airflow_provider_zeta import ZetaSparkJobOperator

with DAG(dag_id=DAG_ID, schedule=None, start_date=datetime(2026, 1, 1, tzinfo=timezone.utc), catchup=False):
    ZetaSparkJobOperator(
        task_id=TASK_ID,
        application=JOB_PATH,
        application_args=["--password", "{{ conn.zeta_leak.extra_dejson.app_password }}"],
        retries=1,
        retry_delay=timedelta(seconds=1),
        poll_interval=1,
        email=[RECIPIENT],
        email_on_retry=True,
        email_on_failure=True,
        on_retry_callback=write_exception("retry_callback"),
        conf={"spark.hadoop.fs.s3a.secret.key": "{{ conn.zeta_leak.extra_dejson.s3_secret_key }}"},
        env_vars={
            "ZETA_LEAK_DIR": LEAK_DIR,
            "ZETA_FORMS": FORMS_PATH,
            "SERVICE_TOKEN": "{{ conn.zeta_leak.extra_dejson.service_token }}",
        },
    )
'''


def test_driver_secrets_reach_no_channel_but_the_masked_task_log(airflow_cluster, mailbox, tmp_path):
    cluster, run_id, run, ti = run_leaky_dag(
        airflow_cluster, tmp_path, mailbox, dag_id=DAG_ID, task_id=TASK_ID, dag_source=DAG, job_ending=FAIL_ONCE
    )
    assert run["state"] == "success" and int(ti["try_number"]) == 2, (run, ti)

    # The oracle can fail: the job printed every secret into its raw output.
    raw = "\n".join(p.read_text(errors="replace") for p in cluster.home.rglob("driver.log"))  # under the state root
    assert PASSWORD in raw and S3_SECRET in raw, "the job's raw output lacks the secrets: the oracle cannot fail"
    unmasked = task_log_leaks(raw)
    assert len(unmasked) == len(FORMS), f"the oracle sees only {len(unmasked)} of {len(FORMS)} forms unmasked"

    quoted = urllib.parse.quote(run_id, safe="")
    base = f"/dags/{DAG_ID}/dagRuns/{quoted}/taskInstances/{TASK_ID}"
    task_logs: dict[str, str] = {}
    for try_number in (1, 2):
        log = readable_json(cluster.api("GET", f"{base}/logs/{try_number}?full_content=true"))
        task_logs[f"task log of try {try_number} (REST)"] = log
        # Every form reached the log (streamed, one marker each), the limits as printed.
        seen = forms_in(log)
        missing = set(range(len(LIMITS) + len(FORMS))) - {int(m) for m in seen if m != "end"}
        assert not missing and "end" in seen, (try_number, sorted(missing))
        assert limits_shown(log) == [name for name, _, _ in LIMITS], (try_number, limits_shown(log))
    assert "zeta.deploy.driver_failed" in task_logs["task log of try 1 (REST)"]
    leaked = {name: task_log_leaks(text) for name, text in task_logs.items() if task_log_leaks(text)}

    messages = mailbox.wait(timeout=60)
    retry_callback, listener = tmp_path / "retry_callback.txt", tmp_path / "listener.txt"
    cluster.wait_for(lambda: retry_callback.exists() and listener.exists(), timeout=60, what="the retry callback's and listener's files")
    assert len(messages) == 1 and mailbox.recipients == [[RECIPIENT]], (mailbox.recipients, messages)
    channels: dict[str, str] = {
        "retry e-mail": readable_mail(messages[0]),
        "on_retry_callback": retry_callback.read_text(),
        "listener": listener.read_text(),
    }
    # Each consumer got the first try's real exception: the rule the deploy failed by.
    for name, text in channels.items():
        assert "zeta.deploy.driver_failed" in text, (name, text[:4000])
    assert "up_for_retry" in channels["retry e-mail"], channels["retry e-mail"][:4000]

    channels["task instance"] = readable_json(cluster.api("GET", base))
    channels["tries"] = readable_json(cluster.api("GET", f"{base}/tries"))
    xcoms = cluster.api("GET", f"{base}/xcomEntries")
    values = [cluster.api("GET", f"{base}/xcomEntries/{urllib.parse.quote(e['key'], safe='')}?deserialize=true", expect=(200, 404))
              for e in xcoms.get("xcom_entries", [])]
    channels["xcoms"] = readable_json([xcoms, values])
    channels.update(plugin_channels(cluster, DAG_ID, run_id, TASK_ID))
    for path in sorted((cluster.home / "component-logs").glob("*.log")):
        channels[f"component log {path.name}"] = path.read_text(errors="replace")
    leaked.update({name: channel_leaks(text) for name, text in channels.items() if channel_leaks(text)})
    assert not leaked, "leaks in: " + "; ".join(sorted(leaked)) + f"\n{leaked}"
