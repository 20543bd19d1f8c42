"""Builds the spark-submit command for a driver with ``SparkSubmitHook`` and launches it detached.

``SparkSubmitHook`` owns everything about the command: the Airflow Spark connection (master,
deploy mode, queue, spark-binary, keytab/principal), ``--conf``, ``--py-files``, ``--jars``,
memory and core settings. Which operator argument becomes which hook argument is
``core.submit_options.hook_arguments``; we add the bootstrap as the application and our token as a
conf key (and the default app name). The command comes from the hook's private
``_build_spark_submit_command`` (a unit test fails if it disappears or changes its signature;
the provider is pinned ``>=6.3,<7``). We do not call ``SparkSubmitHook.submit()``: it runs spark-submit as a child
and blocks for the driver's whole life, which defeats deferral and dies with the task. Instead the
command it builds is started in its own session (``processes.launch_detached``).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

from airflow_provider_zeta.core.submit_options import hook_arguments
from airflow_provider_zeta.processes import ProcessHandle, launch_detached
from airflow_provider_zeta.runtime import driver as driver_bootstrap
from airflow_provider_zeta.runtime import log_shipper

BOOTSTRAP_PATH = str(Path(driver_bootstrap.__file__).resolve())
SHIPPER_PATH = str(Path(log_shipper.__file__).resolve())

#: Environment a task process gives its children that a Spark driver must not inherit: the task
#: supervisor sets an unusable metadata DB URL, and the driver must not act as Airflow anyway.
_STRIPPED_ENV_PREFIXES = ("AIRFLOW__", "_AIRFLOW")


class ConnectionNotFound(ValueError):
    pass


def spark_submit_command(
    *,
    conn_id: str,
    token: str,
    bootstrap_args: list[str],
    conf: dict[str, Any] | None,
    hook_kwargs: dict[str, Any] | None,
    options: dict[str, Any] | None = None,
    where: str = "ZetaSparkJobOperator",
) -> list[str]:
    """The spark-submit command of one attempt, as ``SparkSubmitHook`` builds it.

    The hook's constructor arguments come from ``core.submit_options.hook_arguments`` (the rule:
    which option becomes which flag, checked again here once templates are rendered); the hook
    turns them, and the connection, into the command line.
    """
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
    from airflow.sdk import BaseHook

    try:
        BaseHook.get_connection(conn_id)
    except Exception as error:  # AirflowNotFoundException and friends
        # SparkSubmitHook silently falls back to master=yarn for a missing connection.
        raise ConnectionNotFound(
            f"Airflow connection {conn_id!r} not found ({error}). Create it, e.g. for local mode "
            f"AIRFLOW_CONN_{conn_id.upper()}='{{\"conn_type\": \"spark\", \"host\": \"local[2]\"}}', "
            "or for a standalone cluster host spark://HOST with port 7077."
        ) from None
    hook = SparkSubmitHook(
        conn_id=conn_id,
        **hook_arguments(
            token=token,
            conf=conf,
            application_args=bootstrap_args,
            options=options,
            hook_kwargs=hook_kwargs,
            where=where,
        ),
    )
    if hook._connection.get("deploy_mode") == "cluster":
        raise ValueError(
            f"connection {conn_id!r} uses deploy-mode cluster: ZetaSparkJobOperator runs PySpark "
            "drivers in local or client mode (standalone cluster mode rejects Python apps)."
        )
    command = hook._build_spark_submit_command(BOOTSTRAP_PATH)
    if shutil.which(command[0]) is None:
        # pip's pyspark installs spark-submit next to the interpreter; workers often lack it on PATH.
        beside_python = Path(sys.executable).with_name(command[0])
        if beside_python.exists():
            command[0] = str(beside_python)
    return command


def driver_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_STRIPPED_ENV_PREFIXES)}
    # The driver's Python must be the one that has this package and PySpark installed.
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    env.update(extra or {})
    return env


def launch_driver(command: list[str], env: dict[str, str], log_path: str) -> ProcessHandle:
    return launch_detached(command, env, log_path)


def shipped_command(command: list[str], attempt_url: str, local_log: str) -> list[str]:
    """``command`` behind the log shipper (``runtime/log_shipper.py``), for a state root the
    triggerer cannot read as a file: the output goes to ``local_log`` on this host and, in chunks,
    to the attempt at ``attempt_url`` (opened with the driver's own credentials, as its ledger)."""
    return [sys.executable, SHIPPER_PATH, "--attempt", attempt_url, "--local", local_log, "--", *command]
