"""The printed forms of a job's secrets, and the oracle that searches a channel for them.

One list for the unit matrix (``tests/unit/test_secret_matrix.py``: each form alone through the
trigger's masking path) and the real-component tests (``tests/test_secret_channels.py``,
``tests/test_secret_failure_channels.py``: a fake-driver job prints every form, then each channel
is searched). The oracle is independent of the provider: the secrets are literals of this file,
searched for whole and as every substring of ``FRAGMENT`` characters.

``FORMS`` must not reach any channel. ``LIMITS`` are forms nothing can mask (an encoding of the value
no masker knows, a value the job itself splits over lines): they may reach the task log only, and
are listed in docs/ui.md.

The secrets are handed to the driver as a deploy renders them from an Airflow connection
(``CONNECTION``): its password, and extras under sensitive names for the S3 key (Spark conf), the
service token (environment), the application's ``--password`` argument, a database password and a
private key.
"""

from __future__ import annotations

import base64
import html
import json
import re
import urllib.parse
from typing import Any
from urllib.parse import quote, quote_plus

from airflow_provider_zeta.triggers.driver_output import MAX_LINE

FRAGMENT = 10

PASSWORD = "Tr0ub4dor&3+x/y=z!Qq7"  # the connection's password: & + / = ! stop many patterns
COMMA_PW = "Pass,Word,2024,Zz9"  # a --password application argument
S3_SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYzKEY"  # a Spark conf entry
QUOTED = 'Qu"ote\\Back$lash-42xyz'  # an environment token with a quote and a backslash
DB_PW = "T1gerT1gerDB99"  # an extra under a sensitive name
PEM_BODY = ["MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7", "Zk3q9uVw0x8Lr2mNbPq1sT5yYh6JdK0aXeF4gH7iM2oN3pQ9"]
SSH_BODY = ["b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW", "QyNTUxOQAAACD4bq9Yt2Wm7xLpQ0vR3sN8kJ5cH1gF6dA9eZ0uT4iO2yAAAAJ"]
PGP_BODY = ["lQOYBGXk3ZUBCADJq9Y7mN2pL4sR8tV0wX1yZ3aB5cD7eF9gH1iJ3kL5mN7oP9qR", "ABEBAAEAB/0Qm2nP4rS6tU8vW0xY2zA4bC6dE8fG0hI2jK4lM6nO8pQ0rS2tU4vW"]
PEM = "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(PEM_BODY) + "\n-----END RSA PRIVATE KEY-----"

#: The values a deploy hands the driver.
SECRETS = [PASSWORD, COMMA_PW, S3_SECRET, QUOTED, DB_PW]

#: The Airflow connection the real-component tests define (``AIRFLOW_CONN_ZETA_LEAK``): every value
#: above, the password as such and the rest as extras under names Airflow's masker treats as secret.
CONNECTION: dict[str, Any] = {
    "conn_type": "generic",
    "host": "db",
    "login": "scott",
    "password": PASSWORD,
    "extra": {
        "s3_secret_key": S3_SECRET,
        "service_token": QUOTED,
        "app_password": COMMA_PW,
        "db_password": DB_PW,
        "private_key": PEM,
    },
}


def pad_to_cut(secret: str, at: int) -> str:
    """A line longer than the cut with ``secret`` starting ``at`` characters before the cut."""
    return "x" * (MAX_LINE - at) + secret + " tail of a long line " + "y" * 100


def hex_of(value: str) -> str:
    return value.encode().hex()


# (form, chunks the job writes — a poll runs between two —, secrets that must not show)
FORMS: list[tuple[str, list[str], list[str]]] = [
    ("plain", [f"{PASSWORD}\n"], [PASSWORD]),
    ("key=value", [f"password={PASSWORD}\n"], [PASSWORD]),
    ("key=value then text", [f"password={PASSWORD} user=scott\n"], [PASSWORD]),
    ("double quoted", [f'connecting with "{PASSWORD}"\n'], [PASSWORD]),
    ("single quoted", [f"connecting with '{PASSWORD}'\n"], [PASSWORD]),
    ("python repr of a dict", [f"{ {'token': QUOTED}!r}\n"], [QUOTED]),
    ("python repr of the environment", [f"environ({ {'SERVICE_TOKEN': QUOTED, 'HOME': '/h'}!r})\n"], [QUOTED]),
    ("JSON", [json.dumps({"password": PASSWORD, "token": QUOTED}) + "\n"], [PASSWORD, QUOTED]),
    ("escaped JSON", [json.dumps(json.dumps({"password": PASSWORD, "token": QUOTED})) + "\n"], [PASSWORD, QUOTED]),
    ("Spark getConf().getAll() tuples", [f"{[('spark.app.name', 'sales'), ('spark.hadoop.fs.s3a.secret.key', S3_SECRET)]!r}\n"], [S3_SECRET]),
    ("Hadoop XML", [f"<property><name>fs.s3a.secret.key</name><value>{S3_SECRET}</value></property>\n"], [S3_SECRET]),
    ("--conf echo", [f"--conf spark.hadoop.fs.s3a.secret.key={S3_SECRET} --conf spark.app.name=sales\n"], [S3_SECRET]),
    ("-p with commas", [f"mysql -u scott -p {COMMA_PW} -h db\n"], [COMMA_PW]),
    ("mysql -pPASS", [f"mysql -u scott -p{PASSWORD} sales\n"], [PASSWORD]),
    ("scott/tiger@db", [f"sqlplus scott/{DB_PW}@db\n"], [DB_PW]),
    ("user:pw@host without scheme", [f"connecting scott:{PASSWORD}@db.internal:5432\n"], [PASSWORD]),
    ("URL with scheme", [f"postgresql://scott:{PASSWORD}@db:5432/sales\n"], [PASSWORD]),
    ("s3a URL", [f"reading s3a://AKIAEXAMPLE:{S3_SECRET}@bucket/in\n"], [S3_SECRET]),
    ("query string, raw", [f"jdbc:postgresql://db/sales?user=scott&password={PASSWORD}&ssl=true\n"], [PASSWORD]),
    ("URL-encoded", [f"jdbc:postgresql://db/sales?user=scott&password={quote(PASSWORD, safe='')}&ssl=true\n"], [PASSWORD, quote(PASSWORD, safe="")]),
    ("URL-encoded bare", [f"{quote(PASSWORD, safe='')}\n"], [quote(PASSWORD, safe="")]),
    ("form-encoded bare", [f"body: {quote_plus(PASSWORD)}\n"], [quote_plus(PASSWORD)]),
    ("tab separator", [f"password\t{PASSWORD}\n"], [PASSWORD]),
    ("arrow separator", [f"db_password -> {DB_PW}\n"], [DB_PW]),
    ("'is' separator", [f"the password is {PASSWORD}\n"], [PASSWORD]),
    ("non-breaking space", [f"password:\u00a0{PASSWORD}\n"], [PASSWORD]),
    ("ANSI colours", [f"\x1b[1;31mpassword=\x1b[0m\x1b[33m{PASSWORD}\x1b[0m\n"], [PASSWORD]),
    ("Java stack trace", [
        f"java.sql.SQLException: Access denied for user 'scott'@'db' (using password: {PASSWORD})\n",
        "\tat com.mysql.cj.jdbc.exceptions.SQLError.createSQLException(SQLError.java:129)\n",
        f"Caused by: java.io.IOException: s3a://AKIAEXAMPLE:{S3_SECRET}@bucket/in: 403\n",
    ], [PASSWORD, S3_SECRET]),
    ("Python traceback", [f"Traceback (most recent call last):\n  File \"job.py\", line 3\nValueError: bad token {QUOTED!r}\n"], [QUOTED]),
    ("two stream chunks", [f"the password is {PASSWORD[:8]}", f"{PASSWORD[8:]} ok\n"], [PASSWORD]),
    ("two stream chunks, bare", [f"{S3_SECRET[:15]}", f"{S3_SECRET[15:]}\n"], [S3_SECRET]),
    ("at the 8 KiB cut", [pad_to_cut(PASSWORD, 9) + "\n"], [PASSWORD]),
    ("at the 8 KiB cut, bare, other offset", [pad_to_cut(S3_SECRET, 20) + "\n"], [S3_SECRET]),
    ("at the cut of an unterminated long line", [pad_to_cut(COMMA_PW, 5)], [COMMA_PW]),
    ("PEM private key", [PEM + "\nnext\n"], PEM_BODY),
    ("OpenSSH private key", ["-----BEGIN OPENSSH PRIVATE KEY-----\n" + "\n".join(SSH_BODY) + "\n-----END OPENSSH PRIVATE KEY-----\n"], SSH_BODY),
    ("PGP private key block", ["-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n" + "\n".join(PGP_BODY) + "\n=Ab12\n-----END PGP PRIVATE KEY BLOCK-----\n"], PGP_BODY),
    ("PEM over two chunks", ["-----BEGIN PRIVATE KEY-----\n" + PEM_BODY[0] + "\n", PEM_BODY[1] + "\n-----END PRIVATE KEY-----\n"], PEM_BODY),
]

# Forms no masker can recognise: they may reach the task log (docs/ui.md, "Limits").
LIMITS: list[tuple[str, list[str], list[str]]] = [
    ("base64", [base64.b64encode(PASSWORD.encode()).decode() + "\n"], [base64.b64encode(PASSWORD.encode()).decode()]),
    ("hex", [hex_of(S3_SECRET) + "\n"], [hex_of(S3_SECRET)]),
    ("split across two lines by the job", [f"{PASSWORD[:10]}\n{PASSWORD[10:]}\n"], [PASSWORD[10:]]),
]

#: Every value no channel may show: the secrets, the key bodies (masked by form) and what the rows
#: print of them (an encoding is searched for as such).
ALL_SECRETS: list[str] = list(dict.fromkeys([*SECRETS, *(s for row in FORMS + LIMITS for s in row[2])]))
#: The values the task log never shows whole, and what ``FORMS`` print of them.
MASKED: list[str] = [*SECRETS, *PEM_BODY, *SSH_BODY, *PGP_BODY]
MASKED_FORMS: list[str] = list(dict.fromkeys([*MASKED, *(s for row in FORMS for s in row[2])]))


def fragments(secret: str) -> set[str]:
    if len(secret) <= FRAGMENT:
        return {secret}
    return {secret[i : i + FRAGMENT] for i in range(len(secret) - FRAGMENT + 1)}


def leaks(text: str, secrets: list[str]) -> list[str]:
    """Every fragment of 10 characters (so every longer one too) of ``secrets`` found in ``text``."""
    return sorted({fragment for secret in secrets for fragment in fragments(secret) if fragment in text})


def variants(secret: str) -> list[str]:
    """The ways a consumer may write ``secret``: as is, HTML-escaped (an e-mail, a page),
    URL-encoded, JSON-escaped."""
    return sorted({secret, html.escape(secret), urllib.parse.quote(secret, safe=""), json.dumps(secret)[1:-1]})


def channel_leaks(text: str, secrets: list[str] = ALL_SECRETS) -> list[str]:
    """``leaks`` of every variant of ``secrets``: what a channel other than the task log may not show."""
    return leaks(text, [v for secret in secrets for v in variants(secret)])


def readable_json(value: Any) -> str:
    """A JSON answer as searched: its dump and every string in it as is (a dump escapes quotes and
    backslashes, a fragment holding one would be missed)."""
    strings: list[str] = []

    def walk(item: Any) -> None:
        if isinstance(item, str):
            strings.append(item)
        elif isinstance(item, dict):
            for key, inner in item.items():
                walk(str(key))
                walk(inner)
        elif isinstance(item, (list, tuple)):
            for inner in item:
                walk(inner)

    walk(value)
    return json.dumps(value, ensure_ascii=False, default=str) + "\n" + "\n".join(strings)


# ---------------------------------------------------------------------------- the job of the real tests

MARKER = "zeta-secret-form"
_MARKER_RE = re.compile(rf"{MARKER} (\d+|end)\b")

#: Seconds a printing job waits between two chunks of one form, so that a poll of the driver's
#: output (the deploy's ``poll_interval`` is 1 s there) falls between them.
CHUNK_PAUSE_S = 2.5

#: The job of the real-component tests: prints every row of ``rows.json`` (its path in
#: ``ZETA_FORMS``), each after a marker line, pausing between the chunks of a form, then
#: ``<marker> end``. Its output holds the secrets as the oracle expects them.
JOB = r'''
import json, os, sys, time
rows = json.load(open(os.environ["ZETA_FORMS"]))
for number, chunks in rows:
    sys.stdout.write(f"MARKER {number:02d}\n")
    sys.stdout.flush()
    for index, chunk in enumerate(chunks):
        if index:
            time.sleep(PAUSE)
        sys.stdout.write(chunk)
        sys.stdout.flush()
    if not chunks[-1].endswith("\n"):
        time.sleep(PAUSE)
        sys.stdout.write("\n")
        sys.stdout.flush()
sys.stdout.write("MARKER end\n")
sys.stdout.flush()
'''.replace("MARKER", MARKER).replace("PAUSE", repr(CHUNK_PAUSE_S))


def printed_rows() -> list[tuple[int, list[str]]]:
    """What the job prints, numbered: the limits first, so that the 25-line tail a failed deploy
    logs (the last lines of the output) never starts inside one."""
    return list(enumerate(chunks for _, chunks, _ in LIMITS + FORMS))


def write_job(directory) -> tuple[str, str]:
    """Write the job and its rows under ``directory``; return the job's path and the rows' path."""
    from pathlib import Path

    rows = Path(directory, "forms.json")
    rows.write_text(json.dumps(printed_rows()))
    job = Path(directory, "print_forms_job.py")
    job.write_text(JOB)
    return str(job), str(rows)


def task_log_leaks(log_text: str) -> dict[str, list[str]]:
    """The task log's text cut at the job's markers: what follows a limit's marker may show that
    limit (never a whole secret); everything else — the forms, the task's own lines, the failure's
    tail — no fragment of any secret. Returns the leaking parts by name."""
    found: dict[str, list[str]] = {}
    parts = _MARKER_RE.split(log_text)
    # parts: [before the first marker, number, text, number, text, ...]
    named = [("before the first form", parts[0])] + [
        (label, text) for label, text in zip(parts[1::2], parts[2::2], strict=True)
    ]
    for label, text in named:
        if label.isdigit() and int(label) < len(LIMITS):
            shown = [secret for secret in MASKED if secret in text]
            name = f"limit {LIMITS[int(label)][0]!r}"
        else:
            shown = leaks(text, MASKED_FORMS)
            name = f"form {FORMS[int(label) - len(LIMITS)][0]!r}" if label.isdigit() else f"text {label}"
        if shown:
            found.setdefault(name, []).extend(shown)
    return found


def forms_in(log_text: str) -> set[str]:
    """The markers found in ``log_text``: which rows reached it."""
    return set(_MARKER_RE.findall(log_text))


def limits_shown(log_text: str) -> list[str]:
    """The limits whose encoded value reached ``log_text`` (the task log streams them as printed)."""
    return [name for name, _, secrets in LIMITS if leaks(log_text, secrets)]


# ---------------------------------------------------------------------------- channels of the real tests

#: A listener plugin writing the ``error`` of each ``on_task_instance_failed`` (a try that fails,
#: retried or not) as ``repr``, ``str`` and its formatted traceback to ``$ZETA_LEAK_DIR/listener.txt``.
LISTENER_PLUGIN = """
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
    with open(Path(os.environ["ZETA_LEAK_DIR"], "listener.txt"), "a") as out:
        out.write("\\n".join(text) + "\\n")


class LeakListenerPlugin(AirflowPlugin):
    name = "zeta_leak_listener"
    listeners = [sys.modules[__name__]]
"""

#: A task callback (DAG-file source) writing ``context["exception"]`` the same way to
#: ``LEAK_DIR/<name>.txt``: ``write_exception("callback")``.
CALLBACK_SOURCE = """
import traceback
from pathlib import Path


def write_exception(name):
    def callback(context):
        error = context["exception"]
        text = [repr(error), str(error)]
        if isinstance(error, BaseException):
            text.append("".join(traceback.format_exception(error)))
        with open(Path(LEAK_DIR, name + ".txt"), "a") as out:
            out.write("\\n".join(text) + "\\n")
    return callback
"""


class Mailbox:
    """A real SMTP server on 127.0.0.1 (``aiosmtpd``) keeping every message as received."""

    def __init__(self) -> None:
        import socket
        import threading

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

    def smtp_connection(self) -> dict[str, Any]:
        """The ``smtp_default`` connection that sends to this server."""
        return {
            "conn_type": "smtp",
            "host": "127.0.0.1",
            "port": self.port,
            "extra": {"disable_tls": True, "disable_ssl": True, "retry_limit": 0, "timeout": 10, "from_email": "airflow@example.com"},
        }

    def wait(self, timeout: float, count: int = 1) -> list[bytes]:
        import time

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.messages) >= count:
                    return list(self.messages)
            time.sleep(0.5)
        with self._lock:
            return list(self.messages)


def readable_mail(message: bytes) -> str:
    """The message as received and every part decoded (a body may be base64 or quoted-printable)."""
    import email
    import email.policy

    parsed = email.message_from_bytes(message, policy=email.policy.default)
    text = [message.decode(errors="replace")]
    text += [f"{name}: {value}" for name, value in parsed.items()]
    for part in parsed.walk():
        if part.is_multipart():
            continue
        payload = part.get_payload(decode=True) or b""
        text.append(payload.decode(part.get_content_charset() or "utf-8", errors="replace"))
    return "\n".join(text)


VIEWER = "viewer"
#: The users of a cluster whose plugin routes are read: the harness's admin and a viewer, whose
#: password Airflow's SimpleAuthManager generates into the cluster's passwords file.
USERS_ENV = {"AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"admin:admin,{VIEWER}:viewer"}


def _get(cluster, path: str, token: str, params: dict[str, str]) -> tuple[int, str, dict[str, str]]:
    """GET ``path`` of the API server as the bearer of ``token``; redirects are not followed."""
    import urllib.error
    import urllib.request

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    url = cluster.api_url + path + ("?" + urllib.parse.urlencode(params) if params else "")
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.build_opener(NoRedirect).open(request, timeout=60) as response:
            return response.status, response.read().decode(errors="replace"), dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace"), dict(error.headers)


def viewer_token(cluster) -> str:
    """Log in as ``VIEWER`` with the password the API server generated for it."""
    from pathlib import Path

    passwords = Path(cluster.home, "passwords.json")
    password = cluster.wait_for(
        lambda: json.loads(passwords.read_text() or "{}").get(VIEWER), 60, "the viewer's generated password"
    )
    answer = cluster._http("POST", "/auth/token", body={"username": VIEWER, "password": password}, auth=False)
    return answer["access_token"]


def plugin_channels(cluster, dag_id: str, run_id: str, task_id: str) -> dict[str, str]:
    """Every route of the monitoring plugin (``/zeta/...``) showing the run, read as the admin and as
    a viewer, and the task's extra links: name -> text as searched. Each route must answer as it
    does for a reader (the run listed, the driver link a redirect), so that a silent 404 cannot
    pass for "no leak"."""
    run = {"dag_id": dag_id, "run_id": run_id}
    routes: list[tuple[str, dict[str, str]]] = [
        ("/zeta/ui", {}),
        ("/zeta/ui", {"dag_id": dag_id}),
        ("/zeta/ui", run),
        ("/zeta/ui", {**run, "fragment": "true"}),
        *[("/zeta/api/runs", {"section": section}) for section in ("running", "retained", "ended")],
        *[("/zeta/api/runs", {"section": section, "dag_id": dag_id}) for section in ("running", "retained", "ended")],
        ("/zeta/api/run", run),
        ("/zeta/driver", {**run, "task_id": task_id}),
    ]
    channels: dict[str, str] = {}
    for user, token in (("admin", cluster.token()), (VIEWER, viewer_token(cluster))):
        listed = []
        for path, params in routes:
            status, body, headers = _get(cluster, path, token, params)
            name = f"{path}?{urllib.parse.urlencode(params)} as {user}"
            if path == "/zeta/driver":
                assert status == 307, (name, status, body[:500])
                channels[name] = f"{headers.get('location', '')}\n{body}"
                continue
            assert status == 200, (name, status, body[:500])
            if path == "/zeta/ui":
                channels[name] = body + "\n" + html.unescape(body)
            else:
                answer = json.loads(body)
                listed += [r.get("run_id") for r in answer.get("runs", [])] if "runs" in answer else [answer.get("run_id")]
                channels[name] = readable_json(answer)
        assert run_id in listed, (user, listed)
        assert run_id in channels[f"/zeta/ui?{urllib.parse.urlencode(run)} as {user}"], user
    quoted = urllib.parse.quote(run_id, safe="")
    channels["extra links (REST)"] = readable_json(
        cluster.api("GET", f"/dags/{dag_id}/dagRuns/{quoted}/taskInstances/{task_id}/links")
    )
    return channels


RECIPIENT = "oncall@example.com"


def run_leaky_dag(airflow_cluster, tmp_path, mailbox, *, dag_id, task_id, dag_source, job_ending, db_kind=None):
    """Write the job (every form, then ``job_ending``), the DAG (``dag_source`` after the names it
    reads) and the listener plugin; start a cluster with the leaky connection, the real SMTP server
    and a viewer user; run the DAG once to its end. Returns (cluster, run_id, run, task instance)."""
    dags, plugins = tmp_path / "dags", tmp_path / "plugins"
    dags.mkdir()
    plugins.mkdir()
    job, forms = write_job(tmp_path)
    with open(job, "a") as out:
        out.write(job_ending)
    (dags / f"{dag_id}.py").write_text(
        f"DAG_ID = {dag_id!r}\nTASK_ID = {task_id!r}\nJOB_PATH = {job!r}\nFORMS_PATH = {forms!r}\n"
        f"LEAK_DIR = {str(tmp_path)!r}\nRECIPIENT = {RECIPIENT!r}\n" + CALLBACK_SOURCE + dag_source
    )
    (plugins / "zeta_leak_listener.py").write_text(LISTENER_PLUGIN)
    from tests.conftest import spark_env

    cluster = airflow_cluster(
        dags,
        *([db_kind] if db_kind else []),
        extra_env={
            **spark_env(fake=True),
            **USERS_ENV,
            "AIRFLOW_CONN_ZETA_LEAK": json.dumps(CONNECTION),
            "AIRFLOW_CONN_SMTP_DEFAULT": json.dumps(mailbox.smtp_connection()),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(plugins),
            "ZETA_LEAK_DIR": str(tmp_path),
        },
    )
    cluster.wait_for_dag(dag_id)
    run_id = cluster.trigger_run(dag_id, "2026-04-01T00:00:00Z")
    run = cluster.wait_for_run(dag_id, run_id, states={"success", "failed"}, timeout=300)
    return cluster, run_id, run, cluster.task_instance(dag_id, run_id, task_id)
