"""Real components: the channels Airflow feeds from a failed task's exception, unmasked, carry no
secret the driver printed.

A deploy task renders an Airflow connection's secrets into its driver's environment, Spark conf and
arguments; the job prints them in every printed form of ``tests/secret_forms.py`` (the unit
matrix's list) and fails, with no retry left. Airflow then hands the task's exception to three
consumers that its secrets masker never sees:

- the failure e-mail (``email_on_failure``: ``html.escape(str(exception))`` and the log link),
  sent through the SMTP provider's notifier to a real SMTP server (``aiosmtpd``) run by this test;
- ``on_failure_callback``: ``context["exception"]``, written as ``repr``, ``str`` and its whole
  formatted traceback (with any chained ``__cause__`` / ``__context__``);
- a listener plugin's ``on_task_instance_failed``: its ``error``, written the same way.

The failed run is then read through every route of the monitoring plugin, as the admin and as a
viewer (a failed driver's error is what its page shows), and the task log is judged form by form
(the documented limits may reach it, and only it).

Oracle, independent of the provider: the secret literals (and their HTML-escaped, URL-encoded and
JSON forms, and any 10-character fragment of those) are searched for in the e-mail as received (raw
bytes and every MIME part decoded), the two files and the plugin's answers. It can fail: the job's
raw ``driver.log`` holds the secrets, and the task log shows the job's lines with them masked.
"""

from __future__ import annotations

import urllib.parse

from tests.secret_forms import (
    PASSWORD,
    RECIPIENT,
    S3_SECRET,
    channel_leaks,
    limits_shown,
    plugin_channels,
    readable_json,
    readable_mail,
    run_leaky_dag,
    task_log_leaks,
)

DAG_ID = "secret_failure_channels"
TASK_ID = "leaky_deploy"
#: One of the job's lines as the task log shows it.
MASKED_LINE = "jdbc:postgresql://db/sales?user=scott&password=***&ssl=true"

#: After its forms the job fails with the connection's secrets in its error.
FAIL = r'''
conn = json.loads(os.environ["AIRFLOW_CONN_ZETA_LEAK"])
raise SystemExit(f"cannot connect with password {conn['password']} and key {conn['extra']['s3_secret_key']}")
'''

DAG = '''
from datetime import datetime, timezone
from airflow.sdk import DAG
from airflow_provider_zeta import ZetaSparkJobOperator

with DAG(dag_id=DAG_ID, schedule=None, start_date=datetime(2026, 1, 1, tzinfo=timezone.utc), catchup=False):
    ZetaSparkJobOperator(
        task_id=TASK_ID,
        application=JOB_PATH,
        application_args=["--password", "{{ conn.zeta_leak.extra_dejson.app_password }}"],
        retries=0,
        poll_interval=1,
        email=[RECIPIENT],
        email_on_failure=True,
        on_failure_callback=write_exception("callback"),
        conf={"spark.hadoop.fs.s3a.secret.key": "{{ conn.zeta_leak.extra_dejson.s3_secret_key }}"},
        env_vars={
            "ZETA_FORMS": FORMS_PATH,
            "SERVICE_TOKEN": "{{ conn.zeta_leak.extra_dejson.service_token }}",
        },
    )
'''


def test_a_failed_deploys_email_callback_listener_and_plugin_carry_no_driver_secret(airflow_cluster, db_kind, mailbox, tmp_path):
    cluster, run_id, run, ti = run_leaky_dag(
        airflow_cluster, tmp_path, mailbox, dag_id=DAG_ID, task_id=TASK_ID, dag_source=DAG, job_ending=FAIL, db_kind=db_kind
    )
    assert run["state"] == "failed" and ti["state"] == "failed" and int(ti["try_number"]) == 1, (run, ti)

    # The oracle can fail: the job printed every secret, and the task log shows its lines masked.
    raw = "\n".join(p.read_text(errors="replace") for p in cluster.home.rglob("driver.log"))
    assert PASSWORD in raw and S3_SECRET in raw, "the job's raw output lacks the secrets: the oracle cannot fail"
    base = f"/dags/{DAG_ID}/dagRuns/{urllib.parse.quote(run_id, safe='')}/taskInstances/{TASK_ID}"
    task_log = readable_json(cluster.api("GET", f"{base}/logs/1?full_content=true"))
    assert "zeta.deploy.driver_failed" in task_log and MASKED_LINE in task_log, task_log[-4000:]
    assert limits_shown(task_log), task_log[-4000:]  # the log holds the job's output as printed

    messages = mailbox.wait(timeout=60)
    callback_file, listener_file = tmp_path / "callback.txt", tmp_path / "listener.txt"
    cluster.wait_for(lambda: callback_file.exists() and listener_file.exists(), timeout=60, what="the callback's and listener's files")
    assert len(messages) == 1 and mailbox.recipients == [[RECIPIENT]], (mailbox.recipients, messages)
    mail = readable_mail(messages[0])
    # Each consumer got the real exception: the rule the deploy failed by, and the e-mail its log link.
    channels = {"failure e-mail": mail, "on_failure_callback": callback_file.read_text(), "listener": listener_file.read_text()}
    for name, text in channels.items():
        assert "zeta.deploy.driver_failed" in text, (name, text[:4000])
    assert "Log: " in mail and TASK_ID in mail, mail[:4000]
    channels.update(plugin_channels(cluster, DAG_ID, run_id, TASK_ID))
    leaked = {name: channel_leaks(text) for name, text in channels.items() if channel_leaks(text)}
    if task_log_leaks(task_log):
        leaked["task log"] = task_log_leaks(task_log)
    shown = {name: channels.get(name, task_log)[:6000] for name in leaked}
    assert not leaked, "leaks in: " + "; ".join(sorted(leaked)) + f"\n{leaked}\n{shown}"
