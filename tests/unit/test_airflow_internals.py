"""The non-public Airflow members the provider uses keep the shape it relies on.

``airflow_provider_zeta/airflow_internals.py`` is the only place that reaches them, one function
each. Every test here checks one of them against the installed Airflow (the one ``constraints.txt``
pins): where the adapter calls the member, the call it makes is recorded and bound to the real
signature, so a renamed, removed or newly required parameter fails; attributes are looked up on the
real classes; and where it is cheap the member is really called. A failure names the adapter
function to change before the Airflow pin (and ``setup.py``'s cap) moves.
"""

from __future__ import annotations

import ast
import datetime as dt
import inspect
import typing
from pathlib import Path

import pytest

from airflow_provider_zeta import airflow_internals as internals

PACKAGE = Path(internals.__file__).parent


def _recorded_call(monkeypatch, owner: object, name: str, call: typing.Callable[[], object]) -> inspect.BoundArguments:
    """The arguments ``call`` (an adapter) passes to ``owner.<name>``, bound to the real member's signature."""
    real = getattr(owner, name)
    assert callable(real), f"{owner!r}.{name} is not callable any more"
    calls: list[tuple[tuple, dict]] = []
    with monkeypatch.context() as patch:
        patch.setattr(owner, name, lambda *args, **kwargs: calls.append((args, kwargs)))
        call()
    assert len(calls) == 1
    args, kwargs = calls[0]
    try:
        return inspect.signature(real).bind(*args, **kwargs)
    except TypeError as error:
        pytest.fail(f"{owner!r}.{name}{inspect.signature(real)} no longer takes {args} {kwargs}: {error}")


# ---------------------------------------------------------------------------- Task SDK


def test_xcom_get_calls_get_one_as_it_is_declared(monkeypatch):
    from airflow.sdk.execution_time.xcom import XCom

    bound = _recorded_call(
        monkeypatch, XCom, "get_one", lambda: internals.xcom_get(key="k", dag_id="d", task_id="t", run_id="r", map_index=-1)
    )
    assert dict(bound.arguments) == {"key": "k", "dag_id": "d", "task_id": "t", "run_id": "r", "map_index": -1}


def test_xcom_set_calls_set_as_it_is_declared(monkeypatch):
    from airflow.sdk.execution_time.xcom import XCom

    bound = _recorded_call(
        monkeypatch,
        XCom,
        "set",
        lambda: internals.xcom_set(key="k", value={"a": 1}, dag_id="d", task_id="t", run_id="r", map_index=2),
    )
    assert bound.arguments["value"] == {"a": 1} and bound.arguments["map_index"] == 2


def test_run_task_states_calls_get_task_states_as_it_is_declared(monkeypatch):
    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

    bound = _recorded_call(
        monkeypatch,
        RuntimeTaskInstance,
        "get_task_states",
        lambda: internals.run_task_states(dag_id="d", task_ids=["a", "b"], run_ids=["r"]),
    )
    assert dict(bound.arguments) == {"dag_id": "d", "task_ids": ["a", "b"], "run_ids": ["r"]}
    # Callers read {run id: {task id: state}} from it.
    assert typing.get_type_hints(RuntimeTaskInstance.get_task_states)["return"] == dict[str, typing.Any]


def test_fetch_dag_run_calls_the_sdk_fetch_and_its_run_carries_clear_number(monkeypatch):
    from airflow.sdk.execution_time import comms

    bound = _recorded_call(monkeypatch, comms, "_fetch_dag_run", lambda: internals.fetch_dag_run(dag_id="d", run_id="r"))
    assert dict(bound.arguments) == {"dag_id": "d", "run_id": "r"}
    run_model = typing.get_type_hints(comms._fetch_dag_run)["return"]
    # operators/sweep.py reads the publish incarnation from it.
    assert "clear_number" in run_model.model_fields


def test_deadlock_imminent_error_is_the_sdks_base_exception():
    from airflow.sdk.execution_time import comms

    error = internals.deadlock_imminent_error()
    assert error is comms.DeadlockImminentError
    # triggers/driver.py catches it next to Exception because it is not one.
    assert issubclass(error, BaseException)


def test_masker_redact_replaces_a_secret_the_masker_was_given():
    from airflow.sdk.log import mask_secret

    secret = "zeta-internals-probe-8c41f"
    mask_secret(secret)
    assert internals.masker_redact(f"jdbc:postgresql://db/x?password={secret}") == "jdbc:postgresql://db/x?password=***"


def test_masker_hides_key_follows_airflows_sensitive_names():
    assert internals.masker_hides_key("password") is True
    assert internals.masker_hides_key("spark.executor.memory") is False


def test_fernet_seals_and_unseals(fernet_key):
    sealer = internals.fernet()
    assert sealer.is_encrypted
    token = sealer.encrypt(b'["s3cr3t"]')
    assert token != b'["s3cr3t"]' and internals.fernet().decrypt(token) == b'["s3cr3t"]'


def test_never_expire_is_public_and_a_duration():
    import airflow.sdk

    # task_state.set_kept passes it as the task state store's retention.
    assert "NEVER_EXPIRE" in airflow.sdk.__all__
    assert isinstance(airflow.sdk.NEVER_EXPIRE, dt.timedelta)


# ---------------------------------------------------------------------------- configuration and the API server


def test_airflow_config_reads_with_a_fallback():
    conf = internals.airflow_config()
    assert isinstance(conf.get("zeta_internals_probe", "missing", fallback="x"), str)
    assert conf.get("zeta_internals_probe", "missing", fallback="x") == "x"
    assert conf.getboolean("zeta_internals_probe", "missing", fallback=True) is True


def test_lazy_load_providers_is_airflows_setting():
    from airflow import settings

    assert isinstance(settings.LAZY_LOAD_PROVIDERS, bool)
    assert internals.lazy_load_providers() is settings.LAZY_LOAD_PROVIDERS


@pytest.mark.parametrize(
    ("model", "columns"),
    [
        (internals.dag_run_model, ["id", "dag_id", "run_id", "logical_date", "run_after", "start_date", "end_date"]),
        (internals.task_instance_model, ["dag_id", "run_id", "task_id", "map_index", "operator", "state", "try_number"]),
        (internals.task_state_store_model, ["dag_id", "run_id", "task_id", "map_index", "key", "value"]),
        (internals.dag_model, ["dag_id", "is_paused", "is_stale"]),
        (internals.xcom_model, ["dag_id", "run_id", "task_id", "map_index", "key", "value"]),
    ],
    ids=["DagRun", "TaskInstance", "TaskStateStoreModel", "DagModel", "XComModel"],
)
def test_the_models_have_the_columns_the_plugin_queries(model, columns):
    from sqlalchemy import select

    cls = model()
    table = cls.__table__
    for column in columns:
        assert column in table.columns, f"{cls.__name__} has no column {column!r} (plugins/api.py selects it)"
    # The plugin's queries build on them: a SELECT of those columns compiles.
    sql = str(select(*(getattr(cls, column) for column in columns)))
    assert all(f"{table.name}.{column}" in sql for column in columns)


def test_dag_run_state_column_is_the_runs_state_column():
    from sqlalchemy import select

    column = internals.dag_run_state_column()
    assert "dag_run.state" in str(select(column))
    assert column.in_(["running"]) is not None


def test_dag_team_names_calls_the_team_mapping_as_it_is_declared(monkeypatch):
    from airflow.models.dag import DagModel

    session = object()
    bound = _recorded_call(
        monkeypatch, DagModel, "get_dag_id_to_team_name_mapping", lambda: internals.dag_team_names(["a", "b"], session)
    )
    assert bound.arguments["dag_ids"] == ["a", "b"] and bound.arguments["session"] is session


def test_auth_manager_calls_get_auth_manager_as_it_is_declared(monkeypatch):
    import airflow.api_fastapi.app as app

    _recorded_call(monkeypatch, app, "get_auth_manager", internals.auth_manager)
    # plugins/api.py calls these on it.
    from airflow.api_fastapi.auth.managers.base_auth_manager import BaseAuthManager

    assert "method" in inspect.signature(BaseAuthManager.get_authorized_dag_ids).parameters
    assert list(inspect.signature(BaseAuthManager.batch_is_authorized_dag).parameters)[:3] == ["self", "requests", "user"]


@pytest.mark.parametrize("dependency", [internals.session_dependency, internals.user_dependency])
def test_the_route_dependencies_are_fastapi_annotations(dependency):
    from fastapi import params

    annotation = dependency()
    assert typing.get_origin(annotation) is typing.Annotated
    assert any(isinstance(extra, params.Depends) for extra in annotation.__metadata__)


def test_dag_access_dependency_builds_airflows_dag_access_check():
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity

    check = internals.dag_access_dependency("GET", DagAccessEntity.RUN)
    assert callable(check)
    # FastAPI resolves the request and the user from its parameters.
    assert "request" in inspect.signature(check).parameters


# ---------------------------------------------------------------------------- the Spark provider


@pytest.fixture
def spark_hook(monkeypatch):
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    monkeypatch.setenv(
        "AIRFLOW_CONN_ZETA_INTERNALS_SPARK", '{"conn_type": "spark", "host": "local[2]", "extra": {"deploy-mode": "client"}}'
    )
    return SparkSubmitHook(conn_id="zeta_internals_spark", name="probe")


def test_spark_submit_arguments_builds_the_command_without_running_it(spark_hook):
    command = internals.spark_submit_arguments(spark_hook, "/jobs/app.py")
    assert command[0].endswith("spark-submit") and command[-1] == "/jobs/app.py"
    assert command[command.index("--master") + 1] == "local[2]" and "--name" in command


def test_spark_deploy_mode_is_the_resolved_connections(spark_hook):
    assert internals.spark_deploy_mode(spark_hook) == "client"


# ---------------------------------------------------------------------------- nothing else reaches them


#: Modules (and, after the dot, members) that only airflow_internals.py may use.
PRIVATE_MODULES = (
    "airflow.sdk.execution_time",
    "airflow.sdk._shared",
    "airflow.sdk.crypto",
    "airflow.models",
    "airflow.configuration",
    "airflow.settings",
    "airflow.api_fastapi.app",
    "airflow.api_fastapi.common",
    "airflow.api_fastapi.core_api",
)
PRIVATE_ATTRIBUTES = ("_build_spark_submit_command", "_connection", "_state", "_fetch_dag_run")


def _private_uses(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Attribute) and node.attr in PRIVATE_ATTRIBUTES:
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: .{node.attr}")
        for name in names:
            if any(name == module or name.startswith(module + ".") for module in PRIVATE_MODULES):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {name}")
    return found


def test_only_the_adapter_module_reaches_airflow_internals():
    uses = [use for path in sorted(PACKAGE.rglob("*.py")) if path.name != "airflow_internals.py" for use in _private_uses(path)]
    assert uses == [], "call the adapter in airflow_internals.py instead:\n" + "\n".join(uses)
