"""spark-submit options of a deploy task: which ones it takes, of what type, which are templated.

``ZetaSparkJobOperator`` takes the options users pass to ``SparkSubmitOperator`` under the same
names (``py_files``, ``jars``, ``driver_memory``, ...) and hands them to ``SparkSubmitHook``'s
constructor, which turns them into spark-submit flags (``--py-files``, ``--jars``,
``--driver-memory``, ...). This module is the rule: the option names, the type each must have, and
the ones rendered as Jinja templates — exactly those ``SparkSubmitOperator.template_fields`` renders
(``TEMPLATED_OPTIONS``; a unit test compares both lists with the installed Spark provider).

Pure: no Airflow, no I/O. ``checked_options`` validates values at DAG parse time and again once the
templates are rendered, so a wrong type fails with the option's name and what to pass instead of
deep inside spark-submit.

What it does not cover: options that make no sense for a client-mode PySpark driver launched by
the provider (``java_class``, ``deploy_mode``, ``status_poll_interval``, ``post_submit_commands``,
the YARN/Kubernetes tracking switches) and ``conf`` / ``application_args`` / ``env_vars`` /
``conn_id``, which are operator arguments of their own. Any other ``SparkSubmitHook`` argument may
still go through ``spark_submit_kwargs``.

Secrets in options: a list option whose value holds a secret (a repository or file URL with
``user:password@``, or a value the masker knows) would put it on spark-submit's command line, which
any local user reads. ``secret_options_into_conf`` moves such an option to its Spark conf key
(``OPTION_CONF_KEYS``: spark-submit reads the key from its properties file when the flag is
absent), where the secret conf goes into the launch's private properties file.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

#: Options whose value is one string (a path, a comma-separated list, a size like ``"2g"``).
STRING_OPTIONS = (
    "py_files",
    "files",
    "archives",
    "jars",
    "driver_class_path",
    "packages",
    "exclude_packages",
    "repositories",
    "name",
    "driver_memory",
    "executor_memory",
    "principal",
    "keytab",
    "proxy_user",
    "properties_file",
)
#: Options whose value is a positive whole number.
COUNT_OPTIONS = ("executor_cores", "num_executors", "total_executor_cores")
#: Switches.
FLAG_OPTIONS = ("verbose",)

#: Every spark-submit option the operator takes, in the order its docs list them.
SPARK_SUBMIT_OPTIONS = STRING_OPTIONS + COUNT_OPTIONS + FLAG_OPTIONS

#: The options rendered as templates: those ``SparkSubmitOperator.template_fields`` holds.
TEMPLATED_OPTIONS = (
    "files",
    "py_files",
    "jars",
    "driver_class_path",
    "packages",
    "exclude_packages",
    "keytab",
    "principal",
    "proxy_user",
    "name",
    "properties_file",
)

#: The conf key carrying the attempt token on every driver's command line: how the provider finds a
#: driver's processes (``processes.token_needles``), whatever its app name.
TOKEN_CONF_KEY = "spark.zeta.attemptToken"

#: Options that name comma-separated lists in spark-submit: a Python list is joined for the user.
_LIST_OPTIONS = ("py_files", "files", "archives", "jars", "packages", "exclude_packages", "repositories")


class InvalidSubmitOption(ValueError):
    """A spark-submit option holds a value of the wrong type (the message names it and what to pass)."""


def checked_options(values: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The options that are set (not None), each checked and normalized for ``SparkSubmitHook``.

    :param where: how the user knows the task, used in errors (e.g. ``"deploy_web"``).
    :raises InvalidSubmitOption: an unknown option name or a value of the wrong type.

    A list of strings for a list option (``py_files=["a.py", "b.zip"]``) is joined with commas;
    a whole number given as text (what a rendered template or a ``dag_run.conf`` value gives) is
    accepted for a count. Anything else that is not of the option's type is an error.
    """
    unknown = sorted(set(values) - set(SPARK_SUBMIT_OPTIONS))
    if unknown:
        raise InvalidSubmitOption(
            f"{where}: unknown spark-submit option(s) {unknown}; the options are {list(SPARK_SUBMIT_OPTIONS)}"
        )
    checked: dict[str, Any] = {}
    for name in SPARK_SUBMIT_OPTIONS:
        value = values.get(name)
        if value is None:
            continue
        if name in STRING_OPTIONS:
            checked[name] = _string(name, value, where)
        elif name in COUNT_OPTIONS:
            checked[name] = _count(name, value, where)
        else:
            if not isinstance(value, bool):
                raise InvalidSubmitOption(f"{where}: {name!r} must be True or False, got {value!r}")
            checked[name] = value
    return checked


def _string(name: str, value: Any, where: str) -> str:
    if isinstance(value, (list, tuple)) and name in _LIST_OPTIONS and all(isinstance(v, str) for v in value):
        value = ",".join(value)
    if not isinstance(value, str):
        kind = "a string or a list of strings" if name in _LIST_OPTIONS else "a string"
        raise InvalidSubmitOption(f"{where}: {name!r} must be {kind}, got {type(value).__name__} {value!r}")
    if not value.strip():
        raise InvalidSubmitOption(f"{where}: {name!r} is empty; leave it unset (None) instead")
    return value


def _count(name: str, value: Any, where: str) -> int:
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and value.strip().isdigit():
        number = int(value.strip())
    if number is None or number < 1:
        raise InvalidSubmitOption(f"{where}: {name!r} must be a positive whole number (e.g. 2), got {value!r}")
    return number



def hook_arguments(
    *,
    token: str,
    conf: Mapping[str, Any] | None,
    application_args: list[str],
    options: Mapping[str, Any] | None,
    hook_kwargs: Mapping[str, Any] | None,
    where: str,
) -> dict[str, Any]:
    """``SparkSubmitHook``'s constructor arguments (but ``conn_id``) for one attempt's driver.

    ``options`` are the operator's spark-submit options, ``hook_kwargs`` its ``spark_submit_kwargs``
    (any other hook argument; a spark-submit option found there is checked like one, and giving
    one in both places is an error). The app name (``--name``) is ``options["name"]`` when set,
    else ``zeta-<token>``. ``conf`` always gains the attempt token (``TOKEN_CONF_KEY``) and, unless
    set, ``spark.ui.showConsoleProgress=false`` (progress bars would flood the driver log).
    """
    options = {k: v for k, v in (options or {}).items() if v is not None}
    extra = dict(hook_kwargs or {})
    twice = sorted(set(options) & set(extra))
    if twice:
        raise InvalidSubmitOption(
            f"{where}: {twice} given both as operator arguments and in spark_submit_kwargs; pass each once"
        )
    submit = checked_options({**{k: v for k, v in extra.items() if k in SPARK_SUBMIT_OPTIONS}, **options}, where)
    merged_conf = dict(conf or {})
    merged_conf[TOKEN_CONF_KEY] = token
    merged_conf.setdefault("spark.ui.showConsoleProgress", "false")
    return {
        **{k: v for k, v in extra.items() if k not in SPARK_SUBMIT_OPTIONS},
        **submit,
        "conf": merged_conf,
        "name": submit.get("name") or f"zeta-{token}",
        "application_args": list(application_args),
    }


#: spark-submit's list options and the Spark conf key each one stands for: without the flag,
#: spark-submit takes the value of the key from its properties (``SparkSubmitArguments``).
OPTION_CONF_KEYS = {
    "repositories": "spark.jars.repositories",
    "packages": "spark.jars.packages",
    "exclude_packages": "spark.jars.excludes",
    "jars": "spark.jars",
    "py_files": "spark.submit.pyFiles",
    "files": "spark.files",
    "archives": "spark.archives",
}

_URL_CREDENTIALS = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/\s@:,]+:[^/\s@,]+@")


def carries_url_credentials(value: Any) -> bool:
    """Whether ``value`` holds a URL with a password in its user info (``scheme://user:pw@host``)."""
    return isinstance(value, str) and _URL_CREDENTIALS.search(value) is not None


def secret_options_into_conf(arguments: Mapping[str, Any], is_secret: Callable[[str], bool], where: str) -> dict[str, Any]:
    """``arguments`` (``hook_arguments``' result) with every list option whose value ``is_secret``
    moved to its Spark conf key (``OPTION_CONF_KEYS``), off spark-submit's command line. The key
    given in ``conf`` as well is an error: one of the two values would be lost."""
    moved = {
        option: arguments[option]
        for option in OPTION_CONF_KEYS
        if isinstance(arguments.get(option), str) and is_secret(arguments[option])
    }
    if not moved:
        return dict(arguments)
    conf = dict(arguments.get("conf") or {})
    both = sorted(OPTION_CONF_KEYS[option] for option in moved if OPTION_CONF_KEYS[option] in conf)
    if both:
        raise InvalidSubmitOption(
            f"{where}: {both} given in conf and as the matching option, whose value holds a secret and so "
            "goes into the private properties file under that conf key; pass it once"
        )
    conf.update({OPTION_CONF_KEYS[option]: value for option, value in moved.items()})
    return {**{k: v for k, v in arguments.items() if k not in moved}, "conf": conf}
