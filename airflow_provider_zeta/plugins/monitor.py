"""``ZetaMonitorPlugin``: what the provider adds to Airflow's API server and UI.

* ``fastapi_apps``: the read-only monitoring API and page under ``/zeta`` (``api.py``);
* ``external_views``: the page in the Airflow navigation ("Browse" → "Zeta pipelines") and as a
  "Zeta" tab of every DAG run (scoped to that run);
* ``operator_extra_links``: the "Spark driver" link of ``ZetaSparkJobOperator`` tasks.

Why external views and not a React app: the page is server-rendered HTML from the same JSON the API
serves, with no JavaScript bundle to build, version and ship inside the wheel (the project has no
front-end toolchain), and it is served by the API server itself on the same origin, so the Airflow
session cookie authenticates it inside the UI's iframe exactly as it does for the JSON endpoints.
A React app plugin would need a separately built UMD bundle against the UI's React version and
adds nothing this page needs.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from airflow_provider_zeta.plugins.api import LazyApp
from airflow_provider_zeta.plugins.links import URL_PREFIX, ZetaDriverLink

PLUGIN_NAME = "zeta"


class ZetaMonitorPlugin(AirflowPlugin):
    """The provider's plugin: the monitoring API and page, their places in the UI, and the driver link."""

    name = PLUGIN_NAME
    fastapi_apps = [{"app": LazyApp(), "url_prefix": URL_PREFIX, "name": "Zeta pipelines"}]
    external_views = [
        {
            "name": "Zeta pipelines",
            "href": f"{URL_PREFIX}/ui",
            "destination": "nav",
            "category": "browse",
            "url_route": "zeta-pipelines",
        },
        {
            "name": "Zeta",
            "href": f"{URL_PREFIX}/ui?dag_id={{DAG_ID}}&run_id={{RUN_ID}}",
            "destination": "dag_run",
            "url_route": "zeta-run",
        },
    ]
    operator_extra_links = [ZetaDriverLink()]
