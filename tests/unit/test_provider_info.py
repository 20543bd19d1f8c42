"""``get_provider_info()`` is complete the way official providers' is, and says only what exists."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import airflow
import jsonschema

from airflow_provider_zeta.get_provider_info import get_provider_info

PACKAGE = Path(__file__).resolve().parents[2] / "airflow_provider_zeta"
ROOT = PACKAGE.parent


def test_provider_info_is_valid_for_airflows_schema():
    schema = json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())
    jsonschema.validate(get_provider_info(), schema)


def test_every_operator_sensor_trigger_and_hook_module_is_declared_and_exists():
    info = get_provider_info()
    for kind in ("operators", "sensors", "triggers", "hooks"):
        declared = {module for group in info[kind] for module in group["python-modules"]}
        on_disk = {
            f"airflow_provider_zeta.{kind}.{path.stem}" for path in (PACKAGE / kind).glob("*.py") if path.stem != "__init__"
        }
        assert declared == on_disk, f"{kind}: declared {sorted(declared)} but the package has {sorted(on_disk)}"
        for module in declared:
            importlib.import_module(module)
    integrations = {i["integration-name"] for i in info["integrations"]}
    for kind in ("operators", "sensors", "triggers", "hooks"):
        assert {group["integration-name"] for group in info[kind]} <= integrations
    for guide in info["integrations"][0]["how-to-guide"]:
        assert (ROOT / guide).is_file(), guide
