"""The completed point (G3): publish a run's partition once, atomically, from the reported tokens.

Theory of operation
-------------------
The output table is a directory ``{output}`` with one partition per run and one sub-directory per
source, ``source={name}``. The partition is the run's rendered partition spec (``DEFAULT_PARTITION``
``ds={{ ds }}``, or e.g. ``ds={{ ds }}/hour={{ logical_date.strftime('%H') }}``): one or more
``key=value`` segments (``parse_partition``), written ``<partition>`` below. Publishing a partition:

1. **Assemble** it hidden, under ``{output}/_zeta_pending/<dag>/<run>/{commit_id}-<nonce>/<partition>/``: a copy of each
   reported token's staging output (and nothing else: outputs of tokens that did not report —
   stale or orphaned attempts — live in other attempt directories and are never read), each data
   file renamed ``<token>-<name>`` so no two commits share a file path, plus a commit marker
   ``_zeta_commit.json`` naming the commit id, incarnation and tokens.
2. **Move aside** a partition it replaces (an older incarnation's, or a deleted run's) into
   ``{output}/_zeta_tombstones/<dag>/<run>/`` — never deleted here; the delayed cleanup deletes it later.
3. **Rename** the assembled directory to ``{output}/<partition>`` in one step.

Readers of ``{output}`` skip names starting with ``_`` (Spark, Hive, Arrow all do), so they see the
partition with all its sources or not at all where the rename is atomic (a local filesystem). On
stores whose move is copy + delete (object stores) the marker, written last, commits instead: see
"Stores without atomic rename" below.

The commit id is a hash of (owner, partition, incarnation, sorted source tokens), where the owner
is (``dag_id``, pipeline id, ``run_id``): ``scheduled__<ts>`` run ids repeat in every DAG, so a run
id alone names no one. Re-executing the commit finds its own marker and does nothing
(``already_published``). A partition whose marker names another owner — another run, DAG or
pipeline rendering the same partition of the same table — is never replaced, tombstoned or taken
for one's own: the publish fails and names the owner (``partition_of_another_owner``). The one
exception is a run of the same DAG, pipeline, logical date and deployment that no longer exists
in Airflow (a user deleted it; on SQLite, Airflow's own clean-up of a backfill refused for a locked
database deletes the runs it was reprocessing): nothing can publish as that run again, so its
partition is replaced like an older incarnation's (``owner_run_deleted``). Partitions never
nest: one inside a published partition, or around published partitions, is refused
(``partition_inside_another``, ``partition_holds_others``).

Before a source is published, its staging is checked against what its driver recorded at finish
(``staging_problem``): every file the driver left (relative name and size) must be there and
nothing else. A missing staging directory, a missing, extra or truncated file fails the publish,
naming the source and the attempt token; nothing is published.

This module only decides; the operator does the file work.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from airflow_provider_zeta.core.ledger import CorruptState
from airflow_provider_zeta.core.paths import safe_segment
from airflow_provider_zeta.core.ready import Report

COMMIT_MARKER = "_zeta_commit.json"


class MissingPartitionKey(ValueError):
    """The run has no logical date, so no partition to publish into."""

    pass


def partition_key(ds: str | None, run_id: str) -> str:
    """The partition of a run: its logical date's ``ds``. A run without a logical date has none."""
    if not ds:
        raise MissingPartitionKey(
            f"run {run_id!r} has no logical date, so it has no partition (ds=...). Trigger it with a "
            "logical date (UI: 'Trigger DAG w/ config', REST: logical_date, CLI: --logical-date), "
            "or schedule the DAG."
        )
    return ds


def partition_dir(ds: str) -> str:
    """The default partition of a run: ``ds=<ds>`` (what ``DEFAULT_PARTITION`` renders to)."""
    return f"ds={safe_segment(ds)}"


#: The partition spec of ``zeta_pipeline`` and ``CompletedPointOperator`` unless one is given: one
#: partition per logical date.
DEFAULT_PARTITION = "ds={{ ds }}"
#: The level below a partition: ``source=<name>``. Not a partition key.
SOURCE_KEY = "source"
_PARTITION_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_PARTITION_VALUE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


class BadPartitionSpec(ValueError):
    """A rendered partition spec is not ``key=value[/key=value...]`` with safe keys and values."""


def parse_partition(rendered: str) -> tuple[tuple[str, str], ...]:
    """The ``(key, value)`` segments of a rendered partition spec, e.g. ``ds=2026-06-01/hour=13``.

    One or more ``key=value`` path segments joined by ``/``. A key is an identifier starting with a
    letter (``source`` is the level below a partition: not a key) and appears once; a value is
    non-empty, made of letters, digits, ``.``, ``_`` and ``-``, starts with a letter or digit (a
    name starting with ``_`` or ``.`` is hidden from Spark's partition discovery) and holds no
    ``..``. Anything else raises ``BadPartitionSpec`` (a ``ValueError``) naming the rendered value.
    """
    if not isinstance(rendered, str):
        raise BadPartitionSpec(f"the partition spec rendered to {rendered!r}, not a string")
    text = rendered.strip()

    def bad(why: str) -> BadPartitionSpec:
        return BadPartitionSpec(
            f"the partition spec rendered to {rendered!r}: {why}. A partition is one or more key=value "
            "path segments joined by '/', e.g. 'ds=2026-06-01' or 'ds=2026-06-01/hour=13' (the default "
            f"spec is {DEFAULT_PARTITION!r})"
        )

    if not text:
        raise bad("it is empty")
    segments: list[tuple[str, str]] = []
    for segment in text.split("/"):
        key, equals, value = segment.partition("=")
        problem = _segment_problem(segment, key, bool(equals), value, segments)
        if problem is not None:
            raise bad(problem)
        segments.append((key, value))
    return tuple(segments)


def _segment_problem(segment: str, key: str, has_equals: bool, value: str, before: list[tuple[str, str]]) -> str | None:
    """Why one ``key=value`` segment of a partition spec is refused (``parse_partition``), or None;
    ``before``: the segments already read."""
    if not has_equals:
        return f"segment {segment!r} is not key=value"
    if not _PARTITION_KEY.fullmatch(key):
        return f"key {key!r} is not an identifier starting with a letter"
    if key == SOURCE_KEY:
        return "'source' is the level below the partition (source=<name>), not a partition key"
    if key in (k for k, _ in before):
        return f"key {key!r} appears twice"
    if not value:
        return f"the value of {key!r} is empty"
    if not _PARTITION_VALUE.fullmatch(value) or ".." in value:
        return (
            f"the value {value!r} of {key!r} is not a safe path segment: use letters, digits, '.', '_' "
            "and '-', start with a letter or digit (names starting with '_' or '.' are hidden from "
            "readers), no '..', no '/', ':' or '+' (e.g. {{ ts_nodash }} rather than {{ ts }})"
        )
    return None


def partition_path(rendered: str) -> str:
    """The partition's path relative to the output table, after ``parse_partition`` validated it."""
    return "/".join(f"{key}={value}" for key, value in parse_partition(rendered))


def check_partition_spec(spec: Any, where: str) -> str:
    """A partition spec as given to an operator: checked at DAG parse time when it holds no
    template, else only once rendered (``partition_path``)."""
    if not isinstance(spec, str) or not spec.strip():
        raise BadPartitionSpec(
            f"{where}: 'partition' must be a partition spec such as {DEFAULT_PARTITION!r}, not {spec!r}"
        )
    if "{{" not in spec and "{%" not in spec:
        partition_path(spec)  # BadPartitionSpec (a ValueError) names the value
    return spec


def enclosing_partitions(part: str) -> tuple[str, ...]:
    """Every proper prefix of ``part``, outermost first: where a partition enclosing it would be.

    ``ds=2026-06-01/hour=13`` -> ``("ds=2026-06-01",)``; a one-segment partition has none.
    """
    segments = part.split("/")
    return tuple("/".join(segments[:n]) for n in range(1, len(segments)))


def nested_partitions(part: str, files_below: Iterable[str]) -> tuple[str, ...]:
    """The partitions published inside ``part``: the folders (relative to the table) holding a
    commit marker among ``files_below`` (file paths relative to ``part``), ``part`` itself excluded."""
    found = set()
    for relative in files_below:
        folder, _, name = relative.rpartition("/")
        if name == COMMIT_MARKER and folder:
            found.add(f"{part}/{folder}")
    return tuple(sorted(found))


def source_dir(source: str) -> str:
    """A source's directory inside a partition (``source=<name>``)."""
    return f"source={safe_segment(source)}"


@dataclass(frozen=True)
class Owner:
    """Who publishes a partition: one pipeline of one DAG run."""

    dag_id: str
    pipeline_id: str
    run_id: str

    def describe(self) -> str:
        """The owner in words, for messages."""
        return f"pipeline {self.pipeline_id!r} of DAG {self.dag_id!r}, run {self.run_id!r}"


def commit_id(
    ds: str, incarnation: int, sources: Mapping[str, Report], owner: Owner, partition: str | None = None
) -> str:
    """The commit's id. ``partition`` (the rendered partition path) enters the hash only when it is
    not the default ``ds=<ds>``, so daily pipelines keep the commit ids they had before partition
    specs existed (a re-execution of an old run still finds its own commit)."""
    fields: dict[str, Any] = {
        "ds": ds,
        "dag_id": owner.dag_id,
        "pipeline_id": owner.pipeline_id,
        "run_id": owner.run_id,
        "incarnation": incarnation,
        "tokens": sorted((name, r.token) for name, r in sources.items()),
    }
    if partition is not None and partition != partition_dir(ds):
        fields["partition"] = partition
    material = json.dumps(fields, sort_keys=True)
    return hashlib.sha256(material.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class CommitMarker:
    """The marker of a published partition: which commit, whose, and which attempts' outputs it holds."""

    commit_id: str
    ds: str
    incarnation: int
    tokens: dict[str, str]
    rows: dict[str, int | None]
    published_at: float
    run_id: str = ""  # the owner of the partition: run, DAG, pipeline
    dag_id: str = ""  # "" in markers written before the owner was recorded
    pipeline_id: str = ""
    partition: str = ""  # the rendered partition path; "" in markers written before specs (ds=<ds>)
    # The owner run's logical date (ISO) and the identity of the deployment's state root
    # (storage.state_root_identity): whether a deleted owner may be replaced (owner_run_to_look_up).
    # "" in markers written before they were recorded: such an owner is never taken for deleted.
    logical_date: str = ""
    state_root_id: str = ""
    # Every file of the partition (path below it -> size in bytes), the marker itself excepted:
    # what a retry and a reader verify on a store without atomic rename (``manifest_problem``).
    # None in markers written before manifests existed.
    manifest: dict[str, int] | None = None

    @property
    def owner(self) -> Owner:
        """The partition's owner as the marker records it."""
        return Owner(self.dag_id, self.pipeline_id, self.run_id)

    @property
    def partition_path(self) -> str:
        """The partition's path in the table (``ds=<ds>`` in a marker written before partition specs)."""
        return self.partition or partition_dir(self.ds)

    def to_json(self) -> bytes:
        """The marker as the bytes of its file (sorted JSON)."""
        return json.dumps(self.__dict__, sort_keys=True).encode()


def parse_commit_marker(raw: bytes | None, where: str) -> CommitMarker | None:
    """Parse a marker file's bytes; ``None`` when absent. Raises ``CorruptState`` (naming ``where``)."""
    if raw is None:
        return None
    try:
        data = json.loads(raw)
        return CommitMarker(
            commit_id=str(data["commit_id"]),
            ds=str(data["ds"]),
            incarnation=int(data["incarnation"]),
            tokens={str(k): str(v) for k, v in data["tokens"].items()},
            rows={str(k): (None if v is None else int(v)) for k, v in data.get("rows", {}).items()},
            published_at=float(data["published_at"]),
            run_id=str(data.get("run_id", "")),
            dag_id=str(data.get("dag_id", "")),
            pipeline_id=str(data.get("pipeline_id", "")),
            partition=str(data.get("partition", "")),
            logical_date=str(data.get("logical_date", "")),
            state_root_id=str(data.get("state_root_id", "")),
            manifest=(
                None
                if data.get("manifest") is None
                else {str(k): int(v) for k, v in data["manifest"].items()}
            ),
        )
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise CorruptState(
            f"commit marker {where} is unreadable ({error}); the partition's provenance is unknown. "
            "Inspect it; nothing was changed."
        ) from None


class PublishAction(str, Enum):
    """What the completed point does with the partition (``decide_publish``)."""

    PUBLISH = "publish"  # no partition yet: assemble and rename into place
    REPLACE = "replace"  # an older incarnation's (or a deleted run's) partition: tombstone it, then publish
    NO_OP = "no_op"  # this commit (or this incarnation's first commit) is already published
    FAIL = "fail"  # publishing would overwrite something it must not


@dataclass(frozen=True)
class PublishDecision:
    """``decide_publish``'s answer: the action, the rule that chose it and why."""

    action: PublishAction
    rule: str
    reason: str


def decide_publish(
    ours: str,
    incarnation: int,
    partition_exists: bool,
    existing: CommitMarker | CorruptState | None,
    owner: Owner,
    enclosing: Mapping[str, CommitMarker | CorruptState] | None = None,
    nested: Iterable[str] = (),
    owner_run_deleted: bool = False,
    logical_date: str = "",
    state_root_id: str = "",
    incomplete: str | None = None,
    publishing: Iterable[CommitMarker] = (),
) -> PublishDecision:
    """What to do with the run's partition given what is there now. First matching rule wins.

    ``incomplete``: why the partition's files do not match its marker's manifest
    (``manifest_problem``; None when they match or when the store renames atomically). Such a
    partition is not committed: it is never taken for published (``already_published``,
    ``late_report_ignored``); its own owner's retry moves what is there aside and publishes
    (``incomplete_commit``); another owner's stays untouched (``partition_of_another_owner``).
    ``publishing``: the markers of the intents found for this partition (stores without atomic
    rename, looked up only for a partition without a marker): another owner's publish under way,
    or interrupted and waiting for its retry, is named (``partition_being_published``).

    Incarnations are compared only within one owner (DAG, pipeline, run): a partition published by
    another owner (two runs rendering the same partition, e.g. an hourly schedule with the default
    daily spec; two DAGs or two pipelines writing one table) is never replaced, never tombstoned and
    never reported as one's own commit — with one exception: ``owner_run_deleted`` says the marker's
    run no longer exists in Airflow, and ``owner_run_to_look_up`` (given this run's
    ``logical_date`` and the deployment's ``state_root_id``) names it: a run of this DAG and
    pipeline, of the same logical date, in this deployment. A deleted run can never publish again,
    so its partition is replaced like an older incarnation's (``owner_run_deleted``): deleting a
    run and triggering the date again reprocesses it.

    Partitions never nest: ``enclosing`` maps each enclosing path of the partition (``ds=X`` for
    ``ds=X/hour=13``, ``enclosing_partitions``) that holds a commit marker to that marker, and
    ``nested`` lists the published partitions found inside an existing partition directory that
    has no marker of its own (``nested_partitions``). Either fails the publish: a partition inside
    another one would be read as part of it, and one around others would swallow them.
    """
    nesting = _nesting_problem(owner, partition_exists, existing, enclosing, nested)
    if nesting is not None:
        return nesting
    if not partition_exists:
        return PublishDecision(PublishAction.PUBLISH, "first_publish", "the partition does not exist yet")
    if isinstance(existing, CorruptState):
        return PublishDecision(PublishAction.FAIL, "corrupt_marker", str(existing))
    others = [m for m in publishing if not same_owner(m, owner)] if existing is None else []
    if others:
        return PublishDecision(
            PublishAction.FAIL,
            "partition_being_published",
            f"{others[0].owner.describe()} is publishing this partition (commit {others[0].commit_id}; its "
            f"files are there, its marker not yet: under way, or interrupted until its retry); {owner.describe()} "
            "renders the same partition. One partition belongs to one pipeline run: give each DAG/pipeline its "
            "own output table or runs distinct partitions. Nothing was changed.",
        )
    if existing is None:
        return PublishDecision(
            PublishAction.FAIL,
            "foreign_partition",
            "the partition exists without a commit marker: it was not published by this provider (or, on a "
            "store without atomic rename, another owner's publish is under way there), and replacing it "
            "could lose data. Move it away, then clear the completed point.",
        )
    if incomplete is not None and same_owner(existing, owner) and existing.incarnation <= incarnation:
        return PublishDecision(
            PublishAction.REPLACE,
            "incomplete_commit",
            f"the partition's marker (commit {existing.commit_id}, incarnation {existing.incarnation}) does not "
            f"match its files ({incomplete}): it is not committed. {owner.describe()} moves what is there aside "
            "as a tombstone and publishes",
        )
    if existing.commit_id == ours:
        return PublishDecision(PublishAction.NO_OP, "already_published", f"commit {ours} is already published")
    if not same_owner(existing, owner):
        return _another_owners_partition(existing, owner, owner_run_deleted, logical_date, state_root_id, incomplete)
    return _own_earlier_commit(existing, incarnation)


def _nesting_problem(
    owner: Owner,
    partition_exists: bool,
    existing: CommitMarker | CorruptState | None,
    enclosing: Mapping[str, CommitMarker | CorruptState] | None,
    nested: Iterable[str],
) -> PublishDecision | None:
    """``decide_publish``'s first rules: a partition inside a published one
    (``partition_inside_another``), or a marker-less directory around published ones
    (``partition_holds_others``); None when the partition nests in nothing."""
    for path, marker in sorted((enclosing or {}).items()):
        who = (
            f"{marker.owner.describe()} (commit {marker.commit_id})"
            if isinstance(marker, CommitMarker)
            else "an unknown owner (its marker is unreadable)"
        )
        return PublishDecision(
            PublishAction.FAIL,
            "partition_inside_another",
            f"the partition lies inside partition {path!r}, published by {who}; {owner.describe()} would "
            "write into it. Partitions of one table must not nest: give both pipelines the same partition "
            "keys (e.g. both hourly) or separate output tables. Nothing was changed.",
        )
    if partition_exists and existing is None:
        inside = tuple(nested)
        if inside:
            return PublishDecision(
                PublishAction.FAIL,
                "partition_holds_others",
                f"the partition directory holds {len(inside)} partitions published by other runs (e.g. "
                f"{inside[0]!r}); publishing the partition of {owner.describe()} there would swallow them. "
                "Partitions of one table must not nest: give both pipelines the same partition keys or "
                "separate output tables. Nothing was changed.",
            )
    return None


def _another_owners_partition(
    existing: CommitMarker,
    owner: Owner,
    owner_run_deleted: bool,
    logical_date: str,
    state_root_id: str,
    incomplete: str | None,
) -> PublishDecision:
    """``decide_publish`` on a partition another owner published: replaced only when that owner's run
    was deleted (``owner_run_deleted``), else never touched (``partition_of_another_owner``)."""
    if owner_run_deleted and owner_run_to_look_up(existing, owner, logical_date, state_root_id) is not None:
        return PublishDecision(
            PublishAction.REPLACE,
            "owner_run_deleted",
            f"the partition was published by {existing.owner.describe()} (commit {existing.commit_id}), "
            f"a run that no longer exists in Airflow; {owner.describe()} replaces it and the old "
            "partition becomes a tombstone",
        )
    state = " (not complete: its files do not match its marker's manifest)" if incomplete else ""
    return PublishDecision(
        PublishAction.FAIL,
        "partition_of_another_owner",
        f"the partition was published by {existing.owner.describe()} (commit {existing.commit_id}){state}; "
        f"{owner.describe()} renders the same partition. One partition belongs to one pipeline run: "
        "give each DAG/pipeline its own output table, give runs distinct partitions (a partition spec "
        "matching the schedule, e.g. partition=\"ds={{ ds }}/hour={{ logical_date.strftime('%H') }}\" "
        "for an hourly one), or clear the owning run to reprocess it. Nothing was changed.",
    )


def _own_earlier_commit(existing: CommitMarker, incarnation: int) -> PublishDecision:
    """``decide_publish`` on another commit of this owner: incarnations decide."""
    if existing.incarnation < incarnation:
        return PublishDecision(
            PublishAction.REPLACE,
            "newer_incarnation",
            f"incarnation {incarnation} replaces commit {existing.commit_id} of incarnation "
            f"{existing.incarnation}; the old partition becomes a tombstone",
        )
    if existing.incarnation == incarnation:
        return PublishDecision(
            PublishAction.NO_OP,
            "late_report_ignored",
            f"commit {existing.commit_id} already published this incarnation from tokens "
            f"{existing.tokens}; a later report of the same incarnation is not published twice",
        )
    return PublishDecision(
        PublishAction.FAIL,
        "stale_commit",
        f"commit {existing.commit_id} of a newer incarnation ({existing.incarnation} > {incarnation}) "
        "is published; an older incarnation must not overwrite it",
    )


def owner_run_to_look_up(
    existing: CommitMarker | CorruptState | None, owner: Owner, logical_date: str, state_root_id: str | None
) -> Owner | None:
    """The owner whose run must be looked up before deciding (``decide_publish``'s
    ``owner_run_deleted``): the marker's, when it names another run of the same DAG and pipeline,
    of the same logical date (``logical_date``, ISO), written in the same deployment (the state
    root identity ``state_root_id``). Airflow keeps one run per DAG and logical date, so while that
    run is gone no other live run can be the owner this run would replace.

    None otherwise: another DAG or pipeline writing the same table is a configuration error
    whether or not its run still exists; a run of another logical date rendering the same partition
    (an hourly schedule with the daily spec) is one too; a run of another deployment (staging and
    production writing one table) is not in this metadata database at all; and a marker written
    before these were recorded names none of them."""
    if not isinstance(existing, CommitMarker):
        return None
    if not (existing.dag_id and existing.logical_date and existing.state_root_id):
        return None
    if (existing.dag_id, existing.pipeline_id) != (owner.dag_id, owner.pipeline_id) or existing.run_id == owner.run_id:
        return None
    if existing.logical_date != logical_date or existing.state_root_id != state_root_id:
        return None
    return existing.owner


def same_owner(existing: CommitMarker, owner: Owner) -> bool:
    """A marker written before owners were recorded (empty ``dag_id``) is matched by run id only."""
    if existing.run_id != owner.run_id:
        return False
    if not existing.dag_id:
        return True
    return existing.dag_id == owner.dag_id and existing.pipeline_id == owner.pipeline_id


def marker_for(
    ours: str,
    ds: str,
    incarnation: int,
    sources: Mapping[str, Report],
    now: float,
    owner: Owner,
    partition: str | None = None,
    logical_date: str = "",
    state_root_id: str = "",
) -> CommitMarker:
    """The marker of commit ``ours``, published at ``now``."""
    return CommitMarker(
        partition=partition or partition_dir(ds),
        logical_date=logical_date,
        state_root_id=state_root_id,
        run_id=owner.run_id,
        dag_id=owner.dag_id,
        pipeline_id=owner.pipeline_id,
        commit_id=ours,
        ds=ds,
        incarnation=incarnation,
        tokens={name: r.token for name, r in sorted(sources.items())},
        rows={name: r.rows for name, r in sorted(sources.items())},
        published_at=now,
    )


def asset_extra(marker: CommitMarker) -> dict[str, Any]:
    """What the completed point's Asset event carries."""
    return {
        "commit_id": marker.commit_id,
        "ds": marker.ds,
        "partition": marker.partition_path,
        "incarnation": marker.incarnation,
        "rows": dict(marker.rows),
        "tokens": dict(marker.tokens),
        "run_id": marker.run_id,
        "dag_id": marker.dag_id,
        "pipeline_id": marker.pipeline_id,
    }


def commit_names(value: Any, token: str) -> bool:
    """Whether a completed point's return value (``asset_extra`` and more) published a source from
    attempt ``token``: that driver succeeded (the ready set it published from was verified against
    its ledger), so it ended; tokens are never reused, so the source's name need not match.
    Anything else proves nothing."""
    if not isinstance(value, Mapping):
        return False
    tokens = value.get("tokens")
    return isinstance(tokens, Mapping) and token in tokens.values()


def should_announce(decision: PublishDecision, published: str, publishing: Any, announced: Any) -> bool:
    """Whether this run of the completed point emits the Asset event of commit ``published``.

    Exactly one event per commit. A new commit (``PUBLISH``/``REPLACE``) is announced. A no-op is
    announced only when an earlier try of this task published that very commit (its
    ``zeta_publishing`` record names it) and was killed before it could announce it
    (``zeta_announced`` does not name it): the retry emits the event the killed try did not. A
    re-execution after a clear finds the commit announced, and a commit published by someone else's
    try is not this task's to announce.
    """
    if decision.action in (PublishAction.PUBLISH, PublishAction.REPLACE):
        return True
    if decision.action is not PublishAction.NO_OP:
        return False
    record_commit = publishing.get("commit_id") if isinstance(publishing, Mapping) else None
    return record_commit == published and announced != published


def staging_problem(
    source: str, token: str, recorded: Mapping[str, int] | None, found: Mapping[str, int], where: str
) -> str | None:
    """Why a source's staging cannot be published (None when it can).

    ``recorded``: what the attempt's driver listed in its ledger when it finished (relative file
    name -> size in bytes); ``found``: what is in the staging directory ``where`` now. They must be
    equal: a missing directory, a missing, truncated or extra file all mean the output is not the
    one the driver reported.
    """
    head = f"source {source!r}, attempt {token}: staging {where}"
    if recorded is None:
        return (
            f"{head}: its driver ledger records no list of output files (a driver of an older provider "
            "version), so the staging cannot be checked. Clear the source's deploy task to run it again."
        )
    if not found and recorded:
        return f"{head} is missing or empty, but its driver recorded {len(recorded)} files at finish"
    missing = sorted(set(recorded) - set(found))
    extra = sorted(set(found) - set(recorded))
    resized = sorted(name for name in set(recorded) & set(found) if recorded[name] != found[name])
    if not (missing or extra or resized):
        return None
    parts = []
    if missing:
        parts.append(f"{len(missing)} recorded files missing (e.g. {missing[0]})")
    if extra:
        parts.append(f"{len(extra)} files the driver did not record (e.g. {extra[0]})")
    if resized:
        name = resized[0]
        parts.append(f"{len(resized)} files of another size (e.g. {name}: {found[name]} bytes, recorded {recorded[name]})")
    return f"{head} differs from what its driver recorded at finish: " + "; ".join(parts)


# Stores without atomic rename (object stores; HDFS-like filesystems whose move is copy + delete)
# -----------------------------------------------------------------------------------------------
# There a directory cannot appear at once, so a partition counts as committed only through its
# marker, written last and naming a manifest (every file below the partition and its size). The
# publisher writes an intent (``INTENT_FILE``) into its pending directory before it changes the
# table; a retry finds it and completes or rolls back (``recovery_rule``). The file work, always
# in the same idempotent order (``operators.completed_point``):
#
# 1. a replaced partition: its marker is deleted first (from then on it is not committed), its
#    files are copied into the tombstone, the old marker is written there last, then its files
#    are deleted from the partition;
# 2. the new files are copied in from the pending directory, after checking that the partition
#    holds nothing but the replaced partition's and this commit's files (``landing_problem``);
# 3. right before the marker, the partition must hold exactly the manifest (``landing_problem``
#    with ``complete=True``); the marker is written last, in one PUT.

#: In a publisher's pending directory on a store without atomic rename: what it is committing.
INTENT_FILE = "_zeta_intent.json"


def manifest_problem(marker: CommitMarker, found: Mapping[str, int], atomic_rename: bool) -> str | None:
    """Why the files ``found`` below a partition (relative path -> size, the marker included or
    not) are not the ones its marker names; None when they are.

    Where a directory rename is atomic a marker is only ever seen with its files, and a marker
    written before manifests existed is trusted; elsewhere such a marker cannot be verified and
    counts as incomplete."""
    files = {name: size for name, size in found.items() if name != COMMIT_MARKER}
    if marker.manifest is None:
        return None if atomic_rename else "the marker names no manifest (written before manifests), so it cannot be verified"
    missing = sorted(set(marker.manifest) - set(files))
    extra = sorted(set(files) - set(marker.manifest))
    resized = sorted(n for n in set(files) & set(marker.manifest) if files[n] != marker.manifest[n])
    parts = []
    if missing:
        parts.append(f"{len(missing)} of {len(marker.manifest)} files missing (e.g. {missing[0]})")
    if extra:
        parts.append(f"{len(extra)} files it does not name (e.g. {extra[0]})")
    if resized:
        parts.append(f"{len(resized)} files of another size (e.g. {resized[0]})")
    return "; ".join(parts) or None


@dataclass(frozen=True)
class Intent:
    """What a publisher on a store without atomic rename is committing (``INTENT_FILE``).

    ``partition``: where (relative to the table); ``marker``: the commit marker it writes last (its manifest names every file); ``pending``:
    the directory (relative to the table) holding the assembled partition; ``replaced``: the
    commit it replaces, with that commit's marker (``replaced_marker``, raw JSON) and files
    (``replaced_files``) as they were before anything moved, and the ``tombstone`` they go to."""

    marker: CommitMarker
    partition: str
    pending: str
    replaced: str | None = None
    replaced_marker: str | None = None
    replaced_files: dict[str, int] | None = None
    tombstone: str | None = None

    def to_json(self) -> bytes:
        """The intent as the bytes of its file (sorted JSON)."""
        return json.dumps(
            {
                "marker": json.loads(self.marker.to_json()),
                "partition": self.partition,
                "pending": self.pending,
                "replaced": self.replaced,
                "replaced_marker": self.replaced_marker,
                "replaced_files": self.replaced_files,
                "tombstone": self.tombstone,
            },
            sort_keys=True,
        ).encode()


def parse_intent(raw: bytes | None, where: str) -> Intent | None:
    """Parse an intent file's bytes; ``None`` when absent. Raises ``CorruptState`` (naming ``where``)."""
    if raw is None:
        return None
    try:
        data = json.loads(raw)
        marker = parse_commit_marker(json.dumps(data["marker"]).encode(), where)
        if marker is None or marker.manifest is None:
            raise ValueError("its marker names no manifest")
        files = data.get("replaced_files")
        return Intent(
            marker=marker,
            partition=str(data["partition"]),
            pending=str(data["pending"]),
            replaced=None if data.get("replaced") is None else str(data["replaced"]),
            replaced_marker=None if data.get("replaced_marker") is None else str(data["replaced_marker"]),
            replaced_files=None if files is None else {str(k): int(v) for k, v in files.items()},
            tombstone=None if data.get("tombstone") is None else str(data["tombstone"]),
        )
    except (ValueError, KeyError, TypeError, AttributeError, CorruptState) as error:
        raise CorruptState(
            f"publish intent {where} is unreadable ({error}); what the interrupted publish was doing is "
            "unknown. Inspect the partition and the intent; nothing was changed."
        ) from None


class RecoveryAction(str, Enum):
    """What to do with the intent of an interrupted commit (``recovery_rule``)."""

    DONE = "done"  # the intent's commit is in place and verifies: only its pending directory is left
    FORWARD = "forward"  # complete the commit (the file work is idempotent)
    BACK = "back"  # give the commit up: remove what it copied into the partition, keep the rest


@dataclass(frozen=True)
class RecoveryDecision:
    """``recovery_rule``'s answer: the action, the rule that chose it and why."""

    action: RecoveryAction
    rule: str
    reason: str


def recovery_rule(
    intent: Intent,
    current: CommitMarker | CorruptState | None,
    found: Mapping[str, int],
    pending_found: Mapping[str, int],
) -> RecoveryDecision:
    """What a retry does with an intent left by a killed publisher of its run and partition.

    ``current``: the partition's marker now; ``found``: its files now; ``pending_found``: the
    files of the intent's assembled partition now. First matching rule wins."""
    ours = intent.marker
    if isinstance(current, CommitMarker) and current.commit_id == ours.commit_id:
        if manifest_problem(current, found, atomic_rename=False) is None:
            return RecoveryDecision(RecoveryAction.DONE, "intent_committed", f"commit {ours.commit_id} is in place and verifies")
    if isinstance(current, CorruptState) or (
        isinstance(current, CommitMarker) and current.commit_id not in (ours.commit_id, intent.replaced)
    ):
        who = (
            f"{current.owner.describe()} (commit {current.commit_id})"
            if isinstance(current, CommitMarker)
            else "an unreadable marker"
        )
        return RecoveryDecision(
            RecoveryAction.BACK,
            "intent_partition_taken",
            f"the partition now holds {who}: commit {ours.commit_id} is given up without touching it",
        )
    pending_problem = manifest_problem(ours, pending_found, atomic_rename=False)
    if pending_problem is not None:
        return RecoveryDecision(
            RecoveryAction.BACK,
            "intent_pending_lost",
            f"the assembled partition of commit {ours.commit_id} is not complete ({pending_problem}): the files "
            "it copied into the partition are removed; a replaced partition stays in its tombstone",
        )
    return RecoveryDecision(
        RecoveryAction.FORWARD, "intent_completed", f"commit {ours.commit_id} was interrupted; completing it"
    )


def landing_problem(intent: Intent, found: Mapping[str, int], complete: bool = False) -> str | None:
    """Why the files ``found`` in the partition (the marker excepted) show that someone else
    writes there; None when they are only the replaced commit's and this commit's.

    ``complete``: right before the marker is written the partition must hold exactly the
    manifest (the replaced commit's files are in the tombstone by then)."""
    files = {name: size for name, size in found.items() if name != COMMIT_MARKER}
    manifest = intent.marker.manifest or {}
    if complete:
        extra = sorted(set(files) - set(manifest))
        missing = sorted(n for n in manifest if files.get(n) != manifest[n])
        if extra or missing:
            example = (extra or missing)[0]
            return (
                f"the partition holds {len(extra)} files commit {intent.marker.commit_id} does not name and lacks "
                f"{len(missing)} it names (e.g. {example}) right before its marker is written: another owner "
                "writes there"
            )
        return None
    expected = set(manifest) | set(intent.replaced_files or {})
    foreign = sorted(set(files) - expected)
    if foreign:
        return (
            f"the partition holds {len(foreign)} files that neither commit {intent.marker.commit_id} nor the "
            f"partition it replaces names (e.g. {foreign[0]}): another owner writes there"
        )
    return None
