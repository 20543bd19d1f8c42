"""The driver's lease, enforced by the kernel: a clock that counts while the host is suspended, a
timer that kills the driver at the deadline with no code of the driver running, and a watchdog
process that takes the driver's process group (the JVM) down with it.

Why not a thread: a host that freezes (VM pause, SIGSTOP, a suspended laptop) resumes every thread
at once, and whichever runs first wins; a watchdog thread that needs the GIL, or prints to a pipe
a hung mount drains, may lose that race to the job. Here the deadline is a POSIX timer on
``CLOCK_BOOTTIME`` whose signal is ``SIGKILL``: the kernel ends the process when it expires, even
while the process is stopped, so after a freeze longer than the lease there is no process left to
resume. The timer is re-armed (an absolute deadline) after every write that renewed the lease.

The watchdog process (``python -c`` with the standard library only, no Airflow, no threads of the
driver) keeps the same deadline, renewed through a pipe; when the deadline passes, or the driver
dies without saying it is done, it kills the driver's process group (spark-submit's JVM
included) when the launch gave the driver its own group, else the driver alone.

Standard library only: this module is imported by the driver bootstrap.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
import time

CLOCK_BOOTTIME = getattr(time, "CLOCK_BOOTTIME", None)
_TIMER_ABSTIME = 1
_SIGEV_SIGNAL = 0


def lease_now() -> float:
    """The lease clock: ``CLOCK_BOOTTIME`` where there is one (it counts suspended time), else monotonic."""
    if CLOCK_BOOTTIME is not None:
        return time.clock_gettime(CLOCK_BOOTTIME)
    return time.monotonic()


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


class _Sigevent(ctypes.Structure):
    # Linux layout: sigval (8 bytes), signo, notify, then a 48-byte union (64 bytes in all).
    _fields_ = [
        ("sigev_value", ctypes.c_void_p),
        ("sigev_signo", ctypes.c_int),
        ("sigev_notify", ctypes.c_int),
        ("_pad", ctypes.c_int * 12),
    ]


class KernelKillTimer:
    """A POSIX timer on ``CLOCK_BOOTTIME`` that delivers ``SIGKILL`` to this process at a deadline."""

    def __init__(self) -> None:
        self._timer = ctypes.c_void_p()
        libc = ctypes.CDLL(None, use_errno=True)
        if not hasattr(libc, "timer_create"):  # glibc before 2.34 keeps it in librt
            libc = ctypes.CDLL(ctypes.util.find_library("rt") or "librt.so.1", use_errno=True)
        self._settime = libc.timer_settime
        self._delete = libc.timer_delete
        event = _Sigevent(sigev_value=None, sigev_signo=int(signal.SIGKILL), sigev_notify=_SIGEV_SIGNAL)
        if CLOCK_BOOTTIME is None or libc.timer_create(CLOCK_BOOTTIME, ctypes.byref(event), ctypes.byref(self._timer)):
            raise OSError(ctypes.get_errno(), "timer_create(CLOCK_BOOTTIME, SIGKILL) failed")

    def arm(self, deadline: float) -> None:
        """Kill this process at ``deadline`` (a ``lease_now()`` reading); replaces the previous deadline."""
        seconds = max(deadline, 1e-6)
        value = _Itimerspec(_Timespec(0, 0), _Timespec(int(seconds), int((seconds % 1) * 1e9) or 1))
        if self._settime(self._timer, _TIMER_ABSTIME, ctypes.byref(value), None):
            raise OSError(ctypes.get_errno(), "timer_settime failed")

    def disarm(self) -> None:
        """Cancel the kill."""
        value = _Itimerspec(_Timespec(0, 0), _Timespec(0, 0))
        self._settime(self._timer, 0, ctypes.byref(value), None)


# The watchdog process: reads deadlines ("<float>\n") or "done\n" from the pipe whose fd is argv[1];
# kills at the deadline or when the driver dies without "done". Standard library only.
_WATCHDOG_SOURCE = r"""
import os, select, signal, sys, time
fd, pid, group, deadline, lease = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
clock = getattr(time, "CLOCK_BOOTTIME", None)
now = (lambda: time.clock_gettime(clock)) if clock is not None else time.monotonic
buffer = b""
reason = None
while reason is None:
    left = deadline - now()
    if left <= 0:
        reason = "no heartbeat renewed within the lease"
        break
    ready, _, _ = select.select([fd], [], [], min(left, 1.0))
    if not ready:
        continue
    chunk = os.read(fd, 4096)
    if not chunk:
        reason = "the driver ended without finishing"
        break
    buffer += chunk
    *lines, buffer = buffer.split(b"\n")
    for line in lines:
        if line == b"done":
            sys.exit(0)
        try:
            deadline = max(deadline, float(line))
        except ValueError:
            pass
# Kill first, say why after: the message goes to the driver's log, which may sit on the hung mount.
me = os.getpid()
victims = [pid]
if group > 0:
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != me:
            try:
                with open("/proc/%s/stat" % entry) as stat:
                    if int(stat.read().rsplit(")", 1)[1].split()[2]) == group:
                        victims.append(int(entry))
            except (OSError, IndexError, ValueError):
                pass
for victim in victims:
    try:
        os.kill(victim, signal.SIGKILL)
    except OSError:
        pass
try:
    os.write(2, ("[zeta] lease watchdog: %s (lease %.1fs): driver stopped\n" % (reason, lease)).encode())
except OSError:
    pass
if group > 0:  # whatever the group started meanwhile (this process included)
    os.killpg(group, signal.SIGKILL)
"""


class LeaseWatchdogProcess:
    """The separate watchdog process; ``renew`` and ``done`` never block the driver."""

    def __init__(self, deadline: float, lease: float, kill_group: bool) -> None:
        read_end, self._write_end = os.pipe()
        group = os.getpgid(0) if kill_group else 0
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-S", "-c", _WATCHDOG_SOURCE, str(read_end), str(os.getpid()), str(group), repr(deadline), repr(lease)],
                pass_fds=(read_end,),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                close_fds=True,
            )
        finally:
            os.close(read_end)
        os.set_blocking(self._write_end, False)

    def _send(self, line: bytes) -> None:
        # A watchdog that is itself stopped may leave the pipe full: drop the message rather than
        # wait (its deadline only grows, so a dropped renewal can only end the driver earlier).
        with contextlib.suppress(BlockingIOError, BrokenPipeError, OSError):
            os.write(self._write_end, line)

    def renew(self, deadline: float) -> None:
        """Move the kill to ``deadline``."""
        self._send(f"{deadline!r}\n".encode())

    def done(self) -> None:
        """Tell the watchdog the driver ended: it exits without a kill."""
        self._send(b"done\n")
        with contextlib.suppress(OSError):
            os.close(self._write_end)
