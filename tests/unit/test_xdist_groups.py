"""``--dist loadgroup`` (pytest.ini) keeps each xdist group in one test process, so a shared
cluster is started once, not once per process.

pytest-xdist 3.8 marks a grouped test by appending ``@<group>`` to the item's ``_nodeid``; pytest
9.2 no longer reads that attribute, so under it every group was silently split over both test
processes (each started its own copy of every shared cluster). This runs a small session the way
the suite runs and counts how often a grouped module's fixture was set up, and in which process.
"""

from __future__ import annotations

import os
import subprocess
import sys

GROUPED_MODULE = '''
import os
import pytest

pytestmark = pytest.mark.xdist_group("shared")


@pytest.fixture(scope="module")
def shared_cluster():
    with open(os.environ["SETUPS_LOG"], "a") as log:
        log.write(f"{os.getpid()}\\n")
    yield


@pytest.mark.parametrize("n", range(6))
def test_on_the_shared_cluster(shared_cluster, n):
    pass
'''

OTHER_MODULE = '''
import time


def test_beside_it():
    time.sleep(1)
'''


def test_a_group_runs_in_one_test_process_and_sets_its_module_fixture_up_once(tmp_path):
    (tmp_path / "test_grouped.py").write_text(GROUPED_MODULE)
    (tmp_path / "test_other.py").write_text(OTHER_MODULE)
    setups = tmp_path / "setups.log"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "2", "--dist", "loadgroup",
         "--rootdir", str(tmp_path), "-c", "/dev/null", str(tmp_path)],
        env={**os.environ, "SETUPS_LOG": str(setups)},
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "7 passed" in result.stdout, result.stdout
    assert setups.read_text().split() == [setups.read_text().split()[0]], (
        f"the group's module fixture was set up in several test processes: {setups.read_text().split()}"
    )
