"""A failing seeded test names its seed where a reader of the run finds it: in the failure report,
in ``test-artifacts/<test>/SEED`` and as a property in the JUnit report (``tests/conftest.py``).
Runs a pytest session on ``tests/subsessions/failing_seeded.py`` (no Airflow component)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

from tests.conftest import PROJECT_ROOT, artifact_dir

INNER = "tests/subsessions/failing_seeded.py"


def test_a_failing_seeded_test_reports_its_seed(tmp_path):
    junit = tmp_path / "junit.xml"
    nodeid = f"{INNER}::test_seeded_and_failing"
    kept = artifact_dir(nodeid)
    shutil.rmtree(kept, ignore_errors=True)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "pytest", INNER, "-p", "no:cacheprovider", "-o", "addopts=", f"--junitxml={junit}"],
            cwd=PROJECT_ROOT,
            env={**os.environ, "ZETA_CHAOS_SEED": "424242", "PYTHONPATH": str(PROJECT_ROOT)},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 1, result.stdout + result.stderr
        assert "ZETA_CHAOS_SEED=424242" in result.stdout.split("FAILURES", 1)[1], result.stdout
        assert "ZETA_CHAOS_SEED=424242" in (kept / "SEED").read_text()
        properties = {p.get("name"): p.get("value") for p in ET.parse(junit).getroot().iter("property")}
        assert properties.get("seed") == "424242", properties
    finally:
        shutil.rmtree(kept, ignore_errors=True)
