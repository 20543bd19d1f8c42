"""The printed-forms matrix: a job prints the secrets it was handed in many forms; what reaches the
task log (the driver trigger's masking path, then the triggerer's log processor) holds neither a
secret nor any fragment of 10 characters or more of one.

The path is the production one, in two processes' worth of state: the worker registers and seals
what it launches the driver with (``driver_output_kwargs``), the "triggerer" starts from an empty
masker, registers from the kwargs (``DriverOutput.register_secrets``) and streams ``driver.log``
with ``DriverOutput.poll`` — written in chunks, polled between them — and every line then passes
Airflow's own ``redact`` as the triggerer's ``mask_logs`` processor does. The oracle is independent
of the provider: the secrets are literals of this file, searched for in the output whole and as
every substring of 10 characters.

``LIMITS`` are forms nothing can mask (an encoding of the value no masker knows, a value the job
itself splits over lines): they may reach the task log and are listed in docs/ui.md; their rows
assert that they are the documented limit, so a change that masks them is noticed too.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from urllib.parse import quote, quote_plus

import pytest

from airflow_provider_zeta.triggers.driver_output import DRIVER_LOG, MAX_LINE, DriverOutput, driver_output_kwargs

ATTEMPT = "runs/d/r/attempts/t/-1/tok"
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

SECRETS = [PASSWORD, COMMA_PW, S3_SECRET, QUOTED, DB_PW]


def launch() -> dict:
    """What the deploy renders into the driver: a connection in its environment, conf, an
    argument, an environment token."""
    return {
        "env_vars": {
            "SERVICE_TOKEN": QUOTED,
            "AIRFLOW_CONN_ZETA_DB": json.dumps(
                {"conn_type": "postgres", "host": "db", "login": "scott", "password": PASSWORD,
                 "extra": {"db_password": DB_PW, "private_key": PEM}}
            ),
        },
        "conf": {"spark.hadoop.fs.s3a.secret.key": S3_SECRET, "spark.app.name": "sales"},
        "application_args": ["--password", COMMA_PW, "--date", "2026-01-01"],
    }


def pad_to_cut(secret: str, at: int) -> str:
    """A line longer than the cut with ``secret`` starting ``at`` characters before the cut."""
    return "x" * (MAX_LINE - at) + secret + " tail of a long line " + "y" * 100


def hex_of(value: str) -> str:
    return value.encode().hex()


# (form, chunks written to driver.log — a poll runs after each —, secrets that must not show)
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


def fragments(secret: str) -> set[str]:
    if len(secret) <= FRAGMENT:
        return {secret}
    return {secret[i : i + FRAGMENT] for i in range(len(secret) - FRAGMENT + 1)}


def leaks(text: str, secrets: list[str]) -> list[str]:
    """Every fragment of 10 characters (so every longer one too) of ``secrets`` found in ``text``."""
    return sorted({fragment for secret in secrets for fragment in fragments(secret) if fragment in text})


@pytest.fixture
def fernet_key(monkeypatch):
    from cryptography.fernet import Fernet

    from airflow.sdk.crypto import get_fernet

    monkeypatch.setenv("AIRFLOW__CORE__FERNET_KEY", Fernet.generate_key().decode())
    get_fernet.cache_clear()
    yield
    get_fernet.cache_clear()


def task_log_of(tmp_path, chunks: list[str]) -> str:
    """What the task log shows of a driver that wrote ``chunks``: the worker seals what it launched
    the driver with, the triggerer (a fresh masker) registers it and streams the output, and the
    triggerer's log processor applies Airflow's masker to each record."""
    from airflow.sdk._shared.secrets_masker import redact as airflow_redact
    from airflow.sdk._shared.secrets_masker import reset_secrets_masker

    from airflow_provider_zeta.triggers import driver_output

    def new_process() -> None:
        reset_secrets_masker()
        if hasattr(driver_output, "forget_registered_values"):
            driver_output.forget_registered_values()

    new_process()
    spec = launch()
    kwargs = driver_output_kwargs("spark_default", spec["env_vars"], spec["conf"], spec["application_args"])
    new_process()  # the triggerer is another process
    root = tmp_path / "state"
    (root / ATTEMPT).mkdir(parents=True)
    output = DriverOutput.from_kwargs(str(root), ATTEMPT, kwargs)
    assert output is not None
    asyncio.run(output.register_secrets(logging.getLogger("test")))
    lines: list[str] = []
    for chunk in chunks:
        with open(root / ATTEMPT / DRIVER_LOG, "ab") as log:
            log.write(chunk.encode())
        lines.extend(output.poll())
    lines.extend(output.drain())
    return "\n".join(airflow_redact(f"[driver] {line}") for line in lines)


@pytest.mark.parametrize("form,chunks,secrets", FORMS, ids=[row[0] for row in FORMS])
def test_no_printed_form_reaches_the_task_log(tmp_path, fernet_key, form, chunks, secrets):
    shown = task_log_of(tmp_path, chunks)
    assert not leaks(shown, secrets), (form, leaks(shown, secrets), shown[-400:])


@pytest.mark.parametrize("form,chunks,secrets", LIMITS, ids=[row[0] for row in LIMITS])
def test_the_documented_limits_are_what_they_say(tmp_path, fernet_key, form, chunks, secrets):
    from pathlib import Path

    shown = task_log_of(tmp_path, chunks)
    assert leaks(shown, secrets), f"{form} is masked now: move it to FORMS and out of docs/ui.md's limits"
    limits = Path(__file__).resolve().parents[2].joinpath("docs", "ui.md").read_text()
    assert form.split(" ")[0] in limits.lower(), f"{form} is not listed in docs/ui.md"


def test_the_matrix_has_at_least_thirty_forms():
    assert len(FORMS) + len(LIMITS) >= 30
