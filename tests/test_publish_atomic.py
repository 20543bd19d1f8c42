"""A reader polling the output table never sees a partial partition (G3), on the local filesystem.

Runs the completed point's file work (``publish_partition``) with many sources while reader
threads list and read ``{output}/ds=.../`` as fast as they can.

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

from airflow_provider_zeta.core.paths import run_tombstones_dir
from airflow_provider_zeta.core.publish import COMMIT_MARKER, marker_for, partition_dir
from airflow_provider_zeta.core.ready import Report
from airflow_provider_zeta.operators.completed_point import publish_partition
from airflow_provider_zeta.storage import StateStorage

SOURCES = [f"s{i:02d}" for i in range(40)]
DS = "2026-05-05"
RUN_KEY = ("atomic_dag", "scheduled__2026-05-05T00:00:00+00:00")


def stage(state: StateStorage, token: str) -> dict[str, str]:
    staging = {}
    for name in SOURCES:
        relative = f"attempts/{token}/{name}/output"
        for part in range(3):
            state.write_atomic(f"{relative}/part-{part}.json", json.dumps({"source": name, "token": token}).encode() * 50)
        staging[name] = relative
    return staging


def reports(token: str) -> dict[str, Report]:
    return {n: Report(source=n, task_id=f"deploy_{n}", incarnation=0, token=token, output_path="x", rows=3) for n in SOURCES}


def watch(root: str, stop: threading.Event, seen: list[str], errors: list[str], through_marker: bool) -> None:
    part = os.path.join(root, partition_dir(DS))
    while not stop.is_set():
        try:
            names = set(os.listdir(part))
        except FileNotFoundError:
            seen.append("absent")
            continue
        sources = {n for n in names if n.startswith("source=")}
        if sources and len(sources) != len(SOURCES):
            errors.append(f"partial partition: {len(sources)} of {len(SOURCES)} sources")
            continue
        if COMMIT_MARKER not in names:
            errors.append("partition without its commit marker")
            continue
        try:
            tokens = set()
            wanted = None
            if through_marker:
                with open(os.path.join(part, COMMIT_MARKER)) as handle:
                    wanted = json.load(handle)["tokens"]
            for source in sources:
                files = os.listdir(os.path.join(part, source))
                if wanted is not None:
                    files = [n for n in files if n.startswith(wanted[source.removeprefix("source=")] + "-")]
                    if not files:  # the marker's commit was swapped out meanwhile: retry, as for a missing file
                        raise FileNotFoundError(source)
                    if len(files) != 3:
                        errors.append(f"{source}: {len(files)} of 3 files of the marker's token")
                for name in files:  # read every file by the path the listing gave
                    with open(os.path.join(part, source, name)) as handle:
                        tokens.add(json.loads(handle.read(200).split("}")[0] + "}")["token"])
        except FileNotFoundError:
            continue  # the partition was swapped between listing and reading: the read fails, a retry decides
        if len(tokens) != 1:
            errors.append(f"mixed attempts in one partition: {tokens}")
        seen.append(f"complete:{tokens.pop()}")


def run_with_readers(target, root: str, through_marker: bool = False) -> list[str]:
    stop, seen, errors = threading.Event(), [], []
    readers = [threading.Thread(target=watch, args=(root, stop, seen, errors, through_marker)) for _ in range(2)]
    for reader in readers:
        reader.start()
    try:
        target()
    finally:
        stop.set()
        for reader in readers:
            reader.join()
    assert not errors, errors[:5]
    return seen


def test_first_publish_and_replacement_are_all_or_nothing(tmp_path):
    state = StateStorage.from_url(str(tmp_path / "state"))
    out = StateStorage.from_url(str(tmp_path / "table"))
    os.makedirs(out.root, exist_ok=True)
    first, second = stage(state, "tok1"), stage(state, "tok2")
    marker1 = marker_for("c1", DS, 0, reports("tok1"), 1.0)
    marker2 = marker_for("c2", DS, 1, reports("tok2"), 2.0)

    seen = run_with_readers(lambda: publish_partition(state, first, out, partition_dir(DS), marker1, None, RUN_KEY), out.root)
    assert seen, "the readers must have looked during the publish"
    assert set(seen) <= {"absent", "complete:tok1"}
    seen = run_with_readers(
        lambda: publish_partition(state, second, out, partition_dir(DS), marker2, "c1", RUN_KEY), out.root, through_marker=True
    )
    assert seen and set(seen) <= {"absent", "complete:tok1", "complete:tok2"}
    tombstone = tmp_path / "table" / run_tombstones_dir(*RUN_KEY) / f"{partition_dir(DS)}-c1"
    assert sorted(p.name for p in tombstone.iterdir() if p.name.startswith("source=")) == [f"source={n}" for n in SOURCES]
    assert json.loads((tmp_path / "table" / partition_dir(DS) / COMMIT_MARKER).read_text())["commit_id"] == "c2"
