"""The provider is registered with Airflow: ProvidersManager, `airflow providers list`, `[zeta]` config.

Each check runs Airflow in a subprocess with its own AIRFLOW_HOME, the way a user's installation
would discover the provider through the ``apache_airflow_provider`` entry point.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_provider_zeta.get_provider_info import CONFIG_OPTIONS, get_provider_info

AIRFLOW = str(Path(sys.executable).with_name("airflow"))


@pytest.fixture
def airflow_env(tmp_path, monkeypatch):
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env["AIRFLOW_HOME"] = str(tmp_path)
    return env


def test_provider_info_describes_every_config_option():
    info = get_provider_info()
    assert info["package-name"] == "airflow-provider-zeta"
    options = info["config"]["zeta"]["options"]
    assert set(options) >= {"state_root", "cleanup_retention", "driver_heartbeat_interval", "driver_lost_after"}
    for name, option in options.items():
        assert option["description"].strip(), name
        # Declared for every option; empty only for an optional setting that is off when unset.
        assert "default" in option, f"{name} needs a default"
        assert option["default"] != "" or "Empty" in option["description"] or "empty" in option["description"], (
            f"{name}: an empty default must say what empty means"
        )
        assert option["type"] in {"string", "integer", "float", "boolean"}, name


def test_providers_manager_finds_the_provider(airflow_env):
    script = (
        "import json\n"
        "from airflow.providers_manager import ProvidersManager\n"
        "pm = ProvidersManager()\n"
        "p = pm.providers['airflow-provider-zeta']\n"
        "print(json.dumps({'version': p.version, 'config': sorted(p.data['config']['zeta']['options'])}))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], env=airflow_env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found["version"] == get_provider_info()["versions"][0]
    assert found["config"] == sorted(CONFIG_OPTIONS)


def test_airflow_cli_lists_provider_and_config_section(airflow_env, tmp_path):
    providers = subprocess.run(
        [AIRFLOW, "providers", "list", "-o", "json"], env=airflow_env, capture_output=True, text=True, timeout=120
    )
    assert providers.returncode == 0, providers.stderr
    listed = {entry["package_name"]: entry for entry in json.loads(providers.stdout)}
    assert "airflow-provider-zeta" in listed

    config = subprocess.run(
        [AIRFLOW, "config", "list", "--section", "zeta", "--include-descriptions", "--show-values"],
        env=airflow_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert config.returncode == 0, config.stderr
    for name, option in CONFIG_OPTIONS.items():
        default = option["default"].replace("{AIRFLOW_HOME}", str(tmp_path))
        assert f"{name} = {default}" in config.stdout, f"{name} missing from `airflow config list`"
        first_words = " ".join(option["description"].split()[:6])
        assert first_words in config.stdout, f"description of {name} missing"
