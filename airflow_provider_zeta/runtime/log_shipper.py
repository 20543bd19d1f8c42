"""Ships a driver's output to the state root when the triggerer cannot read the launcher's disk.

Purpose
    On a local or mounted state root the launcher writes spark-submit's output straight into the
    attempt's ``driver.log``, where the driver trigger streams it into the task's log. On an object
    store (``s3://``, ``gs://``) nothing can append to an object, and the worker's temporary
    directory is invisible to a triggerer on another host. This program sits between the launcher
    and spark-submit and copies the output to the attempt on the state root as numbered chunk
    objects, which the trigger reads in order as one stream (``storage.StateStorage.chunk_stream``
    and ``read_stream_range``, ``triggers/driver_output.py``).

How it works
    ``python .../runtime/log_shipper.py --attempt URL --local PATH -- COMMAND...``

    * The launcher starts this program as the leader of a new session; it starts COMMAND
      (spark-submit) as its child in the same process group, so stopping the driver (a signal to
      the group) reaches both.
    * It keeps no copy of the output outside the state root: PATH is the file the launcher opened
      for this program's own stdout and stderr (in the launching host's temporary directory, at a
      name others can predict); it is removed as soon as the program starts (only when it is that
      very file), so nothing of the driver stays behind there. Everything it creates is private
      (umask 077, inherited by spark-submit and the driver).
    * The main thread reads the child's stdout and stderr from one pipe.
    * An uploader thread writes the bytes as ``driver.log.d/<seq>`` (eight digits, from
      ``00000000``) once a chunk holds ``CHUNK_BYTES`` or its first byte has waited
      ``FLUSH_SECONDS``: each chunk one PUT, never rewritten, so a reader sees it whole or not at
      all, and the chunks in order are the output. The shipper's own messages (a failed upload)
      go into the stream.
    * When the output ends (the child and everything it started closed the pipe, or at most
      ``EXIT_DRAIN_SECONDS`` after the child exited: a daemon it started may hold the pipe open for
      good), the last chunk is written and then ``driver.log.d/end`` with the stream's total size;
      a reader counts the stream complete only then. The program exits with the child's exit
      status (128 + the signal for a child killed by one), after at most ``CLOSE_SECONDS`` more
      for the store. A COMMAND that cannot be started is reported in the stream (exit 127).
    * It never holds the child up: reading the pipe never waits for the store. When the uploads lag
      by more than ``MAX_PENDING_BYTES`` the oldest pending bytes are dropped from the shipped
      stream, and a line in it says how many (they are lost). A chunk whose upload keeps
      failing is dropped the same way after ``UPLOAD_ATTEMPTS``; when the last one is, a line says
      so before the end marker, and when even that line cannot be written no end marker is: the
      reader then says the output may be cut.
    * SIGTERM, SIGINT and SIGHUP are caught and ignored (by a handler, which a child does not
      inherit): the program ends when the output ends, so a stopped driver's last words are
      shipped too. SIGKILL of the group ends it with the driver (then without an end marker: the
      reader logs what arrived, and the task says the output may end early). A cancel that
      escalates to SIGKILL therefore loses the driver's last words that were not shipped yet.

What it does not do
    It imports no Airflow module (a driver's environment cannot import Airflow) and masks nothing:
    the trigger masks what it logs, and the chunks, like ``driver.log`` on a local root, are raw
    output, deleted with their attempt by the delayed cleanup (on an object store the bucket's
    access rules decide who reads them). It makes no coordination decision.
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable

if __package__ in (None, ""):
    # Run as a script: sys.path[0] is this directory, not the package root.
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from airflow_provider_zeta.core.paths import DRIVER_LOG_CHUNKS, DRIVER_LOG_END, chunk_name  # noqa: E402
from airflow_provider_zeta.storage import StateStorage  # noqa: E402

#: A chunk is uploaded once it holds this many bytes ...
CHUNK_BYTES = 256 * 1024
#: ... or once its first byte has waited this long (seconds).
FLUSH_SECONDS = 2.0
#: Bytes waiting for the store beyond this are dropped from the shipped stream (a line says so).
MAX_PENDING_BYTES = 16 * 1024 * 1024
#: Uploads of one chunk before it is given up.
UPLOAD_ATTEMPTS = 5
#: After the child exited, output still held open by a process it started is read this long.
EXIT_DRAIN_SECONDS = 5.0
#: After the output ended, the store gets this long for what is left (the shipper's process,
#: which carries the driver's token, outlives its driver by at most this much).
CLOSE_SECONDS = 20.0
READ_BYTES = 64 * 1024


def _stderr_note(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class ChunkUploader:
    """The uploading half: pending bytes in, numbered chunks out, in order, off the reading thread.

    ``note`` receives the shipper's own messages (a failed upload); ``ship`` puts them into the
    stream."""

    def __init__(self, attempt: StateStorage, chunk_bytes: int = CHUNK_BYTES, flush_seconds: float = FLUSH_SECONDS,
                 max_pending: int = MAX_PENDING_BYTES, attempts: int = UPLOAD_ATTEMPTS, retry_pause: float = 1.0,
                 note: Callable[[str], None] = _stderr_note) -> None:
        self.attempt = attempt
        self.chunk_bytes = chunk_bytes
        self.flush_seconds = flush_seconds
        self.max_pending = max_pending
        self.attempts = attempts
        self.retry_pause = retry_pause
        self.note = note
        self.seq = 0
        self.shipped = 0  # bytes in the chunks written so far
        self.ended = False  # the end marker is written
        self._pending = bytearray()
        self._first_pending_at: float | None = None
        self._dropped = 0
        self._closed = False
        self._condition = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="zeta-log-shipper", daemon=True)

    def start(self) -> ChunkUploader:
        """Start the uploading thread; returns the uploader itself."""
        self._thread.start()
        return self

    def add(self, data: bytes) -> None:
        """Queue ``data`` for upload; past ``max_pending`` the oldest pending bytes are dropped."""
        with self._condition:
            if self._first_pending_at is None:
                self._first_pending_at = time.monotonic()
            self._pending += data
            overflow = len(self._pending) - self.max_pending
            if overflow > 0:  # the store lags: drop the oldest, never block the reader
                del self._pending[:overflow]
                self._dropped += overflow
            self._condition.notify()

    def close(self, timeout: float | None = None) -> None:
        """Upload what is left, then the end marker (waits up to ``timeout`` for the store)."""
        with self._condition:
            self._closed = True
            self._condition.notify()
        self._thread.join(timeout)

    @staticmethod
    def _drop_note(dropped: int) -> bytes:
        return f"\n(zeta log shipper: {dropped} bytes of driver output could not be shipped)\n".encode()

    def _take(self) -> tuple[bytes, bool]:
        """The next chunk to write and whether nothing follows it (then the end marker is due)."""
        with self._condition:
            while True:
                if self._pending:
                    waited = time.monotonic() - (self._first_pending_at or 0.0)
                    if len(self._pending) >= self.chunk_bytes or waited >= self.flush_seconds or self._closed:
                        break
                    self._condition.wait(self.flush_seconds - waited)
                elif self._closed:
                    return b"", True
                else:
                    self._condition.wait()
            data = bytes(self._pending[: self.chunk_bytes])
            del self._pending[: len(data)]
            self._first_pending_at = time.monotonic() if self._pending else None
            if self._dropped:
                data = self._drop_note(self._dropped) + data
                self._dropped = 0
            return data, self._closed and not self._pending

    def _run(self) -> None:
        while True:
            data, last = self._take()
            if data:
                self._write(chunk_name(self.seq), data)
            if not last:
                continue
            with self._condition:
                dropped, self._dropped = self._dropped, 0
            if dropped:  # the last chunk was given up: say so in one more chunk before the end
                self._write(chunk_name(self.seq), self._drop_note(dropped))
            with self._condition:
                if self._dropped:  # not even that arrived: no end marker, the reader says the output may be cut
                    return
            self.ended = self._write(DRIVER_LOG_END, str(self.shipped).encode(), counts=False)
            return

    def _write(self, name: str, data: bytes, counts: bool = True) -> bool:
        for attempt in range(self.attempts):
            try:
                self.attempt.write_atomic(f"{DRIVER_LOG_CHUNKS}/{name}", data)
            except Exception as error:  # the store is unreachable for a moment
                self.note(f"(zeta log shipper: could not write {name}: {type(error).__name__}: {error})\n")
                time.sleep(self.retry_pause * (attempt + 1))
                continue
            if counts:
                self.seq += 1
                self.shipped += len(data)
            return True
        if counts:
            with self._condition:  # given up: the next chunk says so
                self._dropped += len(data)
        return False


def ship(command: list[str], attempt: StateStorage, uploader: ChunkUploader | None = None,
         exit_drain: float = EXIT_DRAIN_SECONDS, close_timeout: float = CLOSE_SECONDS) -> int:
    """Run ``command`` with its output shipped to ``attempt``; its exit status (128 + the signal for
    a child ended by a signal, as shells report it)."""
    uploader = uploader or ChunkUploader(attempt)

    def copy(data: bytes) -> None:
        uploader.add(data)

    uploader.note = lambda text: copy(text.encode())
    uploader.start()
    try:
        child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, close_fds=True)
    except OSError as error:  # spark-submit missing or not executable: the task's log says so
        copy(f"zeta log shipper: could not start {command[0]}: {error}\n".encode())
        uploader.close(timeout=close_timeout)
        return 127
    assert child.stdout is not None
    fd = child.stdout.fileno()
    drain_until: float | None = None
    while True:
        if drain_until is None and child.poll() is not None:
            # The child exited; a process it started may hold the pipe open for good.
            drain_until = time.monotonic() + exit_drain
        wait = 1.0 if drain_until is None else max(0.0, drain_until - time.monotonic())
        if not select.select([fd], [], [], wait)[0]:
            if drain_until is not None and time.monotonic() >= drain_until:
                copy(b"\n(zeta log shipper: the driver exited; output that a process it started still writes is not shipped)\n")
                break
            continue
        data = os.read(fd, READ_BYTES)
        if not data:
            break
        copy(data)
    status = child.wait()
    uploader.close(timeout=close_timeout)
    return 128 - status if status < 0 else status


def _ignore(signum, frame) -> None:  # a handler, not SIG_IGN: children do not inherit it
    pass


def forget_launch_log(path: str) -> bool:
    """Remove ``path`` if it is the very file this program's stdout goes to (the launcher opened it
    in the temporary directory, at a predictable name): the output then leaves no trace outside the
    state root. Any other file at that name (a link, someone else's) is left alone."""
    try:
        mine = os.fstat(sys.stdout.fileno())
        found = os.stat(path, follow_symlinks=False)
    except (OSError, ValueError):
        return False
    # Only a regular file is ever removed (stdout may be /dev/null or a pipe of some launcher).
    if not stat.S_ISREG(found.st_mode) or not os.path.samestat(mine, found):
        return False
    try:
        os.unlink(path)
    except OSError:
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    """The log shipper's entry point: run the command after ``--`` with its output shipped to the attempt."""
    os.umask(0o077)  # the chunks on a local-path store, and whatever spark-submit and the driver create
    parser = argparse.ArgumentParser(prog="log_shipper", description=__doc__.split("\n\n")[0])
    parser.add_argument("--attempt", required=True, help="the attempt's URL on the state root (fsspec)")
    parser.add_argument("--local", required=True, help="the file the launcher opened for this program's own output; removed at start")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND...")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command after --")
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, _ignore)
    forget_launch_log(args.local)
    return ship(command, StateStorage.from_url(args.attempt))


if __name__ == "__main__":
    sys.exit(main())
