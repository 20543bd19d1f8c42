"""The completed point on a store whose move is copy + delete (object stores, HDFS-like stores):
a kill at any point of the commit leaves nothing a retry or a reader takes for committed unless it
is complete, and a first publish never lands on top of another owner's.

``CopyDeleteFS`` is the local filesystem with the semantics of an object store through fsspec: no
atomic rename (a move copies file by file in key order, then deletes file by file), a write is one
PUT, and a kill at a named point (``Failpoint``) stops the "process": that call and every later
one raise ``Killed`` (no cleanup runs, as after SIGKILL). The retry is a fresh filesystem on the
same directory. The operator under test is ``CompletedPointOperator.execute`` with a fake task
context (ledger checks stubbed: tested elsewhere). Oracles: the files on disk below the partition
and the attempt tokens in their names and rows, not the provider's bookkeeping.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest
from fsspec.implementations.local import LocalFileSystem
from fsspec.spec import AbstractFileSystem

from airflow_provider_zeta.core.publish import COMMIT_MARKER
from airflow_provider_zeta.storage import StateStorage

DS = "2026-07-01"
PART = f"ds={DS}"
SOURCES = ("eu", "us", "apac")
FILES = 3


class Killed(BaseException):
    """The publishing process died here (a BaseException: no ``except Exception`` runs)."""


@dataclass
class Failpoint:
    """Kill the process at the ``after``-th (0-based) operation ``op`` (``copy``, ``write``,
    ``delete``) on a path (relative to the table) that ``where`` accepts; or, with ``action``,
    run it there once instead (a concurrent writer)."""

    op: str
    where: Callable[[str], bool]
    after: int = 0
    action: Callable[[], None] | None = None
    seen: int = 0
    fired: bool = False


def in_partition(path: str) -> bool:
    return path.startswith(PART + "/")


def is_marker(path: str) -> bool:
    return path == f"{PART}/{COMMIT_MARKER}"


def in_tombstones(path: str) -> bool:
    return path.startswith("_zeta_tombstones/")


def in_pending(path: str) -> bool:
    return path.startswith("_zeta_pending/")


#: The named crash points: a kill during the copy into the partition after k files, between the
#: copy and the delete of the move, during the marker's write, during the tombstone move.
CRASH_POINTS: dict[str, Callable[[], Failpoint]] = {
    **{f"copy_after_{k}_files": (lambda k=k: Failpoint("copy", in_partition, k)) for k in (0, 1, 5)},
    "between_copy_and_delete": lambda: Failpoint("delete", in_pending),
    "marker_write": lambda: Failpoint("any_write", is_marker),
}
TOMBSTONE_POINTS: dict[str, Callable[[], Failpoint]] = {
    **{f"tombstone_copy_after_{k}_files": (lambda k=k: Failpoint("copy", in_tombstones, k)) for k in (0, 4)},
    **{f"tombstone_delete_after_{k}_files": (lambda k=k: Failpoint("delete", in_partition, k)) for k in (0, 1, 6)},
    "tombstone_marker_write": lambda: Failpoint("any_write", lambda p: in_tombstones(p) and p.endswith(COMMIT_MARKER)),
}


class Failpoints:
    """The kill switch of a test filesystem: ``_check`` before each copy, write and delete."""

    table_root: str
    failpoint: Failpoint | None
    dead: bool

    def _check(self, op: str, path: str) -> None:
        if self.dead:
            raise Killed(f"{op} {path} after the kill")
        relative = os.path.relpath(str(path), self.table_root)
        self.__dict__.setdefault("ops", []).append(f"{op} {relative}")
        point = self.failpoint
        if point is None or point.fired:
            return
        ops = ("copy", "write") if point.op == "any_write" else (point.op,)
        if op in ops and point.where(relative):
            if point.seen == point.after:
                point.fired = True
                if point.action is not None:
                    point.action()
                    return
                self.dead = True
                raise Killed(f"killed at {op} {relative}")
            point.seen += 1


class CopyDeleteFS(Failpoints, LocalFileSystem):
    """A local directory seen as an object store sees it through fsspec: ``mv`` is copy + delete
    (``AbstractFileSystem.mv``), file by file in key order; ``rm`` deletes file by file."""

    protocol = ("zetacopydel",)

    def __init__(self, root: str, failpoint: Failpoint | None = None) -> None:
        super().__init__(auto_mkdir=True, skip_instance_cache=True)
        self.table_root = root
        self.failpoint = failpoint
        self.dead = False

    def cp_file(self, path1: Any, path2: Any, **kwargs: Any) -> None:
        self._check("copy", path2)
        super().cp_file(path1, path2, **kwargs)

    def pipe_file(self, path: Any, value: Any, mode: str = "overwrite", **kwargs: Any) -> None:
        self._check("write", path)
        super().pipe_file(path, value, **kwargs)

    def _open(self, path: Any, mode: str = "rb", *args: Any, **kwargs: Any) -> Any:
        if any(flag in mode for flag in "wax"):
            self._check("write", path)
        elif self.dead:
            raise Killed("read after the kill")
        return super()._open(path, mode, *args, **kwargs)

    def rm_file(self, path: Any) -> None:
        self._check("delete", path)
        super().rm_file(path)

    def rm(self, path: Any, recursive: bool = False, maxdepth: int | None = None) -> None:
        paths = self.expand_path(path, recursive=recursive, maxdepth=maxdepth)
        for name in sorted(p for p in paths if self.isfile(p)):
            self.rm_file(name)
        for name in sorted((p for p in paths if self.isdir(p)), key=len, reverse=True):
            try:
                os.rmdir(name)
            except OSError:
                pass

    def mv(self, path1: Any, path2: Any, recursive: bool = False, maxdepth: int | None = None, **kwargs: Any) -> None:
        AbstractFileSystem.mv(self, path1, path2, recursive=recursive, maxdepth=maxdepth, **kwargs)

    def rmdir(self, path: Any) -> None:
        if self.dead:
            raise Killed("rmdir after the kill")
        super().rmdir(path)


def table(tmp_path, failpoint: Failpoint | None = None) -> StateStorage:
    root = str(tmp_path / "table")
    os.makedirs(root, exist_ok=True)
    return StateStorage(CopyDeleteFS(root, failpoint), root, f"zetacopydel://{root}")


class Store(dict):
    def __init__(self, on_set: Callable[[str], None] | None = None) -> None:
        super().__init__()
        self.on_set = on_set

    def set(self, key: str, value: Any) -> None:
        if self.on_set is not None:
            self.on_set(key)
        self[key] = json.loads(json.dumps(value))

    def delete(self, key: str) -> None:
        self.pop(key, None)


def stage(state: StateStorage, token: str) -> dict[str, tuple[str, dict[str, int]]]:
    staging = {}
    for name in SOURCES:
        relative = f"attempts/{token}/{name}/output"
        for n in range(FILES):
            state.write_atomic(f"{relative}/part-{n}.json", json.dumps([{"token": token, "source": name, "n": n}]).encode())
        state.write_atomic(f"{relative}/_SUCCESS", b"")
        staging[name] = (relative, state.file_sizes(relative))
    return staging


@dataclass
class Run:
    """One run's completed point, as Airflow would execute it (a fresh operator per try)."""

    tmp_path: Any
    monkeypatch: Any
    dag_id: str = "dag"
    run_id: str = f"scheduled__{DS}T00:00:00+00:00"
    store: Store = field(default_factory=Store)
    #: The table as a fresh process opens it (with a failpoint); default: ``table`` (local).
    make_table: Callable[[Failpoint | None], StateStorage] | None = None

    def publish(self, token: str, incarnation: int = 0, failpoint: Failpoint | None = None, on_fence: Any = None) -> dict:
        from airflow.sdk import DAG

        from airflow_provider_zeta.operators import completed_point
        from airflow_provider_zeta.operators.completed_point import CompletedPointOperator

        state_root = str(self.tmp_path / "state")
        self.monkeypatch.setenv("AIRFLOW__ZETA__STATE_ROOT", state_root)
        state = StateStorage.from_url(state_root)
        staged = stage(state, token)
        out = self.make_table(failpoint) if self.make_table else table(self.tmp_path, failpoint)
        self.out = out
        real_open = completed_point.open_state_storage
        self.monkeypatch.setattr(
            completed_point, "open_state_storage", lambda url: out if url == "zeta-table" else real_open(url)
        )
        self.monkeypatch.setattr(
            CompletedPointOperator, "_verified_staging", lambda self_, state_, ti, report: staged[report.source]
        )
        with DAG(self.dag_id, schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC)):
            operator = CompletedPointOperator(task_id="completed_point", output_root="zeta-table", ready_task_id="ready")
        reports = {
            n: {"source": n, "task_id": f"deploy_{n}", "incarnation": incarnation, "token": token, "output_path": "x", "rows": 1}
            for n in SOURCES
        }
        self.store.on_set = (lambda key: on_fence() if key == "zeta_publishing" else None) if on_fence else None
        context = {
            "ds": DS,
            "logical_date": datetime(2026, 7, 1, tzinfo=UTC),
            "ti": SimpleNamespace(
                dag_id=self.dag_id,
                run_id=self.run_id,
                xcom_pull=lambda task_ids: {"incarnation": incarnation, "sources": reports},
                get_dr_count=lambda dag_id, run_ids: len(run_ids),
            ),
            "task_state_store": self.store,
            "outlet_events": {},
        }
        operator.render_template_fields(context)
        return operator.execute(context)


def on_disk(tmp_path, relative: str = PART) -> dict[str, Any]:
    """What lies below ``relative`` of the table: files (path -> tokens in its rows) and marker."""
    base = tmp_path / "table" / relative
    files: dict[str, set[str]] = {}
    marker = None
    for path in sorted(base.rglob("*")) if base.is_dir() else []:
        if path.is_dir():
            continue
        name = path.relative_to(base).as_posix()
        if name == COMMIT_MARKER:
            marker = json.loads(path.read_text())
        elif path.suffix == ".json":
            files[name] = {row["token"] for row in json.loads(path.read_text())}
        else:
            files[name] = set()
    return {"files": files, "marker": marker}


def complete_partition_of(tmp_path, token: str, relative: str = PART) -> None:
    """The oracle: every source's every file of attempt ``token`` and nothing else, and the marker."""
    found = on_disk(tmp_path, relative)
    expected = {f"source={n}/{token}-part-{k}.json" for n in SOURCES for k in range(FILES)}
    expected |= {f"source={n}/_SUCCESS" for n in SOURCES}
    assert set(found["files"]) == expected, f"{relative}: {sorted(set(found['files']) ^ expected)[:6]}"
    assert all(tokens <= {token} for tokens in found["files"].values())
    assert found["marker"] is not None and set(found["marker"]["tokens"].values()) == {token}


@pytest.mark.parametrize("point", sorted(CRASH_POINTS))
def test_a_kill_during_a_first_publish_never_leaves_an_incomplete_partition_taken_for_published(tmp_path, monkeypatch, point):
    run = Run(tmp_path, monkeypatch)
    with pytest.raises(Killed):
        run.publish("tok1", failpoint=CRASH_POINTS[point]())
    retry = run.publish("tok1")
    complete_partition_of(tmp_path, "tok1")
    assert retry["rule"] in ("first_publish", "already_published", "incomplete_commit")


@pytest.mark.parametrize("point", sorted(TOMBSTONE_POINTS) + ["copy_after_1_files", "marker_write"])
def test_a_kill_during_a_replacement_is_completed_by_the_retry(tmp_path, monkeypatch, point):
    run = Run(tmp_path, monkeypatch)
    run.publish("tok0", incarnation=0)
    failpoint = {**TOMBSTONE_POINTS, **CRASH_POINTS}[point]()
    with pytest.raises(Killed):
        run.publish("tok1", incarnation=1, failpoint=failpoint)
    retry = run.publish("tok1", incarnation=1)
    assert retry["rule"] in ("newer_incarnation", "already_published", "first_publish"), retry["rule"]
    complete_partition_of(tmp_path, "tok1")
    # The replaced partition is whole in its tombstone, its marker with it.
    tombstones = sorted(p.name for p in (tmp_path / "table" / "_zeta_tombstones").rglob(f"{PART}-*"))
    assert len(tombstones) == 1, tombstones
    (tombstone,) = (tmp_path / "table" / "_zeta_tombstones").rglob(f"{PART}-*")
    complete_partition_of(tmp_path, "tok0", tombstone.relative_to(tmp_path / "table").as_posix())


def test_a_first_publish_racing_another_owners_never_lands_on_top_of_it(tmp_path, monkeypatch):
    """Run B decided ``first_publish``; run A of another DAG publishes the same partition before B
    touches the table (B's fence write runs A's whole publish). B must refuse, naming A; the
    partition stays exactly A's, with nothing nested in it."""
    from airflow.sdk.exceptions import AirflowFailException

    theirs = Run(tmp_path, monkeypatch, dag_id="dag_a")
    mine = Run(tmp_path, monkeypatch, dag_id="dag_b")
    try:
        outcome: Any = mine.publish("tokB", on_fence=lambda: theirs.publish("tokA"))
    except AirflowFailException as error:
        outcome = error
    nested = sorted(p.relative_to(tmp_path / "table").as_posix() for p in (tmp_path / "table" / PART).rglob("ds=*"))
    assert not nested, f"B's publish nested into A's partition: {nested[:3]}; B returned {outcome!r:.200}"
    complete_partition_of(tmp_path, "tokA")
    assert isinstance(outcome, AirflowFailException), outcome
    assert "partition_of_another_owner" in str(outcome) and "dag_a" in str(outcome)


def reader_sees(tmp_path, strict: bool = True) -> set[str] | None:
    """What a marker-aware reader reads (``storage.committed_files``), checked against the disk:
    every file it names is there with its size, all of one attempt. The tokens it read, or None."""
    from airflow_provider_zeta.storage import committed_files

    # On disk, independent of the helper: a partition showing a marker holds exactly its manifest.
    shown = on_disk(tmp_path)
    if strict and shown["marker"] is not None:
        assert set(shown["files"]) == set(shown["marker"]["manifest"]), sorted(set(shown["files"]) ^ set(shown["marker"]["manifest"]))[:4]
    files = committed_files(table(tmp_path), PART)
    if files is None:
        return None
    base = tmp_path / "table" / PART
    tokens: set[str] = set()
    for name, size in files.items():
        assert (base / name).stat().st_size == size, name
        if name.endswith(".json"):
            tokens |= {row["token"] for row in json.loads((base / name).read_text())}
    assert len(files) == len(SOURCES) * (FILES + 1) and len(tokens) == 1, (sorted(files), tokens)
    return tokens


@pytest.mark.parametrize("point", sorted(TOMBSTONE_POINTS) + sorted(CRASH_POINTS))
def test_after_a_kill_a_marker_aware_reader_reads_one_whole_commit_or_nothing(tmp_path, monkeypatch, point):
    run = Run(tmp_path, monkeypatch)
    run.publish("tok0", incarnation=0)
    assert reader_sees(tmp_path) == {"tok0"}
    with pytest.raises(Killed):
        run.publish("tok1", incarnation=1, failpoint={**TOMBSTONE_POINTS, **CRASH_POINTS}[point]())
    assert reader_sees(tmp_path) in (None, {"tok0"}, {"tok1"})
    run.publish("tok1", incarnation=1)
    assert reader_sees(tmp_path) == {"tok1"}


def test_a_partition_whose_files_do_not_match_its_marker_is_never_taken_for_published(tmp_path, monkeypatch):
    """A file of the committed partition goes missing (as the old copy-then-delete move left a
    partition holding only its marker): the re-execution does not call it published; it moves
    what is there to a tombstone and publishes the commit again."""
    run = Run(tmp_path, monkeypatch)
    run.publish("tok1")
    (tmp_path / "table" / PART / "source=us" / "tok1-part-1.json").unlink()
    assert reader_sees(tmp_path, strict=False) is None
    again = run.publish("tok1")
    assert again["rule"] == "incomplete_commit"
    complete_partition_of(tmp_path, "tok1")
    (tombstone,) = (tmp_path / "table" / "_zeta_tombstones").rglob(f"{PART}-*")
    assert not (tombstone / "source=us" / "tok1-part-1.json").exists() and (tombstone / COMMIT_MARKER).exists()
    assert run.publish("tok1")["rule"] == "already_published"


def test_another_owners_incomplete_partition_is_left_alone(tmp_path, monkeypatch):
    from airflow.sdk.exceptions import AirflowFailException

    Run(tmp_path, monkeypatch, dag_id="dag_a").publish("tokA")
    (tmp_path / "table" / PART / "source=eu" / "tokA-part-0.json").unlink()
    before = on_disk(tmp_path)
    with pytest.raises(AirflowFailException, match="partition_of_another_owner.*not complete"):
        Run(tmp_path, monkeypatch, dag_id="dag_b").publish("tokB")
    assert on_disk(tmp_path) == before


# -- the rules, pure -------------------------------------------------------------------------------


def _marker(commit: str, manifest: dict[str, int] | None, run_id: str = "r", incarnation: int = 0):
    from airflow_provider_zeta.core.publish import CommitMarker

    return CommitMarker(commit, DS, incarnation, {"eu": f"t-{commit}"}, {"eu": 1}, 1.0, run_id, "d", "p", PART, manifest=manifest)


def test_manifest_problem_names_missing_extra_and_resized_files_and_distrusts_old_markers_off_local():
    from airflow_provider_zeta.core.publish import manifest_problem

    marker = _marker("c", {"a": 1, "b": 2})
    assert manifest_problem(marker, {"a": 1, "b": 2, COMMIT_MARKER: 9}, atomic_rename=False) is None
    assert "1 of 2 files missing" in manifest_problem(marker, {"a": 1}, atomic_rename=False)
    assert "does not name" in manifest_problem(marker, {"a": 1, "b": 2, "c": 3}, atomic_rename=False)
    assert "another size" in manifest_problem(marker, {"a": 1, "b": 3}, atomic_rename=False)
    legacy = _marker("c", None)
    assert manifest_problem(legacy, {"a": 1}, atomic_rename=True) is None
    assert "no manifest" in manifest_problem(legacy, {"a": 1}, atomic_rename=False)


def test_an_incomplete_partition_is_republished_by_its_owner_only():
    from airflow_provider_zeta.core.publish import Owner, PublishAction, decide_publish

    mine = Owner("d", "p", "r")
    same = _marker("ours", {"a": 1})
    assert decide_publish("ours", 0, True, same, mine).rule == "already_published"
    incomplete = decide_publish("ours", 0, True, same, mine, incomplete="1 of 1 files missing")
    assert (incomplete.action, incomplete.rule) == (PublishAction.REPLACE, "incomplete_commit")
    late = decide_publish("other", 0, True, same, mine, incomplete="x")
    assert late.rule == "incomplete_commit"  # not late_report_ignored: nothing is published yet
    newer = decide_publish("ours", 0, True, _marker("n", {}, incarnation=1), mine, incomplete="x")
    assert newer.rule == "stale_commit"
    theirs = decide_publish("ours", 0, True, _marker("t", {}, run_id="other"), mine, incomplete="x")
    assert theirs.rule == "partition_of_another_owner" and "not complete" in theirs.reason


def test_recovery_completes_an_interrupted_commit_unless_another_owner_committed_or_its_files_are_gone():
    from airflow_provider_zeta.core.ledger import CorruptState
    from airflow_provider_zeta.core.publish import Intent, RecoveryAction, parse_intent, recovery_rule

    ours = _marker("new", {"x/t-new-a": 1})
    intent = Intent(ours, PART, "_zeta_pending/d/r/new-1", "old", "{}", {"x/t-old-a": 1}, "_zeta_tombstones/d/r/t")
    assert parse_intent(intent.to_json(), "w") == intent
    with pytest.raises(CorruptState):
        parse_intent(b"{", "w")
    pending = {"x/t-new-a": 1}
    committed = recovery_rule(intent, ours, {"x/t-new-a": 1, COMMIT_MARKER: 5}, pending)
    assert committed.action is RecoveryAction.DONE
    for current, found in ((None, {}), (_marker("old", {"x/t-old-a": 1}), {"x/t-old-a": 1}), (ours, {})):
        assert recovery_rule(intent, current, found, pending).action is RecoveryAction.FORWARD
    taken = recovery_rule(intent, _marker("else", {}), {}, pending)
    assert (taken.action, taken.rule) == (RecoveryAction.BACK, "intent_partition_taken")
    assert recovery_rule(intent, CorruptState("x"), {}, pending).action is RecoveryAction.BACK
    lost = recovery_rule(intent, None, {}, {})
    assert (lost.action, lost.rule) == (RecoveryAction.BACK, "intent_pending_lost")


def test_landing_problem_refuses_files_of_anyone_else():
    from airflow_provider_zeta.core.publish import Intent, landing_problem

    intent = Intent(_marker("new", {"a": 1}), PART, "p", "old", "{}", {"o": 1}, "t")
    assert landing_problem(intent, {"a": 1, "o": 1, COMMIT_MARKER: 3}) is None
    assert "another owner" in landing_problem(intent, {"z": 1})
    assert landing_problem(intent, {"a": 1}, complete=True) is None
    assert "another owner" in landing_problem(intent, {"a": 1, "o": 1}, complete=True)
    assert "another owner" in landing_problem(intent, {}, complete=True)


@pytest.mark.parametrize("point", ["tombstone_copy_after_4_files", "copy_after_1_files"])
def test_an_interrupted_commit_whose_assembled_files_are_gone_is_rolled_back(tmp_path, monkeypatch, point):
    """The killed try's pending directory lost files (deleted by hand, or by a cleanup): its commit
    cannot be completed. The retry removes what it had copied in, puts the replaced partition's
    marker back when its files were not moved yet, and publishes anew."""
    import shutil

    run = Run(tmp_path, monkeypatch)
    run.publish("tok0", incarnation=0)
    with pytest.raises(Killed):
        run.publish("tok1", incarnation=1, failpoint={**TOMBSTONE_POINTS, **CRASH_POINTS}[point]())
    for assembled in (tmp_path / "table" / "_zeta_pending").rglob("source=eu"):
        shutil.rmtree(assembled)
    assert reader_sees(tmp_path) is None
    retry = run.publish("tok1", incarnation=1)
    # Files not moved yet: the old commit came back and is replaced; already moved: published anew.
    assert retry["rule"] == ("newer_incarnation" if point.startswith("tombstone") else "first_publish")
    complete_partition_of(tmp_path, "tok1")
    tombstones = list((tmp_path / "table" / "_zeta_tombstones").rglob(f"{PART}-*"))
    assert len(tombstones) == 1
    complete_partition_of(tmp_path, "tok0", tombstones[0].relative_to(tmp_path / "table").as_posix())
    assert not list((tmp_path / "table" / "_zeta_pending").rglob("*.json"))


@pytest.mark.parametrize("when", ["at_the_fence", "during_the_copy"])
def test_a_first_publish_never_commits_over_another_owners_publish_under_way(tmp_path, monkeypatch, when):
    """Run A of another DAG starts the same partition while B publishes (after B decided, or while
    B copies its files in) and is killed half-way, its files in the partition without a marker.
    B must not write its marker over them: it takes its own files back out and fails naming A (by
    A's intent); A's retry completes A's commit."""
    from airflow.sdk.exceptions import AirflowFailException

    theirs = Run(tmp_path, monkeypatch, dag_id="dag_a")
    mine = Run(tmp_path, monkeypatch, dag_id="dag_b")

    def half_of_theirs() -> None:
        with pytest.raises(Killed):
            theirs.publish("tokA", failpoint=Failpoint("copy", in_partition, 2))

    with pytest.raises(AirflowFailException, match="partition_being_published.*dag_a"):
        if when == "at_the_fence":
            mine.publish("tokB", on_fence=half_of_theirs)
        else:
            mine.publish("tokB", failpoint=Failpoint("copy", in_partition, 0, action=half_of_theirs))
    assert not any("tokB" in name for name in on_disk(tmp_path)["files"])
    theirs.publish("tokA")
    complete_partition_of(tmp_path, "tokA")
    assert reader_sees(tmp_path) == {"tokA"}


def test_committed_files_on_a_local_table_and_with_a_marker_from_before_manifests(tmp_path):
    """Where a rename is atomic a marker without manifest stands for every file beside it; on a
    store without one it cannot be verified, and the reader is told "not committed"."""
    local = StateStorage.from_url(str(tmp_path / "table"))
    from airflow_provider_zeta.storage import committed_files

    legacy = _marker("c", None)
    for store in (local, table(tmp_path)):
        store.write_atomic(f"{PART}/source=eu/t-c-part-0.json", b"[]")
        store.write_atomic(f"{PART}/{COMMIT_MARKER}", legacy.to_json())
    assert committed_files(local, PART) == {"source=eu/t-c-part-0.json": 2}
    assert committed_files(table(tmp_path), PART) is None
    local.write_atomic(f"{PART}/{COMMIT_MARKER}", _marker("c", {"source=eu/t-c-part-0.json": 2}).to_json())
    assert committed_files(table(tmp_path), PART) == {"source=eu/t-c-part-0.json": 2}
    local.write_atomic(f"{PART}/{COMMIT_MARKER}", _marker("c", {"source=eu/t-c-part-0.json": 3}).to_json())
    assert committed_files(table(tmp_path), PART) is None and committed_files(local, PART) is None


def test_a_partition_another_owner_is_publishing_is_refused_naming_it():
    from airflow_provider_zeta.core.publish import Owner, decide_publish

    mine = Owner("d", "p", "r")
    theirs = _marker("t", {"a": 1}, run_id="other")
    refused = decide_publish("ours", 0, True, None, mine, publishing=[theirs])
    assert refused.rule == "partition_being_published" and "'other'" in refused.reason
    # Our own intent is recovered before deciding, never a reason to refuse; none: foreign_partition.
    assert decide_publish("ours", 0, True, None, mine, publishing=[_marker("o", {"a": 1})]).rule == "foreign_partition"
    assert decide_publish("ours", 0, True, None, mine).rule == "foreign_partition"


@pytest.mark.parametrize("point", ["tombstone_delete_after_1_files", "copy_after_1_files"])
def test_the_runs_cleanup_keeps_an_interrupted_commit_for_the_completed_points_next_try(tmp_path, monkeypatch, point):
    """The run's cleanup (or the sweep) between a kill and the completed point's next try (a clear
    after the run failed) must not delete the intent's pending directory nor the tombstone holding
    the replaced partition: without them the partition would stay a mix of files with no marker,
    and the old published data would be gone. Oracle: the files on disk after the cleanup carried
    out its record, and after the next try."""
    import time

    from airflow_provider_zeta import janitor
    from airflow_provider_zeta.core.cleanup import new_record

    run = Run(tmp_path, monkeypatch)
    run.publish("tok0", incarnation=0)
    failpoint = {**TOMBSTONE_POINTS, **CRASH_POINTS}[point]()
    with pytest.raises(Killed):
        run.publish("tok1", incarnation=1, failpoint=failpoint)
    state = StateStorage.from_url(str(tmp_path / "state"))
    root = "zeta-table"
    leftovers, _ = janitor.find_leftovers(state, run.dag_id, run.run_id, lambda url: table(tmp_path), roots=[root])
    kept = [p for p in leftovers.outputs.get(root, ()) if p.startswith(("_zeta_pending/", "_zeta_tombstones/"))]
    assert kept == [], f"the cleanup would delete {kept}"
    record = new_record(run.dag_id, run.run_id, 1, "p.cleanup", time.time(), 0, leftovers)
    janitor.carry_out(state, record, lambda url: table(tmp_path))
    retry = run.publish("tok1", incarnation=1)
    assert retry["rule"] in ("newer_incarnation", "already_published", "first_publish", "incomplete_commit"), retry["rule"]
    complete_partition_of(tmp_path, "tok1")
    (tombstone,) = (tmp_path / "table" / "_zeta_tombstones").rglob(f"{PART}-*")
    complete_partition_of(tmp_path, "tok0", tombstone.relative_to(tmp_path / "table").as_posix())
