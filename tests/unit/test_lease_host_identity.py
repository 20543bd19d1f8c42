"""A host identity is never reused by a later host.

Hosts here are PID namespaces (as in the multi-host harness). This kernel hands a new namespace the
inode of one that died, so boot id + namespace inode alone takes a later host for the old one: its
"process gone" then counts as the old driver's death and a relaunch skips the silence wait.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = str(Path(__file__).resolve().parents[2])
PROBE = (
    "import os; from airflow_provider_zeta.processes import host_id; "
    "print(os.stat('/proc/self/ns/pid').st_ino, host_id())"
)


def _in_new_host(hostname: str = "worker") -> tuple[int, str]:
    out = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", "--uts", "sh", "-c", f'hostname {hostname} && exec "$0" -c "$1"', sys.executable, PROBE],
        capture_output=True, text=True, timeout=60, env={"PYTHONPATH": ROOT, "PATH": "/usr/bin:/bin"}, check=True,
    ).stdout.split()
    return int(out[0]), out[1]


def _can_unshare() -> bool:
    if shutil.which("unshare") is None:
        return False
    try:
        _in_new_host()
    except (subprocess.CalledProcessError, OSError, subprocess.TimeoutExpired):
        return False
    return True


pytestmark = pytest.mark.skipif(not _can_unshare(), reason="needs unshare --pid (root or user namespaces)")


def test_a_later_host_with_the_same_namespace_inode_is_another_host():
    seen: dict[int, str] = {}
    for _ in range(12):
        inode, identity = _in_new_host()
        if inode in seen:
            assert identity != seen[inode], f"two hosts, one after the other, share the identity {identity}"
            return
        seen[inode] = identity
    pytest.skip(f"the kernel gave every namespace a fresh inode ({sorted(seen)}): nothing to tell apart")


def test_two_hosts_with_one_hostname_are_two_hosts():
    first, second = _in_new_host("same-name"), _in_new_host("same-name")
    assert first[1] != second[1]


def test_one_host_keeps_one_identity():
    from airflow_provider_zeta.processes import host_id

    assert host_id() == host_id()
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env={"PYTHONPATH": ROOT}, check=True)
    assert out.stdout.split()[1] == host_id()  # another process of this host: the same identity
