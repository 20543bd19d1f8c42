"""The provider's parts import one another in one direction only, as import-linter contracts.

The contracts live in ``pyproject.toml`` (``[tool.importlinter]``); ``make lint`` runs
``lint-imports`` on them. Here they are run too, and each is shown to catch a breach: a copy of the
package with one planted import must break exactly that contract. Imports inside functions and
under ``TYPE_CHECKING`` count (grimp reads every import statement of a module).

* ``core-is-pure``: ``core/`` holds the coordination rules without I/O (no Airflow, no ``os``, no
  clock, no other part of the package), so it is testable in milliseconds.
* ``readers-below-deciders``: sensors and operators defer on triggers, so triggers and the plugin
  must not import sensors or operators (a trigger that reached into a sensor's module made an
  import circle).
* ``runtime-without-airflow``: the driver side runs where ``import airflow`` fails.
* ``product-without-harness``: the test harness (``zeta_harness/``) is not in the wheel, so the
  provider must not import it (``crash_points.py`` is the provider's side of the crash points).
* ``parts-acyclic``: no import cycle between the package's top-level parts.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "airflow_provider_zeta"
LINT_IMPORTS = str(Path(sys.executable).with_name("lint-imports"))


def _lint(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    return subprocess.run(
        [LINT_IMPORTS, "--no-cache", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_the_package_keeps_every_contract():
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "Contracts: 5 kept, 0 broken." in result.stdout


@pytest.mark.parametrize(
    ("contract", "module", "planted"),
    [
        ("core-is-pure", "core/pacing.py", "import os"),
        ("core-is-pure", "core/ready.py", "from airflow.sdk import BaseOperator"),
        ("core-is-pure", "core/publish.py", "def _lazy():\n    from airflow_provider_zeta import storage"),
        ("readers-below-deciders", "triggers/ready_to_close.py", "from airflow_provider_zeta.sensors import ready_to_close"),
        ("readers-below-deciders", "plugins/api.py", "def _lazy():\n    from airflow_provider_zeta.operators import spark_job"),
        ("runtime-without-airflow", "runtime/driver.py", "import airflow"),
        ("product-without-harness", "crash_points.py", "def _lazy():\n    from zeta_harness import cluster"),
        ("parts-acyclic", "core/paths.py", "from airflow_provider_zeta import settings"),
    ],
)
def test_each_contract_catches_a_planted_import(tmp_path, contract, module, planted):
    shutil.copytree(ROOT / PACKAGE, tmp_path / PACKAGE, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / PACKAGE / module
    target.write_text(target.read_text() + f"\n\n{planted}  # planted\n")
    result = _lint(tmp_path, "--contract", contract)
    assert result.returncode != 0 and "BROKEN" in result.stdout, result.stdout[-3000:]
    if contract == "parts-acyclic":  # it names the cycle, part by part
        # The linter names the edge with fewer imports: either direction of settings <-> core.
        named = ".settings -> .core" in result.stdout or ".core -> .settings" in result.stdout
        assert "No cycles are allowed" in result.stdout and named, result.stdout[-3000:]
    else:
        planted_module = f"{PACKAGE}.{module.removesuffix('.py').replace('/', '.')}"
        assert planted_module in result.stdout, result.stdout[-3000:]
