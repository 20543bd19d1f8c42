"""Provider metadata for Airflow's ``ProvidersManager`` (``apache_airflow_provider`` entry point).

Kept free of Airflow imports: Airflow calls it while it discovers providers, and the ``[zeta]``
config section below is what ``airflow config list`` shows with its defaults and descriptions.
"""

from __future__ import annotations

from airflow_provider_zeta import __version__ as VERSION  # the one version source (package __init__)

PACKAGE_NAME = "airflow-provider-zeta"

#: The ``[zeta]`` config section. Durations are seconds, or ``str(timedelta)`` text such as
#: ``0:10:00`` (parsed by ``core/durations.py``). Airflow expands ``{AIRFLOW_HOME}`` in
#: defaults, as it does for its own options.
CONFIG_OPTIONS: dict[str, dict[str, str]] = {
    "state_root": {
        "description": (
            "Root of the provider's own data: driver ledgers, cancel markers, per-attempt staging "
            "output, tombstones and cleanup records. A local path or an ObjectStoragePath URL "
            "(file://, s3://conn_id@bucket/prefix, gs://...). Every worker, triggerer, API server "
            "and driver host must see the same root (shared storage): a deploy that finds a launch "
            "it cannot see fails naming this option. Cleanup only ever deletes below this "
            "root and inside tombstones the provider made.\n"
        ),
        "type": "string",
        "example": "s3://aws_default@my-bucket/zeta",
        "default": "{AIRFLOW_HOME}/zeta",
    },
    "cleanup_retention": {
        "description": (
            "Default retention window: how long a finished run's staging data and replaced "
            "partitions are kept as tombstones before the delayed cleanup deletes them. Seconds "
            "(86400) or a duration as Python prints a timedelta (1 day, 0:00:00).\n"
        ),
        "type": "string",
        "example": "86400",
        "default": "3600",
    },
    "driver_heartbeat_interval": {
        "description": (
            "Time between two heartbeats a Spark driver writes to its ledger: seconds (10) or "
            "H:MM:SS (0:00:10).\n"
        ),
        "type": "string",
        "example": "10",
        "default": "5",
    },
    "driver_lost_after": {
        "description": (
            "Seconds without a heartbeat *change* seen by an observer (by its own clock) after "
            "which the driver counts as lost (never shown as running). A driver that cannot renew "
            "its heartbeat within 0.7 x this stops itself; a lost driver is redeployed only after "
            "1.25 x this of silence. Keep it several times driver_heartbeat_interval. Seconds "
            "(120) or H:MM:SS (0:02:00).\n"
        ),
        "type": "string",
        "example": "120",
        "default": "60",
    },
    "poll_interval": {
        "description": (
            "Longest time in seconds between two full reads of a ledger or of ready-to-close progress "
            "by the provider's triggers (each backs off up to this value). On a local state root they "
            "also stat the ledger files every 0.5 s and read at once on a change. Seconds (10) or H:MM:SS.\n"
        ),
        "type": "string",
        "example": "10",
        "default": "5",
    },
    "min_deferral": {
        "description": (
            "Least time a trigger of the provider keeps its task deferred before it wakes it, so that "
            "Airflow's scheduler has processed the deferring worker's exit first; a wake-up before "
            "that turns into a spurious retry of the task (harmless to the job, but it uses up a "
            "retry). A trigger that ends its task instead (a succeeded job's report, the ready-to-close "
            "sensor's ready set) does not wait. Raise it on a slow scheduler; lower it only where the scheduler loop is quick "
            "(a test deployment). Seconds (12) or H:MM:SS, more than 0 and at most 300.\n"
        ),
        "type": "string",
        "example": "12",
        "default": "12",
    },
    "default_deferrable": {
        "description": (
            "Default of ZetaSparkJobOperator's deferrable argument. Set it to False under the "
            "KubernetesExecutor: a deferred task's pod exits and kills the driver inside it, so the "
            "task must keep its pod while the driver runs. (Airflow's [operators] "
            "default_deferrable defaults to false and would turn every deploy task blocking.)\n"
        ),
        "type": "boolean",
        "example": "False",
        "default": "True",
    },
    "spark_history_server_url": {
        "description": (
            "Base URL of a Spark History Server (e.g. http://history:18080). When set, the deploy "
            "task's \"Spark driver\" link opens the application's page there (it outlives the "
            "driver), and the monitoring plugin may redirect to it. Empty: no history server.\n"
        ),
        "type": "string",
        "example": "http://spark-history.internal:18080",
        "default": "",
    },
    "spark_ui_allowed_hosts": {
        "description": (
            "Comma-separated host names or addresses the monitoring plugin may redirect to for a "
            "running driver's Spark UI, besides the driver's host recorded by the launcher (and the "
            "addresses that name resolves to). The Spark UI address is written by the driver, so "
            "any other host is refused and the driver link opens the task's log instead. Empty: only the "
            "driver's own host.\n"
        ),
        "type": "string",
        "example": "spark-driver-1.internal,10.0.0.12",
        "default": "",
    },
}


#: The integration every module below belongs to (official providers group their modules by integration).
INTEGRATION = "Zeta PySpark pipelines"
MODULE_PREFIX = "airflow_provider_zeta"


def _modules(integration_kind: str, *names: str) -> list[dict]:
    return [{"integration-name": INTEGRATION, "python-modules": [f"{MODULE_PREFIX}.{integration_kind}.{n}" for n in names]}]


def get_provider_info() -> dict:
    """What ``ProvidersManager`` and ``airflow providers get airflow-provider-zeta`` read (it is
    validated against Airflow's ``provider_info.schema.json``; ``tests/unit/test_provider_info.py``
    checks every module named here exists and every operator, sensor, trigger and hook module is named)."""
    return {
        "package-name": PACKAGE_NAME,
        "name": "Zeta",
        "description": (
            "Failover-safe multi-source PySpark pipelines: idempotent deploy, durable "
            "ready-to-close, exactly-once partition publish and delayed cleanup.\n"
        ),
        "versions": [VERSION],
        "integrations": [
            {
                "integration-name": INTEGRATION,
                "external-doc-url": "https://spark.apache.org/docs/latest/api/python/",
                "how-to-guide": [
                    "docs/operators/zeta_spark_job.md",
                    "docs/operators/ready_to_close.md",
                    "docs/operators/completed_point.md",
                    "docs/operators/delayed_cleanup.md",
                    "docs/operators/sweep.md",
                    "docs/operators/checkpoint_freshness.md",
                ],
                "tags": ["apache", "spark"],
            }
        ],
        "operators": _modules("operators", "spark_job", "completed_point", "cleanup", "sweep"),
        "sensors": _modules("sensors", "ready_to_close", "checkpoint_freshness"),
        "triggers": _modules(
            "triggers", "driver", "driver_output", "ready_to_close", "checkpoint_freshness", "file_watch", "cleanup_wait"
        ),
        "hooks": _modules("hooks", "spark_driver"),
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
