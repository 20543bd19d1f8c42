"""The provider's Airflow plugin: the monitoring page, its JSON API and the deploy task's extra link.

* ``monitor.ZetaMonitorPlugin``: the plugin class (registered through ``get_provider_info`` and the
  ``airflow.plugins`` entry point, see ``entrypoint.py``);
* ``api.build_app``: the FastAPI app mounted on the API server under ``/zeta``;
* ``page``: the HTML page, rendered from the API's JSON;
* ``links.ZetaDriverLink``: "Spark driver" extra link of every ``ZetaSparkJobOperator`` task.
"""
