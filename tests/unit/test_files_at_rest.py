"""Raw driver output at rest is private: files 0600, directories 0700, no copy outside the state root.

Real processes, no Spark, no Airflow: the driver bootstrap (``runtime/driver.py``) started the way
the launcher starts it (``processes.launch_detached``, its output into the attempt's ``driver.log``,
after the worker wrote the intent file under the test's ordinary umask), running a job that prints
a secret, writes a staging file and fails; and the log shipper (``runtime/log_shipper.py``) with a
real child, its stdout in a temporary directory of its own as the launcher opens it. The oracles
are ``os.stat`` of every file and directory the processes left, and a listing of the temporary
directory.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

from airflow_provider_zeta.core.paths import DRIVER_LOG_CHUNKS, INTENT_FILE, LEDGER_FILE
from airflow_provider_zeta.runtime import driver as bootstrap
from airflow_provider_zeta.runtime import log_shipper
from airflow_provider_zeta.storage import StateStorage

DRIVER = str(Path(bootstrap.__file__).resolve())
ROOT = str(Path(__file__).resolve().parents[2])
SECRET = "at-rest-Secret-5b1e07"
ATTEMPT = "runs/d/r/attempts/job/-1/tokrest"


def modes(top: Path) -> dict[str, int]:
    """Relative path -> permission bits of ``top`` and everything below it (links not followed)."""
    found = {".": stat.S_IMODE(os.lstat(top).st_mode)}
    for folder, dirs, files in os.walk(top):
        for name in dirs + files:
            path = Path(folder) / name
            found[str(path.relative_to(top))] = stat.S_IMODE(os.lstat(path).st_mode)
    return found


def assert_private(top: Path) -> None:
    found = modes(top)
    wrong = {
        name: oct(mode)
        for name, mode in found.items()
        if mode != (0o700 if stat.S_ISDIR(os.lstat(top / name).st_mode) else 0o600)
    }
    assert not wrong, f"not private under {top}: {wrong}"


def test_a_driver_leaves_only_private_files_in_its_attempt(tmp_path):
    from airflow_provider_zeta.processes import launch_detached

    os.umask(0o022)  # a worker's usual umask: what it creates alone would be 0644 / 0755
    root = tmp_path / "state"
    state = StateStorage.from_url(str(root))
    # The worker writes the intent file (this creates the attempt directory), then launches.
    state.child(ATTEMPT).write_atomic(INTENT_FILE, json.dumps({"token": "tokrest"}).encode())
    attempt = root / ATTEMPT
    job = tmp_path / "job.py"
    job.write_text(
        "import os, sys\n"
        f"print('connecting with password {SECRET}', flush=True)\n"
        f"os.makedirs({str(attempt / 'output' / 'part')!r}, exist_ok=True)\n"
        f"open({str(attempt / 'output' / 'part' / 'data.csv')!r}, 'w').write('{SECRET}\\n')\n"
        f"raise RuntimeError('failed with {SECRET}')\n"
    )
    spec = {
        "token": "tokrest",
        "attempt_url": f"file://{attempt}",
        "output_url": f"file://{attempt}/output",
        "application": str(job),
        "heartbeat_interval": 0.2,
        "lost_after": 30.0,
        "task_id": "job",
        "dag_id": "d",
        "run_id": "r",
        "intent_file": True,
    }
    handle = launch_detached(
        [sys.executable, DRIVER, bootstrap.SPEC_FLAG, json.dumps(spec)],
        {"PYTHONPATH": ROOT, "PATH": "/usr/bin:/bin"},
        str(attempt / "driver.log"),
    )
    deadline = time.monotonic() + 60
    ledger: dict = {}
    while time.monotonic() < deadline:
        raw = (attempt / LEDGER_FILE).read_bytes() if (attempt / LEDGER_FILE).exists() else b"{}"
        ledger = json.loads(raw or b"{}")
        if ledger.get("status") == "failed" and SECRET in (attempt / "driver.log").read_text():
            break
        time.sleep(0.1)
    assert ledger.get("status") == "failed", ledger
    while time.monotonic() < deadline:  # the process ends right after its terminal write
        try:
            os.kill(handle.pid, 0)
        except ProcessLookupError:
            break
        if Path(f"/proc/{handle.pid}/stat").exists() and Path(f"/proc/{handle.pid}/stat").read_text().split()[2] == "Z":
            break
        time.sleep(0.05)
    # The oracle: the raw output and the ledger do hold the secret ...
    assert SECRET in (attempt / "driver.log").read_text() and SECRET in (attempt / LEDGER_FILE).read_text()
    assert (attempt / "output" / "part" / "data.csv").exists()
    # ... and nobody but their owner can read them.
    assert_private(attempt)


def _run_shipper(tmp_path: Path, *command: str) -> tuple[Path, Path, int]:
    """The shipper as the launcher starts it for an object-store root: its stdout and stderr in
    ``<tmp>/zeta-driver-logs/<token>.log``, that path as ``--local``; TMPDIR is a directory of
    its own, so whatever it (or its child) leaves in the temporary directory is seen."""
    root, private_tmp = tmp_path / "state", tmp_path / "tmp"
    logs = private_tmp / "zeta-driver-logs"
    logs.mkdir(parents=True)
    launch_log = logs / "tokrest.log"
    with open(launch_log, "ab") as output:
        status = subprocess.run(
            [sys.executable, log_shipper.__file__, "--attempt", f"file://{root}/{ATTEMPT}", "--local", str(launch_log), "--", *command],
            stdout=output,
            stderr=subprocess.STDOUT,
            env={"PYTHONPATH": ROOT, "PATH": "/usr/bin:/bin", "TMPDIR": str(private_tmp)},
            timeout=60,
        ).returncode
    return root, private_tmp, status


def test_the_log_shipper_keeps_no_copy_outside_the_state_root_and_its_chunks_are_private(tmp_path):
    os.umask(0o022)
    child = f"import sys; print('password {SECRET}', flush=True); print('to stderr', file=sys.stderr); sys.exit(3)"
    root, private_tmp, status = _run_shipper(tmp_path, sys.executable, "-c", child)
    assert status == 3
    attempt = StateStorage.from_url(f"{root}/{ATTEMPT}")
    shipped = attempt.read_chunked_range(DRIVER_LOG_CHUNKS, 0, 10_000)
    assert shipped is not None and SECRET.encode() in shipped[0]  # the oracle: it was shipped
    left = [str(p.relative_to(private_tmp)) for p in private_tmp.rglob("*") if not p.is_dir()]
    assert left == [], f"left in the temporary directory: {left}"
    assert_private(root)


def test_the_shipper_removes_only_the_file_that_is_its_own_output(tmp_path):
    """``--local`` naming some other file (not the shipper's stdout) is never removed."""
    other = tmp_path / "someone-elses.log"
    other.write_text("keep me")
    root = tmp_path / "state"
    status = subprocess.run(
        [sys.executable, log_shipper.__file__, "--attempt", f"file://{root}/{ATTEMPT}", "--local", str(other), "--", "true"],
        stdout=subprocess.DEVNULL,
        env={"PYTHONPATH": ROOT, "PATH": "/usr/bin:/bin"},
        timeout=60,
    ).returncode
    assert status == 0 and other.read_text() == "keep me"


def test_the_launcher_makes_the_drivers_log_private_before_the_driver_runs(tmp_path):
    """The launcher's own part, before any code of the driver runs: the log file is 0600 and the
    attempt directory it makes 0700 from the first byte (the directories above hold only ids), and the driver process (so spark-submit's JVM) starts
    under umask 077, whatever the worker's umask is."""
    from airflow_provider_zeta import processes

    log_path = tmp_path / "runs" / "attempt" / "driver.log"
    release = tmp_path / "release"
    script = f"import os, time\nwhile not os.path.exists({str(release)!r}): time.sleep(0.05)\n"
    previous = os.umask(0o022)
    try:
        handle = processes.launch_detached([sys.executable, "-c", script], dict(os.environ), str(log_path))
    finally:
        os.umask(previous)
    try:
        assert stat.S_IMODE(os.stat(log_path).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(log_path.parent).st_mode) == 0o700
        umask_line = next(line for line in Path(f"/proc/{handle.pid}/status").read_text().splitlines() if line.startswith("Umask:"))
        assert umask_line.split()[1] == "0077", umask_line
    finally:
        release.touch()
        deadline = time.monotonic() + 10
        while processes.handle_alive(handle) and time.monotonic() < deadline:
            time.sleep(0.05)


def test_the_shipper_removes_only_a_regular_file_it_writes_to(tmp_path, monkeypatch):
    """Its stdout may be a FIFO or a device (a launcher that discards it): never unlinked."""
    fifo = tmp_path / "launch.fifo"
    os.mkfifo(fifo)
    fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
    try:
        monkeypatch.setattr(sys, "stdout", os.fdopen(os.dup(fd), "w"))
        assert log_shipper.forget_launch_log(str(fifo)) is False
        assert fifo.exists()
    finally:
        os.close(fd)
