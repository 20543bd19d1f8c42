"""The one module that reaches Airflow members outside its public interface.

Airflow's public interface for providers is the ``airflow.sdk`` namespace (its ``__all__``), the
trigger base classes (``airflow.triggers.base``), ``AirflowPlugin``, the auth manager models and
the providers' documented hooks and operators. A few things the provider needs have no public form
in the Airflow release it is tested with (``constraints.txt``):

* from a trigger, which has no task context: an XCom read and write and the task states of a run;
* the current run's ``clear_number`` (the publish incarnation), which the task context lacks;
* the exception the Task SDK raises when a signal handler interrupts a request to the supervisor;
* the secrets masker applied to a text, and its sensitive-name test (only ``mask_secret`` is public);
* the Fernet key a worker and the triggerer share;
* in the API server (the monitoring plugin): the metadata ORM models, the team of each DAG, the
  auth manager and the FastAPI dependencies Airflow's own routes use for the session, the user and
  DAG access; ``[core] lazy_discover_providers`` as Airflow has resolved it; Airflow's
  configuration with the providers' defaults;
* the Spark provider's command builder of ``SparkSubmitHook`` and the connection it resolved.

Each of them is reached here only, by one function, and ``tests/unit/test_airflow_internals.py``
checks each one's shape (signature, attributes, a real call where it is cheap) against the
installed Airflow: an upgrade that changes one fails there, naming the function to adapt. That is
also why ``setup.py`` admits only the Airflow minor release the suite runs on.

Every import is inside its function: this module is imported by task workers, the triggerer and
the API server alike, and each needs only its own part (the API server modules are heavy, and the
Task SDK's execution-time modules have no business in the API server).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from airflow.api_fastapi.auth.managers.base_auth_manager import ResourceMethod
    from airflow.models.dag import DagModel
    from airflow.models.dagrun import DagRun
    from airflow.models.task_state_store import TaskStateStoreModel
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel


class AirflowConfig(Protocol):
    """What the provider reads of Airflow's configuration."""

    def get(self, section: str, key: str, **kwargs: Any) -> Any:
        """The value of ``key`` in ``section`` (``fallback=`` when it is unset)."""

    def getboolean(self, section: str, key: str, **kwargs: Any) -> bool:
        """The value of ``key`` in ``section`` as a boolean."""


# ---------------------------------------------------------------------------- Task SDK (workers, triggerer)


def xcom_get(*, key: str, dag_id: str, task_id: str, run_id: str, map_index: int) -> Any:
    """An XCom value of any task instance (``None`` when there is none), through the execution API."""
    from airflow.sdk.execution_time.xcom import XCom

    return XCom.get_one(key=key, dag_id=dag_id, task_id=task_id, run_id=run_id, map_index=map_index)


def xcom_set(*, key: str, value: Any, dag_id: str, task_id: str, run_id: str, map_index: int) -> None:
    """Write an XCom value of any task instance, through the execution API (a trigger's write)."""
    from airflow.sdk.execution_time.xcom import XCom

    XCom.set(key=key, value=value, dag_id=dag_id, task_id=task_id, run_id=run_id, map_index=map_index)


def run_task_states(*, dag_id: str, task_ids: list[str], run_ids: list[str]) -> dict[str, Any]:
    """run id -> {task id (``<task>_<map index>`` for a mapped instance) -> state or None}, through the
    execution API; usable where there is no task instance at hand (a trigger)."""
    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

    return RuntimeTaskInstance.get_task_states(dag_id=dag_id, task_ids=task_ids, run_ids=run_ids)


def fetch_dag_run(*, dag_id: str, run_id: str) -> Any:
    """The run as the execution API returns it (it carries ``clear_number``)."""
    from airflow.sdk.execution_time.comms import _fetch_dag_run

    return _fetch_dag_run(dag_id=dag_id, run_id=run_id)


def deadlock_imminent_error() -> type[BaseException]:
    """The exception (a ``BaseException``) the Task SDK raises when a request to the supervisor is
    made from a signal handler that interrupted another request of the same process."""
    from airflow.sdk.execution_time.comms import DeadlockImminentError

    return DeadlockImminentError


def masker_redact(text: str) -> Any:
    """``text`` with every secret this process's masker knows replaced."""
    from airflow.sdk._shared import secrets_masker

    return secrets_masker.redact(text)


def masker_hides_key(name: str) -> bool:
    """Whether Airflow's masker treats a value named ``name`` as sensitive (``[core] sensitive_var_conn_names``)."""
    from airflow.sdk._shared import secrets_masker

    return bool(secrets_masker.should_hide_value_for_key(name))


def fernet() -> Any:
    """Airflow's Fernet (``[core] fernet_key``), or its null form when no key is configured."""
    from airflow.sdk.crypto import get_fernet

    return get_fernet()


# ---------------------------------------------------------------------------- Airflow core (configuration, API server)


def airflow_config() -> AirflowConfig:
    """Airflow's configuration, with the defaults the installed providers declare (``[zeta]`` included)."""
    from airflow.configuration import conf

    return conf


def lazy_load_providers() -> bool:
    """``[core] lazy_discover_providers`` as this Airflow process resolved it."""
    from airflow import settings

    return bool(settings.LAZY_LOAD_PROVIDERS)


def dag_run_model() -> type[DagRun]:
    """The ORM model of a DAG run (the plugin's queries; API server only)."""
    from airflow.models.dagrun import DagRun

    return DagRun


def dag_run_state_column() -> Any:
    """The column of a run's state (the model's ``state`` is a Python property over it)."""
    from airflow.models.dagrun import DagRun

    return DagRun._state


def task_instance_model() -> type[TaskInstance]:
    """The ORM model of a task instance (the plugin's queries; API server only)."""
    from airflow.models.taskinstance import TaskInstance

    return TaskInstance


def xcom_model() -> type[XComModel]:
    """The ORM model of an XCom row (the plugin's audit results and row counts; API server only)."""
    from airflow.models.xcom import XComModel

    return XComModel


def task_state_store_model() -> type[TaskStateStoreModel]:
    """The ORM model of the task state store (the plugin's queries; API server only)."""
    from airflow.models.task_state_store import TaskStateStoreModel

    return TaskStateStoreModel


def dag_model() -> type[DagModel]:
    """The ORM model of a DAG's row (whether the cleanup DAG is deployed and paused; API server only)."""
    from airflow.models.dag import DagModel

    return DagModel


def dag_team_names(dag_ids: list[str], session: Any) -> dict[str, str | None]:
    """DAG id -> the team that owns it (None without multi-team), for the auth manager's ``DagDetails``."""
    from airflow.models.dag import DagModel

    return DagModel.get_dag_id_to_team_name_mapping(dag_ids, session=session)


def auth_manager() -> Any:
    """The API server's configured auth manager (a ``BaseAuthManager``)."""
    from airflow.api_fastapi.app import get_auth_manager

    return get_auth_manager()


def session_dependency() -> Any:
    """The annotation of a route parameter that receives the API server's metadata DB session."""
    from airflow.api_fastapi.common.db.common import SessionDep

    return SessionDep


def user_dependency() -> Any:
    """The annotation of a route parameter that receives the authenticated user (401 without one)."""
    from airflow.api_fastapi.core_api.security import GetUserDep

    return GetUserDep


def dag_access_dependency(method: ResourceMethod, access_entity: Any) -> Any:
    """The dependency Airflow's own routes use to refuse (403) a user without ``method`` access to
    ``access_entity`` of the request's ``dag_id``."""
    from airflow.api_fastapi.core_api.security import requires_access_dag

    return requires_access_dag(method, access_entity)


# ---------------------------------------------------------------------------- the Spark provider


def spark_submit_arguments(hook: Any, application: str) -> list[str]:
    """The spark-submit command ``SparkSubmitHook`` would run for ``application``, without running
    it (``submit()`` runs spark-submit as a child and blocks for the driver's whole life)."""
    return hook._build_spark_submit_command(application)


def spark_deploy_mode(hook: Any) -> str | None:
    """The deploy mode of the Spark connection ``SparkSubmitHook`` resolved (None when not set)."""
    return hook._connection.get("deploy_mode")
