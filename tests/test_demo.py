"""`make demo` runs the example on an embedded Airflow, exits 0 and says what it ran."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import PROJECT_ROOT


def test_demo_runs_the_example_and_reports_it():
    result = subprocess.run(
        [sys.executable, str(PROJECT_ROOT / "scripts" / "demo.py")],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=PROJECT_ROOT,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "ended SUCCESS" in result.stdout
    for task_id in ("say_hello", "wait_on_triggerer", "say_done"):
        assert f"{task_id}" in result.stdout and "success" in result.stdout
