"""A deployment's identity includes its metadata database, not only its state root.

Two Airflow deployments sharing a state root and an output table (a migration, staging reading
prod's configuration): deployment B asks its own metadata database about a run of deployment A,
hears that it does not exist, and must not take A's live partition for a deleted run's
(``owner_run_deleted``) and tombstone it. The completed point's deployment identity is the state
root's identity plus an id kept in the metadata database (the Airflow Variable
``zeta_deployment_id``, created once; ``AIRFLOW_VAR_ZETA_DEPLOYMENT_ID`` stands in for it here, as
Airflow reads environment variables first).
"""

from __future__ import annotations

import json

import pytest

from airflow_provider_zeta.core.publish import COMMIT_MARKER, DEFAULT_PARTITION
from tests.unit.test_partition_spec import _publish


def test_another_deployment_sharing_the_state_root_never_tombstones_a_live_partition(tmp_path, monkeypatch):
    from airflow.sdk.exceptions import AirflowFailException

    monkeypatch.setenv("AIRFLOW_VAR_ZETA_DEPLOYMENT_ID", "deployment-a")
    _publish(tmp_path, monkeypatch, "daily", "manual__a", 10, DEFAULT_PARTITION, "d1")
    # Deployment B: same state root, same table, its own metadata database (which has no run manual__a).
    monkeypatch.setenv("AIRFLOW_VAR_ZETA_DEPLOYMENT_ID", "deployment-b")
    with pytest.raises(AirflowFailException, match="partition_of_another_owner"):
        _publish(tmp_path, monkeypatch, "daily", "backfill__b", 10, DEFAULT_PARTITION, "d2", deleted_runs={"manual__a"})
    table = tmp_path / "table"
    assert sorted(p.name for p in (table / "ds=2026-07-01/source=eu").iterdir()) == ["d1-part-0.json"]
    assert not (table / "_zeta_tombstones").exists() or not any((table / "_zeta_tombstones").rglob("*.json"))
    # Deployment A itself, once its run is deleted, still replaces it.
    monkeypatch.setenv("AIRFLOW_VAR_ZETA_DEPLOYMENT_ID", "deployment-a")
    replaced = _publish(tmp_path, monkeypatch, "daily", "backfill__b", 10, DEFAULT_PARTITION, "d2", deleted_runs={"manual__a"})
    assert replaced["rule"] == "owner_run_deleted"
    marker = json.loads((table / "ds=2026-07-01" / COMMIT_MARKER).read_text())
    assert marker["run_id"] == "backfill__b"


def test_without_a_readable_deployment_id_no_owner_is_ever_taken_for_deleted(tmp_path, monkeypatch):
    from airflow.sdk.exceptions import AirflowFailException

    from airflow_provider_zeta.operators import sweep

    monkeypatch.setattr(sweep, "metadata_db_identity", lambda: None)
    _publish(tmp_path, monkeypatch, "daily", "manual__a", 10, DEFAULT_PARTITION, "d1")
    with pytest.raises(AirflowFailException, match="partition_of_another_owner"):
        _publish(tmp_path, monkeypatch, "daily", "backfill__b", 10, DEFAULT_PARTITION, "d2", deleted_runs={"manual__a"})
