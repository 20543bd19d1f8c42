"""Storage work of the delayed cleanup and the sweep: find a run's leftovers, stop drivers, delete.

A thin adapter: what to delete and when is decided in ``core/cleanup.py``; this module only lists,
reads and deletes, and re-checks every record with ``core.cleanup.check_paths`` before it deletes
anything. Airflow-free (output tables are opened by a function the caller passes in, which on the
coordinator side goes through Airflow's ``ObjectStoragePath``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import posixpath
import time
from collections.abc import Callable, Iterable

from airflow_provider_zeta.core.cleanup import (
    ALL_TOMBSTONES,
    CleanupRecord,
    DriverView,
    Leftovers,
    check_paths,
    held_by_interrupted_publish,
    owned_output_entry,
    parse_cleanup_record,
    task_state_key,
)
from airflow_provider_zeta.core.ledger import CorruptState, parse_ledger
from airflow_provider_zeta.core.paths import (
    CANCEL_MARKER,
    LEDGER_FILE,
    OUTPUTS_DIR,
    RUN_INFO_FILE,
    RUNS_DIR,
    cleanup_record_path,
    cleanup_records_dir,
    run_attempts_dir,
    run_dir,
    run_pending_dir,
    run_tombstones_dir,
    safe_segment,
)
from airflow_provider_zeta.core.publish import COMMIT_MARKER, INTENT_FILE, parse_intent
from airflow_provider_zeta.processes import stop_token_processes
from airflow_provider_zeta.storage import StateStorage

log = logging.getLogger(__name__)

OutputOpener = Callable[[str], StateStorage]
#: One driver attempt directory of a run: (task segment, map index or None, token, relative path).
Attempt = tuple[str, int | None, str, str]


def list_runs(state: StateStorage) -> list[tuple[str, str]]:
    """Every (dag_id, run_id) that has a directory in the state root (from its ``run.json``)."""
    found = []
    for dag_segment in state.list_dir(RUNS_DIR):
        for run_segment in state.list_dir(f"{RUNS_DIR}/{dag_segment}"):
            relative = f"{RUNS_DIR}/{dag_segment}/{run_segment}/{RUN_INFO_FILE}"
            raw = state.read_bytes(relative)
            try:
                info = json.loads(raw or b"")  # missing: a JSONDecodeError (ValueError) like a torn file
                found.append((str(info["dag_id"]), str(info["run_id"])))
            except (ValueError, TypeError, KeyError):
                log.warning("zeta.sweep: %s is missing or unreadable; that directory is left alone", state.url_of(relative))
    return found


def output_roots(state: StateStorage, dag_id: str, run_id: str) -> list[str]:
    """The output tables this run registered (before writing anything into them)."""
    roots = []
    folder = f"{run_dir(dag_id, run_id)}/{OUTPUTS_DIR}"
    for name in state.list_dir(folder):
        raw = state.read_bytes(f"{folder}/{name}")
        with contextlib.suppress(ValueError, TypeError, KeyError):
            roots.append(str(json.loads(raw or b"")["output_root"]))
    return sorted(set(roots))


def find_leftovers(
    state: StateStorage,
    dag_id: str,
    run_id: str,
    open_output: OutputOpener,
    task_ids: Iterable[str] | None = None,
    roots: Iterable[str] | None = None,
    pipeline_id: str | None = None,
) -> tuple[Leftovers, list[Attempt]]:
    """The run's attempt directories (of ``task_ids`` if given) and its pending/tombstone dirs (of
    ``pipeline_id`` if given: ``core.cleanup.owned_output_entry`` by each entry's commit marker).

    Also returns the attempts as (task segment, map index, token, relative path) for the driver
    check (map index None: the directory's name is no number).
    """
    attempts = _run_attempts(state, dag_id, run_id, task_ids)
    outputs: dict[str, tuple[str, ...]] = {}
    for root in output_roots(state, dag_id, run_id) if roots is None else roots:
        paths = _output_leftovers(open_output(root), root, dag_id, run_id, pipeline_id)
        if paths:
            outputs[root] = tuple(sorted(paths))
    return Leftovers(tuple(sorted(p for *_, p in attempts)), outputs), attempts


def _run_attempts(
    state: StateStorage, dag_id: str, run_id: str, task_ids: Iterable[str] | None
) -> list[Attempt]:
    """The run's attempt directories (of ``task_ids`` if given) as (task segment, map index, token,
    relative path): ``runs/<dag>/<run>/attempts/<task>/<map index>/<token>`` (``core.paths.attempt_dir``)."""
    base = run_attempts_dir(dag_id, run_id)
    wanted = None if task_ids is None else {safe_segment(t) for t in task_ids}
    attempts = []
    for task_segment in state.list_dir(base):
        if wanted is not None and task_segment not in wanted:
            continue
        for index_segment in state.list_dir(f"{base}/{task_segment}"):
            map_index = _map_index(index_segment)
            for token in state.list_dir(f"{base}/{task_segment}/{index_segment}"):
                attempts.append((task_segment, map_index, token, f"{base}/{task_segment}/{index_segment}/{token}"))
    return attempts


def _map_index(segment: str) -> int | None:
    """The map index an attempt directory's ``<map index>`` segment names; None when it is no number."""
    try:
        return int(segment)
    except ValueError:
        return None


def _output_leftovers(out: StateStorage, root: str, dag_id: str, run_id: str, pipeline_id: str | None) -> list[str]:
    """The run's pending and tombstone directories in one output table that a cleanup may delete:
    those of ``pipeline_id`` (all when None), except what an interrupted publish holds."""
    paths: list[str] = []
    held = held_by_interrupted_commits(out, run_pending_dir(dag_id, run_id))
    tombstones = run_tombstones_dir(dag_id, run_id)
    for folder in (run_pending_dir(dag_id, run_id), tombstones):
        for name in out.list_dir(folder):
            entry = f"{folder}/{name}"
            if held_by_interrupted_publish(entry, folder == tombstones, held):
                log.warning(
                    "zeta.cleanup.interrupted_commit_kept: %s is kept: a publish into %s was interrupted "
                    "there and only the completed point's next try (clear it) completes or rolls it back",
                    out.url_of(entry), root,
                )
                continue
            if pipeline_id is None or owned_output_entry(entry_pipeline(out, entry), pipeline_id):
                paths.append(entry)
    return paths


def held_by_interrupted_commits(out: StateStorage, pending_folder: str) -> set[str]:
    """Entries of a run's leftovers that a cleanup must not delete: each pending directory holding a
    publish intent (``core.publish.INTENT_FILE``: a publish on a store without atomic rename was
    interrupted there) and the tombstone the intent names. The intent is what lets the completed
    point's next try roll the partition back or complete it; the tombstone may hold the only whole
    copy of the partition it replaced. Deleting either would leave a partition of mixed files with
    no marker, for good. They stay until that try has finished (it removes its pending directory).
    An intent that cannot be read holds every tombstone (``core.cleanup.ALL_TOMBSTONES``)."""
    held: set[str] = set()
    for name in out.list_dir(pending_folder):
        entry = f"{pending_folder}/{name}"
        where = f"{entry}/{INTENT_FILE}"
        raw = out.read_bytes(where)
        if raw is None:
            continue
        held.add(entry)
        try:
            intent = parse_intent(raw, out.url_of(where))
        except CorruptState:
            held.add(ALL_TOMBSTONES)
            continue
        if intent is not None and intent.tombstone:
            held.add(intent.tombstone.rstrip("/"))
    return held


#: How deep below a pending directory its commit marker may lie: ``<commit>-<nonce>/<partition>/``,
#: a partition of up to this many ``key=value`` segments.
MARKER_SEARCH_DEPTH = 6


def entry_pipeline(out: StateStorage, entry: str) -> str | None:
    """The ``pipeline_id`` the commit marker of a pending directory or tombstone names, or ``None``
    (no marker found, unreadable, or written before markers named their pipeline)."""
    level = [entry]
    for _ in range(MARKER_SEARCH_DEPTH + 1):
        deeper = []
        for folder in level:
            raw = out.read_bytes(f"{folder}/{COMMIT_MARKER}")
            if raw is not None:
                try:
                    value = json.loads(raw).get("pipeline_id")
                except (ValueError, AttributeError):
                    return None
                return str(value) if value else None
            deeper += [f"{folder}/{name}" for name in out.list_dir(folder) if "=" in name and not name.startswith("source=")]
        level = deeper
        if not level:
            break
    return None


def driver_views(
    state: StateStorage, attempts: list[Attempt], task_states: dict[str, str | None] | None = None
) -> list[DriverView]:
    """One view per attempt: live unless its ledger is terminal (no ledger: maybe still launching).

    ``task_states`` is Airflow's answer to its task-states call, keyed by its own names of task
    instances (``core.cleanup.task_state_key``): a mapped instance's state is looked up by task id
    and the map index of the attempt's directory. An attempt whose directory names no map index
    gets no task state.
    """
    views = []
    for task_segment, map_index, token, relative in attempts:
        try:
            ledger = parse_ledger(state.read_bytes(f"{relative}/{LEDGER_FILE}"), token, state.url_of(relative))
            live = ledger is None or not ledger.status.terminal
            task_id = ledger.task_id if ledger is not None and ledger.task_id else task_segment
        except CorruptState:
            live, task_id = True, task_segment  # unknown: cancelling a dead attempt costs nothing
        task_state = None
        if task_states is not None and map_index is not None:
            task_state = task_states.get(task_state_key(task_id, map_index))
        views.append(DriverView(token, relative, task_id, live, task_state, map_index))
    return views


def stop_drivers(state: StateStorage, drivers: Iterable[DriverView], self_exit_s: float = 7.0) -> list[str]:
    """Write every driver's cancel marker, then stop what is left of them on this host.

    A driver polls its marker and ends itself (writing ``cancelled``); one on another host can only
    be reached that way. Local processes still alive after ``self_exit_s`` are terminated.
    """
    drivers = list(drivers)
    for driver in drivers:
        if state.exists(driver.attempt_path):  # never create a directory just to hold a marker
            state.write_atomic(f"{driver.attempt_path}/{CANCEL_MARKER}", b"cancelled by the zeta cleanup\n")
    deadline = time.monotonic() + self_exit_s
    for driver in drivers:
        stop_token_processes(driver.token, None, self_exit_s=max(0.0, deadline - time.monotonic()))
    return sorted(d.token for d in drivers)


def read_records(state: StateStorage, dag_id: str, run_id: str) -> list[CleanupRecord | CorruptState]:
    """Every cleanup record file of the run, parsed; an unreadable one as its ``CorruptState``."""
    folder = cleanup_records_dir(dag_id, run_id)
    records: list[CleanupRecord | CorruptState] = []
    for name in state.list_dir(folder):
        if not name.endswith(".json"):
            continue  # a temporary file of an interrupted atomic write
        try:
            record = parse_cleanup_record(state.read_bytes(f"{folder}/{name}"), state.url_of(f"{folder}/{name}"))
        except CorruptState as error:
            records.append(error)
            continue
        if record is not None:
            records.append(record)
    return records


def record_file(record: CleanupRecord) -> str:
    """The path of ``record``'s file on the state root."""
    return cleanup_record_path(record.dag_id, record.run_id, record.owner, record.incarnation)


def write_record_file(state: StateStorage, record: CleanupRecord) -> None:
    """Write ``record``'s file, atomically."""
    state.write_atomic(record_file(record), record.to_json())


def carry_out(state: StateStorage, record: CleanupRecord, open_output: OutputOpener, before_delete=None) -> int:
    """Delete exactly the record's paths (idempotent); returns how many were still there.

    ``before_delete`` runs once before the first deletion (the cleanup task's fence).
    """
    check_paths(record, state.url_of(record_file(record)))
    if before_delete is not None:
        before_delete()
    deleted = 0
    for path in record.state_paths:
        deleted += _delete(state, path)
        _prune_empty(state, posixpath.dirname(path), stop_at=run_dir(record.dag_id, record.run_id))
    for root, paths in record.outputs.items():
        out = open_output(root)
        for path in paths:
            deleted += _delete(out, path)
            _prune_empty(out, posixpath.dirname(path), stop_at="")
    log.info(
        "zeta.cleanup: carried out the record of %s %s (incarnation %s): %d of %d paths deleted",
        record.dag_id,
        record.run_id,
        record.incarnation,
        deleted,
        record.paths_count,
    )
    return deleted


def finish_record(state: StateStorage, record: CleanupRecord) -> None:
    """After ``record`` was carried out: its file and the files of the records it adopted go, and
    with no other record and no attempt left, the run's bookkeeping (``forget_run``)."""
    remaining = []
    for other in read_records(state, record.dag_id, record.run_id):
        if isinstance(other, CleanupRecord) and other.owner == record.owner and (
            other.incarnation == record.incarnation or other.incarnation in record.adopted
        ):
            delete_record_files(state, [other])
        else:
            remaining.append(other)
    if not remaining and not state.list_dir(run_attempts_dir(record.dag_id, record.run_id)):
        forget_run(state, record.dag_id, record.run_id)


def _delete(storage: StateStorage, relative: str) -> bool:
    """``delete_tree``, where a path another cleanup removes at the same moment counts as gone."""
    try:
        return storage.delete_tree(relative)
    except FileNotFoundError:
        return False


def delete_record_files(state: StateStorage, records: Iterable[CleanupRecord]) -> None:
    """Delete the files of ``records`` (one already gone counts as deleted)."""
    for record in records:
        _delete(state, record_file(record))


def forget_run(state: StateStorage, dag_id: str, run_id: str) -> None:
    """Delete the run's bookkeeping once nothing of it is left (run.json, registrations, records)."""
    folder = run_dir(dag_id, run_id)
    for name in state.list_dir(folder):
        if name != "attempts":
            _delete(state, f"{folder}/{name}")
    _prune_empty(state, f"{folder}/attempts", stop_at=posixpath.dirname(posixpath.dirname(folder)))


def _prune_empty(storage: StateStorage, relative: str, stop_at: str) -> None:
    """Remove empty directories from ``relative`` up to (not including) ``stop_at``.

    On a local filesystem ``os.rmdir`` refuses a non-empty directory, so a directory another writer
    just filled stays. On other filesystems (HDFS, which keeps directories explicitly, and object
    stores, where a "directory" is only a key prefix) it goes through the filesystem: a directory
    that lists nothing and exists as a directory is removed; an implied one (no objects under it)
    is already gone. A filesystem that refuses the removal leaves it (never an error: the data is
    deleted, only an empty directory stays).
    """
    while relative and relative != stop_at and relative.startswith(stop_at):
        if storage.is_local:
            try:
                os.rmdir(storage.path(relative))
            except FileNotFoundError:
                pass  # already gone: look at the parent
            except OSError:
                return
        else:
            if storage.list_dir(relative):
                return
            target = storage.path(relative)
            try:
                if storage.fs.isdir(target):
                    storage.fs.rmdir(target)
            except FileNotFoundError:
                pass
            except (OSError, NotImplementedError):
                return
        relative = posixpath.dirname(relative)
