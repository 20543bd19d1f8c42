"""Ships a driver's output to the state root when the triggerer cannot read the launcher's disk.

Purpose
    On a local or mounted state root the launcher writes spark-submit's output straight into the
    attempt's ``driver.log``, where the driver trigger streams it into the task's log. On an object
    store (``s3://``, ``gs://``) nothing can append to an object, and the worker's temporary
    directory is invisible to a triggerer on another host. This program sits between the launcher
    and spark-submit and copies the output to the attempt on the state root as numbered chunk
    objects, which the trigger reads in order as one stream (``storage.StateStorage.read_chunked_range``,
    ``triggers/driver_output.py``).

How it works
    ``python .../runtime/log_shipper.py --attempt URL --local PATH -- COMMAND...``

    * The launcher starts this program as the leader of a new session; it starts COMMAND
      (spark-submit) as its child in the same process group, so stopping the driver (a signal to
      the group) reaches both.
    * The main thread reads the child's stdout and stderr from one pipe and appends every byte to
      PATH on the launching host at once (the same host's copy: nothing is lost when the store is
      unreachable).
    * An uploader thread writes the bytes as ``driver.log.d/<seq>`` (eight digits, from
      ``00000000``) once a chunk holds ``CHUNK_BYTES`` or its first byte has waited
      ``FLUSH_SECONDS``: each chunk one PUT, never rewritten, so a reader sees it whole or not at
      all, and the chunks in order are the output.
    * When the output ends (the child and everything it started closed the pipe), the last chunk is
      written and then ``driver.log.d/end`` with the stream's total size; a reader counts the stream
      complete only then. The program exits with the child's exit status.
    * It never holds the child up: reading the pipe never waits for the store. When the uploads lag
      by more than ``MAX_PENDING_BYTES`` the oldest pending bytes are dropped from the shipped
      stream, and a line in it says how many (they stay in PATH). A chunk whose upload keeps
      failing is dropped the same way after ``UPLOAD_ATTEMPTS``.
    * SIGTERM, SIGINT and SIGHUP are caught and ignored: the program ends when the output ends, so a
      stopped driver's last words are shipped too. SIGKILL of the group ends it with the driver
      (then without an end marker: the reader logs what arrived, and the task that resumes says
      where the rest is).

What it does not do
    It imports no Airflow module (a driver's environment cannot import Airflow) and masks nothing:
    the trigger masks what it logs, and the chunks, like ``driver.log`` on a local root, are raw
    output readable by whoever can read the state root. It makes no coordination decision.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time

if __package__ in (None, ""):
    # Run as a script: sys.path[0] is this directory, not the package root.
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from airflow_provider_zeta.core.paths import DRIVER_LOG_CHUNKS, DRIVER_LOG_END, chunk_name  # noqa: E402
from airflow_provider_zeta.storage import StateStorage  # noqa: E402

#: A chunk is uploaded once it holds this many bytes ...
CHUNK_BYTES = 256 * 1024
#: ... or once its first byte has waited this long (seconds).
FLUSH_SECONDS = 2.0
#: Bytes waiting for the store beyond this are dropped from the shipped stream (they stay local).
MAX_PENDING_BYTES = 16 * 1024 * 1024
#: Uploads of one chunk before it is given up.
UPLOAD_ATTEMPTS = 5
READ_BYTES = 64 * 1024


class ChunkUploader:
    """The uploading half: pending bytes in, numbered chunks out, in order, off the reading thread."""

    def __init__(self, attempt: StateStorage, chunk_bytes: int = CHUNK_BYTES, flush_seconds: float = FLUSH_SECONDS,
                 max_pending: int = MAX_PENDING_BYTES, attempts: int = UPLOAD_ATTEMPTS, retry_pause: float = 1.0) -> None:
        self.attempt = attempt
        self.chunk_bytes = chunk_bytes
        self.flush_seconds = flush_seconds
        self.max_pending = max_pending
        self.attempts = attempts
        self.retry_pause = retry_pause
        self.seq = 0
        self.shipped = 0  # bytes in the chunks written so far
        self._pending = bytearray()
        self._first_pending_at: float | None = None
        self._dropped = 0
        self._closed = False
        self._condition = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="zeta-log-shipper", daemon=True)

    def start(self) -> ChunkUploader:
        self._thread.start()
        return self

    def add(self, data: bytes) -> None:
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
                note = f"\n(zeta: {self._dropped} bytes of driver output could not be shipped; they are in the launcher's local copy)\n"
                data = note.encode() + data
                self._dropped = 0
            return data, self._closed and not self._pending

    def _run(self) -> None:
        while True:
            data, last = self._take()
            if data:
                self._write(chunk_name(self.seq), data)
            if last:
                self._write(DRIVER_LOG_END, str(self.shipped).encode(), counts=False)
                return

    def _write(self, name: str, data: bytes, counts: bool = True) -> None:
        for attempt in range(self.attempts):
            try:
                self.attempt.write_atomic(f"{DRIVER_LOG_CHUNKS}/{name}", data)
            except Exception as error:  # the store is unreachable for a moment
                print(f"zeta log shipper: could not write {name} ({type(error).__name__}: {error})", file=sys.stderr, flush=True)
                time.sleep(self.retry_pause * (attempt + 1))
                continue
            if counts:
                self.seq += 1
                self.shipped += len(data)
            return
        if counts:
            with self._condition:  # given up: the next chunk says so
                self._dropped += len(data)


def ship(command: list[str], attempt: StateStorage, local_path: str, uploader: ChunkUploader | None = None) -> int:
    """Run ``command`` with its output copied to ``local_path`` and shipped to ``attempt``; its status."""
    os.makedirs(os.path.dirname(local_path) or ".", exist_ok=True)
    uploader = (uploader or ChunkUploader(attempt)).start()
    child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, close_fds=True)
    assert child.stdout is not None
    with open(local_path, "ab") as local:
        while True:
            data = os.read(child.stdout.fileno(), READ_BYTES)
            if not data:
                break
            local.write(data)
            local.flush()
            uploader.add(data)
    status = child.wait()
    uploader.close(timeout=60)
    return status


def _ignore(signum, frame) -> None:  # a handler, not SIG_IGN: children do not inherit it
    pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="log_shipper", description=__doc__.split("\n\n")[0])
    parser.add_argument("--attempt", required=True, help="the attempt's URL on the state root (fsspec)")
    parser.add_argument("--local", required=True, help="the launching host's copy of the output")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND...")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command after --")
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, _ignore)
    return ship(command, StateStorage.from_url(args.attempt), args.local)


if __name__ == "__main__":
    sys.exit(main())
