"""The completed point (G3): publish a run's partition once, atomically, from the reported tokens.

Theory of operation
-------------------
The output table is a directory ``{output}`` with one partition per run, ``ds={ds}``, and one
sub-directory per source, ``source={name}``. Publishing a partition:

1. **Assemble** it hidden, under ``{output}/_zeta_pending/<dag>/<run>/{commit_id}-<nonce>/ds={ds}/``: a copy of each
   reported token's staging output (and nothing else: outputs of tokens that did not report —
   stale or orphaned attempts — live in other attempt directories and are never read), each data
   file renamed ``<token>-<name>`` so no two commits share a file path, plus a commit marker
   ``_zeta_commit.json`` naming the commit id, incarnation and tokens.
2. **Move aside** a partition it replaces (one from an older incarnation) into
   ``{output}/_zeta_tombstones/<dag>/<run>/`` — never deleted here; the delayed cleanup deletes it later.
3. **Rename** the assembled directory to ``{output}/ds={ds}`` in one step.

Readers of ``{output}`` skip names starting with ``_`` (Spark, Hive, Arrow all do), so they see the
partition with all its sources or not at all. On a local or HDFS-like filesystem the rename is
atomic; object stores have no directory rename, see the docs.

The commit id is a hash of (partition, incarnation, sorted source tokens). Re-executing the commit
finds its own marker and does nothing (``already_published``). This module only decides; the
operator does the file work.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from enum import Enum
from typing import Any, Mapping

from airflow_provider_zeta.core.ledger import CorruptState
from airflow_provider_zeta.core.paths import safe_segment
from airflow_provider_zeta.core.ready import Report

COMMIT_MARKER = "_zeta_commit.json"


class MissingPartitionKey(ValueError):
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
    return f"ds={safe_segment(ds)}"


def source_dir(source: str) -> str:
    return f"source={safe_segment(source)}"


def commit_id(ds: str, incarnation: int, sources: Mapping[str, Report], run_id: str = "") -> str:
    material = json.dumps(
        {
            "ds": ds,
            "run_id": run_id,
            "incarnation": incarnation,
            "tokens": sorted((name, r.token) for name, r in sources.items()),
        },
        sort_keys=True,
    )
    return hashlib.sha256(material.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class CommitMarker:
    commit_id: str
    ds: str
    incarnation: int
    tokens: dict[str, str]
    rows: dict[str, int | None]
    published_at: float
    run_id: str = ""  # the run that owns the partition

    def to_json(self) -> bytes:
        return json.dumps(self.__dict__, sort_keys=True).encode()


def parse_commit_marker(raw: bytes | None, where: str) -> CommitMarker | None:
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
        )
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise CorruptState(
            f"commit marker {where} is unreadable ({error}); the partition's provenance is unknown. "
            "Inspect it; nothing was changed."
        ) from None


class PublishAction(str, Enum):
    PUBLISH = "publish"  # no partition yet: assemble and rename into place
    REPLACE = "replace"  # an older incarnation's partition: tombstone it, then publish
    NO_OP = "no_op"  # this commit (or this incarnation's first commit) is already published
    FAIL = "fail"  # publishing would overwrite something it must not


@dataclass(frozen=True)
class PublishDecision:
    action: PublishAction
    rule: str
    reason: str


def decide_publish(
    ours: str,
    incarnation: int,
    partition_exists: bool,
    existing: CommitMarker | CorruptState | None,
    run_id: str = "",
) -> PublishDecision:
    """What to do with partition ``ds`` given what is there now. First matching rule wins.

    Incarnations are compared only within one run: a partition published by another run (two runs
    with the same ``ds``, e.g. an hourly schedule) is never replaced nor silently kept.
    """
    if not partition_exists:
        return PublishDecision(PublishAction.PUBLISH, "first_publish", "the partition does not exist yet")
    if isinstance(existing, CorruptState):
        return PublishDecision(PublishAction.FAIL, "corrupt_marker", str(existing))
    if existing is None:
        return PublishDecision(
            PublishAction.FAIL,
            "foreign_partition",
            "the partition exists without a commit marker: it was not published by this provider, "
            "and replacing it could lose data. Move it away, then clear the completed point.",
        )
    if existing.commit_id == ours:
        return PublishDecision(PublishAction.NO_OP, "already_published", f"commit {ours} is already published")
    if existing.run_id != run_id:
        return PublishDecision(
            PublishAction.FAIL,
            "partition_of_another_run",
            f"the partition was published by run {existing.run_id!r} (commit {existing.commit_id}); run "
            f"{run_id!r} has the same ds. One partition belongs to one run: give runs distinct partition "
            "keys (a daily schedule), or clear the owning run to reprocess it.",
        )
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


def marker_for(
    ours: str, ds: str, incarnation: int, sources: Mapping[str, Report], now: float, run_id: str = ""
) -> CommitMarker:
    return CommitMarker(
        run_id=run_id,
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
        "incarnation": marker.incarnation,
        "rows": dict(marker.rows),
        "tokens": dict(marker.tokens),
        "run_id": marker.run_id,
    }
