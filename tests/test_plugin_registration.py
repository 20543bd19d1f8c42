"""The provider's plugin is loaded by Airflow exactly once, with lazy and with eager provider discovery.

Airflow loads plugins declared in ``get_provider_info()["plugins"]`` only when
``[core] lazy_discover_providers`` is False (not the default); the ``airflow.plugins`` entry point
covers the default, and resolves to nothing in the other case (``plugins/entrypoint.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_provider_zeta.get_provider_info import get_provider_info

AIRFLOW = str(Path(sys.executable).with_name("airflow"))


def test_provider_info_declares_the_plugin_and_the_extra_link():
    info = get_provider_info()
    assert info["plugins"] == [{"name": "zeta", "plugin-class": "airflow_provider_zeta.plugins.monitor.ZetaMonitorPlugin"}]
    assert info["extra-links"] == ["airflow_provider_zeta.plugins.links.ZetaDriverLink"]


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
