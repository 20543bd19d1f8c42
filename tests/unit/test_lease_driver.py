"""The driver's lease as a real process: every write inside it, a kernel clock that counts while
the host is stopped, and nothing of the driver running again after a freeze longer than the lease.

Oracles are the job's own file (the fake job appends a line every 50 ms) and the ledger file's
bytes and mtime, never the driver's own bookkeeping.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from airflow_provider_zeta.runtime import driver as bootstrap

from .test_driver_lease import DRIVER, ROOT, WRAPPER

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the kernel lease timer is Linux-only")

# Hangs the terminal write (the ledger document carrying a terminal status) forever.
TERMINAL_HANG = WRAPPER.replace(
    'if name == "ledger.json":',
    'if name == "ledger.json" and fault == "hang-terminal" and b\'"status": "succeeded"\' in data:\n'
    "        time.sleep(3600)\n"
    '    if name == "ledger.json":',
)

APPENDING_JOB = """
import time, pathlib
progress = pathlib.Path({progress!r})
deadline = time.time() + {seconds}
while time.time() < deadline:
    with progress.open("a") as out:
        out.write("tick\\n")
    time.sleep(0.05)
"""


def _spawn(tmp_path: Path, fault: str, job_source: str, lost_after: float, **spec_extra):
    attempt = tmp_path / "attempt"
    job = tmp_path / "job.py"
    job.write_text(job_source)
    spec = {
        "token": "tok-lease2",
        "attempt_url": f"file://{attempt}",
        "output_url": f"file://{attempt}/output",
        "application": str(job),
        "heartbeat_interval": 0.2,
        "lost_after": lost_after,
        "task_id": "job",
        "dag_id": "d",
        "run_id": "r",
        # The launch starts spark-submit in its own session: the driver's group is its own.
        "process_group": True,
        **spec_extra,
    }
    wrapper = tmp_path / "wrapper.py"
    wrapper.write_text(TERMINAL_HANG)
    log = (tmp_path / "driver.out").open("wb")
    process = subprocess.Popen(
        [sys.executable, str(wrapper), fault, "0", DRIVER, bootstrap.SPEC_FLAG, json.dumps(spec)],
        env={"PYTHONPATH": ROOT, "PATH": "/usr/bin:/bin"},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    return process, attempt


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    # Zombies of the group count as gone.
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(stat[2]) == pgid and stat[0] not in ("Z", "X"):
                return True
    return False


def _cleanup(process) -> None:
    for sig in (signal.SIGCONT, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            pass
    process.wait(timeout=10)


def _wait_for(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def test_a_terminal_write_that_hangs_is_inside_the_lease(tmp_path):
    # The job returns at once; its terminal write (succeeded) hangs on a stuck mount. Past the
    # lease a coordinator counts the driver lost and may redeploy: this process must be gone by then.
    lost_after = 2.0
    process, attempt = _spawn(tmp_path, "hang-terminal", "pass\n", lost_after)
    try:
        assert _wait_for(lambda: (attempt / "ledger.json").exists(), 10)
        gone = _wait_for(lambda: process.poll() is not None and not _group_alive(process.pid), 1.25 * lost_after + 2)
        out = (tmp_path / "driver.out").read_text(errors="replace")
        assert gone, f"driver still alive {1.25 * lost_after + 2:.1f}s after its terminal write hung:\n{out}"
        assert json.loads((attempt / "ledger.json").read_text())["status"] == "running"
    finally:
        _cleanup(process)


def test_a_frozen_driver_runs_nothing_after_it_is_resumed(tmp_path):
    # The whole host freezes (every process of the driver's group, its watchdog included) for
    # twice lost_after, then resumes. By then a replacement may run: the old job must not write
    # one more line, and its ledger must not change.
    lost_after = 2.0
    progress = tmp_path / "progress"
    process, attempt = _spawn(tmp_path, "none", APPENDING_JOB.format(progress=str(progress), seconds=60), lost_after)
    try:
        assert _wait_for(lambda: progress.exists() and progress.stat().st_size > 20, 15)
        ledger = attempt / "ledger.json"
        assert _wait_for(lambda: json.loads(ledger.read_text()).get("beat", 0) >= 3, 10)
        os.killpg(process.pid, signal.SIGSTOP)
        time.sleep(0.3)  # in-flight writes of the moment land before the snapshot
        frozen_progress = progress.read_bytes()
        frozen_ledger = (ledger.read_bytes(), ledger.stat().st_mtime_ns)
        time.sleep(2 * lost_after)
        os.killpg(process.pid, signal.SIGCONT)
        time.sleep(2.0)
        out = (tmp_path / "driver.out").read_text(errors="replace")
        after = progress.read_bytes()
        assert after == frozen_progress, f"the job wrote {after.count(b'tick') - frozen_progress.count(b'tick')} line(s) after the resume:\n{out}"
        assert (ledger.read_bytes(), ledger.stat().st_mtime_ns) == frozen_ledger, f"ledger written after the resume:\n{out}"
        assert _wait_for(lambda: not _group_alive(process.pid), 3), f"driver group alive after the resume:\n{out}"
    finally:
        _cleanup(process)


def test_the_driver_arms_a_kernel_kill_timer_on_the_boot_clock(tmp_path):
    # Independent of the driver's code: the kernel's own list of the process's POSIX timers. A
    # timer on CLOCK_BOOTTIME (7) or CLOCK_BOOTTIME_ALARM (9) keeps counting while the host is
    # suspended, and SIGKILL (9) needs no code of the process to run.
    timers_file = Path("/proc/self/timers")
    if not timers_file.exists():
        pytest.skip("this kernel does not list POSIX timers in /proc")
    process, attempt = _spawn(tmp_path, "none", "import time\ntime.sleep(30)\n", 30.0)
    try:
        assert _wait_for(lambda: (attempt / "ledger.json").exists(), 10)
        driver_pids = [int(p) for p in os.listdir("/proc") if p.isdigit() and _in_group(int(p), process.pid)]
        listed = "".join(_read(f"/proc/{pid}/timers") for pid in driver_pids)
        assert "signal: 9/" in listed and ("ClockID: 7" in listed or "ClockID: 9" in listed), listed or "no POSIX timer"
    finally:
        _cleanup(process)


def test_the_lease_clock_counts_time_the_host_was_suspended(monkeypatch):
    # CLOCK_MONOTONIC stops while a host is suspended; CLOCK_BOOTTIME does not. Simulate a 100 s
    # suspend: BOOTTIME moves on, MONOTONIC does not. The lease must be over.
    spec = {"token": "t", "attempt_url": "file:///nonexistent/a", "output_url": "file:///nonexistent/a/o",
            "application": "x", "task_id": "j", "dag_id": "d", "run_id": "r", "lost_after": 10}
    driver = bootstrap.DriverBootstrap(spec, [])
    real = time.clock_gettime
    monkeypatch.setattr(time, "clock_gettime", lambda clock: real(clock) + (100.0 if clock == time.CLOCK_BOOTTIME else 0.0))
    assert driver.lease_expired()


def test_no_write_starts_after_the_lease_expired(tmp_path):
    attempt = tmp_path / "attempt"
    spec = {"token": "t", "attempt_url": f"file://{attempt}", "output_url": f"file://{attempt}/o",
            "application": "x", "task_id": "j", "dag_id": "d", "run_id": "r", "lost_after": 10}
    driver = bootstrap.DriverBootstrap(spec, [])
    driver.write(bootstrap.LedgerStatus.RUNNING, claim=True)
    before = (attempt / "ledger.json").read_bytes()
    driver._renewed_at -= 8.0  # the last good write started longer ago than the lease (7 s)
    for status in (bootstrap.LedgerStatus.RUNNING, bootstrap.LedgerStatus.SUCCEEDED):
        with pytest.raises(bootstrap.LeaseExpired):
            driver.write(status)
    assert (attempt / "ledger.json").read_bytes() == before


def _in_group(pid: int, pgid: int) -> bool:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[2]) == pgid
    except (OSError, IndexError, ValueError):
        return False


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


# Every ledger write takes 0.3 s (a slow store), and none hangs.
SLOW_WRITES = WRAPPER.replace('if name == "ledger.json":', 'if name == "ledger.json" and fault == "slow-writes":\n        time.sleep(0.3)\n    if name == "ledger.json":')


def test_a_heartbeat_interval_near_the_lease_leaves_room_for_slow_writes(tmp_path):
    """Settings accept any heartbeat interval below the lease (0.7 x lost_after): here 2.0 s against
    a 2.1 s lease, with every write taking 0.3 s. A driver beating only every 2.0 s after each write
    would start its next write 2.3 s after the last renewal began and be killed by its own lease
    while healthy; it must beat often enough to finish the job. Oracle: the job's own file, its
    exit and the ledger's bytes."""
    progress = tmp_path / "progress"
    (tmp_path / "job.py").write_text(APPENDING_JOB.format(progress=str(progress), seconds=5))
    (tmp_path / "wrapper.py").write_text(SLOW_WRITES)
    spec = {
        "token": "tok-lease3",
        "attempt_url": f"file://{tmp_path / 'attempt'}",
        "output_url": f"file://{tmp_path / 'attempt'}/output",
        "application": str(tmp_path / "job.py"),
        "heartbeat_interval": 2.0,
        "lost_after": 3.0,
        "task_id": "job",
        "dag_id": "d",
        "run_id": "r",
        "process_group": True,
    }
    with (tmp_path / "driver.out").open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, str(tmp_path / "wrapper.py"), "slow-writes", "0", DRIVER, bootstrap.SPEC_FLAG, json.dumps(spec)],
            env={"PYTHONPATH": ROOT, "PATH": "/usr/bin:/bin"},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        code = process.wait(timeout=30)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    out = (tmp_path / "driver.out").read_text(errors="replace")
    assert code == 0, f"a healthy driver ended with {code}:\n{out[-3000:]}"
    assert json.loads((tmp_path / "attempt" / "ledger.json").read_text())["status"] == "succeeded"
    assert progress.read_text().count("tick") >= 50, "the job did not run its course"
