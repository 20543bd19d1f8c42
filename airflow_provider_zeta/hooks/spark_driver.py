"""Builds the spark-submit command for a driver with ``SparkSubmitHook`` and launches it detached.

``SparkSubmitHook`` owns everything about the command: the Airflow Spark connection (master,
deploy mode, queue, spark-binary, keytab/principal), ``--conf``, ``--py-files``, ``--jars``,
memory and core settings. Which operator argument becomes which hook argument is
``core.submit_options.hook_arguments``; we add the bootstrap as the application and our token as a
conf key (and the default app name). The command comes from the hook's private
``_build_spark_submit_command``, reached through ``airflow_internals.spark_submit_arguments``
(its test fails if the builder disappears or changes its signature; the Spark provider is pinned
``>=6.3,<7``). We do not call ``SparkSubmitHook.submit()``: it runs spark-submit as a child
and blocks for the driver's whole life, which defeats deferral and dies with the task. Instead the
command it builds is started in its own session (``processes.launch_detached``).

Secret Spark conf never reaches a command line: any local user reads a process's arguments
(``ps``, ``/proc/<pid>/cmdline``), and the LocalExecutor's log repeats them. Conf entries whose
name is sensitive (``core.redaction.is_sensitive_key`` or Airflow's ``[core]
sensitive_var_conn_names``), or whose value holds a secret this process's masker knows (a
connection password a template rendered into ``spark.myapp.jdbcUrl``), go into a properties file
instead — merged after the user's ``properties_file``, or after ``spark-defaults.conf`` when none
is given (a properties file given to spark-submit replaces the defaults file) — that exists only as
an anonymous, already deleted 0600 file: the launch writes it, hands spark-submit its descriptor
and the path ``/dev/fd/<n>`` (the JVMs spark-submit starts inherit it and read it there), and closes its own
copy. Nothing named is left on disk; the open descriptor dies with the driver's processes, and
``/proc/<pid>/fd`` of those is readable by their user only (as ``/proc/<pid>/environ`` is).
Application arguments are not touched: a secret there is visible (docs/operators/zeta_spark_job.md
says what to use instead).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from airflow_provider_zeta.airflow_internals import spark_deploy_mode, spark_submit_arguments
from airflow_provider_zeta.core.redaction import java_properties, split_secret_conf
from airflow_provider_zeta.core.submit_options import (
    TOKEN_CONF_KEY,
    carries_url_credentials,
    hook_arguments,
    secret_options_into_conf,
)
from airflow_provider_zeta.processes import ProcessHandle, launch_detached
from airflow_provider_zeta.runtime import driver as driver_bootstrap
from airflow_provider_zeta.runtime import log_shipper

BOOTSTRAP_PATH = str(Path(driver_bootstrap.__file__).resolve())
SHIPPER_PATH = str(Path(log_shipper.__file__).resolve())

#: Environment a task process gives its children that a Spark driver must not inherit: the task
#: supervisor sets an unusable metadata DB URL, and the driver must not act as Airflow anyway.
_STRIPPED_ENV_PREFIXES = ("AIRFLOW__", "_AIRFLOW")


#: Stands for the secret properties file's descriptor number in a command until the launch opens it.
SECRET_FD = "{zeta-secret-properties-fd}"
#: The descriptor the log shipper's child re-opens the file on (``shipped_command``).
SHIPPED_SECRET_FD = 3


class ConnectionNotFound(ValueError):
    """The Airflow connection the operator names does not exist."""

    pass


class SubmitCommand(list):
    """spark-submit's arguments, and the text of the properties file with the secret conf that
    ``launch_driver`` hands over by descriptor (``None``: no secret conf)."""

    secret_properties: str | None = None

    def with_arguments(self, arguments: list[str]) -> SubmitCommand:
        """A command of ``arguments`` with the same secret properties."""
        command = SubmitCommand(arguments)
        command.secret_properties = self.secret_properties
        return command


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
    arguments = hook_arguments(
        token=token,
        conf=conf,
        application_args=bootstrap_args,
        options=options,
        hook_kwargs=hook_kwargs,
        where=where,
    )
    # An option URL with credentials (``--repositories https://user:pw@...``) or a known secret
    # goes to the private properties file as its conf key, like any secret conf.
    arguments = secret_options_into_conf(arguments, _holds_secret, where)
    conf = arguments["conf"]
    holds_secret = {name for name, value in conf.items() if _holds_secret(value)}
    public, secret = split_secret_conf(
        conf, lambda name: name in holds_secret or _sensitive_conf_name(name), keep_public=(TOKEN_CONF_KEY,)
    )
    secret_properties = None
    if secret:
        secret_properties = _properties_base(arguments.get("properties_file"), where) + java_properties(secret)
        arguments = {**arguments, "conf": public, "properties_file": f"/dev/fd/{SECRET_FD}"}
    hook = SparkSubmitHook(conn_id=conn_id, **arguments)
    if spark_deploy_mode(hook) == "cluster":
        raise ValueError(
            f"connection {conn_id!r} uses deploy-mode cluster: ZetaSparkJobOperator runs PySpark "
            "drivers in local or client mode (standalone cluster mode rejects Python apps)."
        )
    command = SubmitCommand(spark_submit_arguments(hook, BOOTSTRAP_PATH))
    command.secret_properties = secret_properties
    if shutil.which(command[0]) is None:
        # pip's pyspark installs spark-submit next to the interpreter; workers often lack it on PATH.
        beside_python = Path(sys.executable).with_name(command[0])
        if beside_python.exists():
            command[0] = str(beside_python)
    return command


def driver_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a driver: this process's without Airflow's own variables, this Python as PySpark's, and ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_STRIPPED_ENV_PREFIXES)}
    # The driver's Python must be the one that has this package and PySpark installed.
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    env.update(extra or {})
    return env


def launch_driver(command: list[str], env: dict[str, str], log_path: str) -> ProcessHandle:
    """Start ``command`` detached; its secret properties (``SubmitCommand``) go in an anonymous
    0600 file whose descriptor only the new process inherits."""
    secret_properties = getattr(command, "secret_properties", None)
    if not secret_properties:
        return launch_detached(list(command), env, log_path)
    # An unnamed (O_TMPFILE) or at once unlinked file, mode 0600: nothing to delete afterwards.
    with tempfile.TemporaryFile() as properties:
        properties.write(secret_properties.encode())
        properties.flush()
        descriptor = properties.fileno()
        arguments = [argument.replace(SECRET_FD, str(descriptor)) for argument in command]
        return launch_detached(arguments, env, log_path, pass_fds=(descriptor,))


def shipped_command(command: list[str], attempt_url: str, local_log: str) -> list[str]:
    """``command`` behind the log shipper (``runtime/log_shipper.py``), for a state root the
    triggerer cannot read as a file: the output goes to ``local_log`` on this host and, in chunks,
    to the attempt at ``attempt_url`` (opened with the driver's own credentials, as its ledger).

    The shipper starts its child with no inherited descriptors: with secret properties, the child
    is a shell that re-opens the shipper's descriptor (``/proc/<shipper>/fd/<n>``, readable by the
    same user only) as descriptor 3 and then becomes spark-submit."""
    shipper = [sys.executable, SHIPPER_PATH, "--attempt", attempt_url, "--local", local_log, "--"]
    if not getattr(command, "secret_properties", None):
        return [*shipper, *command]
    assert isinstance(command, SubmitCommand)
    inner = [argument.replace(f"/dev/fd/{SECRET_FD}", f"/dev/fd/{SHIPPED_SECRET_FD}") for argument in command]
    reopen = f'exec "$@" {SHIPPED_SECRET_FD}<"/proc/$PPID/fd/{SECRET_FD}"'
    return command.with_arguments([*shipper, "/bin/sh", "-c", reopen, "sh", *inner])


def _sensitive_conf_name(name: str) -> bool:
    from airflow_provider_zeta.triggers.driver_output import _sensitive_name

    return _sensitive_name(name)


def _holds_secret(value: object) -> bool:
    """A known secret (``_holds_known_secret``) or a URL with a password in its user info."""
    return carries_url_credentials(str(value)) or _holds_known_secret(value)


def _holds_known_secret(value: object) -> bool:
    """Whether this process's masker finds a secret value in ``value`` (Airflow's masker: e.g. a
    connection password a template rendered; and the values the provider registered): such an
    entry goes into the properties file whatever its name (``spark.myapp.jdbcUrl=...password=...``)."""
    from airflow_provider_zeta.triggers.driver_output import mask_by_value

    text = str(value)
    return mask_by_value(text) != text


def _properties_base(user_file: object, where: str, environ: Mapping[str, str] | None = None) -> str:
    """What the secret entries are appended to: the user's ``properties_file``, else the
    ``spark-defaults.conf`` spark-submit would have read (a given properties file replaces it)."""
    if user_file:
        try:
            return Path(str(user_file)).read_text() + "\n"
        except OSError as error:
            raise ValueError(
                f"{where}: properties_file {str(user_file)!r} cannot be read ({error.strerror}); the secret Spark conf "
                "is merged into a copy of it at launch: make it readable by the worker, or leave properties_file unset"
            ) from None
    environ = os.environ if environ is None else environ
    defaults = _spark_conf_dir(environ)
    if defaults is not None and (defaults / "spark-defaults.conf").is_file():
        return (defaults / "spark-defaults.conf").read_text() + "\n"
    return ""


def _spark_conf_dir(environ: Mapping[str, str]) -> Path | None:
    if environ.get("SPARK_CONF_DIR"):
        return Path(environ["SPARK_CONF_DIR"])
    if environ.get("SPARK_HOME"):
        return Path(environ["SPARK_HOME"]) / "conf"
    import importlib.util

    spec = importlib.util.find_spec("pyspark")  # pip's pyspark: spark-submit's home is the package
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / "conf"
