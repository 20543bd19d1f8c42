"""A deleted attempt stops its driver whatever the job writes afterwards.

The run's cleanup deletes the attempt directory; the job's own staging writes (``output/`` lives
inside the attempt) re-create it at once. The driver must still stop, and never re-create its
ledger (a SUCCEEDED ledger that reappears would be published or reused).
"""

from __future__ import annotations

import errno
import shutil
import time
from pathlib import Path

import pytest

from .test_lease_driver import _cleanup, _group_alive, _spawn, _wait_for

STAGING_JOB = """
import os, time, pathlib
from airflow_provider_zeta.runtime import zeta_context
out = pathlib.Path(zeta_context().output_path.replace("file://", ""))
deadline = time.time() + {seconds}
while time.time() < deadline:
    out.mkdir(parents=True, exist_ok=True)
    with (out / "part-0").open("a") as f:
        f.write("row\\n")
    time.sleep(0.05)
"""


def _delete_while_the_job_writes(path: Path) -> None:
    """``rmtree``, again when the job re-created a file in a directory being removed (ENOTEMPTY:
    it writes every 50 ms), until one pass removes the whole tree."""
    for _ in range(100):
        try:
            shutil.rmtree(path)
            return
        except FileNotFoundError:
            if not path.exists():
                return
        except OSError as error:
            if error.errno != errno.ENOTEMPTY:
                raise
    raise AssertionError(f"{path} could not be deleted while the job wrote into it")


@pytest.mark.parametrize("intent_file", [True, False], ids=["launch-with-intent-file", "launch-without"])
def test_a_deleted_attempt_stops_its_driver_though_the_job_recreates_its_staging(tmp_path, intent_file):
    if intent_file:  # the launch writes it before it starts the driver; only the cleanup deletes it
        (tmp_path / "attempt").mkdir()
        (tmp_path / "attempt" / "intent.json").write_text("{}")
    process, attempt = _spawn(tmp_path, "none", STAGING_JOB.format(seconds=4), lost_after=30.0, intent_file=intent_file)
    try:
        ledger = attempt / "ledger.json"
        assert _wait_for(lambda: ledger.exists() and (attempt / "output" / "part-0").exists(), 15)
        _delete_while_the_job_writes(attempt)  # the run's cleanup; the job's next write re-creates output/
        gone = _wait_for(lambda: process.poll() is not None and not _group_alive(process.pid), 10)
        out = (tmp_path / "driver.out").read_text(errors="replace")
        assert gone, f"driver still running after its attempt was deleted:\n{out}"
        time.sleep(0.5)
        assert not ledger.exists(), f"the deleted attempt's ledger was re-created:\n{ledger.read_text()}\n{out}"
    finally:
        _cleanup(process)


def test_a_ledger_deleted_beside_its_intent_file_is_restored_and_the_job_runs_on(tmp_path):
    # Outside damage, not the run's cleanup: the intent file is still there.
    (tmp_path / "attempt").mkdir()
    (tmp_path / "attempt" / "intent.json").write_text("{}")
    process, attempt = _spawn(tmp_path, "none", STAGING_JOB.format(seconds=3), lost_after=30.0, intent_file=True)
    try:
        ledger = attempt / "ledger.json"
        assert _wait_for(lambda: ledger.exists(), 15)
        ledger.unlink()
        assert _wait_for(lambda: process.poll() is not None, 20)
        assert process.returncode == 0 and '"status": "succeeded"' in ledger.read_text()
    finally:
        _cleanup(process)
