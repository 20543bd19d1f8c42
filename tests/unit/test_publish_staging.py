"""The completed point publishes a source only as its driver reported it.

``core.publish.staging_problem`` compares the staging with the files the driver recorded in its
ledger at finish; ``publish_partition`` applies it to every source before and after the copy, and
leaves no empty pending directory behind. The oracle is the files on disk.
"""

from __future__ import annotations

import json
import os

import pytest

from airflow_provider_zeta.core.paths import PENDING_DIR, run_pending_dir
from airflow_provider_zeta.core.publish import COMMIT_MARKER, Owner, marker_for, partition_dir, staging_problem
from airflow_provider_zeta.core.ready import Report
from airflow_provider_zeta.operators.completed_point import StagingMismatch, publish_partition
from airflow_provider_zeta.storage import StateStorage

DS = "2026-04-04"
OWNER = Owner("dag", "pipe", "scheduled__2026-04-04T00:00:00+00:00")
RUN_KEY = (OWNER.dag_id, OWNER.run_id)


def test_staging_problem_names_source_and_token():
    recorded = {"part-0.json": 10, "_SUCCESS": 0}
    assert staging_problem("eu", "tok1", recorded, dict(recorded), "file:///s") is None
    assert staging_problem("eu", "tok1", {}, {}, "file:///s") is None  # an empty output, as reported
    missing_dir = staging_problem("eu", "tok1", recorded, {}, "file:///s")
    assert "'eu'" in missing_dir and "tok1" in missing_dir and "missing or empty" in missing_dir
    assert "1 recorded files missing" in staging_problem("eu", "t", recorded, {"_SUCCESS": 0}, "w")
    assert "did not record" in staging_problem("eu", "t", recorded, {**recorded, "part-9.json": 1}, "w")
    assert "another size" in staging_problem("eu", "t", recorded, {**recorded, "part-0.json": 3}, "w")
    assert "older provider" in staging_problem("eu", "t", None, recorded, "w")


def stage(state: StateStorage, token: str, sources, files=2) -> dict:
    staging = {}
    for name in sources:
        relative = f"attempts/{token}/{name}/output"
        for part in range(files):
            state.write_atomic(f"{relative}/part-{part}.json", json.dumps({"source": name, "token": token}).encode())
        state.write_atomic(f"{relative}/_SUCCESS", b"")
        staging[name] = (relative, state.file_sizes(relative))
    return staging


def marker(token: str, sources, incarnation=0):
    reports = {n: Report(n, f"deploy_{n}", incarnation, token, "x", 2) for n in sources}
    return marker_for(f"c-{token}", DS, incarnation, reports, 1.0, OWNER)


@pytest.fixture
def stores(tmp_path):
    return StateStorage.from_url(str(tmp_path / "state")), StateStorage.from_url(str(tmp_path / "table"))


@pytest.mark.parametrize("damage", ["delete_dir", "delete_file", "truncate"])
def test_a_staging_that_differs_from_the_ledger_publishes_nothing(stores, damage):
    """A missing staging directory must not be published as an empty source (it once was)."""
    state, out = stores
    staging = stage(state, "tok1", ["eu", "us"])
    us_dir = state.local_path(staging["us"][0])
    if damage == "delete_dir":
        state.delete_tree(staging["us"][0])
    elif damage == "delete_file":
        os.remove(os.path.join(us_dir, "part-1.json"))
    else:
        open(os.path.join(us_dir, "part-0.json"), "wb").close()
    with pytest.raises(StagingMismatch) as raised:
        publish_partition(state, staging, out, partition_dir(DS), marker("tok1", ["eu", "us"]), None, RUN_KEY)
    assert "'us'" in str(raised.value) and "tok1" in str(raised.value)
    assert not os.path.exists(out.path(partition_dir(DS)))
    assert out.files_under("") == [], "nothing, not even a pending directory, may be left in the table"


def test_a_publish_leaves_no_empty_pending_directory(stores):
    """``_zeta_pending/<dag>/<run>/`` must not stay, empty, after a publish (it once stayed after every one)."""
    state, out = stores
    staging = stage(state, "tok1", ["eu", "us"], files=3)
    publish_partition(state, staging, out, partition_dir(DS), marker("tok1", ["eu", "us"]), None, RUN_KEY)
    assert not os.path.exists(out.path(run_pending_dir(*RUN_KEY)))
    assert not os.path.exists(os.path.dirname(out.path(run_pending_dir(*RUN_KEY))))
    # Every file of every source is in the partition (not one per source), with the marker.
    published = out.files_under(partition_dir(DS))
    assert sorted(published) == sorted(
        [COMMIT_MARKER] + [f"source={n}/{f}" for n in ("eu", "us") for f in ("_SUCCESS", *(f"tok1-part-{i}.json" for i in range(3)))]
    )


def test_pruning_keeps_a_pending_directory_another_publisher_still_uses(stores):
    state, out = stores
    other = f"{run_pending_dir(OWNER.dag_id, 'manual__other')}/c-x/{partition_dir('2026-04-05')}"
    out.write_atomic(f"{other}/{COMMIT_MARKER}", b"{}")
    publish_partition(state, stage(state, "tok1", ["eu"]), out, partition_dir(DS), marker("tok1", ["eu"]), None, RUN_KEY)
    assert out.exists(f"{other}/{COMMIT_MARKER}")
    assert not out.exists(run_pending_dir(*RUN_KEY))
    assert out.exists(PENDING_DIR)
