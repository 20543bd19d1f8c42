"""Local process handles for detached drivers: launch, identify, look up by token, stop.

A handle is (host, host id, pid, start time). The start time (from ``/proc/<pid>/stat``) makes a
handle immune to pid reuse: a process with the same pid but another start time is not our driver,
and a handle without a start time is never trusted (nor signalled). A handle is only meaningful on
its own host; elsewhere the ledger heartbeat is the only signal.

A *host* is what shares one process table: ``host_id()`` is the kernel's boot id plus the inode of
this process's PID namespace plus the start time of that namespace's init. Hostnames are not unique (containers share them, and so do PID
numbers), so they are kept for display only.

An *observer clock* (``observer_clock()``) is what liveness is measured with: the monotonic clock,
named by what makes two readings of it comparable — the boot (and time namespace) on Linux, where
``CLOCK_MONOTONIC`` is shared by every process of one boot; elsewhere this process alone.

Looking a driver up *by token* scans the command lines of this host's processes: the token is in
the spark-submit command (``--conf spark.zeta.attemptToken=<token>`` and the bootstrap's spec), so a driver that was
launched but has not written its ledger yet is still found. Linux ``/proc`` only; elsewhere the
lookups answer "unknown" and the ledger decides.

Processes are listed, waited for and signalled through psutil; a process found is signalled only
while psutil still sees the same process at its pid (pid and start time). Two things are read from
``/proc`` directly because psutil has no public equivalent: the start time in clock ticks since
boot (``process_start_time``: psutil's ``create_time()`` is seconds since the epoch, the boot time
by the wall clock plus these ticks, so it moves when the system clock is stepped, while a handle is
stored in the launch record and compared later, in other processes) and a process's raw command
line (``pids_carrying``: psutil splits a command line rewritten without NUL separators on spaces,
and the bootstrap's token needle holds one).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from airflow_provider_zeta.core.deploy import ProcessView


@dataclass(frozen=True)
class ProcessHandle:
    """A launched process: its host, its pid and its start time (which tells it from a later process with the same pid)."""

    host: str  # hostname, for people
    pid: int
    start_time: float | None
    host_id: str | None = None  # host_id() of the launching host; None: an older handle, never trusted


#: Names this process's monotonic clock where no boot id says which processes share it.
_PROCESS_CLOCK = f"process-{os.getpid()}-{os.urandom(6).hex()}"


def _clock_id() -> str:
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return _PROCESS_CLOCK
    try:
        time_namespace = os.stat("/proc/self/ns/time").st_ino  # may shift CLOCK_MONOTONIC
    except OSError:
        time_namespace = 0
    return f"{boot}:timens-{time_namespace}:monotonic"


def observer_clock() -> tuple[str, float]:
    """(which clock, its reading): this host's monotonic clock, for ``core.ledger.HeartbeatSeen``."""
    return _clock_id(), time.monotonic()


def this_host() -> str:
    """This host's name."""
    return socket.gethostname()


def host_id() -> str:
    """Boot id + PID-namespace inode + start of that namespace's init: equal exactly when two
    processes see the same process table, and never equal to a later host's.

    The kernel hands a new PID namespace the inode of one that died, so boot id + inode alone
    would take a host started later (a restarted container, a new worker namespace) for the old
    one. The start time of the namespace's pid 1 (clock ticks since boot) is fixed for the
    namespace's whole life and later for any later namespace: it makes the identity unique over
    time. Where ``/proc/1`` cannot be read it is left out (the identity is then only as good as
    boot id + inode).
    """
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = "no-boot-id"
    try:
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        namespace = 0
    init_start = process_start_time(1)
    started = "" if init_start is None else f":init-{init_start:.0f}"
    return f"{boot}:pidns-{namespace}{started}"


def process_start_time(pid: int) -> float | None:
    """Start time of ``pid`` in clock ticks since boot, or None when it does not exist (or is a zombie)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if fields[0] in ("Z", "X"):
        return None
    return float(fields[19])


def launch_detached(command: list[str], env: dict[str, str], log_path: str, pass_fds: tuple[int, ...] = ()) -> ProcessHandle:
    """Start ``command`` in its own session so it outlives the task process, worker and scheduler
    (``pass_fds``: descriptors it inherits, e.g. the secret Spark properties)."""
    # The driver's output can hold every secret the deploy rendered: its log and the directories
    # made for it are private from the first byte (0600 / 0700), and so is everything the driver
    # and spark-submit's JVM create (umask 077), before the driver itself runs.
    os.makedirs(os.path.dirname(log_path), mode=0o700, exist_ok=True)
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "ab") as log:
        process = subprocess.Popen(
            command,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
            pass_fds=pass_fds,
            umask=0o077,
        )
    # The Popen object is dropped on purpose: the driver is not our child to wait for. Its exit is
    # read from the ledger; the zombie is reaped by whoever inherits it.
    return ProcessHandle(
        host=this_host(), pid=process.pid, start_time=process_start_time(process.pid), host_id=host_id()
    )


def handle_alive(handle: ProcessHandle) -> bool | None:
    """True/False on the handle's own host (same boot and PID namespace), None when it cannot tell.

    A handle without a recorded start time cannot be told from a reused pid: unknown, never "alive"
    (it would be signalled) nor "gone" (it would count as stopped).
    """
    if handle.host_id is None or handle.host_id != host_id() or handle.start_time is None:
        return None
    start = process_start_time(handle.pid)
    return start is not None and start == handle.start_time


def token_needles(token: str) -> tuple[bytes, ...]:
    """How a driver's processes carry its token: spark-submit's conf and the bootstrap's spec.

    Only these count — a ``tail -f`` on a path that contains the token is not the driver.
    """
    return (f"spark.zeta.attemptToken={token}".encode(), f'"token": "{token}"'.encode())


def pids_carrying(token: str) -> list[int]:
    """Pids of live processes on this host whose command line carries ``token`` as a driver does."""
    needles = token_needles(token)
    found = []
    me = os.getpid()
    try:
        pids = psutil.pids()
    except OSError:
        return []
    for pid in pids:
        if pid == me:
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if any(needle in cmdline for needle in needles) and process_start_time(pid) is not None:
            found.append(pid)
    return found


def process_view(token: str, handle: ProcessHandle | None) -> ProcessView:
    """What this host can tell about the driver of ``token``: alive, gone, or unknown."""
    if token and pids_carrying(token):
        return ProcessView.ALIVE
    if handle is not None:
        alive = handle_alive(handle)
        if alive is True:
            return ProcessView.ALIVE
        if alive is False:
            return ProcessView.GONE
    return ProcessView.UNKNOWN


def stop_token_processes(
    token: str, handle: ProcessHandle | None = None, grace_s: float = 10.0, self_exit_s: float = 0.0
) -> list[int]:
    """Stop every local process of the token (and the handle's group).

    First wait up to ``self_exit_s`` for the driver to notice its cancel marker and exit on its
    own (it then records ``cancelled`` in its ledger), then SIGTERM, then SIGKILL after ``grace_s``.
    """
    targets = set(pids_carrying(token))
    if handle is not None and handle_alive(handle) is True:  # start time recorded and matching
        targets.add(handle.pid)
    processes = [process for process in map(_found_process, targets) if process is not None]
    if not targets:
        return []
    _wait_until_gone(processes, self_exit_s)
    for process in processes:
        _signal_group_or_process(process, signal.SIGTERM)
    _wait_until_gone(processes, grace_s)
    for process in processes:
        _signal_group_or_process(process, signal.SIGKILL)
    return sorted(targets)


def _found_process(pid: int) -> psutil.Process | None:
    """The process at ``pid`` as psutil sees it now (its identity: pid and start time), or None."""
    try:
        return psutil.Process(pid)
    except psutil.Error:
        return None


def _running(process: psutil.Process) -> bool:
    """Whether ``process`` still runs: the same process at its pid (not a later one that reuses the
    pid), and not a zombie."""
    try:
        return process.is_running() and process.status() not in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
    except psutil.Error:
        return False


def _wait_until_gone(processes: list[psutil.Process], timeout: float) -> None:
    """Up to ``timeout`` seconds, until none of ``processes`` runs any more (zombies count as gone)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(_running(process) for process in processes):
        time.sleep(0.2)


def _signal_group_or_process(process: psutil.Process, sig: signal.Signals) -> None:
    """Send ``sig`` to a still-running process, to its whole process group when it leads one (the
    driver leads its own session/group: its children go too)."""
    if not _running(process):
        return
    with contextlib.suppress(ProcessLookupError, PermissionError, psutil.Error):
        if os.getpgid(process.pid) == process.pid:
            os.killpg(process.pid, sig)
        else:
            process.send_signal(sig)
