"""A frozen namespace host stops every process it has, and runs again once thawed."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import pytest

from zeta_harness.hosts import NamespaceHost, process_state, unshare_available

# Two children of the command and a detached one (reparented to the host's init, as a driver is);
# each appends a line to a file of its own ten times a second while it runs.
TICK = "while :; do date +%s.%N >> {out}/{name}; sleep 0.1; done"
FAMILY = "\n".join([
    f"({TICK.format(out='$OUT', name='a')}) &",
    f"({TICK.format(out='$OUT', name='b')}) &",
    f"(setsid sh -c '{TICK.format(out='$OUT', name='detached')}' &)",
    "wait",
])


def _wait_for(condition, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def test_a_frozen_host_runs_nothing_until_thawed():
    why = unshare_available()
    if why is not None:
        pytest.skip(why)
    # Outside /tmp: a namespace host has a private /tmp of its own.
    out = Path(tempfile.mkdtemp(prefix="zeta-host-freeze-", dir="/var/tmp"))
    host = NamespaceHost(
        "frozen-test", ["sh", "-c", FAMILY], env={"PATH": "/usr/bin:/bin", "OUT": str(out)}, cwd=out,
        log_path=out / "host.log",
    )
    files = [out / name for name in ("a", "b", "detached")]
    try:
        host.start()
        assert _wait_for(lambda: all(f.exists() for f in files), 15), host.log_path.read_text()
        frozen = host.freeze()
        assert host.init_pid in frozen and len(frozen) >= 5, frozen
        assert {process_state(pid) for pid in host.members()} - {"Z", "X"} == {"T"}  # a zombie waits for the thaw
        time.sleep(0.3)  # a write in flight at the moment of the freeze lands
        sizes = [f.stat().st_size for f in files]
        time.sleep(1.0)
        assert [f.stat().st_size for f in files] == sizes, "a process of the frozen host wrote"

        assert set(host.thaw()) <= set(frozen)
        assert _wait_for(lambda: all(f.stat().st_size > size for f, size in zip(files, sizes, strict=True)), 5)
        assert "T" not in {process_state(pid) for pid in host.members()}

        # A frozen host can still be killed whole (the harness's cleanup after a failed test).
        host.freeze()
        host.kill()
        assert host.members() == []
    finally:
        if host.alive():
            host.kill()
        shutil.rmtree(out, ignore_errors=True)
