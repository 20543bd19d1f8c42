"""Provider metadata for Airflow's ``ProvidersManager`` (``apache_airflow_provider`` entry point).

Kept free of Airflow imports: Airflow calls it while it discovers providers, and the ``[zeta]``
config section below is what ``airflow config list`` shows with its defaults and descriptions.
"""

from __future__ import annotations

PACKAGE_NAME = "airflow-provider-zeta"
VERSION = "0.1.0"

#: The ``[zeta]`` config section. Durations are seconds. Airflow expands ``{AIRFLOW_HOME}`` in
#: defaults, as it does for its own options.
CONFIG_OPTIONS: dict[str, dict[str, str]] = {
    "state_root": {
        "description": (
            "Root of the provider's own data: driver ledgers, cancel markers, per-attempt staging "
            "output, tombstones and cleanup records. A local path or an ObjectStoragePath URL "
            "(file://, s3://conn_id@bucket/prefix, gs://...). Cleanup only ever deletes below this "
            "root and inside tombstones the provider made.\n"
        ),
        "type": "string",
        "example": "s3://aws_default@my-bucket/zeta",
        "default": "{AIRFLOW_HOME}/zeta",
    },
    "cleanup_retention": {
        "description": (
            "Default retention window in seconds: how long a finished run's staging data and "
            "replaced partitions are kept as tombstones before the delayed cleanup deletes them.\n"
        ),
        "type": "integer",
        "example": "86400",
        "default": "3600",
    },
    "driver_heartbeat_interval": {
        "description": "Seconds between two heartbeats a Spark driver writes to its ledger.\n",
        "type": "integer",
        "example": "10",
        "default": "5",
    },
    "driver_lost_after": {
        "description": (
            "Age in seconds of a driver's last heartbeat after which the driver counts as lost "
            "(never shown as running; its task may redeploy it as a new attempt). Keep it several "
            "times driver_heartbeat_interval.\n"
        ),
        "type": "integer",
        "example": "120",
        "default": "60",
    },
    "poll_interval": {
        "description": (
            "Seconds between two reads of a ledger or of ready-to-close progress by the provider's "
            "triggers. Each trigger backs off up to this value.\n"
        ),
        "type": "integer",
        "example": "10",
        "default": "5",
    },
}


def get_provider_info() -> dict:
    return {
        "package-name": PACKAGE_NAME,
        "name": "Zeta",
        "description": (
            "Failover-safe multi-source PySpark pipelines: idempotent deploy, durable "
            "ready-to-close, exactly-once partition publish and delayed cleanup.\n"
        ),
        "versions": [VERSION],
        "plugins": [{"name": "zeta", "plugin-class": "airflow_provider_zeta.plugins.monitor.ZetaMonitorPlugin"}],
        "extra-links": ["airflow_provider_zeta.plugins.links.ZetaDriverLink"],
        "config": {
            "zeta": {
                "description": "Settings of airflow-provider-zeta.\n",
                "options": {
                    name: {"version_added": "0.1.0", **option} for name, option in CONFIG_OPTIONS.items()
                },
            }
        },
    }
