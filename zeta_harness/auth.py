"""An auth manager for tests: Airflow's SimpleAuthManager plus per-user DAG allow-lists.

Airflow's ``SimpleAuthManager`` (what the test harness runs) grants by role only: a ``viewer`` may
read every DAG. It can narrow access per *team* in multi-team mode (``[core] multi_team``, users
written ``name:role:team``, each DAG bundle owned by a team), but not per DAG, and a team's deferred
tasks then need a triggerer started for that team. Per-DAG access is what the FAB auth manager
(``apache-airflow-providers-fab``: ``DAG:<dag_id>`` permissions on a role) and the Keycloak auth
manager (a resource per DAG) offer.

The plugin never asks which auth manager runs: it calls the auth manager interface
(``get_authorized_dag_ids``, ``is_authorized_dag`` through ``requires_access_dag``), exactly as
Airflow's own endpoints do. This subclass implements that interface with per-DAG allow-lists, so a
test can check that a user who may read only some DAGs sees nothing of the others, against the real
API server, login and JWT handling of ``SimpleAuthManager``.

Configure with ``[core] auth_manager = zeta_harness.auth.DagScopedSimpleAuthManager``
and ``ZETA_TEST_DAG_SCOPES='{"alice": ["dag_a"]}'``; users not named there keep their role's access.

Access kinds are granted separately too, as FAB's per-resource permissions do ("DAG Runs" and "Task
Logs" are distinct): ``ZETA_TEST_DAG_ENTITIES='{"dave": ["RUN"]}'`` lets ``dave`` read DAGs and
their runs (``DagAccessEntity.RUN``) but no other access kind of a DAG — task logs, task
instances, XComs, ... — so "may read runs but not task logs" can be tested over HTTP.
"""

from __future__ import annotations

import json
import os

from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager

SCOPES_ENV = "ZETA_TEST_DAG_SCOPES"
ENTITIES_ENV = "ZETA_TEST_DAG_ENTITIES"


def dag_scopes() -> dict[str, set[str]]:
    raw = os.environ.get(SCOPES_ENV, "")
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except ValueError:
        raise ValueError(f"{SCOPES_ENV} must be JSON like '{{\"alice\": [\"dag_a\"]}}', got {raw!r}") from None
    return {str(user): {str(dag) for dag in dags} for user, dags in data.items()}


def dag_entities() -> dict[str, set[str]]:
    """User -> the ``DagAccessEntity`` names (``RUN``, ``TASK_LOGS``, ...) granted on DAGs."""
    raw = os.environ.get(ENTITIES_ENV, "")
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except ValueError:
        raise ValueError(f"{ENTITIES_ENV} must be JSON like '{{\"dave\": [\"RUN\"]}}', got {raw!r}") from None
    return {str(user): {str(name).upper() for name in names} for user, names in data.items()}


class DagScopedSimpleAuthManager(SimpleAuthManager):
    def is_authorized_dag(self, *, method, user, access_entity=None, details=None) -> bool:
        allowed = super().is_authorized_dag(method=method, user=user, access_entity=access_entity, details=details)
        if not allowed:
            return False
        entities = dag_entities().get(user.get_name())
        if entities is not None and access_entity is not None and access_entity.name not in entities:
            return False
        scope = dag_scopes().get(user.get_name())
        if scope is None or details is None or details.id is None:
            return True
        return details.id in scope
