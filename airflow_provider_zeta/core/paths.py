"""Where the provider keeps each piece of its own data.

In the state root (``[zeta] state_root``), everything of one run lives under one directory::

    runs/<dag>/<run>/run.json                                  the run's real ids (the sweep reads them)
    runs/<dag>/<run>/attempts/<task>/<map_index>/<token>/ledger.json   driver ledger (driver writes)
                                                        /cancel        cancel marker (coordinator writes)
                                                        /output/       this attempt's staging output
                                                        /driver.log    spark-submit's output
    runs/<dag>/<run>/outputs/<hash>.json                       an output table this run published into
    runs/<dag>/<run>/cleanup/<task>-<incarnation>.json         record of a cleanup task's incarnation
    runs/<dag>/<run>/cleanup/sweep.json                        record written by the sweep

In an output table, the run's hidden leftovers are kept apart per run, so that a cleanup can only
ever reach its own::

    _zeta_pending/<dag>/<run>/<commit>-<nonce>/<partition>/... a partition being assembled
    _zeta_tombstones/<dag>/<run>/<partition, flat>-<commit>/...  a replaced partition, kept for the window

``<partition>`` is the run's rendered partition, ``ds=<ds>`` by default, possibly several segments
(``ds=<ds>/hour=13``). Leftovers are listed, recorded and deleted one level below ``<run>``, one
entry each, so a tombstone's name is flat (``tombstone_dir``): ``ds=<ds>-<commit>``, or
``ds=<ds>__hour=13-<commit>`` — each tombstone keeps its own window.

Every segment goes through ``safe_segment``: Airflow run ids hold ``:`` and ``+``, which Hadoop
paths (and so Spark) reject.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

LEDGER_FILE = "ledger.json"
CANCEL_MARKER = "cancel"
# Written by the deploy task before its intent record: proof, for any later observer, that the
# launching side wrote to this state root (core/deploy.py, row state_root_not_shared).
INTENT_FILE = "intent.json"
OUTPUT_DIR = "output"
#: spark-submit's output, in the attempt directory: one file on a local or mounted state root ...
DRIVER_LOG = "driver.log"
#: ... or, on an object store, numbered chunk objects in this folder, shipped by
#: ``runtime/log_shipper.py`` and read in order as one stream (``chunk_stream``), ...
DRIVER_LOG_CHUNKS = "driver.log.d"
#: ... closed by this object, which holds the stream's total size.
DRIVER_LOG_END = "end"
RUNS_DIR = "runs"
RUN_INFO_FILE = "run.json"
ATTEMPTS_DIR = "attempts"
OUTPUTS_DIR = "outputs"
CLEANUP_DIR = "cleanup"
SWEEP_RECORD_NAME = "sweep.json"
PENDING_DIR = "_zeta_pending"
TOMBSTONES_DIR = "_zeta_tombstones"

_UNSAFE = re.compile(r"[^A-Za-z0-9._=-]")


def safe_segment(value: str) -> str:
    """A path segment that Hadoop, object stores and shells all accept, unique per input.

    Values that need no change are kept as they are, so paths stay readable.
    """
    if value and not _UNSAFE.search(value) and value not in (".", ".."):
        return value
    digest = hashlib.sha1(value.encode()).hexdigest()[:8]
    return f"{_UNSAFE.sub('_', value)[:80]}-{digest}"


def run_dir(dag_id: str, run_id: str) -> str:
    """The run's directory on the state root."""
    return f"{RUNS_DIR}/{safe_segment(dag_id)}/{safe_segment(run_id)}"


def run_info_path(dag_id: str, run_id: str) -> str:
    """The run's ``run.json`` (its real ids), which the sweep maps directories to runs by."""
    return f"{run_dir(dag_id, run_id)}/{RUN_INFO_FILE}"


def run_attempts_dir(dag_id: str, run_id: str) -> str:
    """The directory of every driver attempt of the run."""
    return f"{run_dir(dag_id, run_id)}/{ATTEMPTS_DIR}"


def task_attempts_dir(dag_id: str, run_id: str, task_id: str, map_index: int) -> str:
    """The directory of the driver attempts of one task instance (``map_index`` -1 when not mapped)."""
    return f"{run_attempts_dir(dag_id, run_id)}/{safe_segment(task_id)}/{map_index}"


def attempt_dir(dag_id: str, run_id: str, task_id: str, map_index: int, token: str) -> str:
    """The directory of one driver attempt, named by its token."""
    return f"{task_attempts_dir(dag_id, run_id, task_id, map_index)}/{safe_segment(token)}"


def cleanup_records_dir(dag_id: str, run_id: str) -> str:
    """The directory of the run's cleanup record files."""
    return f"{run_dir(dag_id, run_id)}/{CLEANUP_DIR}"


def cleanup_record_path(dag_id: str, run_id: str, owner: str, incarnation: int | None) -> str:
    """The record file of a cleanup task's incarnation, or the sweep's (``incarnation=None``)."""
    name = SWEEP_RECORD_NAME if incarnation is None else f"{safe_segment(owner)}-{int(incarnation)}.json"
    return f"{cleanup_records_dir(dag_id, run_id)}/{name}"


def output_registration_path(dag_id: str, run_id: str, output_root: str) -> str:
    """The file recording that the run writes into ``output_root`` (named by a digest of the root)."""
    digest = hashlib.sha1(output_root.encode()).hexdigest()[:12]
    return f"{run_dir(dag_id, run_id)}/{OUTPUTS_DIR}/{digest}.json"


def run_pending_dir(dag_id: str, run_id: str) -> str:
    """Relative to an output root: where this run assembles partitions."""
    return f"{PENDING_DIR}/{safe_segment(dag_id)}/{safe_segment(run_id)}"


def run_tombstones_dir(dag_id: str, run_id: str) -> str:
    """Relative to an output root: where this run keeps the partitions it replaced."""
    return f"{TOMBSTONES_DIR}/{safe_segment(dag_id)}/{safe_segment(run_id)}"


#: Joins the segments of a multi-segment partition in a tombstone's (single-segment) name.
TOMBSTONE_SEGMENT_JOIN = "__"


def tombstone_dir(dag_id: str, run_id: str, partition: str, commit: str) -> str:
    """Relative to an output root: where partition ``partition`` of commit ``commit`` goes when it
    is replaced. One directory directly below the run's, whatever the partition's depth: the
    cleanup records, lists and deletes each tombstone on its own (a shared ``ds=<ds>/`` folder
    would be deleted at the first tombstone's due time, taking later ones with it)."""
    return f"{run_tombstones_dir(dag_id, run_id)}/{partition.replace('/', TOMBSTONE_SEGMENT_JOIN)}-{commit}"



def chunk_name(sequence: int) -> str:
    """The name of chunk ``sequence`` of a shipped driver log: eight digits, so names sort in order."""
    return f"{sequence:08d}"


@dataclass(frozen=True)
class ChunkStream:
    """What a listing of ``DRIVER_LOG_CHUNKS`` makes of the stream: its chunks in order as
    (name, offset of the chunk's first byte, size), the stream's size, and whether it is complete."""

    chunks: tuple[tuple[str, int, int], ...]
    size: int
    complete: bool

    def covering(self, start: int, end: int) -> list[tuple[str, int, int]]:
        """The chunks holding bytes of ``[start, end)``, each as (name, first byte, past the last
        byte) relative to the chunk."""
        found = []
        for name, offset, size in self.chunks:
            low, high = max(start, offset), min(end, offset + size)
            if low < high:
                found.append((name, low - offset, high - offset))
        return found


def chunk_stream(sizes: dict[str, int], end_marker: bytes | None) -> ChunkStream:
    """The stream a shipped driver log holds: chunks ``00000000``, ``00000001``, ... in order, up to
    the first one missing (the shipper writes them one after the other, so a gap is a chunk still
    on its way: what follows it is not read yet). Other names are ignored (the job can write the
    attempt directory). Complete when the end marker names exactly the size of those chunks."""
    chunks: list[tuple[str, int, int]] = []
    offset = 0
    while True:
        name = chunk_name(len(chunks))
        if name not in sizes:
            break
        chunks.append((name, offset, sizes[name]))
        offset += sizes[name]
    try:
        total = int((end_marker or b"").decode().strip()) if end_marker is not None else None
    except (UnicodeDecodeError, ValueError):
        total = None
    return ChunkStream(tuple(chunks), offset, total is not None and total == offset)
