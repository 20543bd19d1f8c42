"""`make demo`: the example pipeline with real Spark and a scheduler crash; exits 0 and reports.

This is also the default suite's end-to-end run of G1-G3 with real PySpark: three regional jobs,
`kill -9` of the scheduler while they run, exactly one launch per source and the expected rows in
the published partition — the demo itself exits non-zero otherwise.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import PROJECT_ROOT

pytestmark = pytest.mark.spark


def test_demo_runs_the_pipeline_through_a_scheduler_crash_and_reports_it():
    result = subprocess.run(
        [sys.executable, str(PROJECT_ROOT / "scripts" / "demo.py")],
        capture_output=True,
        text=True,
        timeout=1200,
        cwd=PROJECT_ROOT,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    out = result.stdout
    assert "kill -9 scheduler" in out and "Run ended SUCCESS" in out
    for region in ("emea", "amer", "apac"):
        line = next(line for line in out.splitlines() if line.strip().startswith(region))
        rows, expected, launches = line.split()[1:4]
        assert rows == expected and launches == "1", line
    assert "All guarantees held" in out
