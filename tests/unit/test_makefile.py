"""`make demo` installs only the provider and checks Java first; `make test` installs the test and
openlineage extras and lints before pytest.
Read from `make -n -B` (what make would run, everything considered out of date), nothing is run."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _plan(target: str) -> str:
    return subprocess.run(["make", "-n", "-B", target], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def test_demo_installs_only_what_it_needs_and_checks_java_before_spark():
    plan = _plan("demo")
    assert "pip install --quiet -c constraints.txt -e .\n" in plan
    assert "[test]" not in plan and "chromium" not in plan
    assert plan.index("Java 17 is missing") < plan.index("scripts/demo.py")


def test_test_installs_the_test_extra_and_lints_before_pytest():
    plan = _plan("test")
    # The openlineage extra too: its tests must run in CI, not skip for want of the provider.
    assert "-e '.[test,openlineage]'" in plan and "chromium" in plan
    assert plan.index("ruff check") < plan.index("-m pytest")
    assert plan.index("mypy") < plan.index("-m pytest")


def test_ci_runs_make_test():
    assert "\nmake test\n" in (ROOT / ".ci" / "run").read_text()
