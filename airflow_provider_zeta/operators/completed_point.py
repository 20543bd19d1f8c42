"""CompletedPointOperator: publish the run's partition once, atomically, from the reported tokens (G3).

Purpose
    Turn the ready set (``ReadyToCloseSensor``'s return value) into the run's partition
    ``{output}/ds={ds}/source={name}/...``, so that ``spark.read.parquet(output)`` sees all sources of
    the partition or none of them, exactly once, and never an output of an attempt that did not report.

How it works
    ``core.publish`` decides; this operator moves files. It re-checks every reported attempt's
    ledger (succeeded, same output), computes the commit id from (ds, incarnation, tokens), reads the
    partition's commit marker, and then, by ``core.publish.decide_publish``:

    * ``first_publish`` / ``newer_incarnation``: copies each reported token's staging output — read
      from that token's own attempt directory, nothing else — into a hidden
      ``{output}/_zeta_pending/<dag>/<run>/<commit>-<nonce>/ds={ds}/``, writes the commit marker there, moves an older
      incarnation's partition aside to ``{output}/_zeta_tombstones/<dag>/<run>/`` (the delayed cleanup deletes it
      later), and renames the assembled partition into place in one step;
    * ``already_published`` (a re-execution) and ``late_report_ignored``: nothing;
    * ``foreign_partition``, ``stale_commit``, ``corrupt_marker``: fail, change nothing.

    A crash at any point leaves either the old state or the new one plus leftovers that a re-run
    replaces (the pending directory) or the cleanup removes (the tombstone). On success it emits an
    Asset event for the output with the commit id and rows per source in its ``extra``.

Where the publish is atomic
    On a local filesystem (and NFS, HDFS) a directory rename is atomic: readers see all sources or
    none. Object stores (S3, GCS, Azure Blob) have no directory rename: fsspec copies object by
    object, so a reader listing during the move can see part of the partition. There, read through
    the commit marker (``_zeta_commit.json``) or use a table format with atomic commits.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_zeta.core.ledger import CorruptState, parse_ledger
from airflow_provider_zeta.core.paths import LEDGER_FILE, OUTPUT_DIR, attempt_dir, run_pending_dir, run_tombstones_dir
from airflow_provider_zeta.core.publish import (
    COMMIT_MARKER,
    MissingPartitionKey,
    PublishAction,
    asset_extra,
    commit_id,
    decide_publish,
    marker_for,
    parse_commit_marker,
    partition_dir,
    partition_key,
    source_dir,
)
from airflow_provider_zeta.core.ready import attempt_problem, parse_ready_set
from airflow_provider_zeta.settings import ZetaSettings, open_state_storage
from airflow_provider_zeta.storage import StateStorage, copy_tree, register_output

if TYPE_CHECKING:
    from airflow.sdk import Context


class CompletedPointOperator(BaseOperator):
    """Publish the run's partition from the ready set of ``ready_task_id``.

    :param output_root: the output table's root: a path or an ObjectStoragePath URL (templated).
        (Not ``output``: that name is BaseOperator's XCom reference.)
    :param ready_task_id: task id of the ``ReadyToCloseSensor`` whose return value is the ready set.
    :param asset: optional ``Asset`` for the output; the task emits an event for it with the commit.
    """

    template_fields = ("output_root",)
    ui_color = "#ffd700"

    def __init__(self, *, output_root: str, ready_task_id: str, asset: Any | None = None, **kwargs: Any) -> None:
        if asset is not None:
            kwargs.setdefault("outlets", [asset])
        super().__init__(**kwargs)
        if not output_root:
            raise ValueError(f"{self.task_id}: 'output_root' must be the output table's root path or URL")
        self.output_root = output_root
        self.ready_task_id = ready_task_id
        self.asset = asset

    def execute(self, context: Context) -> dict[str, Any]:
        ti = context["ti"]
        try:
            ds = partition_key(context.get("ds") if context.get("logical_date") else None, ti.run_id)
        except MissingPartitionKey as error:
            raise AirflowFailException(str(error)) from None
        try:
            incarnation, sources = parse_ready_set(ti.xcom_pull(task_ids=self.ready_task_id))
        except CorruptState as error:
            raise AirflowFailException(f"[zeta.publish.bad_ready_set] {error}") from None

        state = open_state_storage(ZetaSettings.load().state_root)
        out = open_state_storage(self.output_root)
        part = partition_dir(ds)
        ours = commit_id(ds, incarnation, sources, ti.run_id)
        staging: dict[str, str] | None = None
        tombstone = None
        for _ in range(3):  # a concurrent publisher (an orphaned try) may win a rename: decide again
            try:
                existing = parse_commit_marker(
                    out.read_bytes(f"{part}/{COMMIT_MARKER}"), out.url_of(f"{part}/{COMMIT_MARKER}")
                )
            except CorruptState as error:
                existing = error
            decision = decide_publish(ours, incarnation, out.exists(part), existing, ti.run_id)
            self.log.info("zeta.publish.%s -> %s: %s", decision.rule, decision.action.value, decision.reason)
            if decision.action is PublishAction.FAIL:
                raise AirflowFailException(f"[zeta.publish.{decision.rule}] {decision.reason} ({out.url_of(part)})")
            if decision.action is PublishAction.NO_OP:
                # Decided before the staging is looked at: a re-execution after the delayed cleanup
                # deleted the staging is a logged no-op, not an "unverified attempt" failure.
                marker = existing  # what is published stands
                break
            if staging is None:
                staging = {name: self._verified_staging(state, ti, report) for name, report in sources.items()}
                # Registered before anything is written into the table, so that the cleanup and
                # the sweep know where this run's pending directories and tombstones can be.
                register_output(state, ti.dag_id, ti.run_id, self.output_root)
            marker = marker_for(ours, ds, incarnation, sources, time.time(), ti.run_id)
            replaced = existing.commit_id if decision.action is PublishAction.REPLACE else None

            def fence() -> None:
                # The execution API refuses this write from a try the scheduler has reset: an
                # orphaned try stops here, before it can rename anything into the table.
                context["task_state_store"].set("zeta_publishing", {"commit_id": ours, "at": time.time()})

            try:
                tombstone = publish_partition(
                    state,
                    staging,
                    out,
                    part,
                    marker,
                    replaced,
                    run_key=(ti.dag_id, ti.run_id),
                    log=self.log,
                    before_swap=fence,
                )
                break
            except PartitionTaken:
                continue
        else:
            raise AirflowFailException(f"[zeta.publish] the partition {out.url_of(part)} kept changing under this task")
        extra = asset_extra(marker)
        if self.asset is not None:
            context["outlet_events"][self.asset].extra = extra
        return {**extra, "partition": out.url_of(part), "tombstone": out.url_of(tombstone) if tombstone else None, "rule": decision.rule}

    def _verified_staging(self, state: StateStorage, ti: Any, report: Any) -> str:
        """The reported token's own staging directory — after checking its ledger (fencing)."""
        relative = attempt_dir(ti.dag_id, ti.run_id, report.task_id, -1, report.token)
        attempt = state.child(relative)
        try:
            ledger = parse_ledger(attempt.read_bytes(LEDGER_FILE), report.token, attempt.url_of(LEDGER_FILE))
        except CorruptState as error:
            ledger = error
        problem = attempt_problem(report, ledger)
        if problem:
            raise AirflowFailException(f"[zeta.publish.unverified_attempt] {problem}; nothing was published")
        return f"{relative}/{OUTPUT_DIR}"


class PartitionTaken(RuntimeError):
    """Another publisher renamed a partition into place first; the caller decides again."""


def publish_partition(
    state: StateStorage,
    staging: dict[str, str],
    out: StateStorage,
    part: str,
    marker: Any,
    replaced_commit: str | None,
    run_key: tuple[str, str],
    log: Any = None,
    before_swap: Any = None,
) -> str | None:
    """Assemble ``part`` hidden from the given staging directories, then rename it into place.

    ``staging``: source name -> directory in ``state`` (a reported token's own output). When
    ``replaced_commit`` is set, the existing partition is first moved aside as a tombstone, whose
    relative path is returned. Each call assembles in a pending directory of its own, so two
    publishers (a try and its orphaned predecessor) never write into each other's; the rename onto
    an existing partition fails (``PartitionTaken``) instead of merging. ``before_swap`` runs just
    before anything in the table changes (the operator's fence against orphaned tries).
    """
    pending = f"{run_pending_dir(*run_key)}/{marker.commit_id}-{uuid.uuid4().hex[:8]}"
    for name, relative in sorted(staging.items()):
        # File names carry the attempt token: a reader that listed the old partition and opens a
        # file after the swap gets "not found" (and retries), never another attempt's file.
        token = marker.tokens[name]
        copied = copy_tree(state, relative, out, f"{pending}/{part}/{source_dir(name)}", name_prefix=f"{token}-")
        if log:
            log.info("zeta.publish: source %s: %d files from %s", name, copied, relative)
    out.write_atomic(f"{pending}/{part}/{COMMIT_MARKER}", marker.to_json())
    if before_swap is not None:
        before_swap()
    tombstone = None
    try:
        if replaced_commit is not None and out.exists(part):
            tombstone = f"{run_tombstones_dir(*run_key)}/{part}-{replaced_commit}"
            out.move(part, tombstone)
        out.move(f"{pending}/{part}", part)  # the publish: one rename
    except (FileExistsError, OSError) as error:
        if not out.exists(part):
            raise
        out.delete_tree(pending)
        raise PartitionTaken(str(error)) from error
    out.delete_tree(pending)
    return tombstone
