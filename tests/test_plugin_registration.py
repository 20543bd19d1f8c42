"""The provider's plugin is loaded by Airflow exactly once, with lazy and with eager provider discovery.

Airflow loads plugins declared in ``get_provider_info()["plugins"]`` only when
``[core] lazy_discover_providers`` is False (not the default); the ``airflow.plugins`` entry point
covers the default, and resolves to nothing in the other case (``plugins/entrypoint.py``).
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_provider_zeta.get_provider_info import get_provider_info

AIRFLOW = str(Path(sys.executable).with_name("airflow"))


def _resolve(dotted: str):
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def test_provider_info_names_a_plugin_and_an_extra_link_that_exist():
    """What Airflow imports from ``get_provider_info()`` by name: the plugin class is an
    ``AirflowPlugin`` of the declared name, each extra link a ``BaseOperatorLink`` (a typo in a dotted
    path would only show when Airflow loads providers eagerly)."""
    from airflow.plugins_manager import AirflowPlugin
    from airflow.sdk import BaseOperatorLink

    info = get_provider_info()
    (plugin,) = info["plugins"]
    plugin_class = _resolve(plugin["plugin-class"])
    assert issubclass(plugin_class, AirflowPlugin) and plugin_class.name == plugin["name"] == "zeta"
    assert info["extra-links"], "the deploy's link to its driver is not declared"
    for dotted in info["extra-links"]:
        link = _resolve(dotted)
        assert issubclass(link, BaseOperatorLink), dotted
        assert link in [type(known) for known in plugin_class.operator_extra_links], f"{dotted} is not the plugin's"


@pytest.mark.parametrize("lazy", ["True", "False"])
def test_airflow_loads_the_plugin_once(tmp_path, lazy):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        AIRFLOW_HOME=str(tmp_path), AIRFLOW__CORE__LOAD_EXAMPLES="False", AIRFLOW__CORE__LAZY_DISCOVER_PROVIDERS=lazy
    )
    out = subprocess.run([AIRFLOW, "plugins", "-o", "json"], env=env, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    plugins = json.loads(out.stdout[out.stdout.index("[") :])
    zeta = [p for p in plugins if p["name"] == "zeta"]
    assert len(zeta) == 1, plugins
    assert zeta[0]["fastapi_apps"][0]["url_prefix"] == "/zeta"
    assert {v["destination"] for v in zeta[0]["external_views"]} == {"nav", "dag_run"}
    assert zeta[0]["operator_extra_links"] == ["<airflow_provider_zeta.plugins.links.ZetaDriverLink object>"]
