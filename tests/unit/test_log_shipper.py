"""Driver output on an object-store state root: the shipper (runtime/log_shipper.py) puts a real
child process's output into numbered chunks, and the trigger's reader (triggers/driver_output.py)
reads them back as one stream, in order, bounded, masked, resumable; core.paths.chunk_stream is
the rule of which chunks count. The store here is fsspec's in-memory filesystem (not local: the
code takes the object-store path); tests/test_object_store.py runs the same through a real S3
server and real Airflow components."""

from __future__ import annotations

import asyncio
import sys
import time

import fsspec
import pytest

from airflow_provider_zeta.core.paths import DRIVER_LOG_CHUNKS, DRIVER_LOG_END, chunk_name, chunk_stream
from airflow_provider_zeta.runtime import log_shipper
from airflow_provider_zeta.storage import StateStorage
from airflow_provider_zeta.triggers.driver_output import DriverOutput, drain_in_worker

ATTEMPT = "runs/d/r/attempts/t/-1/tok"


@pytest.fixture
def store():
    fs = fsspec.filesystem("memory")
    root = f"/zeta-test-{time.monotonic_ns()}"
    storage = StateStorage(fs, root, f"memory://{root}")
    assert not storage.is_local
    yield storage
    if fs.exists(root):
        fs.rm(root, recursive=True)


def put_chunks(attempt: StateStorage, *chunks: bytes, end: bool = False) -> None:
    for seq, data in enumerate(chunks):
        attempt.write_atomic(f"{DRIVER_LOG_CHUNKS}/{chunk_name(seq)}", data)
    if end:
        attempt.write_atomic(f"{DRIVER_LOG_CHUNKS}/{DRIVER_LOG_END}", str(sum(map(len, chunks))).encode())


def reader(store: StateStorage, **kw) -> DriverOutput:
    output = DriverOutput(store.url, ATTEMPT, **kw)
    output._attempt = store.child(ATTEMPT)  # what open_state_storage would give for this URL
    return output


# ---------------------------------------------------------------------------- the rule


def test_chunks_count_in_order_up_to_the_first_gap_and_other_names_are_ignored():
    stream = chunk_stream({"00000000": 3, "00000001": 4, "00000003": 9, "end": 2, "x.log": 50}, None)
    assert stream.chunks == (("00000000", 0, 3), ("00000001", 3, 4))
    assert stream.size == 7 and not stream.complete
    assert stream.covering(2, 5) == [("00000000", 2, 3), ("00000001", 0, 2)]
    assert stream.covering(7, 100) == []


@pytest.mark.parametrize(
    "marker, complete",
    [(b"7", True), (b"7\n", True), (b"6", False), (b"8", False), (b"seven", False), (b"\xff", False), (None, False)],
)
def test_a_stream_is_complete_only_when_its_end_marker_names_its_size(marker, complete):
    assert chunk_stream({"00000000": 3, "00000001": 4}, marker).complete is complete


# ---------------------------------------------------------------------------- the shipper


CHILD = """
import sys, time
print("first line", flush=True)
sys.stderr.write("to stderr\\n"); sys.stderr.flush()
time.sleep(0.3)
sys.stdout.write("x" * 300 + "\\n")
sys.stdout.write("no newline at the end")
sys.exit(7)
"""


def test_the_shipper_ships_a_real_childs_whole_output_in_chunks_and_its_status(store, tmp_path):
    attempt = store.child(ATTEMPT)
    uploader = log_shipper.ChunkUploader(attempt, chunk_bytes=100, flush_seconds=0.1)
    status = log_shipper.ship([sys.executable, "-c", CHILD], attempt, uploader)
    assert status == 7
    expected = b"first line\nto stderr\n" + b"x" * 300 + b"\nno newline at the end"
    stream = attempt.chunk_stream(DRIVER_LOG_CHUNKS)
    assert stream is not None and stream.complete and stream.size == len(expected)
    assert len(stream.chunks) >= 4 and all(size <= 100 for _, _, size in stream.chunks)
    assert attempt.read_chunked_range(DRIVER_LOG_CHUNKS, 0, 10_000) == (expected, 0, len(expected))
    assert attempt.read_chunked_range(DRIVER_LOG_CHUNKS, -10, 10) == (expected[-10:], len(expected) - 10, len(expected))


def test_a_chunk_waits_at_most_the_flush_time(store):
    attempt = store.child(ATTEMPT)
    uploader = log_shipper.ChunkUploader(attempt, chunk_bytes=1 << 20, flush_seconds=0.2).start()
    uploader.add(b"a line\n")
    deadline = time.monotonic() + 5
    while attempt.chunk_stream(DRIVER_LOG_CHUNKS) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    stream = attempt.chunk_stream(DRIVER_LOG_CHUNKS)
    assert stream is not None and stream.size == 7 and not stream.complete  # shipped before the end
    uploader.close(timeout=5)
    assert attempt.chunk_stream(DRIVER_LOG_CHUNKS).complete


class FlakyStore(StateStorage):
    """Fails every write of a chunk until ``failures`` writes have failed."""

    def __init__(self, inner: StateStorage, failures: int) -> None:
        super().__init__(inner.fs, inner.root, inner.url)
        self.failures = failures

    def write_atomic(self, relative, data, make_parents=True):
        if self.failures and relative != f"{DRIVER_LOG_CHUNKS}/{DRIVER_LOG_END}":
            self.failures -= 1
            raise OSError("store unreachable")
        super().write_atomic(relative, data, make_parents)


def test_a_chunk_the_store_keeps_refusing_is_dropped_and_the_stream_says_so(store):
    attempt = FlakyStore(store.child(ATTEMPT), failures=2)
    uploader = log_shipper.ChunkUploader(attempt, chunk_bytes=5, flush_seconds=0.05, attempts=2, retry_pause=0.01)
    uploader.start()
    uploader.add(b"lost\n")
    time.sleep(0.3)
    uploader.add(b"kept\n")
    uploader.close(timeout=5)
    data, _, _ = attempt.read_chunked_range(DRIVER_LOG_CHUNKS, 0, 1000)
    assert b"lost" not in data and data.endswith(b"kept\n")
    assert b"5 bytes of driver output could not be shipped" in data
    assert attempt.chunk_stream(DRIVER_LOG_CHUNKS).complete


def test_the_reader_is_never_held_up_by_a_lagging_store(store):
    attempt = store.child(ATTEMPT)
    uploader = log_shipper.ChunkUploader(attempt, chunk_bytes=4, flush_seconds=60, max_pending=10)  # not started: nothing uploads
    started = time.monotonic()
    for _ in range(1000):
        uploader.add(b"0123456789")
    assert time.monotonic() - started < 1
    assert len(uploader._pending) == 10 and uploader._dropped == 9990


def test_the_last_chunk_given_up_is_never_lost_silently(store):
    class RefuseAfterFirst(StateStorage):
        """Takes the first chunk, then refuses ``refusals`` more writes of chunks."""

        def __init__(self, inner, refusals):
            super().__init__(inner.fs, inner.root, inner.url)
            self.refusals, self.chunks = refusals, 0

        def write_atomic(self, relative, data, make_parents=True):
            if not relative.endswith(f"/{DRIVER_LOG_END}"):
                self.chunks += 1
                if self.chunks > 1 and self.refusals:
                    self.refusals -= 1
                    raise OSError("store unreachable")
            super().write_atomic(relative, data, make_parents)

    def ship_first_and_last_words(name: str, refusals: int):
        attempt = RefuseAfterFirst(store.child(f"runs/d/r/attempts/t/-1/{name}"), refusals=refusals)
        uploader = log_shipper.ChunkUploader(attempt, flush_seconds=0.05, attempts=2, retry_pause=0.01, note=lambda text: None).start()
        uploader.add(b"first\n")
        time.sleep(0.3)
        uploader.add(b"last words\n")
        uploader.close(timeout=5)
        return attempt, uploader

    # The last chunk is refused for good, the note after it arrives: complete, and it says so.
    attempt, uploader = ship_first_and_last_words("a", refusals=2)
    data, _, _ = attempt.read_chunked_range(DRIVER_LOG_CHUNKS, 0, 1000)
    assert data.startswith(b"first\n") and b"last words" not in data and b"11 bytes of driver output could not be shipped" in data
    assert attempt.chunk_stream(DRIVER_LOG_CHUNKS).complete and uploader.ended

    # Not even the note arrives: no end marker, so the reader never counts the stream complete.
    attempt, uploader = ship_first_and_last_words("b", refusals=4)
    assert not attempt.chunk_stream(DRIVER_LOG_CHUNKS).complete and not uploader.ended


def _run_shipper(tmp_path, *command):
    import subprocess

    root = tmp_path / "state"
    return root, subprocess.Popen(
        [sys.executable, log_shipper.__file__, "--attempt", f"file://{root}/{ATTEMPT}", "--local", str(tmp_path / "launch.log"), "--", *command],
        start_new_session=True,
    )


def _shipped(root) -> tuple[bytes, bool]:
    attempt = StateStorage.from_url(f"{root}/{ATTEMPT}")
    stream = attempt.chunk_stream(DRIVER_LOG_CHUNKS)
    assert stream is not None
    return attempt.read_chunked_range(DRIVER_LOG_CHUNKS, 0, 100_000)[0], stream.complete


def test_the_shipper_ignores_sigterm_its_child_does_not_and_the_last_words_are_shipped(tmp_path):
    import os
    import signal

    # The child installs no handler: SIGTERM must kill it (a SIG_IGN inherited from the shipper
    # would keep it alive), and what it printed before is shipped, closed by the end marker.
    root, shipper = _run_shipper(tmp_path, sys.executable, "-c", "import time; print('up', flush=True); time.sleep(30)")
    deadline = time.monotonic() + 20
    chunks = root / ATTEMPT / DRIVER_LOG_CHUNKS
    while b"up" not in b"".join(p.read_bytes() for p in sorted(chunks.glob("0*"))) and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(shipper.pid, signal.SIGTERM)  # as stop_token_processes signals a driver's group
    assert shipper.wait(timeout=20) == 128 + signal.SIGTERM  # the child's end, as a shell reports it
    assert _shipped(root) == (b"up\n", True)


def test_a_daemon_that_keeps_the_output_open_does_not_keep_the_shipper(tmp_path):
    child = "import subprocess, sys; subprocess.Popen(['sleep', '30']); print('child done', flush=True)"
    root, shipper = _run_shipper(tmp_path, sys.executable, "-c", child)
    started = time.monotonic()
    assert shipper.wait(timeout=40) == 0
    assert time.monotonic() - started < log_shipper.EXIT_DRAIN_SECONDS + 15
    data, complete = _shipped(root)
    assert complete and data.startswith(b"child done\n") and b"output that a process it started still writes is not shipped" in data


def test_a_command_that_cannot_start_is_reported_in_the_stream(tmp_path):
    root, shipper = _run_shipper(tmp_path, str(tmp_path / "no-such-spark-submit"))
    assert shipper.wait(timeout=30) == 127
    data, complete = _shipped(root)
    assert complete and b"could not start" in data and b"no-such-spark-submit" in data


# ---------------------------------------------------------------------------- the reader


def test_the_reader_follows_the_chunks_as_one_stream_across_chunk_borders(store):
    attempt = store.child(ATTEMPT)
    put_chunks(attempt, b"one\ntw", b"o\nthr")
    output = reader(store)
    assert output.poll() == ["one", "two"]
    assert output.poll() == []
    put_chunks(attempt, b"one\ntw", b"o\nthr", b"ee\npassword=hunter2\n")
    assert output.poll() == ["three", "password=***"]  # masked by form on the way
    assert not output.settled() and not output.reached_end()
    put_chunks(attempt, b"one\ntw", b"o\nthr", b"ee\npassword=hunter2\n", b"tail", end=True)
    assert output.settled()
    assert output.drain() == ["tail"]
    assert output.reached_end()
    # the offset is kept on the store: a new trigger of the attempt goes on from there
    again = reader(store)
    assert again.poll(final=True) == [] and again.offset == output.offset


def test_the_trigger_waits_for_the_end_marker_of_an_ended_driver_then_gives_up(store):
    attempt = store.child(ATTEMPT)
    put_chunks(attempt, b"line\n")
    output = reader(store)

    async def late_end():
        await asyncio.sleep(0.3)
        put_chunks(attempt, b"line\n", b"last\n", end=True)

    async def main():
        return await asyncio.gather(output.settle(timeout=10, pause=0.05), late_end())

    assert asyncio.run(main())[0] is True
    assert output.drain() == ["line", "last"] and output.reached_end()

    other = store.child("runs/d/r/attempts/t/-1/other")
    put_chunks(other, b"no end\n")
    never = DriverOutput(store.url, "runs/d/r/attempts/t/-1/other")
    never._attempt = other
    started = time.monotonic()
    assert asyncio.run(never.settle(timeout=0.3, pause=0.05)) is False
    assert time.monotonic() - started < 2


def test_the_worker_says_when_a_shipped_log_never_got_its_end(store):
    attempt = store.child(ATTEMPT)
    put_chunks(attempt, b"a\nb\n")
    logged = []

    class Log:
        def info(self, fmt, prefix, line):
            logged.append(line)

    drain_in_worker(reader(store), Log())
    assert logged[:2] == ["a", "b"] and "without its end marker" in logged[2]
    logged.clear()
    put_chunks(attempt, b"a\nb\n", end=True)
    drain_in_worker(reader(store), Log())
    assert logged == []  # the first drain logged a and b; the offset is on the store


def test_after_the_first_listing_a_look_costs_the_same_however_long_the_log(store, monkeypatch):
    attempt = store.child(ATTEMPT)
    listings = []
    real_ls = store.fs.ls
    monkeypatch.setattr(store.fs, "ls", lambda *a, **k: listings.append(a) or real_ls(*a, **k))
    lookups = []
    real_info = store.fs.info
    monkeypatch.setattr(store.fs, "info", lambda *a, **k: lookups.append(a) or real_info(*a, **k))
    output = reader(store)
    chunks = []
    for number in range(30):
        chunks.append(f"line {number}\n".encode())
        put_chunks(attempt, *chunks)
        assert output.poll() == [f"line {number}"]
    assert len(listings) == 1  # the first look; then one lookup per new chunk and one that misses
    assert len(lookups) == 2 * 29


def test_a_stream_that_looks_shorter_is_not_read_again(store):
    attempt = store.child(ATTEMPT)
    put_chunks(attempt, b"one\n", b"two\n")
    output = reader(store)
    assert output.poll() == ["one", "two"]
    fresh = reader(store)  # a new trigger: its first look lists, and a chunk is not visible yet
    fresh._stream = None
    fresh.offset = output.offset + 100
    assert fresh.poll() == []  # nothing logged again from the start


def test_an_unterminated_last_line_waits_for_the_end_marker(store):
    attempt = store.child(ATTEMPT)
    put_chunks(attempt, b"one\npart")
    output = reader(store)
    assert output.drain() == ["one"]  # no end marker: "part" may go on in a chunk on its way
    put_chunks(attempt, b"one\npart", b"word=x\n", end=True)
    assert output.drain() == ["partword=x"]
