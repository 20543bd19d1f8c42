"""A state root on a mount whose writes hang: a FUSE passthrough filesystem for the hung-mount test.

Theory of operation
-------------------
``HungMount`` mounts a directory (the *backing* directory) at a mountpoint through FUSE
(Debian's ``fuse3`` and the ``mfusepy`` bindings), served by a separate daemon process
(``python -m zeta_harness.hung_mount ...``). Every operation passes through to the backing
directory, as a network mount would, with one exception that stands in for a stuck NFS server:
the first ``hang_terminal_ledgers`` writes of a driver's *terminal* ledger (the data of a
``ledger.json`` temporary file whose status is ``succeeded``, ``failed`` or ``cancelled``) block
in the daemon until the test calls ``release()``. The writing thread waits in the kernel for an
answer that does not come: a fatal signal marks its process as dying, but the thread stays in the
write (state ``D``) until the daemon answers, as with a hard-mounted NFS share. After the release
the write completes (the mount recovered); a process that was killed meanwhile then exits without
running another instruction of its own.

The daemon keeps its own record of what each process did on the mount, independent of the
provider's bookkeeping: ``ops.jsonl`` beside the mountpoint, one JSON line per changing operation
(``create``, ``write``, ``truncate``, ``rename``, ``unlink``, ``mkdir``, ``rmdir``, ``fsync``,
``chmod``, ``utimens``, ``symlink``, ``link``) with its path, the caller's process id and thread id
as seen from the machine's first PID namespace (hosts in PID namespaces included), and the wall
time; a hung write adds a ``hang`` line when it starts blocking and a ``released`` line when it
goes on.

The mount is made in the machine's first mount namespace before the namespace hosts start: each
host's private mount namespace starts with a copy of it, so every host sees the same state root.

``fuse_unavailable()`` says why the mount cannot work here (no ``/dev/fuse``, no ``fusermount3`` or
libfuse 3, no ``mfusepy``), for a skip or a failure message.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

#: The data of a ledger write whose status is terminal (``core.ledger.Ledger.to_json``: sorted JSON).
TERMINAL_LEDGER = re.compile(rb'"status": "(succeeded|failed|cancelled)"')
#: The temporary file a ledger replace writes first (``storage._write_temporary``).
LEDGER_TEMPORARY = re.compile(r"(^|/)ledger\.json\.tmp-[0-9a-f]+$")


def fuse_unavailable() -> str | None:
    """None when a ``HungMount`` can run here, else why not."""
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse on this machine (FUSE)"
    if shutil.which("fusermount3") is None:
        return "fusermount3 is missing (Debian: apt-get install fuse3, as make install does)"
    try:
        import mfusepy  # type: ignore[import-untyped,unused-ignore]  # noqa: F401
    except (ImportError, OSError) as error:
        return f"the FUSE bindings cannot load (mfusepy, libfuse 3; make install): {error}"
    return None


def caller_process(thread_id: int) -> int:
    """The process (thread group) of ``thread_id``, or ``thread_id`` itself once it is gone."""
    try:
        for line in Path(f"/proc/{thread_id}/status").read_text().splitlines():
            if line.startswith("Tgid:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return thread_id


def fatal_signal_pending(pid: int) -> bool | None:
    """Whether ``pid`` has SIGKILL pending (it is dying: no instruction of its own runs again);
    None when the process is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    if fields.get("State", "").strip().startswith(("Z", "X")):
        return None
    bit = 1 << (signal.SIGKILL - 1)
    return any(int(fields.get(name, "0").strip() or "0", 16) & bit for name in ("SigPnd", "ShdPnd"))


class HungMount:
    """The FUSE mount of ``backing`` at ``mountpoint`` (module docstring), all under ``base``."""

    def __init__(self, base: str | os.PathLike, hang_terminal_ledgers: int = 1) -> None:
        self.base = Path(base)
        self.backing = self.base / "backing"
        self.mountpoint = self.base / "state"
        self.ops_log = self.base / "ops.jsonl"
        self.release_file = self.base / "release"
        self.hang_terminal_ledgers = hang_terminal_ledgers
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 20) -> HungMount:
        for directory in (self.backing, self.mountpoint):
            directory.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
        with open(self.base / "daemon.log", "ab") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable, "-m", "zeta_harness.hung_mount", str(self.backing), str(self.mountpoint),
                    "--ops-log", str(self.ops_log), "--release-file", str(self.release_file),
                    "--hang-terminal-ledgers", str(self.hang_terminal_ledgers),
                ],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while not os.path.ismount(self.mountpoint):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the FUSE mount at {self.mountpoint} did not come up; see {self.base / 'daemon.log'}")
            time.sleep(0.05)
        from zeta_harness import teardown

        teardown.register(self)
        return self

    def release(self) -> None:
        """Let every hung write go on (the mount recovered)."""
        self.release_file.touch()

    def ops(self) -> list[dict[str, Any]]:
        """The daemon's record of changing operations (module docstring), in order."""
        if not self.ops_log.exists():
            return []
        lines = self.ops_log.read_text().splitlines()
        return [json.loads(line) for line in lines if line.endswith("}")]

    def hangs(self) -> list[dict[str, Any]]:
        return [op for op in self.ops() if op["op"] == "hang"]

    def kill_leftover_processes(self) -> list[int]:
        self.stop()
        return []

    def stop(self) -> None:
        """Release the hung writes, unmount (lazily: a host's copy of the mount goes with its
        namespace) and end the daemon."""
        from zeta_harness import teardown

        teardown.unregister(self)
        self.release()
        if os.path.ismount(self.mountpoint):
            subprocess.run(["fusermount3", "-u", "-z", str(self.mountpoint)], capture_output=True, timeout=20)
        if self.process is not None and self.process.poll() is None:
            time.sleep(0.2)
            with_timeout = time.monotonic() + 5
            while self.process.poll() is None and time.monotonic() < with_timeout:
                time.sleep(0.05)
            if self.process.poll() is None:
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)


# ---------------------------------------------------------------------- the daemon


class _OpsLog:
    """The daemon's record of changing operations (``ops.jsonl``; module docstring)."""

    def __init__(self, path: str, fuse_get_context: Any) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._fuse_get_context = fuse_get_context

    def record(self, op: str, path: str, **extra: Any) -> None:
        """One line: the operation, its path, the calling process and thread, the wall time."""
        _uid, _gid, thread_id = self._fuse_get_context()
        line = {"op": op, "path": path, "pid": caller_process(thread_id), "tid": thread_id, "at": time.time(), **extra}
        os.write(self._fd, (json.dumps(line) + "\n").encode())  # one O_APPEND write per line


class _HungWrites:
    """The first ``count`` terminal ledger writes block until ``release_file`` exists."""

    def __init__(self, count: int, release_file: str, record: Any) -> None:
        self._left = count
        self._lock = threading.Lock()
        self._release_file = release_file
        self._record = record

    def hold(self, path: str) -> None:
        """Block this write until the release when it is one of the first ``count``; else return."""
        with self._lock:
            hang = self._left > 0
            self._left -= hang
        if hang:
            self._record("hang", path)
            while not os.path.exists(self._release_file):
                time.sleep(0.1)
            self._record("released", path)


class _Passthrough:
    """The mount's operations, each passed through to ``backing`` (changing ones recorded, terminal
    ledger writes held by ``hangs``); mixed into ``mfusepy.Operations`` by ``_serve``."""

    use_ns = True

    def __init__(self, backing: str, record: Any, hangs: _HungWrites) -> None:
        self._backing = backing
        self._record = record
        self._hangs = hangs


    def _full(self, path: str) -> str:
        return os.path.join(self._backing, path.lstrip("/"))

    def access(self, path: str, amode: int) -> int:
        if not os.access(self._full(path), amode):
            raise OSError(errno.EACCES, "access denied")
        return 0

    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        st = os.fstat(fh) if fh is not None else os.lstat(self._full(path))
        keys = ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_atime_ns", "st_mtime_ns", "st_ctime_ns")
        attrs = {key: getattr(st, key) for key in keys}
        for key in ("st_atime", "st_mtime", "st_ctime"):  # nanoseconds (use_ns)
            attrs[key] = attrs.pop(f"{key}_ns")
        return attrs

    def readdir(self, path: str, fh: int) -> list[str]:
        return [".", "..", *os.listdir(self._full(path))]

    def readlink(self, path: str) -> str:
        return os.readlink(self._full(path))

    def statfs(self, path: str) -> dict[str, int]:
        st = os.statvfs(self._full(path))
        keys = ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files", "f_flag", "f_frsize", "f_namemax")
        return {key: getattr(st, key) for key in keys}

    def open(self, path: str, flags: int) -> int:
        return os.open(self._full(path), flags)

    def create(self, path: str, mode: int, fi: Any = None) -> int:
        self._record("create", path)
        return os.open(self._full(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        return os.pread(fh, size, offset)

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        self._record("write", path, size=len(data))
        if LEDGER_TEMPORARY.search(path) and TERMINAL_LEDGER.search(data):
            self._hangs.hold(path)
        return os.pwrite(fh, data, offset)

    def truncate(self, path: str, length: int, fh: int | None = None) -> int:
        self._record("truncate", path)
        if fh is not None:
            os.ftruncate(fh, length)
        else:
            os.truncate(self._full(path), length)
        return 0

    def flush(self, path: str, fh: int) -> int:
        return 0

    def fsync(self, path: str, datasync: int, fh: int) -> int:
        self._record("fsync", path)
        (os.fdatasync if datasync else os.fsync)(fh)
        return 0

    def release(self, path: str, fh: int) -> int:
        os.close(fh)
        return 0

    def rename(self, old: str, new: str) -> int:
        self._record("rename", old, to=new)
        os.rename(self._full(old), self._full(new))
        return 0

    def unlink(self, path: str) -> int:
        self._record("unlink", path)
        os.unlink(self._full(path))
        return 0

    def mkdir(self, path: str, mode: int) -> int:
        self._record("mkdir", path)
        os.mkdir(self._full(path), mode)
        return 0

    def rmdir(self, path: str) -> int:
        self._record("rmdir", path)
        os.rmdir(self._full(path))
        return 0

    def chmod(self, path: str, mode: int) -> int:
        self._record("chmod", path)
        os.chmod(self._full(path), mode)
        return 0

    def chown(self, path: str, uid: int, gid: int) -> int:
        os.chown(self._full(path), uid, gid)
        return 0

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        self._record("utimens", path)
        if times is None:
            os.utime(self._full(path))
        else:
            os.utime(self._full(path), ns=times)
        return 0

    def symlink(self, target: str, source: str) -> int:
        self._record("symlink", target, source=source)
        os.symlink(source, self._full(target))
        return 0

    def link(self, target: str, source: str) -> int:
        self._record("link", target, source=source)
        os.link(self._full(source), self._full(target))
        return 0


def _serve(backing: str, mountpoint: str, ops_log: str, release_file: str, hang_terminal_ledgers: int) -> None:
    from mfusepy import FUSE, Operations, fuse_get_context  # type: ignore[import-untyped,unused-ignore]

    class Passthrough(_Passthrough, Operations):
        """``_Passthrough``, with ``Operations``' defaults for the operations it leaves out."""

    record = _OpsLog(ops_log, fuse_get_context).record
    operations = Passthrough(backing, record, _HungWrites(hang_terminal_ledgers, release_file, record))
    # Attributes and names are not cached by the kernel: every process sees every change at once,
    # as the provider expects of a shared state root.
    FUSE(operations, mountpoint, foreground=True, nothreads=False, attr_timeout=0, entry_timeout=0, negative_timeout=0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="A FUSE passthrough mount whose terminal ledger writes hang (module docstring)")
    parser.add_argument("backing")
    parser.add_argument("mountpoint")
    parser.add_argument("--ops-log", required=True)
    parser.add_argument("--release-file", required=True)
    parser.add_argument("--hang-terminal-ledgers", type=int, default=1)
    args = parser.parse_args(argv)
    _serve(args.backing, args.mountpoint, args.ops_log, args.release_file, args.hang_terminal_ledgers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
