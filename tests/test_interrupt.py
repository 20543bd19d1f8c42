"""An interrupted test run leaves no process behind (``zeta_harness/teardown.py``).

A pytest session in a subprocess starts a real cluster through the suite's ``airflow_cluster``
fixture (``tests/subsessions/interrupted_session.py``) and is then sent SIGTERM — what a CI or
``timeout`` time limit sends — or SIGINT (Ctrl-C). Afterwards no process of that cluster may be
alive: the oracle scans ``/proc`` itself for processes in the components' sessions or carrying the
cluster's ``ZETA_HARNESS_ID`` marker, independently of the harness's own bookkeeping.
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

from tests.conftest import PROJECT_ROOT

INNER = PROJECT_ROOT / "tests" / "subsessions" / "interrupted_session.py"


def _cluster_processes(cluster_id: str, sessions: set[int]) -> list[tuple[int, str]]:
    """(pid, cmdline) of every live process in one of ``sessions`` or marked with ``cluster_id``."""
    found = []
    marker = f"ZETA_HARNESS_ID={cluster_id}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            session = int(stat.rsplit(")", 1)[1].split()[3])  # fields after "(comm)": state ppid pgrp session
            state = stat.rsplit(")", 1)[1].split()[0]
            environ = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue
        if state == "Z":  # a zombie is already dead, waiting for its parent to reap it
            continue
        if session in sessions or marker in environ:
            found.append((int(entry), cmdline))
    return found


def _start_inner_session(tmp_path: Path, info_path: Path, workers: int) -> subprocess.Popen:
    """The inner pytest session (``INNER``), with ``workers`` xdist workers (0: none); its output
    goes to ``inner.log``, the cluster's identity to ``info_path``."""
    env = {**os.environ, "ZETA_INTERRUPT_INFO": str(info_path), "PYTHONPATH": str(PROJECT_ROOT)}
    xdist = ["-n", str(workers)] if workers else ["-s"]
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", str(INNER), "-q", *xdist, "-p", "no:cacheprovider", "-o", "addopts=", "--timeout=600"],
        cwd=PROJECT_ROOT,
        env=env,
        stdout=(tmp_path / "inner.log").open("wb"),
        stderr=subprocess.STDOUT,
    )


def _wait_for_cluster_info(inner: subprocess.Popen, info_path: Path, log_path: Path) -> dict | None:
    """What the inner session wrote about its cluster once it started it (None: not within 300 s);
    the inner session must not end before."""
    info = None
    deadline = time.monotonic() + 300
    while info is None and time.monotonic() < deadline:
        assert inner.poll() is None, "inner session ended early:\n" + log_path.read_text()[-3000:]
        if info_path.exists():
            info = json.loads(info_path.read_text())
        time.sleep(0.5)
    return info


def _survivors(cluster_id: str, sessions: set[int], looks: int) -> list[tuple[int, str]]:
    """The cluster's processes still alive after at most ``looks`` more looks half a second apart
    (SIGKILLed processes take a moment to leave /proc)."""
    survivors = _cluster_processes(cluster_id, sessions)
    for _ in range(looks):
        if not survivors:
            break
        time.sleep(0.5)
        survivors = _cluster_processes(cluster_id, sessions)
    return survivors


def _wait_until_gone(path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.5)


def _kill_inner_and_cluster(inner: subprocess.Popen, info: dict | None) -> None:
    """Whatever the outcome: end the inner session and every process of its cluster."""
    if inner.poll() is None:
        inner.kill()
        inner.wait()
    if info is not None:  # never leave the cluster behind, whatever the outcome
        for pid, _ in _cluster_processes(info["cluster_id"], set(info["sessions"])):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.mark.parametrize(
    "signum, workers",
    [(signal.SIGTERM, 0), (signal.SIGINT, 0), (signal.SIGTERM, 1)],
    ids=["SIGTERM", "SIGINT", "SIGTERM-xdist"],
)
def test_interrupted_session_leaves_no_process_behind(tmp_path, signum, workers):
    """Also with pytest-xdist (``make test`` runs four test processes): the cluster then lives in a
    worker, and a time limit's SIGTERM reaches only the controller. (Ctrl-C's SIGINT goes to the
    whole foreground process group, workers included, as in one process.)"""
    info_path = tmp_path / "cluster.json"
    inner = _start_inner_session(tmp_path, info_path, workers)
    info = None
    try:
        info = _wait_for_cluster_info(inner, info_path, tmp_path / "inner.log")
        assert info is not None, "the inner session never started its cluster"
        sessions = set(info["sessions"])
        before = _cluster_processes(info["cluster_id"], sessions)
        assert len(before) >= 2, f"the cluster should be running (api-server, scheduler): {before}"

        inner.send_signal(signum)
        inner.wait(timeout=120)
        # SIGKILLed processes take a moment to leave /proc (xdist: a watch period more).
        survivors = _survivors(info["cluster_id"], sessions, 60 if workers else 10)
        assert survivors == [], f"processes of the interrupted cluster still alive: {survivors}"
        log = (tmp_path / "inner.log").read_text()
        if not workers:  # an xdist worker's stderr does not reach this log: the oracle above decides
            assert f"{signum.name} received" in log, log[-3000:]
        # An xdist worker tears down on its own after the controller ended: give it a moment.
        _wait_until_gone(Path(info["home"]), 30 if workers else 0)
        assert not Path(info["home"]).exists(), "the interrupted cluster's temporary home was not removed"
        if signum == signal.SIGTERM:
            assert inner.returncode == -signal.SIGTERM, "the session must still end by SIGTERM"
    finally:
        _kill_inner_and_cluster(inner, info)
