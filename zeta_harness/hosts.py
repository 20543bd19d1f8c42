"""Several "hosts" on one machine: Linux PID + mount + UTS namespaces, for multi-host tests.

Theory of operation
-------------------
A ``NamespaceHost`` runs one command (a Celery worker, a triggerer) as the only child of a tiny
init process inside fresh namespaces made by ``unshare --pid --fork --mount-proc --uts --mount``:

* **its own process table** (PID namespace, ``/proc`` remounted): processes of one host cannot see,
  signal or judge by PID the processes of another, as on separate machines;
* **its own hostname** (UTS namespace), set by the init before the command starts;
* **its own /tmp** (mount namespace, private propagation): a fresh tmpfs, so nothing a host keeps in
  ``/tmp`` is visible elsewhere.

Everything else is shared, as on machines that share storage: the network (so 127.0.0.1 reaches
PostgreSQL, Redis, the API server and the Spark master) and every directory outside ``/tmp`` — the
state root and the output directories a test gives all hosts stand in for NFS/HDFS. A harness that
wants a host-private directory (the misconfigured deployment) points a setting into ``/tmp``.

The init (``python -m zeta_harness.hosts --hostname NAME -- COMMAND...``) is PID 1 of
the namespace: it forwards SIGTERM/SIGINT to the command, reaps every orphan re-parented to it (the
detached Spark drivers of a worker host) so that none lingers as a zombie that looks alive, and
exits with the command's status. When PID 1 of a PID namespace dies the kernel SIGKILLs every
other process of the namespace: **killing a host** is ``SIGKILL`` to the init from outside, after
which ``kill()`` waits until no process of the namespace is left and records the moment.

**Freezing a host** (a paused VM, a suspended laptop) is ``SIGSTOP`` to every process of the
namespace, the init included (from outside the namespace the kernel delivers it even to a PID 1):
nothing of the host runs, but its processes, sockets and timers stay. ``thaw()`` sends ``SIGCONT``
to all of them at once. The kernel still acts on a stopped process: a ``SIGKILL`` (a POSIX timer's
included) ends it, and it stays a zombie until its frozen parent reaps it after the thaw.

**A host whose wall clock is off** (an NTP-less VM, a drifted container host) runs every
process under Debian's libfaketime: ``skewed_wall_clock_env(seconds)`` is the environment to start
it with (``LD_PRELOAD``, ``FAKETIME``). Only the wall clock moves (``time.time()``, ``date``, file
times the host's processes stamp themselves); ``CLOCK_MONOTONIC`` and ``CLOCK_BOOTTIME`` run true,
as on a real host whose clock is merely set wrong (``FAKETIME_DONT_FAKE_MONOTONIC=1``, and a small
preloaded fix, ``faketime_monotonic_fix.c``, for the sleeps, timers and condition-variable waits
on those clocks that libfaketime 0.9.10 still shifts). ``NamespaceHost.run()`` runs a command inside a host with its
environment, e.g. to read the clocks it sees.

This module imports only the standard library: the init runs it before anything else.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

#: The repository root, which holds this harness (a top-level package, not installed with the provider).
REPOSITORY_ROOT = Path(__file__).resolve().parents[1]


class HostError(RuntimeError):
    """A namespace host could not start, or did not die completely when killed."""


def pid_namespace(pid: int | str = "self") -> str | None:
    """The PID namespace of ``pid`` as the kernel names it (``pid:[4026532…]``), or None if gone."""
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def unshare_available() -> str | None:
    """None when namespace hosts can run here, else why not (for a skip message)."""
    try:
        result = subprocess.run(
            ["unshare", "--pid", "--fork", "--mount-proc", "--uts", "--mount", "true"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"unshare cannot run: {error}"
    if result.returncode != 0:
        return f"unshare --pid --uts --mount failed (needs root or user namespaces): {result.stderr.strip()}"
    return None


#: Where Debian's ``libfaketime`` package (``apt-get install faketime``) puts the library.
LIBFAKETIME_GLOB = "/usr/lib/*/faketime/libfaketime.so.1"
#: The fix preloaded before libfaketime (see its header), built once per source version.
_MONOTONIC_FIX_SOURCE = Path(__file__).with_name("faketime_monotonic_fix.c")
#: Built outside /tmp: every host has a private /tmp, and each process of a host loads it.
_MONOTONIC_FIX_DIR = Path("/var/tmp/zeta-faketime-fix")


def libfaketime_path() -> str | None:
    found = sorted(glob.glob(LIBFAKETIME_GLOB))
    return found[0] if found else None


def skewed_clock_unavailable() -> str | None:
    """None when ``skewed_wall_clock_env`` can work here, else why not (for a skip message)."""
    if libfaketime_path() is None:
        return f"libfaketime is not installed (no {LIBFAKETIME_GLOB}; Debian: apt-get install faketime, as make install does)"
    try:
        _monotonic_fix()
    except HostError as error:
        return str(error)
    return None


def _monotonic_fix() -> str:
    source = _MONOTONIC_FIX_SOURCE.read_bytes()
    library = _MONOTONIC_FIX_DIR / f"faketime-monotonic-fix-{hashlib.sha256(source).hexdigest()[:16]}.so"
    if library.exists():
        return str(library)
    _MONOTONIC_FIX_DIR.mkdir(parents=True, exist_ok=True)
    partial = library.with_suffix(f".{os.getpid()}.partial")
    try:
        result = subprocess.run(
            ["gcc", "-shared", "-fPIC", "-O2", "-o", str(partial), str(_MONOTONIC_FIX_SOURCE), "-ldl"],
            capture_output=True,
            text=True,
            timeout=120,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise HostError(f"cannot build {_MONOTONIC_FIX_SOURCE.name} (needs gcc): {error}") from None
    if result.returncode != 0:
        raise HostError(f"cannot build {_MONOTONIC_FIX_SOURCE.name}: {result.stderr.strip()[-2000:]}")
    os.replace(partial, library)
    return str(library)


def skewed_wall_clock_env(seconds: int, env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment that gives every process of a host a wall clock ``seconds`` off (ahead when
    positive), its monotonic and boot clocks true; pass it as the host's environment (``env`` is
    the host's own, whose ``LD_PRELOAD`` is kept after libfaketime's)."""
    faketime = libfaketime_path()
    if faketime is None:
        raise HostError(skewed_clock_unavailable() or "libfaketime is not installed")
    preload = " ".join(p for p in (_monotonic_fix(), faketime, (env or {}).get("LD_PRELOAD", "")) if p)
    return {
        "LD_PRELOAD": preload,
        "FAKETIME": f"{int(seconds):+d}",  # a constant offset in seconds from the true time
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    }


class NamespaceHost:
    """One simulated host running ``command``; see the module docstring."""

    def __init__(
        self,
        hostname: str,
        command: Sequence[str],
        *,
        env: dict[str, str],
        cwd: str | os.PathLike,
        log_path: str | os.PathLike,
    ) -> None:
        self.hostname = hostname
        self.command = list(command)
        self.env = dict(env)
        self.cwd = str(cwd)
        self.log_path = Path(log_path)
        self.process: subprocess.Popen | None = None
        self.namespace: str | None = None  # pid:[inode] of the host, known once started
        self.init_pid: int | None = None  # the namespace's PID 1, as seen from outside
        self.killed_at: float | None = None  # wall clock (time.time()) when kill() ended the host

    def start(self, timeout: float = 20) -> NamespaceHost:
        env = dict(self.env)
        # The init imports this module by name: the harness (at the repository root, not installed)
        # must be importable from the command's cwd.
        package_root = str(REPOSITORY_ROOT)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [
                    "unshare", "--pid", "--fork", "--mount-proc", "--uts", "--mount", "--propagation", "private",
                    sys.executable, "-m", "zeta_harness.hosts", "--hostname", self.hostname,
                    "--", *self.command,
                ],
                env=env,
                cwd=self.cwd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            init = _children(self.process.pid)
            if init:
                namespace = pid_namespace(init[0])
                if namespace and namespace != pid_namespace(self.process.pid):
                    self.init_pid, self.namespace = init[0], namespace
                    return self
            if self.process.poll() is not None:
                raise HostError(f"host {self.hostname}: unshare exited {self.process.returncode}; see {self.log_path}")
            time.sleep(0.05)
        raise HostError(f"host {self.hostname}: no namespace init within {timeout}s")

    @property
    def pid(self) -> int:
        assert self.process is not None, "start() first"
        return self.process.pid

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def members(self) -> list[int]:
        """Outside PIDs of every live (non-zombie) process of this host's PID namespace."""
        if self.namespace is None:
            return []
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit() and pid_namespace(entry) == self.namespace and not _zombie(int(entry)):
                found.append(int(entry))
        return found

    def kill(self, timeout: float = 20) -> list[int]:
        """SIGKILL the whole host (every process of its namespace); returns the PIDs it had.

        Raises ``HostError`` if any process of the namespace is still alive after ``timeout``.
        """
        victims = self.members()
        if self.init_pid is not None:
            try:
                os.kill(self.init_pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout
        while (left := self.members()) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.killed_at = time.time()
        if left:
            raise HostError(f"host {self.hostname}: processes {left} survived the kill of its namespace")
        if self.process is not None:
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
        return victims

    def freeze(self, timeout: float = 20) -> list[int]:
        """SIGSTOP every process of the host, as a paused VM stops all of them; returns their PIDs.

        Repeats until every member is stopped: a process the host forked between two signals is
        stopped too. Returns once the kernel shows each of them stopped (``T``), so nothing of the
        host runs after this returns; raises ``HostError`` if that takes longer than ``timeout``.
        """
        deadline = time.monotonic() + timeout
        while True:
            members = self.members()
            # A zombie (a child that exited just before its parent was stopped, and so is not
            # reaped until the thaw) or a gone process runs nothing and never shows "T".
            running = [pid for pid in members if process_state(pid) not in ("T", "Z", "X")]
            if not running:
                return members
            if time.monotonic() > deadline:
                raise HostError(f"host {self.hostname}: processes {running} not stopped within {timeout}s")
            for pid in running:
                try:
                    os.kill(pid, signal.SIGSTOP)
                except ProcessLookupError:
                    pass
            time.sleep(0.02)

    def thaw(self) -> list[int]:
        """SIGCONT every process of the host at once, as a VM resumes; returns their PIDs."""
        members = self.members()
        for pid in members:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        return members

    def run(self, command: Sequence[str], timeout: float = 30) -> subprocess.CompletedProcess:
        """Run ``command`` inside this host (its PID, mount and UTS namespaces) with the host's
        environment, as one more process of it; returns its completed process (text output)."""
        if self.init_pid is None or not self.alive():
            raise HostError(f"host {self.hostname} is not running")
        return subprocess.run(
            ["nsenter", "--target", str(self.init_pid), "--pid", "--mount", "--uts", "--", *command],
            env=self.env,
            cwd=self.cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )

    def terminate(self) -> None:
        """Ask the command to stop (SIGTERM through the init); ``kill()`` ends whatever is left."""
        if self.init_pid is not None and self.alive():
            try:
                os.kill(self.init_pid, signal.SIGTERM)
            except ProcessLookupError:
                pass


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def process_state(pid: int) -> str:
    """The kernel's one-letter state of ``pid`` (``R``, ``S``, ``T`` stopped, ``Z`` zombie...); ``X`` if gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "X"


def _zombie(pid: int) -> bool:
    return process_state(pid) in ("Z", "X")


# ---------------------------------------------------------------------- the namespace's init


def _paths_under_tmp_to_keep() -> list[Path]:
    """The project root, the Python environment and sys.path entries that lie under /tmp, outermost only."""
    candidates = {REPOSITORY_ROOT, Path(sys.prefix).resolve()}
    candidates.update(Path(entry).resolve() for entry in sys.path if entry and Path(entry).is_dir())
    under_tmp = sorted(p for p in candidates if p != Path("/tmp") and Path("/tmp") in p.parents)
    outermost: list[Path] = []
    for path in under_tmp:
        if not any(kept == path or kept in path.parents for kept in outermost):
            outermost.append(path)
    return outermost


def _init(hostname: str, command: list[str]) -> int:
    import socket

    socket.sethostname(hostname)
    # A private /tmp: the mount namespace is private (unshare --propagation private), so this tmpfs
    # is seen by this host only. What the host must still run from — the project and the Python
    # environment, when they live under /tmp (a CI checkout may) — is bound back into it.
    keep = _paths_under_tmp_to_keep()
    holds = []
    for index, path in enumerate(keep):
        hold = Path(f"/var/tmp/zeta-host-hold/{hostname}-{os.getpid()}/{index}")
        hold.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "--bind", str(path), str(hold)], check=True)
        holds.append((hold, path))
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=1777", f"tmpfs-{hostname}", "/tmp"], check=True)
    for hold, path in holds:
        path.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "--bind", str(hold), str(path)], check=True)
    child = subprocess.Popen(command)

    def forward(signum, _frame):
        try:
            child.send_signal(signum)
        except ProcessLookupError:
            pass

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    while True:
        try:
            pid, status = os.waitpid(-1, 0)  # reap every orphan of the host, not only the command
        except ChildProcessError:
            return 0
        except InterruptedError:
            continue
        if pid == child.pid:
            return os.waitstatus_to_exitcode(status)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="PID 1 of a namespace host (see module docstring)")
    parser.add_argument("--hostname", required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the host's command after --")
    return _init(args.hostname, command)


if __name__ == "__main__":
    sys.exit(main())
