"""Real components: the channels Airflow feeds from a failed task's exception, unmasked, carry no
secret the driver printed.

A deploy task renders an Airflow connection's password and S3 key into its driver's environment
and Spark conf; the job prints them in many forms and fails, with no retry left. Airflow then hands
the task's exception to three consumers that its secrets masker never sees:

- the failure e-mail (``email_on_failure``: ``html.escape(str(exception))`` and the log link),
  sent through the SMTP provider's notifier to a real SMTP server (``aiosmtpd``) run by this test;
- ``on_failure_callback``: ``context["exception"]``, written as ``repr``, ``str`` and its whole
  formatted traceback (with any chained ``__cause__`` / ``__context__``);
- a listener plugin's ``on_task_instance_failed``: its ``error``, written the same way.

Oracle, independent of the provider: the secret literals below (and their HTML-escaped, URL-encoded
and JSON forms, and any 10-character fragment of those) are searched for in the e-mail as received
(raw bytes and every MIME part decoded) and in the two files. It can fail: the job's raw
``driver.log`` holds the secrets, and the task log shows the job's lines with them masked.
"""

from __future__ import annotations

import email
import email.policy
import html
import json
import socket
import threading
import time
import urllib.parse

import pytest

from tests.conftest import spark_env

DAG_ID = "secret_failure_channels"
TASK_ID = "leaky_deploy"
PASSWORD = "Tr0ub4dor&3+x/y=z!Qq7-fail"
S3_SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYfailKEY"
SECRETS = [PASSWORD, S3_SECRET]
RECIPIENT = "oncall@example.com"
#: One of the job's lines as the task log shows it.
MASKED_LINE = "jdbc:postgresql://db/sales?user=scott&password=***&ssl=true"

JOB = r'''
import json, os
from urllib.parse import quote
pw, s3 = os.environ["ZETA_DB_PASSWORD"], os.environ["ZETA_S3_SECRET"]
lines = [
    pw,
    f"password={pw} user=scott",
    f"jdbc:postgresql://db/sales?user=scott&password={pw}&ssl=true",
    json.dumps({"password": pw}),
    f"mysql -u scott -p{pw} sales",
    f"encoded {quote(pw, safe='')}",
    f"<name>fs.s3a.secret.key</name><value>{s3}</value>",
    f"java.sql.SQLException: Access denied (using password: {pw})",
]
for line in lines:
    print(line, flush=True)
raise SystemExit(f"cannot connect with password {pw} and key {s3}")
'''

DAG = '''
import traceback
from datetime import datetime, timezone
from pathlib import Path
from airflow.sdk import DAG
from airflow_provider_zeta import ZetaSparkJobOperator


def write_exception(context):
    error = context["exception"]
    text = [repr(error), str(error)]
    if isinstance(error, BaseException):
        text.append("".join(traceback.format_exception(error)))
    Path(LEAK_DIR, "callback.txt").write_text("\\n".join(text))


with DAG(dag_id=DAG_ID, schedule=None, start_date=datetime(2026, 1, 1, tzinfo=timezone.utc), catchup=False):
    ZetaSparkJobOperator(
        task_id=TASK_ID,
        application=JOB_PATH,
        retries=0,
        email=[RECIPIENT],
        email_on_failure=True,
        on_failure_callback=write_exception,
        conf={"spark.hadoop.fs.s3a.secret.key": "{{ conn.zeta_leak.extra_dejson.s3_secret_key }}"},
        env_vars={
            "ZETA_DB_PASSWORD": "{{ conn.zeta_leak.password }}",
            "ZETA_S3_SECRET": "{{ conn.zeta_leak.extra_dejson.s3_secret_key }}",
        },
    )
'''

LISTENER_PLUGIN = '''
import os
import sys
import traceback
from pathlib import Path

from airflow.listeners import hookimpl
from airflow.plugins_manager import AirflowPlugin


@hookimpl
def on_task_instance_failed(previous_state, task_instance, error):
    text = [repr(error), str(error)]
    if isinstance(error, BaseException):
        text.append("".join(traceback.format_exception(error)))
    Path(os.environ["ZETA_LEAK_DIR"], "listener.txt").write_text("\\n".join(text))


class LeakListenerPlugin(AirflowPlugin):
    name = "zeta_leak_listener"
    listeners = [sys.modules[__name__]]
'''


def forms(secret: str) -> list[str]:
    """The ways a consumer may write ``secret``: as is, HTML-escaped (the e-mail body),
    URL-encoded, JSON-escaped."""
    return sorted({secret, html.escape(secret), urllib.parse.quote(secret, safe=""), json.dumps(secret)[1:-1]})


def fragments(text: str, size: int = 10) -> list[str]:
    return [text[i : i + size] for i in range(len(text) - size + 1)]


def leaks(text: str) -> list[str]:
    return sorted({f for secret in SECRETS for form in forms(secret) for f in fragments(form) if f in text})


class Mailbox:
    """A real SMTP server on 127.0.0.1 (``aiosmtpd``) keeping every message as received."""

    def __init__(self) -> None:
        from aiosmtpd.controller import Controller

        self.messages: list[bytes] = []
        self.recipients: list[list[str]] = []
        self._lock = threading.Lock()
        with socket.socket() as probe:  # aiosmtpd's start-up check connects to the port it is given: not 0
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.controller = Controller(self, hostname="127.0.0.1", port=self.port)

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 (aiosmtpd's handler hook name)
        with self._lock:
            self.messages.append(bytes(envelope.original_content or envelope.content))
            self.recipients.append(list(envelope.rcpt_tos))
        return "250 Message accepted for delivery"

    def start(self) -> None:
        self.controller.start()

    def stop(self) -> None:
        self.controller.stop()

    def wait(self, timeout: float) -> list[bytes]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if self.messages:
                    return list(self.messages)
            time.sleep(0.5)
        with self._lock:
            return list(self.messages)


def readable(message: bytes) -> str:
    """The message as received and every part decoded (a body may be base64 or quoted-printable)."""
    parsed = email.message_from_bytes(message, policy=email.policy.default)
    text = [message.decode(errors="replace")]
    text += [f"{name}: {value}" for name, value in parsed.items()]
    for part in parsed.walk():
        if part.is_multipart():
            continue
        payload = part.get_payload(decode=True) or b""
        text.append(payload.decode(part.get_content_charset() or "utf-8", errors="replace"))
    return "\n".join(text)


@pytest.fixture
def mailbox():
    box = Mailbox()
    box.start()
    yield box
    box.stop()


def test_a_failed_deploys_email_callback_and_listener_carry_no_driver_secret(airflow_cluster, db_kind, mailbox, tmp_path):
    dags, plugins = tmp_path / "dags", tmp_path / "plugins"
    dags.mkdir()
    plugins.mkdir()
    job = tmp_path / "leaky_job.py"
    job.write_text(JOB)
    (dags / f"{DAG_ID}.py").write_text(
        f"DAG_ID = {DAG_ID!r}\nTASK_ID = {TASK_ID!r}\nJOB_PATH = {str(job)!r}\nLEAK_DIR = {str(tmp_path)!r}\n"
        f"RECIPIENT = {RECIPIENT!r}\n" + DAG
    )
    (plugins / "zeta_leak_listener.py").write_text(LISTENER_PLUGIN)
    leak_connection = {"conn_type": "generic", "login": "scott", "password": PASSWORD, "extra": {"s3_secret_key": S3_SECRET}}
    smtp_connection = {
        "conn_type": "smtp",
        "host": "127.0.0.1",
        "port": mailbox.port,
        "extra": {"disable_tls": True, "disable_ssl": True, "retry_limit": 0, "timeout": 10, "from_email": "airflow@example.com"},
    }
    cluster = airflow_cluster(
        dags,
        db_kind,
        extra_env={
            **spark_env(fake=True),
            "AIRFLOW_CONN_ZETA_LEAK": json.dumps(leak_connection),
            "AIRFLOW_CONN_SMTP_DEFAULT": json.dumps(smtp_connection),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(plugins),
            "ZETA_LEAK_DIR": str(tmp_path),
        },
    )
    cluster.wait_for_dag(DAG_ID)
    run_id = cluster.trigger_run(DAG_ID, "2026-04-01T00:00:00Z")
    run = cluster.wait_for_run(DAG_ID, run_id, states={"success", "failed"}, timeout=300)
    ti = cluster.task_instance(DAG_ID, run_id, TASK_ID)
    assert run["state"] == "failed" and ti["state"] == "failed" and int(ti["try_number"]) == 1, (run, ti)

    # The oracle can fail: the job printed both secrets, and the task log shows its lines masked.
    raw = "\n".join(p.read_text(errors="replace") for p in cluster.home.rglob("driver.log"))
    assert PASSWORD in raw and S3_SECRET in raw, "the job's raw output lacks the secrets: the oracle cannot fail"
    base = f"/dags/{DAG_ID}/dagRuns/{urllib.parse.quote(run_id, safe='')}/taskInstances/{TASK_ID}"
    task_log = json.dumps(cluster.api("GET", f"{base}/logs/1?full_content=true"), ensure_ascii=False)
    assert "zeta.deploy.driver_failed" in task_log and MASKED_LINE in task_log, task_log[-4000:]

    messages = mailbox.wait(timeout=60)
    callback_file, listener_file = tmp_path / "callback.txt", tmp_path / "listener.txt"
    cluster.wait_for(lambda: callback_file.exists() and listener_file.exists(), timeout=60, what="the callback's and listener's files")
    assert len(messages) == 1 and mailbox.recipients == [[RECIPIENT]], (mailbox.recipients, messages)
    mail = readable(messages[0])
    # Each consumer got the real exception: the rule the deploy failed by, and the e-mail its log link.
    channels = {"failure e-mail": mail, "on_failure_callback": callback_file.read_text(), "listener": listener_file.read_text()}
    for name, text in channels.items():
        assert "zeta.deploy.driver_failed" in text, (name, text[:4000])
    assert "Log: " in mail and TASK_ID in mail, mail[:4000]
    channels["task log"] = task_log
    leaked = {name: leaks(text) for name, text in channels.items() if leaks(text)}
    assert not leaked, (sorted(leaked), leaked, {name: channels[name][:6000] for name in leaked})
