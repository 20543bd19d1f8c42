"""The lease watchdog process alone, without the kernel timer: each enforcer of the lease must stop
a driver by itself, so a test of the whole driver (where either may act first) is not the only proof
of either.

The "driver" here is a plain Python process in its own process group that starts the watchdog the
way the bootstrap does, then either stops renewing or dies without saying it is done. The oracle is
the kernel's process table (is any process of the group still alive) and the watchdog's own line.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the lease watchdog reads /proc")

ROOT = Path(__file__).resolve().parents[2]

# Starts the watchdog with a deadline ``lease`` seconds ahead, starts a child in its own group (the
# JVM spark-submit would start), then acts out ``behaviour``.
FAKE_DRIVER = textwrap.dedent(
    """
    import subprocess, sys, time
    sys.path.insert(0, {root!r})
    from airflow_provider_zeta.runtime.lease import LeaseWatchdogProcess, lease_now
    lease = {lease!r}
    watchdog = LeaseWatchdogProcess(lease_now() + lease, lease, kill_group=True)
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    print("started", flush=True)
    if {behaviour!r} == "silent":
        time.sleep(600)
    elif {behaviour!r} == "renewing":
        for _ in range(int(3 * lease / 0.2)):
            watchdog.renew(lease_now() + lease)
            time.sleep(0.2)
        watchdog.done()
        print("finished", flush=True)
    # "dies": return without telling the watchdog, leaving the child running
    """
)


def _group_alive(pgid: int) -> bool:
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                return True
        except (OSError, IndexError, ValueError):
            continue
    return False


def _run(tmp_path: Path, behaviour: str, lease: float) -> tuple[subprocess.Popen, Path]:
    err = tmp_path / "driver.err"
    process = subprocess.Popen(
        [sys.executable, "-c", FAKE_DRIVER.format(root=str(ROOT), lease=lease, behaviour=behaviour)],
        stdout=subprocess.PIPE,
        stderr=err.open("wb"),
        start_new_session=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == b"started", err.read_text(errors="replace")
    return process, err


def _wait_gone(process: subprocess.Popen, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        process.poll()
        if not _group_alive(process.pid):
            return True
        time.sleep(0.05)
    return False


def _kill(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait(timeout=5)


@pytest.mark.parametrize(
    ("behaviour", "reason"),
    [("silent", "no heartbeat renewed within the lease"), ("dies", "the driver ended without finishing")],
)
def test_the_watchdog_alone_kills_the_whole_group(tmp_path, behaviour, reason):
    lease = 1.0
    process, err = _run(tmp_path, behaviour, lease)
    started = time.monotonic()
    try:
        gone = _wait_gone(process, lease + 3)
        text = err.read_text(errors="replace")
        assert gone, f"driver group still alive {time.monotonic() - started:.1f}s after start:\n{text}"
        assert reason in text, text
    finally:
        _kill(process)


def test_the_watchdog_leaves_a_renewing_driver_alone(tmp_path):
    lease = 1.0
    process, err = _run(tmp_path, "renewing", lease)
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == b"finished", err.read_text(errors="replace")
        assert process.wait(timeout=5) == 0
        assert "lease watchdog" not in err.read_text(errors="replace")
    finally:
        _kill(process)
