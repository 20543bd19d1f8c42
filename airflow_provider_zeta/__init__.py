"""airflow-provider-zeta: failover-safe multi-source PySpark pipelines for Apache Airflow 3.3+.

The public operators are imported lazily: a Spark driver imports ``airflow_provider_zeta.runtime``
through this package, and the task supervisor gives it an environment in which ``import airflow``
fails (an unusable metadata DB URL). Nothing at this level may import Airflow eagerly.
"""

from __future__ import annotations

__version__ = "0.1.0"

# public name -> module that defines it; filled in as the operators land.
_LAZY_PUBLIC_NAMES: dict[str, str] = {
    "zeta_pipeline": "airflow_provider_zeta.pipeline",
    "ZetaSparkJobOperator": "airflow_provider_zeta.operators.spark_job",
    "ReadyToCloseSensor": "airflow_provider_zeta.sensors.ready_to_close",
    "CompletedPointOperator": "airflow_provider_zeta.operators.completed_point",
    "DelayedCleanupOperator": "airflow_provider_zeta.operators.cleanup",
    "ZetaSweepOperator": "airflow_provider_zeta.operators.sweep",
    "CarryOutCleanupsOperator": "airflow_provider_zeta.operators.cleanup",
    "CLEANUP_ASSET": "airflow_provider_zeta.operators.cleanup",
    "zeta_sweep_dag": "airflow_provider_zeta.maintenance",
    "zeta_cleanup_dag": "airflow_provider_zeta.maintenance",
    "CheckpointFreshnessSensor": "airflow_provider_zeta.sensors.checkpoint_freshness",
    # Write-audit-publish: the audits a completed point runs before it publishes.
    "rows_within": "airflow_provider_zeta.core.audits",
    "same_schema": "airflow_provider_zeta.core.audits",
    "not_null": "airflow_provider_zeta.core.audits",
    "unique_key": "airflow_provider_zeta.core.audits",
    "user_audit": "airflow_provider_zeta.core.audits",
    "SourceFacts": "airflow_provider_zeta.core.audits",
}

__all__ = ["__version__", *_LAZY_PUBLIC_NAMES]


def __getattr__(name: str):
    module_name = _LAZY_PUBLIC_NAMES.get(name)
    if module_name is None:
        raise AttributeError(f"module 'airflow_provider_zeta' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module_name), name)
