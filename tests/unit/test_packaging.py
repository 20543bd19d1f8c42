"""Packaging facts a user's installer relies on: one version, the license, type hints, and every
Airflow provider the package imports declared as a requirement."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import airflow_provider_zeta
from airflow_provider_zeta.get_provider_info import get_provider_info

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "airflow_provider_zeta"
#: The test and demo harness: a top-level package of the repository, never shipped.
HARNESS = ROOT / "zeta_harness"
SETUP = (ROOT / "setup.py").read_text()


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    """The wheel a user's installer gets, built from this tree (no network: the build backend is
    the one installed)."""
    out = tmp_path_factory.mktemp("wheel")
    # Built from a copy: setuptools writes build/ and *.egg-info/ into the tree it builds.
    tree = tmp_path_factory.mktemp("tree")
    for name in ("setup.py", "README.md", "LICENSE", "pyproject.toml"):
        shutil.copy(ROOT / name, tree / name)
    # The harness too, as in the repository: a setup.py that picked it up would put it in the wheel.
    for package in (PACKAGE, HARNESS):
        shutil.copytree(package, tree / package.name, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(out), str(tree)],
        check=True, capture_output=True, timeout=300,
    )
    (built,) = out.glob("airflow_provider_zeta-*.whl")
    return zipfile.ZipFile(built)


def _dist_info(wheel: zipfile.ZipFile, name: str) -> str:
    (path,) = [n for n in wheel.namelist() if n.endswith(f".dist-info/{name}")]
    return wheel.read(path).decode()


def test_the_wheel_carries_one_version_everywhere(wheel):
    metadata = _dist_info(wheel, "METADATA")
    version = re.search(r"^Version: (.+)$", metadata, re.M).group(1)
    package_init = wheel.read("airflow_provider_zeta/__init__.py").decode()
    assert re.search(rf'^__version__ = "{re.escape(version)}"$', package_init, re.M), "the module's version is not the wheel's"
    assert get_provider_info()["versions"] == [version] == [airflow_provider_zeta.__version__]
    assert not re.search(r"version\s*=\s*[\"']\d", SETUP), "setup.py must read __version__, not spell a version"


def test_the_wheel_ships_license_type_marker_and_provider_entry_point(wheel):
    names = wheel.namelist()
    assert "airflow_provider_zeta/py.typed" in names
    (license_file,) = [n for n in names if n.endswith("LICENSE") and ".dist-info/" in n]
    assert "Apache License" in wheel.read(license_file).decode()[:200]
    assert "License-Expression: Apache-2.0" in _dist_info(wheel, "METADATA") or "License: Apache-2.0" in _dist_info(wheel, "METADATA")
    entry_points = _dist_info(wheel, "entry_points.txt")
    assert re.search(r"\[apache_airflow_provider\]\s*\nprovider_info = airflow_provider_zeta\.get_provider_info:get_provider_info", entry_points)
    # Only the package: no tests, DAGs, scripts or benchmarks of this repository.
    top_levels = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top_levels == {"airflow_provider_zeta"}, top_levels
    # Every module of the source tree is in the wheel (a package without __init__ would be left out).
    sources = {str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py")}
    assert sources <= set(names), sorted(sources - set(names))


def test_the_wheel_holds_no_test_harness(wheel):
    """The test and demo harness (clusters, chaos, namespace hosts) stays in the repository: no module
    of it in the wheel, under its own name or inside the package (where it lived before)."""
    assert (HARNESS / "cluster.py").exists(), "the harness moved: update HARNESS"
    harness = [n for n in wheel.namelist() if n.startswith((f"{HARNESS.name}/", "airflow_provider_zeta/testing/"))]
    assert harness == [], harness


def _imported_providers() -> set[str]:
    found = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in getattr(node, "names", [])] if isinstance(node, ast.Import) else []
            for name in names:
                parts = name.split(".")
                if parts[:2] == ["airflow", "providers"] and len(parts) > 2:
                    # airflow.providers.apache.spark.hooks -> apache-airflow-providers-apache-spark
                    distribution = "apache-airflow-providers-" + "-".join(parts[2:4] if parts[2] in ("apache", "common") else parts[2:3])
                    found.add(distribution)
    return found


#: Providers the package uses only when installed (an extra of its own; imports guarded, see
#: ``test_the_package_works_without_the_optional_providers``).
OPTIONAL_PROVIDERS = {"apache-airflow-providers-openlineage": "openlineage"}


def test_every_imported_provider_is_declared():
    imported = _imported_providers()
    assert "apache-airflow-providers-apache-spark" in imported  # the scan finds the provider's imports
    install_requires = SETUP[SETUP.index("install_requires") : SETUP.index("extras_require")]
    extras = SETUP[SETUP.index("extras_require") :]
    missing = [d for d in sorted(imported) if f'"{d}' not in install_requires and d not in OPTIONAL_PROVIDERS]
    assert not missing, f"imported but not in install_requires: {missing}"
    assert re.search(r'"apache-airflow-providers-apache-spark>=[\d.]+,<\d', install_requires), "spark provider needs an upper bound"
    # Non-public Airflow members are used behind adapters: Airflow itself is capped to the tested minor release.
    tested = re.search(r"^apache-airflow==(\d+)\.(\d+)\.", (ROOT / "constraints.txt").read_text(), re.M)
    cap = re.search(r'"apache-airflow>=[\d.]+,<(\d+)\.(\d+)"', install_requires)
    assert tested and cap, "apache-airflow needs a minor-version cap and a pin in constraints.txt"
    assert (int(cap[1]), int(cap[2])) == (int(tested[1]), int(tested[2]) + 1), "the cap admits an untested minor release"
    for distribution, extra in OPTIONAL_PROVIDERS.items():
        assert re.search(rf'"{extra}": \["{distribution}>=', extras), f"{distribution} is not the extra {extra!r}"
        assert f"\n{distribution}==" in (ROOT / "constraints.txt").read_text(), f"{distribution} not pinned in constraints.txt"


def test_the_package_works_without_the_optional_providers():
    """With the OpenLineage provider unimportable, every module of the package imports (a fresh
    interpreter: modules already imported here would not show a module-level import). The test
    harness is made unimportable too: it is not installed with the wheel.

    The provider stays registered in this venv (Airflow's config reads its ``get_provider_info``),
    so what is made unimportable is everything else of it and the OpenLineage client library."""
    import subprocess
    import sys

    code = (
        "import sys, pkgutil, importlib\n"
        "for name in ('airflow.providers.openlineage.utils', 'airflow.providers.openlineage.extractors',\n"
        "             'airflow.providers.openlineage.plugins', 'openlineage', 'zeta_harness'):\n"
        "    sys.modules[name] = None\n"
        "import airflow_provider_zeta\n"
        "for module in pkgutil.walk_packages(airflow_provider_zeta.__path__, 'airflow_provider_zeta.'):\n"
        "    importlib.import_module(module.name)\n"
        "from airflow_provider_zeta import ZetaSparkJobOperator, CompletedPointOperator, zeta_pipeline\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]
