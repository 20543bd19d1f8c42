"""The "Spark driver" extra link of ``ZetaSparkJobOperator`` tasks.

Airflow 3 resolves an extra link in the task process (when a try ends or defers) and keeps the URL
as an XCom, which the UI reads. The driver's Spark UI address is only known once the driver runs,
and a retry gets a new driver, so the link does not point at the Spark UI itself: it points at the
plugin's ``/zeta/driver`` endpoint for this task, which looks at the task's current attempt when it
is opened and redirects to the application on the Spark History Server when
``[zeta] spark_history_server_url`` is set (it outlives the driver), else to the live Spark UI
while the driver runs on the host its launcher recorded (or an allow-listed one), else to the
task's log in the Airflow UI, which holds the driver's output masked by Airflow's secrets masker.
The endpoint checks the user's access to the DAG's task logs.
"""

from __future__ import annotations

from urllib.parse import urlencode

from airflow.sdk import BaseOperatorLink

URL_PREFIX = "/zeta"


def driver_link_path(dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> str:
    """Path (below the API server's base URL) of the driver endpoint of one deploy task."""
    query = urlencode({"dag_id": dag_id, "run_id": run_id, "task_id": task_id, "map_index": int(map_index)})
    return f"{URL_PREFIX}/driver?{query}"


def task_log_path(base: str, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> str:
    """The task instance's page in the Airflow UI, which opens on its Logs tab."""
    from urllib.parse import quote

    path = f"{base}/dags/{quote(dag_id, safe='')}/runs/{quote(run_id, safe='')}/tasks/{quote(task_id, safe='')}"
    return path + (f"/mapped/{int(map_index)}" if int(map_index) >= 0 else "")


def _base_url() -> str:
    try:
        from airflow_provider_zeta.airflow_internals import airflow_config

        return (airflow_config().get("api", "base_url", fallback="") or "").rstrip("/")
    except Exception:
        return ""


class ZetaDriverLink(BaseOperatorLink):
    """Link from a deploy task to its driver's Spark UI, or to its driver log."""

    name = "Spark driver"

    def get_link(self, operator, *, ti_key) -> str:
        """The plugin's ``/driver`` endpoint for this task instance."""
        map_index = getattr(ti_key, "map_index", -1)
        map_index = -1 if map_index is None else map_index
        return _base_url() + driver_link_path(ti_key.dag_id, ti_key.run_id, ti_key.task_id, map_index)
