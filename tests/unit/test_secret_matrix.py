"""The printed-forms matrix: a job prints the secrets it was handed in many forms; what reaches the
task log (the driver trigger's masking path, then the triggerer's log processor) holds neither a
secret nor any fragment of 10 characters or more of one.

The path is the production one, in two processes' worth of state: the worker registers and seals
what it launches the driver with (``driver_output_kwargs``), the "triggerer" starts from an empty
masker, registers from the kwargs (``DriverOutput.register_secrets``) and streams ``driver.log``
with ``DriverOutput.poll`` — written in chunks, polled between them — and every line then passes
Airflow's own ``redact`` as the triggerer's ``mask_logs`` processor does. The oracle is independent
of the provider: the secrets are literals (``tests/secret_forms.py``, the forms the real-component
tests print too), searched for in the output whole and as every substring of 10 characters.

``LIMITS`` are forms nothing can mask (an encoding of the value no masker knows, a value the job
itself splits over lines): they may reach the task log and are listed in docs/ui.md; their rows
assert that they are the documented limit, so a change that masks them is noticed too.
"""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from airflow_provider_zeta.triggers.driver_output import DRIVER_LOG, DriverOutput, driver_output_kwargs
from tests.secret_forms import COMMA_PW, DB_PW, FORMS, LIMITS, PASSWORD, PEM, QUOTED, S3_SECRET, leaks

ATTEMPT = "runs/d/r/attempts/t/-1/tok"


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
