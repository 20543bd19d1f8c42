"""The completed point's commit on a real S3 server: kills at each point of the commit, with a
reader listing the table the whole time.

Real parts: an S3 server (moto's, a separate process on 127.0.0.1, ``tests.test_object_store``'s
fixture) holds the output table, reached through s3fs exactly as the task reaches it; the
operator's ``execute`` runs with a fake task context (as in ``tests/unit/test_publish_object_store.py``,
whose crash points and oracle this reuses), its s3fs filesystem killed at a named point (that call
and every later one raise, as after SIGKILL); the retry opens a fresh filesystem.

The oracles are the keys on the server, listed with boto3 (not s3fs, not the provider): after the
retry the partition holds every file of the published attempt and its marker; and a reader thread
listing the table during every publish, kill and retry finds that every listing showing a marker
shows exactly the files its manifest names (a listing counts when a second listing right after it
is the same and the marker it read was the one listed, by ETag).
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

import pytest

from tests.test_object_store import BUCKET, KEY, SECRET_KEY, s3_endpoint  # noqa: F401  (the fixture)
from tests.unit.test_publish_object_store import (
    COMMIT_MARKER,
    CRASH_POINTS,
    FILES,
    PART,
    SOURCES,
    TOMBSTONE_POINTS,
    Failpoint,
    Failpoints,
    Killed,
    Run,
    in_partition,
)

pytestmark = pytest.mark.xdist_group("object_store_cluster")


def s3_table(endpoint: str, prefix: str, failpoint: Failpoint | None = None) -> Any:
    from fsspec.asyn import sync
    from s3fs import S3FileSystem

    from airflow_provider_zeta.storage import StateStorage

    class FailpointS3(Failpoints, S3FileSystem):
        # The sync entry points StateStorage calls: the kill is raised in the calling thread, not
        # inside fsspec's event loop (which only hands ``Exception`` back to the caller).
        def cp_file(self, path1: str, path2: str, **kwargs: Any) -> Any:
            self._check("copy", path2)
            return sync(self.loop, self._cp_file, path1, path2, **kwargs)

        def pipe_file(self, path: str, value: Any, **kwargs: Any) -> Any:
            self._check("write", path)
            return sync(self.loop, self._pipe_file, path, value, **kwargs)

        def rm_file(self, path: str, **kwargs: Any) -> Any:
            self._check("delete", path)
            return sync(self.loop, self._rm_file, path, **kwargs)

        def rm(self, path: Any, recursive: bool = False, maxdepth: int | None = None, **kwargs: Any) -> Any:
            # One object at a time, in key order, as a kill between two of them would find them.
            for name in sorted(self.find(path) if recursive else [path]):
                self.rm_file(name)

        def _open(self, path: str, mode: str = "rb", *args: Any, **kwargs: Any) -> Any:
            if any(flag in mode for flag in "wax"):
                self._check("write", path)
            return super()._open(path, mode, *args, **kwargs)

    root = f"{BUCKET}/{prefix}"
    fs = FailpointS3(
        key=KEY,
        secret=SECRET_KEY,
        client_kwargs={"endpoint_url": endpoint, "region_name": "us-east-1"},
        skip_instance_cache=True,
        use_listings_cache=False,
    )
    fs.table_root, fs.failpoint, fs.dead = root, failpoint, False
    return StateStorage(fs, root, f"s3://{root}")


def client(endpoint: str) -> Any:
    import boto3

    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=KEY, aws_secret_access_key=SECRET_KEY, region_name="us-east-1")


def listing(s3: Any, prefix: str) -> dict[str, tuple[int, str]]:
    """Key (below ``prefix``) -> (size, ETag) of the table's partition, as one listing shows it."""
    found = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=f"{prefix}/{PART}/"):
        for item in page.get("Contents", []):
            found[item["Key"].removeprefix(f"{prefix}/{PART}/")] = (item["Size"], item["ETag"])
    return found


class Reader(threading.Thread):
    """Lists the partition the whole time; records every violation and what it saw."""

    def __init__(self, endpoint: str, prefix: str) -> None:
        super().__init__(daemon=True)
        self.s3, self.prefix = client(endpoint), prefix
        self.stop = threading.Event()
        self.violations: list[str] = []
        self.looks = {"with_marker": 0, "without_marker": 0, "empty": 0, "unsettled": 0}

    def run(self) -> None:
        from botocore.exceptions import ClientError

        while not self.stop.is_set():
            try:
                first = listing(self.s3, self.prefix)
                if COMMIT_MARKER not in first:
                    self.looks["without_marker" if first else "empty"] += 1
                    continue
                raw = self.s3.get_object(
                    Bucket=BUCKET, Key=f"{self.prefix}/{PART}/{COMMIT_MARKER}", IfMatch=first[COMMIT_MARKER][1]
                )["Body"].read()
                second = listing(self.s3, self.prefix)
            except ClientError:
                self.looks["unsettled"] += 1  # the marker changed or went since the listing
                continue
            if second != first:
                self.looks["unsettled"] += 1
                continue
            self.looks["with_marker"] += 1
            manifest = json.loads(raw)["manifest"]
            files = {name: size for name, (size, _) in first.items() if name != COMMIT_MARKER}
            if files != manifest:
                wrong = sorted(set(files.items()) ^ set(manifest.items()))
                self.violations.append(f"a listing with the marker of {json.loads(raw)['commit_id']} differs from its manifest: {wrong[:4]}")

    def finish(self) -> None:
        self.stop.set()
        self.join(timeout=30)


def assert_complete(endpoint: str, prefix: str, token: str, partition: str = PART) -> None:
    """Every file of attempt ``token`` and nothing else below ``partition``, with its marker."""
    s3 = client(endpoint)
    keys = {
        item["Key"].removeprefix(f"{prefix}/{partition}/")
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=f"{prefix}/{partition}/")
        for item in page.get("Contents", [])
    }
    expected = {f"source={n}/{token}-part-{k}.json" for n in SOURCES for k in range(FILES)} | {f"source={n}/_SUCCESS" for n in SOURCES}
    assert keys == expected | {COMMIT_MARKER}, sorted(keys ^ (expected | {COMMIT_MARKER}))[:6]
    for name in expected:
        if name.endswith(".json"):
            body = s3.get_object(Bucket=BUCKET, Key=f"{prefix}/{partition}/{name}")["Body"].read()
            assert {row["token"] for row in json.loads(body)} == {token}, name
    marker = json.loads(s3.get_object(Bucket=BUCKET, Key=f"{prefix}/{partition}/{COMMIT_MARKER}")["Body"].read())
    assert set(marker["tokens"].values()) == {token}


def test_kills_at_every_point_of_a_first_publish_and_a_replacement_on_s3(s3_endpoint, tmp_path, monkeypatch):  # noqa: F811
    points = [(name, False) for name in sorted(CRASH_POINTS)] + [
        (name, True) for name in sorted(TOMBSTONE_POINTS) + ["copy_after_1_files", "marker_write"]
    ]
    looked = {"with_marker": 0, "without_marker": 0}
    for n, (point, replacing) in enumerate(points):
        prefix = f"tables/t{n}"
        run = Run(tmp_path / f"t{n}", monkeypatch, make_table=lambda fp, prefix=prefix: s3_table(s3_endpoint, prefix, fp))
        os.makedirs(run.tmp_path, exist_ok=True)
        reader = Reader(s3_endpoint, prefix)
        reader.start()
        try:
            incarnation = 0
            if replacing:
                run.publish("tok0", incarnation=0)
                incarnation = 1
            failpoint = {**CRASH_POINTS, **TOMBSTONE_POINTS}[point]()
            try:
                run.publish("tok1", incarnation=incarnation, failpoint=failpoint)
            except Killed:
                pass
            else:
                pytest.fail(f"{point}: never killed; the operations were {run.out.fs.__dict__.get('ops')}")
            retry = run.publish("tok1", incarnation=incarnation)
        finally:
            reader.finish()
        assert not reader.violations, (point, reader.violations[:3])
        assert_complete(s3_endpoint, prefix, "tok1")
        if replacing:
            s3 = client(s3_endpoint)
            tombstones = {
                item["Key"].split("/")[5]
                for item in s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{prefix}/_zeta_tombstones/").get("Contents", [])
            }
            assert len(tombstones) == 1, (point, tombstones)
            (tombstone,) = tombstones
            run_dir = s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{prefix}/_zeta_tombstones/")["Contents"][0]["Key"].split("/")[2:5]
            assert_complete(s3_endpoint, prefix, "tok0", "/".join([*run_dir, tombstone]))
        assert retry["rule"] in ("first_publish", "newer_incarnation", "already_published"), (point, retry["rule"])
        for key in looked:
            looked[key] += reader.looks[key]
    # The readers looked while the partition was there and while it was not.
    assert looked["with_marker"] > 0 and looked["without_marker"] > 0, looked


def test_a_first_publish_on_s3_never_commits_over_another_owners(s3_endpoint, tmp_path, monkeypatch):  # noqa: F811
    """Run A of another DAG publishes the same partition while B copies its files in (A killed
    half-way, then A whole): B never writes its marker over A's files and never nests into A's
    partition; A's retry commits A's."""
    from airflow.sdk.exceptions import AirflowFailException

    prefix = "tables/race"

    def make(fp: Failpoint | None) -> Any:
        return s3_table(s3_endpoint, prefix, fp)

    theirs = Run(tmp_path, monkeypatch, dag_id="dag_a", make_table=make)
    mine = Run(tmp_path, monkeypatch, dag_id="dag_b", make_table=make)

    def half_of_theirs() -> None:
        with pytest.raises(Killed):
            theirs.publish("tokA", failpoint=Failpoint("copy", in_partition, 2))

    reader = Reader(s3_endpoint, prefix)
    reader.start()
    try:
        with pytest.raises(AirflowFailException, match="partition_being_published.*dag_a"):
            mine.publish("tokB", failpoint=Failpoint("copy", in_partition, 0, action=half_of_theirs))
        theirs.publish("tokA")
        # And B once more, now that A is committed: refused, naming A.
        with pytest.raises(AirflowFailException, match="partition_of_another_owner.*dag_a"):
            mine.publish("tokB")
    finally:
        reader.finish()
    assert not reader.violations, reader.violations[:3]
    assert_complete(s3_endpoint, prefix, "tokA")
