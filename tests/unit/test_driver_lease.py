"""The driver bootstrap as a real process (no Spark, no Airflow): lease watchdog, SIGTERM, fence.

A small wrapper runs ``runtime/driver.py`` after patching ``StateStorage.write_atomic`` to inject
a storage fault at a chosen ledger write: a write that *hangs*, or a SIGTERM that arrives while
the main thread is inside a write. Each test fails on a driver that keeps running past its lease with a hung write, or whose SIGTERM
handler deadlocks on the ledger lock.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from airflow_provider_zeta.runtime import driver as bootstrap

DRIVER = str(Path(bootstrap.__file__).resolve())
ROOT = str(Path(__file__).resolve().parents[2])
LEASE_ENDED = (bootstrap.EXIT_LEASE_LOST, -signal.SIGKILL)

WRAPPER = textwrap.dedent(
    """
    import os, runpy, signal, sys, threading, time
    from airflow_provider_zeta.storage import StateStorage

    fault, at = sys.argv[1], int(sys.argv[2])
    original = StateStorage.write_atomic
    writes = [0]

    def faulty(self, name, data, **kwargs):
        if name == "ledger.json":
            writes[0] += 1
            if writes[0] >= at and fault == "hang":
                time.sleep(3600)  # a stuck mount: the call never returns
            if writes[0] == at and fault == "slow":
                time.sleep(2.0)  # a write that hangs for a while, then succeeds
            if writes[0] == at and fault == "sigterm":
                os.kill(os.getpid(), signal.SIGTERM)  # delivered while this thread is inside write()
                time.sleep(0.3)
        return original(self, name, data, **kwargs)

    StateStorage.write_atomic = faulty
    sys.argv = [sys.argv[3], *sys.argv[4:]]
    runpy.run_path(sys.argv[0], run_name="__main__")
    """
)


def _start(tmp_path: Path, fault: str, at: int, job_seconds: float, lost_after: float = 2.0, **spec_extra):
    attempt = tmp_path / "attempt"
    job = tmp_path / "job.py"
    ran = tmp_path / "job-ran"
    job.write_text(f"import time, pathlib\npathlib.Path({str(ran)!r}).write_text('x')\ntime.sleep({job_seconds})\n")
    spec = {
        "token": "tok-lease",
        "attempt_url": f"file://{attempt}",
        "output_url": f"file://{attempt}/output",
        "application": str(job),
        "heartbeat_interval": 0.2,
        "lost_after": lost_after,
        "task_id": "job",
        "dag_id": "d",
        "run_id": "r",
        **spec_extra,
    }
    wrapper = tmp_path / "wrapper.py"
    wrapper.write_text(WRAPPER)
    process = subprocess.Popen(
        [sys.executable, str(wrapper), fault, str(at), DRIVER, bootstrap.SPEC_FLAG, json.dumps(spec)],
        env={"PYTHONPATH": ROOT, "PATH": "/usr/bin:/bin"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    return process, attempt, ran


def _wait(process, timeout: float) -> tuple[int | None, str]:
    try:
        out, _ = process.communicate(timeout=timeout)
        return process.returncode, out.decode(errors="replace")
    except subprocess.TimeoutExpired:
        process.kill()
        out, _ = process.communicate()
        return None, out.decode(errors="replace")


def test_a_driver_whose_heartbeat_write_hangs_stops_itself_within_its_lease(tmp_path):
    # Claim (write 1) and a first heartbeat succeed; from write 3 on every write hangs.
    process, attempt, _ = _start(tmp_path, "hang", at=3, job_seconds=60, lost_after=2.0)
    started = time.monotonic()
    code, out = _wait(process, timeout=15)
    # Ended by the kernel's lease timer (SIGKILL) or by the driver itself, never left running.
    assert code in LEASE_ENDED, f"driver still running or wrong exit {code}:\n{out}"
    # It stopped within the lease (0.7 x lost_after, counted from its last good write) plus slack,
    # well before an observer would count it as certainly stopped (1.25 x lost_after of silence).
    assert time.monotonic() - started < 2.0 * 1.25 + 3, out
    # Which enforcer acts first (the kernel timer or the watchdog process) depends on scheduling;
    # each alone is proven elsewhere: the kernel timer by test_lease_driver (a frozen group, whose
    # watchdog is frozen too), the watchdog process by test_lease_watchdog.


def test_sigterm_while_the_main_thread_writes_the_ledger_does_not_deadlock(tmp_path):
    # The claim is written by the main thread: the signal lands inside that write.
    process, attempt, ran = _start(tmp_path, "sigterm", at=1, job_seconds=60, lost_after=30.0)
    code, out = _wait(process, timeout=10)
    assert code == bootstrap.EXIT_CANCELLED, f"deadlocked or wrong exit {code}:\n{out}"
    ledger = json.loads((attempt / "ledger.json").read_text())
    assert ledger["status"] == "failed" and "terminated by signal 15" in ledger["error"]
    assert not ran.exists()  # the job never started: the handler ended the process after the claim


def test_a_driver_fenced_before_start_exits_without_running_the_job(tmp_path):
    # A coordinator gave up on the token (wrote its cancel marker) before the driver claimed.
    attempt = tmp_path / "attempt"
    attempt.mkdir()
    (attempt / "cancel").write_text("fenced by the test\n")
    process, attempt, ran = _start(tmp_path, "none", at=0, job_seconds=1, lost_after=30.0)
    code, out = _wait(process, timeout=20)
    assert code == bootstrap.EXIT_FENCED, out
    ledger = json.loads((attempt / "ledger.json").read_text())
    assert ledger["status"] == "cancelled" and "fenced before start" in ledger["error"]
    assert not ran.exists()


def test_a_driver_that_starts_after_its_attempt_was_deleted_neither_claims_nor_runs(tmp_path):
    # The launch wrote its intent file, then the run's cleanup deleted the attempt while
    # spark-submit was still starting the driver (or its claim hung). A cleared task on another
    # host then waits only until the deletion has lasted past the lease (core.deploy,
    # earlier_incarnation_cleanup_wait): the late driver must not re-create the attempt nor run.
    process, attempt, ran = _start(tmp_path, "none", at=0, job_seconds=1, lost_after=30.0, intent_file=True)
    code, out = _wait(process, timeout=20)
    assert code == bootstrap.EXIT_CANCELLED, out
    assert "deleted (its intent file is gone)" in out
    assert not attempt.exists() and not ran.exists()


def test_a_driver_whose_intent_file_is_there_claims_and_runs(tmp_path):
    attempt = tmp_path / "attempt"
    attempt.mkdir()
    (attempt / "intent.json").write_text("{}")
    process, attempt, ran = _start(tmp_path, "none", at=0, job_seconds=0.1, lost_after=30.0, intent_file=True)
    code, out = _wait(process, timeout=20)
    assert code == 0, out
    assert ran.exists() and json.loads((attempt / "ledger.json").read_text())["status"] == "succeeded"


def test_a_claim_that_outlasted_the_lease_runs_no_user_code(tmp_path):
    # The claim hung past the lease (1.4 s here) and then succeeded: meanwhile a coordinator may
    # have counted the attempt lost or deleted and launched another driver. This one must stop.
    process, attempt, ran = _start(tmp_path, "slow", at=1, job_seconds=1, lost_after=2.0)
    code, out = _wait(process, timeout=20)
    # Either it saw the claim come back late, or the lease ended it inside the claim: the watchdog
    # saw no renewal, or (the kernel's timer having killed the driver first) saw it ended unfinished.
    assert code in LEASE_ENDED, out
    ended_by_lease = ("no heartbeat renewed" in out or "the driver ended without finishing" in out)
    assert ("outlasted the lease" in out or ended_by_lease) and not ran.exists()
