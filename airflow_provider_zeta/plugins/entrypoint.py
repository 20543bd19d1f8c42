"""The ``airflow.plugins`` entry point of the provider's plugin.

The plugin is declared in ``get_provider_info()["plugins"]``, but Airflow loads plugins declared by
providers only when ``[core] lazy_discover_providers`` is False, and it is True by default. Airflow
always loads ``airflow.plugins`` entry points, so this one makes the plugin load by default; when
providers are discovered eagerly, Airflow loads it from the provider declaration instead, and this
entry point resolves to nothing (a non-plugin object, which Airflow skips silently) so that the
plugin is not registered twice (that would be reported as a plugin import error).
"""

from __future__ import annotations


def __getattr__(name: str):
    if name != "ZetaMonitorPlugin":
        raise AttributeError(name)
    from airflow_provider_zeta.airflow_internals import lazy_load_providers

    if not lazy_load_providers():
        return None  # Airflow loads it through the provider declaration
    from airflow_provider_zeta.plugins.monitor import ZetaMonitorPlugin

    return ZetaMonitorPlugin
