"""Storage adapter for the provider's own files (ledgers, cancel markers, staging, records).

Airflow-free on purpose: the Spark driver imports it, and a driver launched from a task cannot
import Airflow (its environment holds an unusable metadata DB URL; see the package's
``__init__``). The coordinator side opens the same storage from an Airflow
``ObjectStoragePath`` (so connections such as ``s3://aws_default@bucket`` resolve); the driver side
opens it from the plain URL with fsspec, using the credentials of its own environment.

Writes that others read while they change are atomic replaces: on a local filesystem a temporary
file renamed over the target (``os.replace`` semantics), on an object store a single-object PUT.
A reader therefore sees the old or the new document, never a torn one.
"""

from __future__ import annotations

import os
import posixpath
import secrets
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_provider_zeta.core.paths import ChunkStream

#: ``stat_signature`` of a file that does not exist.
ABSENT = "absent"


def stat_signature(path: str) -> Any:
    """A cheap signature of a local file that changes whenever the file is rewritten:
    ``(st_ino, st_size, st_mtime_ns)``, ``ABSENT``, or ``("error", errno)`` when it cannot be
    stat'ed (the reader that follows then says what is wrong)."""
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return ABSENT
    except OSError as error:
        return ("error", error.errno)
    return (stat.st_ino, stat.st_size, stat.st_mtime_ns)


def _write_temporary(target: str, data: bytes, make_parents: bool = True) -> str:
    """``data`` written and synced to a new temporary file beside ``target``; its path. Without
    ``make_parents`` a missing directory raises ``FileNotFoundError``."""
    if make_parents:
        os.makedirs(os.path.dirname(target), exist_ok=True)
    temporary = f"{target}.tmp-{secrets.token_hex(4)}"
    with open(temporary, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    return temporary


#: At the top of a state root: its identity, a random id written once and never deleted.
ROOT_ID_FILE = "zeta-root-id"


def state_root_identity(state: StateStorage, create: bool) -> str | None:
    """The identity of the state root ``state`` is: a random id in ``ROOT_ID_FILE`` at its top,
    written by the first launch that finds none (``create``) and never deleted. A launch records
    it; an observer that later finds an attempt's files gone takes that as the run's cleanup only
    where it reads the same identity — an unmounted NFS mountpoint or another host's local
    directory holds none, or another one. ``None`` when absent (and not created) or unreadable."""
    raw = state.read_bytes(ROOT_ID_FILE)
    if raw is None and create:
        new = secrets.token_hex(12).encode()
        if state.is_local:
            # Create-if-absent with its content in one step: link a complete temporary file.
            target = state.path(ROOT_ID_FILE)
            temporary = _write_temporary(target, new)
            try:
                os.link(temporary, target)
            except FileExistsError:
                pass  # another launch wrote it first: read theirs
            finally:
                os.unlink(temporary)
        else:
            # No create-if-absent on an object store: two first launches may each write one; the
            # later one stays, and records of the other never match it (the safe direction).
            state.write_atomic(ROOT_ID_FILE, new)
        raw = state.read_bytes(ROOT_ID_FILE)
    identity = (raw or b"").decode("utf-8", "replace").strip()
    return identity or None


def _inside(root: str, path: str) -> bool:
    """Whether the real location of ``path`` is ``root`` (a real path) or below it."""
    return os.path.commonpath([root, os.path.realpath(path)]) == root


def _refuse_unless_launched_file(relative: str, opened: os.stat_result, local: str, root: str) -> None:
    """``PermissionError`` unless the opened file (``opened``: its ``fstat``) is what the driver's
    launcher made at ``local``: the checks listed in ``StateStorage.read_local_range``."""
    import stat

    if not stat.S_ISREG(opened.st_mode):
        raise PermissionError(f"{relative} is not a regular file")
    if opened.st_nlink != 1:
        raise PermissionError(f"{relative} has {opened.st_nlink} hard links: not a log the launcher created")
    if hasattr(os, "geteuid") and opened.st_uid != os.geteuid():
        raise PermissionError(f"{relative} is owned by uid {opened.st_uid}, not by uid {os.geteuid()} that launches drivers")
    # The directories may have been swapped between the check and the open: the file
    # opened must still be the one at a path inside the root.
    if not _inside(root, local) or not os.path.samestat(opened, os.stat(os.path.realpath(local))):
        raise PermissionError(f"{relative} leads outside the state root")

class StateStorage:
    """A root directory on some filesystem, addressed by relative POSIX paths."""

    def __init__(self, fs: Any, root: str, url: str) -> None:
        self.fs = fs
        self.root = root.rstrip("/") or "/"
        self.url = url.rstrip("/")

    @classmethod
    def from_url(cls, url: str) -> StateStorage:
        """Open ``url`` with fsspec (driver side). A plain path means the local filesystem."""
        import fsspec.core

        if "://" not in url:
            url = "file://" + os.path.abspath(url)
        fs, root = fsspec.core.url_to_fs(url)
        return cls(fs, root, url)

    @classmethod
    def from_object_storage_path(cls, path: Any) -> StateStorage:
        """Open an Airflow ``ObjectStoragePath`` (coordinator side)."""
        url = str(path)
        return cls(path.fs, path.path, url)

    @property
    def is_local(self) -> bool:
        """Whether the filesystem is the local one."""
        protocol = self.fs.protocol
        protocols = protocol if isinstance(protocol, (tuple, list)) else (protocol,)
        return "file" in protocols or "local" in protocols

    @property
    def atomic_rename(self) -> bool:
        """Whether a directory appears at once when renamed into place (a local filesystem).
        Elsewhere (object stores, and filesystems reached through fsspec whose move is copy +
        delete) a partition is committed by its marker and manifest instead (``core.publish``)."""
        return self.is_local

    def path(self, relative: str) -> str:
        """The filesystem path of ``relative`` (the root for ``""``)."""
        return posixpath.join(self.root, relative) if relative else self.root

    def url_of(self, relative: str) -> str:
        """The URL of ``relative``, for messages."""
        return f"{self.url}/{relative}" if relative else self.url

    def child(self, relative: str) -> StateStorage:
        """The storage rooted at ``relative``."""
        return StateStorage(self.fs, self.path(relative), self.url_of(relative))

    def read_bytes(self, relative: str) -> bytes | None:
        """The content of ``relative``; ``None`` when the file is missing."""
        try:
            return self.fs.cat_file(self.path(relative))
        except FileNotFoundError:
            return None

    def exists(self, relative: str) -> bool:
        """Whether ``relative`` exists."""
        return self.fs.exists(self.path(relative))

    def write_atomic(self, relative: str, data: bytes, make_parents: bool = True) -> None:
        """Replace ``relative`` with ``data`` at once. ``make_parents=False``: a missing directory
        (local storage) raises ``FileNotFoundError`` instead of being created."""
        target = self.path(relative)
        if self.is_local:
            os.replace(_write_temporary(target, data, make_parents), target)
        else:
            self.fs.pipe_file(target, data)

    def delete_tree(self, relative: str) -> bool:
        """Delete ``relative`` (file or directory) if present; True when something was deleted."""
        target = self.path(relative)
        if not self.fs.exists(target):
            return False
        self.fs.rm(target, recursive=True)
        return True

    def list_dir(self, relative: str) -> list[str]:
        """The names in directory ``relative``, sorted (never a cached listing); empty when it is missing."""
        self.fs.invalidate_cache(self.path(relative))  # another process may have written there
        try:
            return sorted(posixpath.basename(p.rstrip("/")) for p in self.fs.ls(self.path(relative), detail=False))
        except FileNotFoundError:
            return []

    def local_path(self, relative: str = "") -> str | None:
        """The OS path of ``relative`` when the storage is local, else None."""
        return self.path(relative) if self.is_local else None

    def read_local_tail(self, relative: str, max_bytes: int) -> bytes | None:
        """The last ``max_bytes`` of a file the driver writes (its log), with every check of
        ``read_local_range``. ``None`` when the storage is not local or the file is missing."""
        found = self.read_local_range(relative, -max_bytes, max_bytes)
        return None if found is None else found[0]

    def read_local_range(self, relative: str, offset: int, max_bytes: int) -> tuple[bytes, int, int] | None:
        """Up to ``max_bytes`` of a local file a job can write, from ``offset`` (negative: from the
        end), refusing anything the driver's launcher did not create there.

        Returns ``(data, start, size)``: the bytes, the offset they start at, and the file's size.
        ``None`` when the storage is not local or the file is missing; ``PermissionError`` when it is
        refused. The job runs inside the driver and can write its attempt directory, so a file there
        is refused when it is not what the launcher made (an ``O_APPEND`` file of its own):

        * a symbolic link (``O_NOFOLLOW``), or a path whose real location leaves the storage root
          (a symlinked directory on the way out, also if swapped in between check and open);
        * anything but a regular file (a FIFO would block the reader; a device);
        * a hard link (``st_nlink != 1``): a same-filesystem file the job's user can read, such as
          ``airflow.cfg``, linked in as the log;
        * a file owned by another user than the one reading it: the launcher runs as the Airflow
          user, so the log it creates is that user's; a file of another owner was not created by it (the job runs as the same user, so this does not
          catch a file the job itself put there).
        """
        local = self.local_path(relative)
        if local is None:
            return None
        root = os.path.realpath(self.root)
        if not _inside(root, os.path.dirname(local)):
            raise PermissionError(f"{relative} leads outside the state root")
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        try:
            fd = os.open(local, flags)
        except FileNotFoundError:
            return None
        except OSError as error:  # ELOOP: the file is a symbolic link
            if os.path.islink(local):
                raise PermissionError(f"{relative} is a symbolic link") from error
            raise
        with os.fdopen(fd, "rb") as handle:
            opened = os.fstat(handle.fileno())
            _refuse_unless_launched_file(relative, opened, local, root)
            size = opened.st_size
            start = max(0, size + offset) if offset < 0 else min(offset, size)
            handle.seek(start)
            return handle.read(max(0, max_bytes)), start, size

    def chunk_stream(self, relative: str, known: ChunkStream | None = None, with_end: bool = True) -> ChunkStream | None:
        """The stream of a chunked log folder (``core.paths.chunk_stream``); ``None`` when absent.

        Without ``known``: one listing (the first look, or after a restart). With ``known`` (the
        stream as a reader saw it before): one lookup per chunk after it plus one that misses, so
        a look costs the same however long the log has grown. ``with_end``: also read the end
        marker (one small read), without which the stream never counts as complete."""
        from airflow_provider_zeta.core.paths import DRIVER_LOG_END, chunk_name, chunk_stream

        base = self.path(relative).rstrip("/")
        self.fs.invalidate_cache(base)  # a listing cached by the filesystem would hide new chunks
        if known is None:
            try:
                entries = self.fs.ls(base, detail=True)
            except FileNotFoundError:
                return None
            sizes = {posixpath.basename(str(e["name"]).rstrip("/")): int(e.get("size") or 0) for e in entries if e.get("type") != "directory"}
            if not sizes:
                return None
        else:
            sizes = {name: size for name, _, size in known.chunks}
            while True:
                try:
                    info = self.fs.info(posixpath.join(base, chunk_name(len(sizes))))
                except FileNotFoundError:
                    break
                sizes[chunk_name(len(sizes))] = int(info.get("size") or 0)
        listed_without_end = known is None and DRIVER_LOG_END not in sizes
        end = self.read_bytes(posixpath.join(relative, DRIVER_LOG_END)) if with_end and not listed_without_end else None
        return chunk_stream(sizes, end)

    def read_stream_range(self, relative: str, stream: ChunkStream, offset: int, max_bytes: int) -> tuple[bytes, int, int]:
        """Up to ``max_bytes`` of ``stream`` (of the chunked log folder ``relative``) from
        ``offset`` (negative: from the end): ``(data, start, size)`` as ``read_local_range``
        answers. Each chunk is read with a ranged read of its own object."""
        start = max(0, stream.size + offset) if offset < 0 else min(offset, stream.size)
        parts = [
            self.fs.cat_file(self.path(posixpath.join(relative, name)), start=low, end=high)
            for name, low, high in stream.covering(start, start + max(0, max_bytes))
        ]
        return b"".join(parts), start, stream.size

    def read_chunked_range(self, relative: str, offset: int, max_bytes: int) -> tuple[bytes, int, int] | None:
        """``read_stream_range`` of the folder's stream as one listing finds it; ``None`` when absent."""
        stream = self.chunk_stream(relative, with_end=False)
        return None if stream is None else self.read_stream_range(relative, stream, offset, max_bytes)

    def move(self, source_relative: str, target_relative: str) -> None:
        """Rename within this storage. Atomic for a directory on a local filesystem."""
        source, target = self.path(source_relative), self.path(target_relative)
        if self.is_local:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.rename(source, target)  # fails rather than merging into an existing target
        else:
            self.fs.mv(source, target, recursive=True)

    def copy_file(self, source_relative: str, target_relative: str) -> None:
        """Copy one file within this storage (a server-side copy on an object store)."""
        source, target = self.path(source_relative), self.path(target_relative)
        if self.is_local:
            os.makedirs(os.path.dirname(target), exist_ok=True)
        self.fs.cp_file(source, target)

    def delete_file(self, relative: str) -> None:
        """Delete one file; a file already gone is fine."""
        try:
            self.fs.rm_file(self.path(relative))
        except FileNotFoundError:
            pass

    def file_sizes(self, relative: str) -> dict[str, int]:
        """Relative path (below ``relative``) -> size in bytes of every file under it; {} when absent."""
        base = self.path(relative).rstrip("/")
        self.fs.invalidate_cache(base)  # a cached listing would hide another process's writes
        try:
            found = self.fs.find(base, detail=True)
        except FileNotFoundError:
            return {}
        return {
            posixpath.relpath(path, base): int(info.get("size") or 0)
            for path, info in found.items()
            if info.get("type", "file") != "directory"
        }

    def remove_empty_dirs(self, relative: str, levels: int) -> None:
        """Remove ``relative`` and then up to ``levels - 1`` of its parents, each only while empty.

        Through the filesystem's own API, so it works wherever directories exist (local, NFS,
        HDFS). On an object store a "directory" is only a key prefix that vanishes with its last
        object: listing an empty one finds nothing and the walk ends, with nothing left behind. On
        a local filesystem ``os.rmdir`` refuses a directory that another writer just filled; on
        other filesystems the directory is listed empty right before it is removed.
        """
        path = self.path(relative)
        for _ in range(levels):
            try:
                if self.is_local:
                    os.rmdir(path)
                else:
                    if self.fs.ls(path, detail=False):
                        return
                    self.fs.rmdir(path)
            except (OSError, NotImplementedError):  # not empty, already gone, or not removable
                return
            path = posixpath.dirname(path)

    def files_under(self, relative: str) -> list[str]:
        """Relative paths (below ``relative``) of every file under it."""
        base = self.path(relative).rstrip("/")
        try:
            found = self.fs.find(base)
        except FileNotFoundError:
            return []
        return sorted(posixpath.relpath(p, base) for p in found)


def committed_files(out: StateStorage, part: str) -> dict[str, int] | None:
    """What a marker-aware reader of partition ``part`` of table ``out`` reads: the files its
    commit marker's manifest names (path below the partition -> size), once every one of them is
    there with that size; None while the partition is not committed (no marker, an unreadable
    one, or files that do not match it yet: a publish or a replacement is under way or was
    interrupted, and the publisher's retry completes or rolls it back).

    Read the files it returns, nothing else, then call it again: the same commit id in between
    (``_zeta_commit.json``'s ``commit_id``) means nothing was replaced while reading. Where a
    directory rename is atomic (``atomic_rename``), a marker written before manifests existed
    stands for every file of the partition."""
    from airflow_provider_zeta.core.ledger import CorruptState
    from airflow_provider_zeta.core.publish import COMMIT_MARKER, parse_commit_marker

    try:
        marker = parse_commit_marker(out.read_bytes(f"{part}/{COMMIT_MARKER}"), out.url_of(f"{part}/{COMMIT_MARKER}"))
    except CorruptState:
        return None
    if marker is None:
        return None
    found = out.file_sizes(part)
    if marker.manifest is None:
        if not out.atomic_rename:
            return None
        return {name: size for name, size in found.items() if name != COMMIT_MARKER}
    manifest = marker.manifest
    if any(found.get(name) != size for name, size in manifest.items()):
        return None
    # Files it does not name (another owner's, racing a first publish) are not the commit's: the
    # reader reads the manifest only.
    return dict(manifest)


def copy_tree(
    source: StateStorage, source_relative: str, target: StateStorage, target_relative: str, name_prefix: str = ""
) -> int:
    """Copy every file under ``source_relative`` to ``target_relative`` (streams; any two filesystems).

    ``name_prefix`` is put before every file name that does not start with ``_`` or ``.`` (those
    are metadata files readers skip, such as ``_SUCCESS``). Returns the number of files copied.
    """
    import shutil

    count = 0
    for relative in source.files_under(source_relative):
        src = source.path(posixpath.join(source_relative, relative))
        folder, name = posixpath.split(relative)
        if name_prefix and not name.startswith(("_", ".")):
            name = name_prefix + name
        dst = target.path(posixpath.join(target_relative, folder, name))
        if target.is_local:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
        with source.fs.open(src, "rb") as reader, target.fs.open(dst, "wb") as writer:
            shutil.copyfileobj(reader, writer, 1 << 20)
        count += 1
    return count


def register_run(state: StateStorage, dag_id: str, run_id: str) -> None:
    """Write ``runs/<dag>/<run>/run.json`` (the run's real ids) once: the sweep maps directories to runs by it."""
    import json

    from airflow_provider_zeta.core.paths import run_info_path

    relative = run_info_path(dag_id, run_id)
    if not state.exists(relative):
        state.write_atomic(relative, json.dumps({"dag_id": dag_id, "run_id": run_id}).encode())


def register_output(state: StateStorage, dag_id: str, run_id: str, output_root: str) -> None:
    """Record that this run writes hidden leftovers (pending, tombstones) into ``output_root``."""
    import json

    from airflow_provider_zeta.core.paths import output_registration_path

    register_run(state, dag_id, run_id)
    relative = output_registration_path(dag_id, run_id, output_root)
    if not state.exists(relative):
        state.write_atomic(relative, json.dumps({"output_root": output_root}).encode())
