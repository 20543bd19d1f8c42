"""A reader polling the output table never sees a partial partition (G3), on the local filesystem.

Runs the completed point's file work (``publish_partition``) with many sources while reader
threads list and read the table as fast as they can, the way ``spark.read.parquet(output)`` finds
it: list the table root, keep the ``ds=`` directories (names starting with ``_`` or ``.`` —
``_zeta_pending``, ``_zeta_tombstones`` — are skipped, as Spark's partition discovery skips them),
list each one's ``source=`` directories and read every data file in them. A test fails if no
reader ever saw the partition present: "never partial" must not pass by never looking.

* First publish: every look sees no partition, or every source and the commit marker, all files
  of one attempt.
* Replacement of an older incarnation's partition (which becomes a tombstone): every look sees
  every source and the marker, or nothing; a reader that reads through the commit marker (the
  files named after the marker's tokens) sees one commit whole. A plain directory walk that spans
  the swap can mix the two commits — the documented limit of a same-path replacement.
"""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from airflow_provider_zeta.core.paths import run_tombstones_dir
from airflow_provider_zeta.core.publish import COMMIT_MARKER, Owner, marker_for, partition_dir
from airflow_provider_zeta.core.ready import Report
from airflow_provider_zeta.operators.completed_point import publish_partition
from airflow_provider_zeta.storage import StateStorage, copy_tree

SOURCES = [f"s{i:02d}" for i in range(40)]
FILES = 3
DS = "2026-05-05"
RUN_KEY = ("atomic_dag", "scheduled__2026-05-05T00:00:00+00:00")
OWNER = Owner(RUN_KEY[0], "pipe", RUN_KEY[1])


def stage(state: StateStorage, token: str) -> dict[str, tuple[str, dict[str, int]]]:
    staging = {}
    for name in SOURCES:
        relative = f"attempts/{token}/{name}/output"
        for part in range(FILES):
            state.write_atomic(f"{relative}/part-{part}.json", json.dumps({"source": name, "token": token}).encode() * 50)
        staging[name] = (relative, state.file_sizes(relative))
    return staging


def reports(token: str) -> dict[str, Report]:
    return {n: Report(source=n, task_id=f"deploy_{n}", incarnation=0, token=token, output_path="x", rows=3) for n in SOURCES}


def discover(root: str) -> dict[str, str]:
    """Partition discovery as Spark does it: ``ds=`` directories of the table root, hidden names skipped."""
    return {
        entry.name: entry.path
        for entry in os.scandir(root)
        if entry.is_dir() and not entry.name.startswith(("_", ".")) and entry.name.startswith("ds=")
    }


def look(part: str, through_marker: bool) -> str:
    """One look at a partition directory: ``complete:<token>``, or why it is not whole."""
    names = set(os.listdir(part))
    sources = {n for n in names if n.startswith("source=")}
    if len(sources) != len(SOURCES):
        return f"partial partition: {len(sources)} of {len(SOURCES)} sources"
    if COMMIT_MARKER not in names:
        return "partition without its commit marker"
    tokens = set()
    wanted = None
    if through_marker:
        with open(os.path.join(part, COMMIT_MARKER)) as handle:
            wanted = json.load(handle)["tokens"]
    for source in sources:
        files = [n for n in os.listdir(os.path.join(part, source)) if not n.startswith(("_", "."))]
        if wanted is not None:
            files = [n for n in files if n.startswith(wanted[source.removeprefix("source=")] + "-")]
        if len(files) != FILES:
            return f"{source}: {len(files)} data files of the marker's attempt, expected {FILES}"
        for name in files:  # read every file by the path the listing gave
            with open(os.path.join(part, source, name)) as handle:
                head = handle.read(200)
            try:
                tokens.add(json.loads(head.split("}")[0] + "}")["token"])
            except ValueError:
                return f"{source}/{name}: a torn file ({len(head)} bytes read)"
    if len(tokens) != 1:
        return f"mixed attempts in one partition: {tokens}"
    return f"complete:{tokens.pop()}"


def watch(root: str, stop: threading.Event, seen: list[str], errors: list[str], through_marker: bool) -> None:
    """Look again and again. A look counts only when the partition directory it looked at was not
    swapped meanwhile (the same inode before and after: a rename into place brings a new one); a
    swapped look is what a reader retries, anything else that is not whole is an error — also a
    file that vanished from a partition that was not swapped."""
    while not stop.is_set():
        part = discover(root).get(partition_dir(DS))
        try:
            before = os.stat(part).st_ino if part else None
        except FileNotFoundError:
            before = None
        if before is None:
            seen.append("absent")
            continue
        try:
            result = look(part, through_marker)
        except FileNotFoundError as error:
            result = f"a file vanished during the look: {error.filename}"
        try:
            after = os.stat(part).st_ino
        except FileNotFoundError:
            after = None
        if after != before:
            seen.append("swapped")
        elif result.startswith("complete:"):
            seen.append(result)
        else:
            errors.append(result)


def run_with_readers(
    target, root: str, through_marker: bool = False, expect: str | None = None, before: str | None = None
) -> list[list[str]]:
    """Readers look during ``target`` and afterwards until each saw ``expect`` complete (at most 10 s);
    with ``before``, ``target`` starts only once each reader saw ``before`` complete. The looks of
    each reader, in order."""
    stop, errors = threading.Event(), []
    seen_by = [[] for _ in range(2)]
    readers = [threading.Thread(target=watch, args=(root, stop, seen, errors, through_marker)) for seen in seen_by]
    for reader in readers:
        reader.start()
    try:
        deadline = time.monotonic() + 10
        while before and time.monotonic() < deadline and not all(f"complete:{before}" in seen for seen in seen_by):
            time.sleep(0.01)
        assert before is None or all(f"complete:{before}" in seen for seen in seen_by), f"no reader saw {before} first"
        target()
        deadline = time.monotonic() + 10
        while expect and time.monotonic() < deadline and not all(f"complete:{expect}" in seen for seen in seen_by):
            time.sleep(0.01)
    finally:
        stop.set()
        for reader in readers:
            reader.join()
    assert not errors, errors[:5]
    assert expect is None or all(f"complete:{expect}" in looks for looks in seen_by), (
        f"a reader never saw the partition of {expect} present: the test proved nothing"
    )
    return seen_by


def test_first_publish_and_replacement_are_all_or_nothing(tmp_path):
    state = StateStorage.from_url(str(tmp_path / "state"))
    out = StateStorage.from_url(str(tmp_path / "table"))
    os.makedirs(out.root, exist_ok=True)
    first, second = stage(state, "tok1"), stage(state, "tok2")
    marker1 = marker_for("c1", DS, 0, reports("tok1"), 1.0, OWNER)
    marker2 = marker_for("c2", DS, 1, reports("tok2"), 2.0, OWNER)

    seen_by = run_with_readers(
        lambda: publish_partition(state, first, out, partition_dir(DS), marker1, None, RUN_KEY), out.root, expect="tok1"
    )
    for seen in seen_by:
        assert set(seen) <= {"absent", "complete:tok1"}
        assert "absent" not in seen[seen.index("complete:tok1") :]  # once there, it stays
    # The replacement: each reader saw the old partition whole before it began and the new one
    # after; in between only the old one whole, a swapped look (retried) or none — and never the
    # old one again once the new one was seen.
    seen_by = run_with_readers(
        lambda: publish_partition(state, second, out, partition_dir(DS), marker2, "c1", RUN_KEY),
        out.root,
        through_marker=True,
        expect="tok2",
        before="tok1",
    )
    for seen in seen_by:
        assert set(seen) <= {"absent", "swapped", "complete:tok1", "complete:tok2"}, set(seen)
        after_new = seen[seen.index("complete:tok2") :]
        assert "complete:tok1" not in after_new and "absent" not in after_new
    tombstone = tmp_path / "table" / run_tombstones_dir(*RUN_KEY) / f"{partition_dir(DS)}-c1"
    assert sorted(p.name for p in tombstone.iterdir() if p.name.startswith("source=")) == [f"source={n}" for n in SOURCES]
    assert json.loads((tmp_path / "table" / partition_dir(DS) / COMMIT_MARKER).read_text())["commit_id"] == "c2"


def test_the_readers_fail_a_publish_that_never_shows_the_partition(tmp_path):
    """The oracle can fail: a "publish" that leaves the table empty is not "all or nothing", it is
    nothing, and the readers say so (the earlier version passed it: every look was "absent")."""
    out = tmp_path / "table"
    out.mkdir()
    with pytest.raises(AssertionError, match="never saw the partition"):
        run_with_readers(lambda: None, str(out), expect="tok1")
    # A partition published under a hidden name is not found by partition discovery either.
    (out / "_zeta_pending" / partition_dir(DS)).mkdir(parents=True)
    with pytest.raises(AssertionError, match="never saw the partition"):
        run_with_readers(lambda: None, str(out), expect="tok1")


def test_the_readers_fail_a_replacement_that_writes_the_new_marker_before_its_files(tmp_path):
    """The replacement half can fail too: rewriting the partition in place — the new marker first,
    then the new files, then the old ones removed — is caught by the readers (the marker's attempt
    has no files yet in a partition that was not swapped)."""
    state = StateStorage.from_url(str(tmp_path / "state"))
    out = StateStorage.from_url(str(tmp_path / "table"))
    os.makedirs(out.root, exist_ok=True)
    first, second = stage(state, "tok1"), stage(state, "tok2")
    part = partition_dir(DS)
    publish_partition(state, first, out, part, marker_for("c1", DS, 0, reports("tok1"), 1.0, OWNER), None, RUN_KEY)

    def in_place() -> None:
        out.write_atomic(f"{part}/{COMMIT_MARKER}", marker_for("c2", DS, 1, reports("tok2"), 2.0, OWNER).to_json())
        time.sleep(0.3)
        for name, (relative, _) in second.items():
            copy_tree(state, relative, out, f"{part}/source={name}", name_prefix="tok2-")
        for path in (tmp_path / "table" / part).rglob("tok1-*"):
            path.unlink()

    with pytest.raises(AssertionError, match="data files of the marker's attempt|a torn file"):
        run_with_readers(in_place, out.root, through_marker=True, expect="tok2", before="tok1")
