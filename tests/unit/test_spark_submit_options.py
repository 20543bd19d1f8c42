"""ZetaSparkJobOperator takes SparkSubmitOperator's options under the same names.

The command lines here are built by the installed ``SparkSubmitHook`` itself (no fake): each option
must reach spark-submit as its flag. The hook's command builder is private
(``_build_spark_submit_command``); ``test_the_private_command_builder_we_call_still_exists`` fails
when an upgrade of the Spark provider removes it or changes its signature.
"""

from __future__ import annotations

import inspect
from datetime import UTC, datetime

import pytest
from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from airflow_provider_zeta.core.submit_options import (
    SPARK_SUBMIT_OPTIONS,
    TEMPLATED_OPTIONS,
    InvalidSubmitOption,
    checked_options,
)
from airflow_provider_zeta.hooks.spark_driver import spark_submit_command
from airflow_provider_zeta.operators.spark_job import ZetaSparkJobOperator

#: One value per option and the flag(s) spark-submit must receive for it.
VALUES = {
    "py_files": ("deps.zip,util.py", ["--py-files", "deps.zip,util.py"]),
    "files": ("lookup.csv", ["--files", "lookup.csv"]),
    "archives": ("env.tar.gz#env", ["--archives", "env.tar.gz#env"]),
    "jars": ("a.jar,b.jar", ["--jars", "a.jar,b.jar"]),
    "driver_class_path": ("/opt/cp", ["--driver-class-path", "/opt/cp"]),
    "packages": ("org.x:y:1.0", ["--packages", "org.x:y:1.0"]),
    "exclude_packages": ("org.z:w", ["--exclude-packages", "org.z:w"]),
    "repositories": ("https://repo.example", ["--repositories", "https://repo.example"]),
    "name": ("orders-eu", ["--name", "orders-eu"]),
    "driver_memory": ("3g", ["--driver-memory", "3g"]),
    "executor_memory": ("5g", ["--executor-memory", "5g"]),
    "executor_cores": (3, ["--executor-cores", "3"]),
    "num_executors": (4, ["--num-executors", "4"]),
    "total_executor_cores": (12, ["--total-executor-cores", "12"]),
    "principal": ("etl@EXAMPLE.COM", ["--principal", "etl@EXAMPLE.COM"]),
    "keytab": ("/etc/etl.keytab", ["--keytab", "/etc/etl.keytab"]),
    "proxy_user": ("analyst", ["--proxy-user", "analyst"]),
    "properties_file": ("/etc/spark.props", ["--properties-file", "/etc/spark.props"]),
    "verbose": (True, ["--verbose"]),
}


@pytest.fixture(autouse=True)
def spark_connection(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_OPTS", '{"conn_type": "spark", "host": "local[2]"}')


def _command(operator: ZetaSparkJobOperator, token: str = "tok17") -> list[str]:
    return spark_submit_command(
        conn_id="spark_opts",
        token=token,
        bootstrap_args=["--spec", "{}"],
        conf=operator.conf,
        hook_kwargs=operator.spark_submit_kwargs,
        options=operator.spark_submit_options(),
        where=operator.task_id,
    )


def _has(command: list[str], flags: list[str]) -> bool:
    return any(command[i : i + len(flags)] == flags for i in range(len(command)))


def test_the_table_covers_every_option_the_issue_names():
    assert set(VALUES) == set(SPARK_SUBMIT_OPTIONS)


def test_every_option_reaches_the_command_line_built_by_the_real_hook():
    operator = ZetaSparkJobOperator(
        task_id="deploy_eu", application="/jobs/eu.py", conn_id="spark_opts", **{k: v for k, (v, _) in VALUES.items()}
    )
    command = _command(operator)
    missing = {option: flags for option, (_, flags) in VALUES.items() if not _has(command, flags)}
    assert missing == {}, command
    # The application comes after every option; the token conf stays (the process lookup needs it).
    assert command.index("--verbose") < next(i for i, a in enumerate(command) if a.endswith("driver.py"))
    assert _has(command, ["--conf", "spark.zeta.attemptToken=tok17"])


def test_each_option_alone_adds_only_its_own_flags():
    bare = _command(ZetaSparkJobOperator(task_id="bare", application="/a.py", conn_id="spark_opts"))
    for option, (value, flags) in VALUES.items():
        command = _command(ZetaSparkJobOperator(task_id="one", application="/a.py", conn_id="spark_opts", **{option: value}))
        if option == "name":  # replaces the default app name
            assert _has(bare, ["--name", "zeta-tok17"]) and _has(command, flags)
            continue
        assert len(command) == len(bare) + len(flags) and _has(command, flags), option


def test_without_a_name_the_app_is_named_after_the_token():
    command = _command(ZetaSparkJobOperator(task_id="t", application="/a.py", conn_id="spark_opts"), token="abc")
    assert _has(command, ["--name", "zeta-abc"])


def test_templated_options_mirror_spark_submit_operator():
    theirs = set(SparkSubmitOperator.template_fields)
    assert set(TEMPLATED_OPTIONS) == theirs & set(SPARK_SUBMIT_OPTIONS)
    assert set(TEMPLATED_OPTIONS) <= set(ZetaSparkJobOperator.template_fields)
    assert not (set(SPARK_SUBMIT_OPTIONS) - set(TEMPLATED_OPTIONS)) & set(ZetaSparkJobOperator.template_fields)


def test_options_are_public_constructor_arguments_of_the_hook_and_the_operator():
    hook_params = inspect.signature(SparkSubmitHook.__init__).parameters
    operator_params = inspect.signature(SparkSubmitOperator.__init__).parameters
    ours = inspect.signature(ZetaSparkJobOperator.__init__).parameters
    for option in SPARK_SUBMIT_OPTIONS:
        assert option in hook_params and option in operator_params and option in ours, option


def test_the_private_command_builder_we_call_still_exists():
    # hooks/spark_driver.py calls SparkSubmitHook._build_spark_submit_command(application): the
    # hook has no public way to build a command without running it (submit() blocks on the child).
    builder = getattr(SparkSubmitHook, "_build_spark_submit_command", None)
    assert builder is not None, "SparkSubmitHook._build_spark_submit_command is gone: adapt hooks/spark_driver.py"
    assert list(inspect.signature(builder).parameters) == ["self", "application"]


def test_templated_options_render_with_the_context():
    operator = ZetaSparkJobOperator(
        task_id="deploy_eu",
        application="/jobs/eu.py",
        conn_id="spark_opts",
        py_files="/deps/{{ ds }}/lib.zip",
        name="orders-{{ params.region }}-{{ ds_nodash }}",
        keytab="/keytabs/{{ params.region }}.keytab",
        principal="etl-{{ params.region }}@EXAMPLE.COM",
        properties_file="/conf/{{ params.region }}.conf",
        packages="{{ params.package }}",
    )
    context = {"ds": "2026-03-04", "ds_nodash": "20260304", "params": {"region": "eu", "package": "org.x:y:2.0"}}
    operator.render_template_fields(context)
    command = _command(operator)
    assert _has(command, ["--py-files", "/deps/2026-03-04/lib.zip"])
    assert _has(command, ["--name", "orders-eu-20260304"])
    assert _has(command, ["--keytab", "/keytabs/eu.keytab"])
    assert _has(command, ["--principal", "etl-eu@EXAMPLE.COM"])
    assert _has(command, ["--properties-file", "/conf/eu.conf"])
    assert _has(command, ["--packages", "org.x:y:2.0"])


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("executor_cores", "lots", "positive whole number"),
        ("num_executors", 0, "positive whole number"),
        ("total_executor_cores", True, "positive whole number"),
        ("driver_memory", 2048, "must be a string"),
        ("py_files", {"a.py"}, "a string or a list of strings"),
        ("verbose", "yes", "True or False"),
        ("jars", "  ", "is empty"),
    ],
)
def test_a_bad_type_fails_at_parse_time_naming_the_task_and_option(option, value, says):
    with pytest.raises(InvalidSubmitOption, match=rf"deploy_eu: '{option}' .*{says}|deploy_eu: '{option}' {says}"):
        ZetaSparkJobOperator(task_id="deploy_eu", application="/a.py", **{option: value})


def test_a_value_that_renders_to_a_bad_type_fails_before_launching():
    operator = ZetaSparkJobOperator(task_id="deploy_eu", application="/a.py", conn_id="spark_opts", py_files="{{ x }}")
    operator.py_files = 42  # what a native-object template could render to
    with pytest.raises(InvalidSubmitOption, match="deploy_eu: 'py_files' must be a string or a list of strings, got int"):
        _command(operator)


def test_lists_are_joined_and_counts_given_as_text_are_accepted():
    assert checked_options({"py_files": ["a.py", "b.zip"], "executor_cores": " 2 "}, "t") == {
        "py_files": "a.py,b.zip",
        "executor_cores": 2,
    }


def test_an_option_in_both_places_is_refused_and_spark_submit_kwargs_still_work():
    with pytest.raises(InvalidSubmitOption, match=r"\['jars'\] given both"):
        ZetaSparkJobOperator(task_id="t", application="/a.py", jars="a.jar", spark_submit_kwargs={"jars": "b.jar"})
    # The older way (options in spark_submit_kwargs) keeps working, checked the same way.
    operator = ZetaSparkJobOperator(
        task_id="t", application="/a.py", conn_id="spark_opts", spark_submit_kwargs={"jars": "b.jar", "name": "x"}
    )
    command = _command(operator)
    assert _has(command, ["--jars", "b.jar"]) and _has(command, ["--name", "x"])
    with pytest.raises(InvalidSubmitOption, match="'executor_cores' must be a positive whole number"):
        ZetaSparkJobOperator(task_id="t", application="/a.py", spark_submit_kwargs={"executor_cores": "many"})


def test_the_pipeline_passes_options_per_source():
    from airflow.sdk import DAG

    from airflow_provider_zeta import zeta_pipeline

    with DAG("pipeline_options", schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC)) as dag:
        zeta_pipeline(
            "orders",
            sources={"web": "/jobs/web.py", "stores": "/jobs/stores.py"},
            output="/tmp/out",
            conn_id="spark_opts",
            deploy_kwargs={"driver_memory": "1g", "py_files": "common.zip"},
            spark_options={
                "web": {"driver_memory": "4g", "num_executors": 2, "packages": "org.web:x:1"},
                "stores": {"jars": "stores.jar", "name": "stores-{{ ds }}"},
            },
        )
    web = _command(dag.get_task("orders.deploy_web"))
    stores_task = dag.get_task("orders.deploy_stores")
    stores_task.render_template_fields({"ds": "2026-01-05"})
    stores = _command(stores_task)
    assert _has(web, ["--driver-memory", "4g"]) and _has(web, ["--num-executors", "2"])
    assert _has(web, ["--packages", "org.web:x:1"]) and not _has(web, ["--jars", "stores.jar"])
    assert _has(stores, ["--driver-memory", "1g"]) and _has(stores, ["--jars", "stores.jar"])
    assert _has(stores, ["--name", "stores-2026-01-05"]) and "--packages" not in stores
    assert _has(web, ["--py-files", "common.zip"]) and _has(stores, ["--py-files", "common.zip"])


def test_the_pipeline_refuses_options_for_unknown_sources_or_unknown_options():
    from airflow.sdk import DAG

    from airflow_provider_zeta import zeta_pipeline

    with DAG("pipeline_bad_options", schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC)):
        with pytest.raises(ValueError, match=r"spark_options for unknown sources \['mobile'\]"):
            zeta_pipeline("p1", sources={"web": "/a.py"}, output="/tmp/o", spark_options={"mobile": {"jars": "a.jar"}})
        with pytest.raises(ValueError, match=r"spark_options\['web'\] holds \['retries'\]"):
            zeta_pipeline("p2", sources={"web": "/a.py"}, output="/tmp/o", spark_options={"web": {"retries": 3}})
        with pytest.raises(InvalidSubmitOption, match="deploy_web: 'num_executors' must be a positive whole number"):
            zeta_pipeline("p3", sources={"web": "/a.py"}, output="/tmp/o", spark_options={"web": {"num_executors": "x"}})


def test_an_option_holding_a_secret_moves_to_its_conf_key_and_the_others_stay():
    from airflow_provider_zeta.core.submit_options import carries_url_credentials, secret_options_into_conf

    assert carries_url_credentials("https://ci:pw@nexus/maven") and carries_url_credentials("a.jar,s3a://k:s@b/x.jar")
    assert not carries_url_credentials("https://nexus/maven") and not carries_url_credentials("https://ci@nexus/maven")
    arguments = {"conf": {"spark.a": "1"}, "repositories": "https://ci:pw@nexus/maven", "packages": "org:lib:1", "name": "n"}
    moved = secret_options_into_conf(arguments, carries_url_credentials, "t")
    assert moved == {"conf": {"spark.a": "1", "spark.jars.repositories": "https://ci:pw@nexus/maven"}, "packages": "org:lib:1", "name": "n"}
    assert secret_options_into_conf({"conf": {}, "packages": "org:lib:1"}, carries_url_credentials, "t") == {
        "conf": {},
        "packages": "org:lib:1",
    }
    with pytest.raises(ValueError, match=r"spark\.jars'"):
        secret_options_into_conf({"conf": {"spark.jars": "x.jar"}, "jars": "https://u:p@h/y.jar"}, carries_url_credentials, "t")
