"""CompletedPointOperator: publish the run's partition once, atomically, from the reported tokens (G3).

Purpose
    Turn the ready set (``ReadyToCloseSensor``'s return value) into the run's partition
    ``{output}/<partition>/source={name}/...`` (``partition``: a templated spec, default
    ``ds={{ ds }}``, e.g. ``ds={{ ds }}/hour={{ logical_date.strftime('%H') }}`` for an hourly
    schedule), so that ``spark.read.parquet(output)`` sees all sources of the partition or none of them, exactly once, and never an output of an attempt that did not report.

How it works
    ``core.publish`` decides; this operator moves files. It re-checks every reported attempt's
    ledger (succeeded, same output, same rows), renders and checks the partition spec
    (``core.publish.parse_partition``), computes the commit id from (DAG, pipeline, run, ds,
    partition, incarnation, tokens), reads the partition's commit marker and those of the paths
    enclosing it, and then, by
    ``core.publish.decide_publish``:

    * ``first_publish`` / ``newer_incarnation`` / ``owner_run_deleted`` (the partition's marker
      names a run of this DAG, pipeline, logical date and deployment that no longer exists: the
      task asks Airflow, and a deleted run's partition is replaced like an older incarnation's):
      checks each reported token's staging against the
      files its driver recorded in its ledger at finish (``core.publish.staging_problem``: a missing
      directory, a missing, extra or resized file fails the task naming the source and the token,
      and nothing is published); copies the staging — read from that token's own attempt directory,
      nothing else — into a hidden ``{output}/_zeta_pending/<dag>/<run>/<commit>-<nonce>/<partition>/``
      and checks the copy the same way; writes the commit marker there; moves the partition
      it replaces aside to ``{output}/_zeta_tombstones/<dag>/<run>/`` (the delayed
      cleanup deletes it later); renames the assembled partition into place in one step; and
      removes its pending directories (the run's and the DAG's, when empty);
    * ``already_published`` (a re-execution) and ``late_report_ignored``: nothing;
    * ``partition_inside_another``, ``partition_holds_others`` (partitions never nest),
      ``foreign_partition``, ``partition_of_another_owner`` (another DAG, pipeline or existing run
      published this partition into the table), ``partition_being_published`` (another owner's
      publish is under way on a store without atomic rename), ``stale_commit``, ``corrupt_marker``:
      fail, change nothing;
    * ``incomplete_commit`` (a store without atomic rename: this owner's marker does not match
      the partition's files): like ``newer_incarnation``, what is there becomes a tombstone.

    Crash windows are named (``failure_window``): ``after_assemble`` (the pending partition is
    complete, the table untouched), ``between_renames`` (a replaced partition is a tombstone, the
    new one not yet in place: the table has *no* such partition until the retry) and
    ``after_publish``. The task has ``retries=3`` by default: a retry after any of them finds the old
    partition (nothing changed: it publishes), no partition (``between_renames``: it publishes the
    new one, ``first_publish``) or its own commit (``already_published``). A reader therefore sees the
    old partition or the new one, and — only while the task is down between the two renames of a
    replacement — none; never a mix. Leftovers are the pending directory (a retry assembles anew; the
    delayed cleanup deletes the old one) and the tombstone.

Audits (write-audit-publish)
    With ``audits=[...]`` (``core.audits``: ``rows_within``, ``same_schema``, ``not_null``,
    ``unique_key``, ``user_audit`` or a plain callable) the staged outputs of the reporting
    attempts are audited after their ledgers and staging files are verified and before anything is written into the
    table: the decision is ``first_publish`` or a replacement, nothing moved yet. Row-count bounds
    use the rows each driver reported; audits that read the data are answered by the provider's
    audit job (``spark_jobs/audit_job.py``), submitted with ``SparkSubmitHook`` on
    ``audit_conn_id`` and waited for, never run in the worker. The outcome goes to the task log (one
    ``zeta.audit.passed`` / ``zeta.audit.failed`` line per source and audit, with its numbers) and
    to the XCom ``zeta_audit_results``. A failed audit fails the task without a retry
    (``[zeta.audit.failed]``, naming each failed audit, source and numbers): the published
    partition and the staging stay exactly as they were, and the run's delayed cleanup still
    applies. Clearing the failed sources with ``ready_to_close`` and downstream re-runs them and
    audits their new attempts. A re-execution that finds its commit already published audits
    nothing (``already_published`` is decided first), and a retry of a try that passed the audits
    of this very commit and was killed in its publish (its fence record ``zeta_publishing`` names
    the commit; ``core.audits.audited_before``) finishes that publish without auditing again: a
    replacement killed between its two renames has no partition in the table until then. A failure to run the audit job (spark-submit
    fails, no result) is an ordinary error: the task retries.

Asset events: exactly one per new commit
    The task declares the ``AssetAlias`` ``zeta-commits:<asset name>`` as its outlet, not the Asset
    itself, and adds an event for the Asset to it only for a commit not announced yet
    (``core.publish.should_announce``): a new commit, or the retry of a try killed after its rename
    (``after_publish``). A no-op re-execution after a clear (``already_published``,
    ``late_report_ignored``) emits nothing, so consumers scheduled on the Asset run once per commit.
    The event's ``extra`` carries the commit id, owner and rows per source.

OpenLineage
    With ``apache-airflow-providers-openlineage`` installed and enabled, the task's COMPLETE event
    carries its output (``get_openlineage_facets_on_complete``, built by ``lineage.py``): the table
    at ``output_root`` as one dataset, the partition ``ds=...`` it published as the ``subset``
    output facet, the commit id as the dataset ``version``, the rows written (a new commit only) as
    ``outputStatistics``, and a ``zeta_commit`` run facet (commit, owner, sources with their
    tokens and rows, the publish rule). A failed try reports no output.

Where the publish is atomic
    On a local filesystem a directory rename is atomic: readers see all sources or none. Elsewhere
    (object stores, and any store reached through fsspec, whose move is copy + delete;
    ``StateStorage.atomic_rename``) the partition is committed by its marker, written last and
    naming a manifest (every file and its size): before changing the table the task writes an
    intent into its pending directory, removes a replaced partition's marker first, moves its
    files to the tombstone, copies the new files in, checks that the partition holds exactly the
    manifest, and writes the marker (``_publish_by_marker``). A retry after a kill at any point
    completes or rolls back the commit (``recover_interrupted``, ``core.publish.recovery_rule``);
    a marker whose files do not match its manifest is never taken for published. Readers that
    must see whole commits there read ``storage.committed_files``; plain directory readers can see
    a partition in the middle of a publish.
"""

from __future__ import annotations

import dataclasses
import json
import os
import posixpath
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.sdk import AssetAlias, BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_provider_zeta.airflow_internals import spark_deploy_mode
from airflow_provider_zeta.core.audits import (
    AUDIT_RESULTS_XCOM,
    Audit,
    AuditOutcome,
    SourceFacts,
    SparkRequest,
    audit_job_request,
    audited_before,
    check_audit_submit_kwargs,
    check_audits,
    decide_audits,
    parse_audit_job_result,
    spark_request,
)
from airflow_provider_zeta.core.durations import Duration, duration_seconds
from airflow_provider_zeta.core.ledger import CorruptState, Ledger, parse_ledger
from airflow_provider_zeta.core.paths import (
    LEDGER_FILE,
    OUTPUT_DIR,
    PENDING_DIR,
    TOMBSTONE_SEGMENT_JOIN,
    attempt_dir,
    run_pending_dir,
    run_tombstones_dir,
    tombstone_dir,
)
from airflow_provider_zeta.core.publish import (
    COMMIT_MARKER,
    DEFAULT_PARTITION,
    INTENT_FILE,
    BadPartitionSpec,
    CommitMarker,
    Intent,
    MissingPartitionKey,
    Owner,
    PublishAction,
    PublishDecision,
    RecoveryAction,
    asset_extra,
    check_partition_spec,
    commit_id,
    decide_publish,
    enclosing_partitions,
    landing_problem,
    manifest_problem,
    marker_for,
    nested_partitions,
    owner_run_to_look_up,
    parse_commit_marker,
    parse_intent,
    partition_key,
    partition_path,
    recovery_rule,
    should_announce,
    source_dir,
    staging_problem,
)
from airflow_provider_zeta.core.ready import Report, attempt_problem, parse_ready_set, split_task_ref
from airflow_provider_zeta.operators.sweep import deployment_identity, run_exists
from airflow_provider_zeta.settings import ZetaSettings, driver_url, open_state_storage
from airflow_provider_zeta.spark_jobs import audit_job
from airflow_provider_zeta.storage import StateStorage, copy_tree, register_output, state_root_identity
from airflow_provider_zeta.task_state import set_kept

#: Parent levels of a pending directory removed after a publish when empty: ``<run>``, ``<dag>``.
#: ``_zeta_pending`` itself stays: other DAGs' publishers create their directories under it.
PENDING_LEVELS_TO_PRUNE = 2
#: Task state store keys: the commit a try is about to rename into place (the orphan fence), and
#: the last commit whose Asset event was emitted.
PUBLISHING_KEY = "zeta_publishing"
ANNOUNCED_KEY = "zeta_announced"
#: The audit job the completed point submits for audits that read the staged data.
AUDIT_JOB_PATH = str(Path(audit_job.__file__).resolve())
#: How long the audit job may run by default (``audit_timeout``), in seconds.
DEFAULT_AUDIT_TIMEOUT = 3600.0
#: After ``audit_timeout``: how often the kill is repeated until spark-submit has ended.
AUDIT_KILL_WAIT = 5.0

if TYPE_CHECKING:
    from airflow.sdk import Context


class CompletedPointOperator(BaseOperator):
    """Publish the run's partition from the ready set of ``ready_task_id``.

    :param output_root: the output table's root: a path or an ObjectStoragePath URL (templated).
        (Not ``output``: that name is BaseOperator's XCom reference.)
    :param ready_task_id: task id of the ``ReadyToCloseSensor`` whose return value is the ready set.
    :param asset: optional ``Asset`` for the output; the task emits one event for it per new commit.
    :param pipeline_id: the pipeline this publish belongs to (part of the commit's owner, with the
        DAG and the run); default: the task's TaskGroup id, or its task id outside a group.
    :param partition: the run's partition spec (templated), default ``"ds={{ ds }}"``: once
        rendered, one or more ``key=value`` path segments joined by ``/``, e.g.
        ``"ds={{ ds }}/hour={{ logical_date.strftime('%H') }}"`` for an hourly schedule
        (``core.publish.parse_partition`` says what is accepted). The partition lands at
        ``{output_root}/<rendered partition>/source={name}/``.
    :param audits: audits of the staged data before the publish (``core.audits``: ``rows_within``,
        ``same_schema``, ``not_null``, ``unique_key``, ``user_audit``, or a callable called per
        source with its ``SourceFacts``); a failed one fails the task and publishes nothing.
    :param audit_conn_id: the Spark connection the audit job is submitted on (local or client
        mode), for audits that read the data.
    :param audit_spark_submit_kwargs: further ``SparkSubmitHook`` arguments of the audit job
        (``conf``, ``executor_memory``, ...); not those it sets itself (``application``,
        ``application_args``, ``conn_id``: a ``ValueError`` when the DAG is parsed).
    :param audit_timeout: how long the audit job may run (a ``timedelta`` or seconds, default one
        hour); then its spark-submit is killed and the try fails (``zeta.audit.timeout``; it retries).

    ``retries`` defaults to 3 and ``retry_delay`` to 10 seconds: a worker lost between the two
    renames of a replacement leaves the table without the partition until the retry publishes it.
    """

    #: A cleared deploy task looks for its run's commits by this mark (``ZetaSparkJobOperator``):
    #: a source published from an attempt token tells it that driver ended.
    is_zeta_completed_point = True

    template_fields = ("output_root", "partition", "audit_spark_submit_kwargs")
    ui_color = "#ffd700"

    def __init__(
        self,
        *,
        output_root: str,
        ready_task_id: str,
        asset: Any | None = None,
        pipeline_id: str | None = None,
        partition: str = DEFAULT_PARTITION,
        audits: Sequence[Audit | Any] | None = None,
        audit_conn_id: str = "spark_default",
        audit_spark_submit_kwargs: Mapping[str, Any] | None = None,
        audit_timeout: Duration = DEFAULT_AUDIT_TIMEOUT,
        **kwargs: Any,
    ) -> None:
        if asset is not None:
            kwargs.setdefault("outlets", [commit_alias(asset)])
            # Also an inlet, which emits nothing: the DAG processor then creates the Asset's row when it
            # parses the DAG, so two first commits at once never race to create it from their events.
            inlets = list(kwargs.get("inlets") or [])
            kwargs["inlets"] = inlets if asset in inlets else [*inlets, asset]
            # One completed point of the DAG at a time: Airflow links an alias to its asset when the
            # first event goes through it, and of two runs whose first commits end together the
            # second fails its own success update on that link's unique key (the API server then
            # sets the task failed, with no retry, although its partition was published). A
            # running task instance leaves "running" only when its success, with its events and
            # the link, is committed, so the next one finds the link. A publish takes seconds;
            # the runs' deploys still run in parallel.
            kwargs.setdefault("max_active_tis_per_dag", 1)
        kwargs.setdefault("retries", 3)
        kwargs.setdefault("retry_delay", timedelta(seconds=10))
        super().__init__(**kwargs)
        if not output_root:
            raise ValueError(f"{self.task_id}: 'output_root' must be the output table's root path or URL")
        self.output_root = output_root
        self.partition = check_partition_spec(partition, self.task_id)
        self.ready_task_id = ready_task_id
        self.asset = asset
        self.audits = check_audits(audits, self.task_id)
        self.audit_conn_id = audit_conn_id
        self.audit_spark_submit_kwargs = check_audit_submit_kwargs(audit_spark_submit_kwargs, self.task_id)
        self.audit_timeout = duration_seconds(audit_timeout, f"{self.task_id}: 'audit_timeout'")
        #: The audit job's hook while it runs (``on_kill`` kills its spark-submit).
        self._audit_hook: Any = None
        group = getattr(self, "task_group", None)
        self.pipeline_id = pipeline_id or (group.group_id if group is not None and group.group_id else self.task_id)
        #: What this execution returned (the partition it published or found published), for OpenLineage.
        self._published: dict[str, Any] | None = None

    def failure_window(self, name: str, context: Context) -> None:
        """Called at each named point where a crash changes what the next try finds.

        ``after_assemble`` (pending partition complete, table untouched), ``between_renames`` (the
        replaced partition is a tombstone, the new one not in place) and ``after_publish`` (before
        the Asset event and the return value). A no-op here; tests override it to kill the task
        process exactly there.
        """

    def render_template_fields(self, context: Any, jinja_env: Any = None) -> None:
        """Fail with a plain message on a run without a logical date, before the templates are rendered."""
        # A run without a logical date has no partition: said plainly, before the spec's template
        # fails on the missing ``ds`` with a Jinja error.
        if not context.get("ds"):
            require_logical_date(context)
        super().render_template_fields(context, jinja_env)

    def execute(self, context: Context) -> dict[str, Any]:
        """Publish the ready set's outputs as the run's partition, or find this commit already
        published; fail when publishing would overwrite what it must not."""
        ti = context["ti"]
        ds = require_logical_date(context)
        part = self._rendered_partition()
        incarnation, sources = _ready_set_of(ti.xcom_pull(task_ids=self.ready_task_id))

        state = open_state_storage(ZetaSettings.load().state_root)
        out = open_state_storage(self.output_root)
        owner = Owner(ti.dag_id, self.pipeline_id, ti.run_id)
        ours = commit_id(ds, incarnation, sources, owner, part)
        # Recorded in the marker; what a later run compares before taking this owner for deleted.
        logical_date = context["logical_date"].isoformat()
        # The deployment: the state root and the metadata database (whose runs ``_run_deleted`` asks about).
        root_id = deployment_identity(state_root_identity(state, create=True))
        staging: dict[str, tuple[str, dict[str, int] | None]] | None = None
        tombstone = None
        if not out.atomic_rename:
            # A try killed in the middle of a commit left its intent: complete it or roll it back
            # before looking at the partition.
            _recover_interrupted_commits(out, (ti.dag_id, ti.run_id), part, self.log)
        for _ in range(3):  # a concurrent publisher (an orphaned try) may win a rename: decide again
            decision, exists, existing = self._decide(ti, out, part, ours, incarnation, owner, logical_date, root_id)
            if decision.action is PublishAction.NO_OP:
                # Decided before the staging is looked at: a re-execution after the delayed cleanup
                # deleted the staging is a logged no-op, not an "unverified attempt" failure.
                assert isinstance(existing, CommitMarker)  # a no-op is decided on a readable marker only
                marker = existing  # what is published stands
                break
            if staging is None:
                staging = self._verified_audited_staging(context, state, out, sources, ours, part, exists)
            marker = marker_for(ours, ds, incarnation, sources, time.time(), owner, part, logical_date, root_id)
            try:
                tombstone = self._publish(context, state, staging, out, part, marker, _replaced_commit(decision, existing))
                break
            except PartitionTaken:
                continue
        else:
            raise AirflowFailException(f"[zeta.publish] the partition {out.url_of(part)} kept changing under this task")
        self.failure_window("after_publish", context)
        extra = asset_extra(marker)
        self._announce(context, decision, marker, extra)
        self._published = {
            **extra,
            "partition_path": extra["partition"],  # the rendered spec; "partition" is where it lies
            "partition": out.url_of(part),
            "tombstone": out.url_of(tombstone) if tombstone else None,
            "rule": decision.rule,
            "new_commit": decision.action in (PublishAction.PUBLISH, PublishAction.REPLACE),
        }
        return self._published

    def _rendered_partition(self) -> str:
        """The partition this run publishes: the rendered ``partition`` spec, checked
        (``core.publish.partition_path``); a bad spec fails the task at once."""
        try:
            return partition_path(self.partition)
        except BadPartitionSpec as error:
            raise AirflowFailException(f"[zeta.publish.bad_partition] {self.task_id}: {error}") from None

    def _decide(
        self,
        ti: Any,
        out: StateStorage,
        part: str,
        ours: str,
        incarnation: int,
        owner: Owner,
        logical_date: str,
        root_id: str,
    ) -> tuple[PublishDecision, bool, CommitMarker | CorruptState | None]:
        """``core.publish.decide_publish`` on what the partition holds now, logged; a ``FAIL``
        decision fails the task. Returns the decision, whether the partition exists and its marker."""
        exists, existing, incomplete, files = partition_state(out, part)
        decision = decide_publish(
            ours,
            incarnation,
            exists,
            existing,
            owner,
            enclosing=enclosing_markers(out, part),
            nested=nested_partitions(part, files) if exists and existing is None else (),
            owner_run_deleted=_run_deleted(ti, owner_run_to_look_up(existing, owner, logical_date, root_id)),
            logical_date=logical_date,
            state_root_id=root_id,
            incomplete=incomplete,
            publishing=publishing_intents(out, part) if exists and existing is None and not out.atomic_rename else (),
        )
        self.log.info("zeta.publish.%s -> %s: %s", decision.rule, decision.action.value, decision.reason)
        if decision.action is PublishAction.FAIL:
            raise AirflowFailException(f"[zeta.publish.{decision.rule}] {decision.reason} ({out.url_of(part)})")
        return decision, exists, existing

    def _verified_audited_staging(
        self,
        context: Context,
        state: StateStorage,
        out: StateStorage,
        sources: Mapping[str, Any],
        ours: str,
        part: str,
        exists: bool,
    ) -> dict[str, tuple[str, dict[str, int] | None]]:
        """Each source's staging (``_verified_staging``), checked against the files its driver
        recorded and audited — unless an earlier try passed the audits of this very commit — and
        then the run's output registered: all before anything is written into the table."""
        ti = context["ti"]
        staging = {name: self._verified_staging(state, ti, report) for name, report in sources.items()}
        # Before the audits: a staging that is not what its driver recorded is a clear,
        # final failure, not an audit job that cannot read it (checked again at the copy).
        for name, (relative, recorded) in sorted(staging.items()):
            problem = staging_problem(name, sources[name].token, recorded, state.file_sizes(relative), state.url_of(relative))
            if problem:
                raise AirflowFailException(f"[zeta.publish.staging_mismatch] {problem}; nothing was published")
        # Before anything is written into the table: a failed audit leaves it as it is.
        if audited_before(context["task_state_store"].get(PUBLISHING_KEY), ours):
            # An earlier try passed the audits of this very commit and was killed in its
            # publish (the table may lack the partition): finish it, do not audit again.
            self.log.info("zeta.audit.resumed: commit %s passed its audits in an earlier try; finishing its publish", ours)
        else:
            self.audit(context, state, sources, staging, absent=_absent_note(out, (ti.dag_id, ti.run_id), part, exists))
        # Registered before anything is written into the table, so that the cleanup and
        # the sweep know where this run's pending directories and tombstones can be.
        register_output(state, ti.dag_id, ti.run_id, self.output_root)
        return staging

    def _publish(
        self,
        context: Context,
        state: StateStorage,
        staging: dict[str, tuple[str, dict[str, int] | None]],
        out: StateStorage,
        part: str,
        marker: CommitMarker,
        replaced: str | None,
    ) -> str | None:
        """``publish_partition`` of ``marker``'s commit, fenced against orphaned tries, with the
        named failure windows; the replaced partition's tombstone, if any. ``PartitionTaken`` when
        another publisher renamed the partition first."""
        ti = context["ti"]

        def fence() -> None:
            # The execution API refuses this write from a try the scheduler has reset: an
            # orphaned try stops here, before it can rename anything into the table.
            set_kept(context["task_state_store"], PUBLISHING_KEY, {"commit_id": marker.commit_id, "at": time.time()})
            self.failure_window("after_assemble", context)

        try:
            return publish_partition(
                state,
                staging,
                out,
                part,
                marker,
                replaced,
                run_key=(ti.dag_id, ti.run_id),
                log=self.log,
                before_swap=fence,
                between_renames=lambda: self.failure_window("between_renames", context),
            )
        except StagingMismatch as error:
            raise AirflowFailException(f"[zeta.publish.staging_mismatch] {error}; nothing was published") from None

    def _announce(self, context: Context, decision: PublishDecision, marker: CommitMarker, extra: dict[str, Any]) -> None:
        """Add the Asset event of ``marker``'s commit to the task's alias when the commit was not
        announced yet (``core.publish.should_announce``); log either way."""
        store = context["task_state_store"]
        asset = self.asset
        if asset is not None and should_announce(
            decision, marker.commit_id, store.get(PUBLISHING_KEY), store.get(ANNOUNCED_KEY)
        ):
            # Recorded first: a clear's re-execution then finds the commit announced. Only a kill
            # between this write and the task's success (no file work left) can lose the event.
            set_kept(store, ANNOUNCED_KEY, marker.commit_id)
            context["outlet_events"][commit_alias(asset)].add(asset, extra=extra)
            self.log.info("zeta.publish.asset_event: %s commit %s", asset.name, marker.commit_id)
        elif asset is not None:
            self.log.info("zeta.publish.no_asset_event: commit %s was announced before; consumers are not woken", marker.commit_id)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """OpenLineage (called by its listener after a successful execution): the output table and
        the partition this execution published or found published; see the module docstring."""
        from airflow_provider_zeta.lineage import completed_point_lineage

        return completed_point_lineage(self.output_root, self._published)

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> Any:
        """A failed try published nothing it can vouch for: no output (the listener would otherwise
        fall back to ``get_openlineage_facets_on_complete``)."""
        from airflow_provider_zeta.lineage import completed_point_lineage

        return completed_point_lineage(self.output_root, None)

    def audit(
        self,
        context: Context,
        state: StateStorage,
        sources: Mapping[str, Any],
        staging: Mapping[str, tuple[str, dict[str, int] | None]],
        absent: str | None = None,
    ) -> AuditOutcome | None:
        """Audit the reporting attempts' staged outputs (``core.audits``); fail the task when an
        audit fails. Logs and pushes the outcome (XCom ``zeta_audit_results``) either way.
        ``absent``: why the table lacks the partition although it was published (``_absent_note``),
        said in the failure instead of "as they were"."""
        if not self.audits:
            return None
        # The staging's URL as drivers get it (plain fsspec, no Airflow connection id in it): the
        # audit job opens it with Spark, and a user callable may open it.
        facts = {
            name: SourceFacts(name, report.token, report.rows, driver_url(state, staging[name][0]))
            for name, report in sorted(sources.items())
        }
        wanted = spark_request(self.audits)
        if wanted:
            read = self.run_audit_job(context, wanted, {name: fact.staging for name, fact in facts.items()})
            facts = {name: dataclasses.replace(fact, **read[name]) for name, fact in facts.items()}
        outcome = decide_audits(self.audits, facts)
        ti = context["ti"]
        ti.xcom_push(
            key=AUDIT_RESULTS_XCOM,
            value={
                **outcome.to_value(),
                "pipeline_id": self.pipeline_id,
                "tokens": {name: fact.token for name, fact in facts.items()},
                "rows": {name: fact.rows for name, fact in facts.items()},
                "at": time.time(),
            },
        )
        for result in outcome.results:
            numbers = json.dumps(dict(result.numbers), sort_keys=True, default=str)
            if result.passed:
                self.log.info("zeta.audit.passed: %s on %s: %s %s", result.audit, result.source, result.message, numbers)
            else:
                self.log.error("zeta.audit.failed: %s on %s: %s %s", result.audit, result.source, result.message, numbers)
        if not outcome.passed:
            table = (
                f"Nothing was published by this try, and the staging is as it was; but {absent}"
                if absent
                else "Nothing was published: the partition and the staging are as they were"
            )
            raise AirflowFailException(
                f"[zeta.audit.failed] {outcome.summary()}. {table}. Fix the input of {list(outcome.failed_sources) or 'the sources'} and "
                f"clear their deploy tasks together with {self.ready_task_id} and downstream."
            )
        self.log.info("zeta.audit.all_passed: %s", outcome.summary())
        return outcome

    def run_audit_job(self, context: Context, wanted: SparkRequest, staging: Mapping[str, str]) -> dict[str, dict[str, Any]]:
        """Submit the audit job (``spark_jobs/audit_job.py``) with ``SparkSubmitHook`` and wait for
        it, at most ``audit_timeout``; what it read of each source (``SourceFacts`` fields). A job
        that fails, runs out of time (killed) or leaves no result raises ``AirflowException`` (the
        task retries; nothing was published). Its temporary directory is removed in any case."""
        from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

        ti = context["ti"]
        folder = tempfile.mkdtemp(prefix="zeta-audit-")
        try:
            result_path = os.path.join(folder, "result.json")
            request_path = os.path.join(folder, "request.json")
            with open(request_path, "w") as handle:
                json.dump(audit_job_request(wanted, staging, result_path), handle)
            env = {
                # The job's Python must be one that has PySpark; spark-submit from pip's pyspark
                # lies beside it when the worker's PATH lacks one.
                "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
                "PYSPARK_DRIVER_PYTHON": os.environ.get("PYSPARK_DRIVER_PYTHON", sys.executable),
                "PATH": os.pathsep.join(p for p in (os.environ.get("PATH", ""), os.path.dirname(sys.executable)) if p),
            }
            kwargs = dict(self.audit_spark_submit_kwargs)
            kwargs["env_vars"] = {**env, **dict(kwargs.get("env_vars") or {})}
            kwargs.setdefault("name", f"zeta-audit-{ti.dag_id}-{self.pipeline_id}")
            hook = SparkSubmitHook(conn_id=self.audit_conn_id, application_args=[request_path], **kwargs)
            if spark_deploy_mode(hook) == "cluster":
                raise AirflowFailException(
                    f"[zeta.audit.cluster_mode] connection {self.audit_conn_id!r} uses deploy-mode cluster: the audit "
                    "job runs in local or client mode (its result is read where it was submitted); set audit_conn_id"
                )
            self.log.info("zeta.audit.job: submitting %s for %s on %s", AUDIT_JOB_PATH, sorted(staging), self.audit_conn_id)
            self._submit_audit_job(hook)
            raw = Path(result_path).read_bytes() if os.path.exists(result_path) else None
            try:
                return parse_audit_job_result(raw, staging, result_path)
            except CorruptState as error:
                raise AirflowException(f"[zeta.audit.no_result] {error}") from None
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def _submit_audit_job(self, hook: Any) -> None:
        """``hook.submit`` the audit job and wait at most ``audit_timeout``; then kill its
        spark-submit (``SparkSubmitHook.on_kill``, repeated until it has ended) and fail the try."""
        failed: list[BaseException] = []

        def submit() -> None:
            try:
                hook.submit(AUDIT_JOB_PATH)
            except BaseException as error:  # handed to the task's thread below
                failed.append(error)

        self._audit_hook = hook
        try:
            worker = threading.Thread(target=submit, name="zeta-audit-job", daemon=True)
            worker.start()
            worker.join(self.audit_timeout)
            if worker.is_alive():
                self.log.error("zeta.audit.timeout: the audit job ran longer than %g s; killing its spark-submit", self.audit_timeout)
                while worker.is_alive():  # a kill before spark-submit started kills nothing: again
                    hook.on_kill()
                    worker.join(AUDIT_KILL_WAIT)
                raise AirflowException(
                    f"[zeta.audit.timeout] the audit job ran longer than audit_timeout ({self.audit_timeout:g} s) "
                    f"on {self.audit_conn_id!r} and was killed; nothing was published (the task retries). "
                    "Give it more time (audit_timeout) or resources (audit_spark_submit_kwargs)"
                )
        finally:
            self._audit_hook = None
        if failed:
            raise failed[0]

    def on_kill(self) -> None:
        """The task is being killed: kill the audit job's spark-submit when one runs."""
        hook = self._audit_hook
        if hook is not None:
            self.log.info("zeta.audit.killed: killing the audit job's spark-submit")
            hook.on_kill()

    def _verified_staging(self, state: StateStorage, ti: Any, report: Any) -> tuple[str, dict[str, int] | None]:
        """The reported token's own staging directory — after checking its ledger (fencing) — and
        the files its driver recorded there at finish."""
        # The report names its task instance (core.ready.task_ref): a mapped source's attempts are its map index's.
        relative = attempt_dir(ti.dag_id, ti.run_id, *split_task_ref(report.task_id), report.token)
        attempt = state.child(relative)
        ledger: Ledger | CorruptState | None
        try:
            ledger = parse_ledger(attempt.read_bytes(LEDGER_FILE), report.token, attempt.url_of(LEDGER_FILE))
        except CorruptState as error:
            ledger = error
        problem = attempt_problem(report, ledger)
        if problem:
            raise AirflowFailException(f"[zeta.publish.unverified_attempt] {problem}; nothing was published")
        assert isinstance(ledger, Ledger)  # attempt_problem finds no problem in a succeeded ledger only
        return f"{relative}/{OUTPUT_DIR}", ledger.files


def _ready_set_of(value: Any) -> tuple[int, dict[str, Report]]:
    """The ready set the sensor returned (``core.ready.parse_ready_set``): its incarnation and the
    report of each source; an unreadable one fails the task at once."""
    try:
        return parse_ready_set(value)
    except CorruptState as error:
        raise AirflowFailException(f"[zeta.publish.bad_ready_set] {error}") from None


def _recover_interrupted_commits(out: StateStorage, run_key: tuple[str, str], part: str, log: Any) -> None:
    """``recover_interrupted``; an unreadable intent fails the task at once."""
    try:
        recover_interrupted(out, run_key, part, log)
    except CorruptState as error:
        raise AirflowFailException(f"[zeta.publish.corrupt_intent] {error}") from None


def _replaced_commit(decision: PublishDecision, existing: CommitMarker | CorruptState | None) -> str | None:
    """The commit a ``REPLACE`` decision moves aside; None for any other decision."""
    if decision.action is not PublishAction.REPLACE:
        return None
    assert isinstance(existing, CommitMarker)  # a replace is decided on a readable marker only
    return existing.commit_id


def _absent_note(out: StateStorage, run_key: tuple[str, str], part: str, exists: bool) -> str | None:
    """When the partition is missing although an earlier try of this run moved a published one
    aside (killed between the two renames of a replacement of another commit): what to tell the
    user instead of "the partition is as it was". ``None`` otherwise."""
    if exists:
        return None
    prefix = part.replace("/", TOMBSTONE_SEGMENT_JOIN) + "-"
    tombstones = sorted(e for e in out.list_dir(run_tombstones_dir(*run_key)) if e.startswith(prefix))
    if not tombstones:
        return None
    where = out.url_of(f"{run_tombstones_dir(*run_key)}/{tombstones[-1]}")
    return (
        f"the partition {out.url_of(part)} is absent: an earlier try of this run moved the published "
        f"one aside to {where} and was killed before its replacement was in place"
    )


def _run_deleted(ti: Any, owner: Owner | None) -> bool:
    """Whether ``owner``'s run no longer exists (the sweep's ``run_exists``); False when there is
    no one to ask about."""
    return owner is not None and not run_exists(ti, owner.dag_id, owner.run_id)


def require_logical_date(context: Any) -> str:
    """The run's ``ds``; a run without a logical date fails at once (no retry): it has no partition."""
    ti = context.get("ti")
    run_id = getattr(ti, "run_id", None) or context.get("run_id") or "?"
    try:
        return partition_key(context.get("ds") if context.get("logical_date") else None, run_id)
    except MissingPartitionKey as error:
        raise AirflowFailException(str(error)) from None


def partition_state(
    out: StateStorage, part: str
) -> tuple[bool, CommitMarker | CorruptState | None, str | None, dict[str, int]]:
    """What ``decide_publish`` is given about the partition: whether it exists, its marker, why
    its files do not match the marker's manifest (``core.publish.manifest_problem``; checked only
    where a rename is not atomic) and its files (relative path -> size).

    Where a rename is not atomic, a partition "exists" when it holds a file: a prefix without
    objects is nothing, and an emptied directory is what a rolled-back publish leaves."""
    existing: CommitMarker | CorruptState | None
    try:
        existing = parse_commit_marker(out.read_bytes(f"{part}/{COMMIT_MARKER}"), out.url_of(f"{part}/{COMMIT_MARKER}"))
    except CorruptState as error:
        existing = error
    if out.atomic_rename:
        # The marker is only ever seen with its files; the files are listed only to look for
        # partitions nested in one without a marker.
        exists = out.exists(part)
        return exists, existing, None, out.file_sizes(part) if exists and existing is None else {}
    files = out.file_sizes(part)
    incomplete = manifest_problem(existing, files, atomic_rename=False) if isinstance(existing, CommitMarker) else None
    return bool(files), existing, incomplete, files


def enclosing_markers(out: StateStorage, part: str) -> dict[str, CommitMarker | CorruptState]:
    """The commit markers of the partitions that would enclose ``part`` (``ds=X`` of ``ds=X/hour=13``)."""
    found: dict[str, CommitMarker | CorruptState] = {}
    for path in enclosing_partitions(part):
        where = f"{path}/{COMMIT_MARKER}"
        try:
            marker = parse_commit_marker(out.read_bytes(where), out.url_of(where))
        except CorruptState as error:
            found[path] = error
            continue
        if marker is not None:
            found[path] = marker
    return found


def commit_alias(asset: Any) -> AssetAlias:
    """The outlet through which the completed point emits its Asset's events (one per new commit)."""
    return AssetAlias(name=f"zeta-commits:{asset.name}")


class StagingMismatch(RuntimeError):
    """A source's staging is not what its driver recorded at finish; nothing was published."""


class PartitionTaken(RuntimeError):
    """Another publisher renamed a partition into place first; the caller decides again."""


def publish_partition(
    state: StateStorage,
    staging: dict[str, tuple[str, dict[str, int] | None]],
    out: StateStorage,
    part: str,
    marker: Any,
    replaced_commit: str | None,
    run_key: tuple[str, str],
    log: Any = None,
    before_swap: Any = None,
    between_renames: Any = None,
) -> str | None:
    """Assemble ``part`` hidden from the given staging directories, then rename it into place.

    ``staging``: source name -> (directory in ``state``, the files its driver recorded there at
    finish). Each source's staging is checked against the recorded files before it is copied, and
    the copy after (``StagingMismatch`` otherwise, before anything in the table changed). When
    ``replaced_commit`` is set, the existing partition is first moved aside as a tombstone, whose
    relative path is returned. Each call assembles in a pending directory of its own, so two
    publishers (a try and its orphaned predecessor) never write into each other's; the rename onto
    an existing partition fails (``PartitionTaken``) instead of merging. ``before_swap`` runs just
    before anything in the table changes (the operator's fence against orphaned tries);
    ``between_renames`` between moving the replaced partition aside and renaming the new one in.
    """
    run_pending = run_pending_dir(*run_key)
    pending = f"{run_pending}/{marker.commit_id}-{uuid.uuid4().hex[:8]}"
    try:
        marker = _assemble_pending(state, staging, out, f"{pending}/{part}", marker, log)
    except BaseException:
        _discard_pending(out, pending, run_pending)
        raise
    if before_swap is not None:
        before_swap()
    if not out.atomic_rename:
        return _publish_by_marker(out, part, pending, run_pending, marker, replaced_commit, run_key, log, between_renames)
    return _publish_by_rename(out, part, pending, run_pending, replaced_commit, run_key, between_renames)


def _assemble_pending(
    state: StateStorage,
    staging: dict[str, tuple[str, dict[str, int] | None]],
    out: StateStorage,
    assembled: str,
    marker: Any,
    log: Any,
) -> Any:
    """Copy each source's checked staging into ``assembled`` (the partition in its pending
    directory) and check the copy (``StagingMismatch`` otherwise); ``marker`` with the manifest of
    what was assembled, written beside it where a rename is atomic (elsewhere it is written last,
    by ``_complete``)."""
    for name, (relative, recorded) in sorted(staging.items()):
        copied = _copy_source(state, relative, recorded, out, f"{assembled}/{source_dir(name)}", name, marker.tokens[name])
        if log:
            log.info("zeta.publish: source %s: %d files from %s", name, copied, relative)
    # The manifest: every file of the partition and its size, what a retry and a reader verify.
    marker = dataclasses.replace(marker, manifest=out.file_sizes(assembled))
    if out.atomic_rename:
        out.write_atomic(f"{assembled}/{COMMIT_MARKER}", marker.to_json())
    return marker


def _copy_source(
    state: StateStorage,
    relative: str,
    recorded: dict[str, int] | None,
    out: StateStorage,
    target: str,
    name: str,
    token: str,
) -> int:
    """Copy source ``name``'s staging ``relative`` to ``target``, checking it against the files its
    driver recorded before and the copy after (``StagingMismatch``); the number of files copied."""
    problem = staging_problem(name, token, recorded, state.file_sizes(relative), state.url_of(relative))
    if problem:
        raise StagingMismatch(problem)
    # File names carry the attempt token: a reader that listed the old partition and opens a
    # file after the swap gets "not found" (and retries), never another attempt's file.
    copied = copy_tree(state, relative, out, target, name_prefix=f"{token}-")
    copy_problem = staging_problem(name, token, _prefixed(recorded, f"{token}-"), out.file_sizes(target), out.url_of(target))
    if copy_problem:
        raise StagingMismatch(f"the copy into the pending partition: {copy_problem}")
    return copied


def _publish_by_rename(
    out: StateStorage,
    part: str,
    pending: str,
    run_pending: str,
    replaced_commit: str | None,
    run_key: tuple[str, str],
    between_renames: Any,
) -> str | None:
    """Where a rename is atomic: move a replaced partition aside as a tombstone (returned), then
    rename the assembled ``<pending>/<part>`` into place in one step; ``PartitionTaken`` when
    another publisher's partition is there first."""
    tombstone = None
    try:
        if replaced_commit is not None and out.exists(part):
            tombstone = tombstone_dir(*run_key, part, replaced_commit)
            out.move(part, tombstone)
            if between_renames is not None:
                between_renames()
        out.move(f"{pending}/{part}", part)  # the publish: one rename
    except (FileExistsError, OSError) as error:
        if not out.exists(part):
            raise
        _discard_pending(out, pending, run_pending)
        raise PartitionTaken(str(error)) from error
    _discard_pending(out, pending, run_pending)
    return tombstone


def _prefixed(recorded: dict[str, int] | None, prefix: str) -> dict[str, int] | None:
    """The recorded file names as ``copy_tree`` renames them (metadata files keep their name)."""
    if recorded is None:
        return None
    renamed = {}
    for relative, size in recorded.items():
        folder, name = relative.rpartition("/")[0], relative.rpartition("/")[2]
        if not name.startswith(("_", ".")):
            name = prefix + name
        renamed[f"{folder}/{name}" if folder else name] = size
    return renamed


def _discard_pending(out: StateStorage, pending: str, run_pending: str) -> None:
    """Delete this publisher's pending directory, then the run's and DAG's if now empty."""
    out.delete_tree(pending)
    out.remove_empty_dirs(run_pending, PENDING_LEVELS_TO_PRUNE)


# -- stores without atomic rename: the marker, written last, commits ---------------------------------


def _publish_by_marker(
    out: StateStorage,
    part: str,
    pending: str,
    run_pending: str,
    marker: CommitMarker,
    replaced_commit: str | None,
    run_key: tuple[str, str],
    log: Any,
    between_renames: Any,
) -> str | None:
    """Commit the assembled ``<pending>/<part>`` where a rename is copy + delete: write the intent,
    then do the idempotent file work (``_complete``) a retry repeats after a kill at any point."""
    found = out.file_sizes(part)
    raw = out.read_bytes(f"{part}/{COMMIT_MARKER}")
    try:
        current = parse_commit_marker(raw, out.url_of(f"{part}/{COMMIT_MARKER}"))
    except CorruptState:
        current = None
        raw = None
    if replaced_commit is None:
        if found:  # a first publish never lands on top of what another owner wrote
            _discard_pending(out, pending, run_pending)
            raise PartitionTaken(f"{out.url_of(part)} appeared meanwhile ({len(found)} files)")
        intent = Intent(marker, part, pending)
    else:
        if current is None or current.commit_id != replaced_commit:
            _discard_pending(out, pending, run_pending)
            raise PartitionTaken(f"{out.url_of(part)} no longer holds commit {replaced_commit}")
        intent = Intent(
            marker,
            part,
            pending,
            replaced=replaced_commit,
            replaced_marker=raw.decode() if raw is not None else None,
            replaced_files={n: size for n, size in found.items() if n != COMMIT_MARKER},
            tombstone=tombstone_dir(*run_key, part, replaced_commit),
        )
    # Before anything in the table changes: a retry finds it whatever point a kill hits.
    out.write_atomic(f"{pending}/{INTENT_FILE}", intent.to_json())
    try:
        _complete(out, intent, log, between_renames)
    except PartitionTaken:
        _discard_pending(out, pending, run_pending)  # given up: its files are out of the partition
        raise
    _discard_pending(out, pending, run_pending)
    return intent.tombstone


def _complete(out: StateStorage, intent: Intent, log: Any = None, between_renames: Any = None) -> None:
    """The file work of ``intent``, in an order every step of which a retry can repeat (see
    ``core.publish``): the replaced partition's marker first, its files into the tombstone and the
    old marker there last, the new files in, the new marker last. ``PartitionTaken`` (after
    removing this commit's own files again) when another owner writes into the partition."""
    part, ours = intent.partition, intent.marker
    _uncommit(out, intent)
    if intent.tombstone is not None:
        _move_replaced_to_tombstone(out, intent, intent.tombstone, log)
        if between_renames is not None:
            between_renames()
    problem = _land_new_files(out, intent)
    if problem is not None:
        _remove_own_files(out, intent)
        raise PartitionTaken(f"{out.url_of(part)}: {problem}")
    out.write_atomic(f"{part}/{COMMIT_MARKER}", ours.to_json())  # the commit: one PUT, last


def _uncommit(out: StateStorage, intent: Intent) -> None:
    """Delete the partition's marker when it is the replaced commit's or this one's, so that the
    partition stops counting as committed before any of its files moves. ``PartitionTaken`` (after
    removing this commit's own files) when another owner committed it, or its marker is unreadable."""
    marker_path = f"{intent.partition}/{COMMIT_MARKER}"
    try:
        current = parse_commit_marker(out.read_bytes(marker_path), out.url_of(marker_path))
    except CorruptState as error:
        raise PartitionTaken(str(error)) from None
    if current is None:
        return
    if current.commit_id not in (intent.replaced, intent.marker.commit_id):
        _remove_own_files(out, intent)
        raise PartitionTaken(f"{out.url_of(intent.partition)} was committed by {current.owner.describe()} meanwhile")
    # The partition stops counting as committed before any of its files moves.
    out.delete_file(marker_path)


def _move_replaced_to_tombstone(out: StateStorage, intent: Intent, tombstone: str, log: Any) -> None:
    """Copy the replaced partition's files into ``tombstone``, the old marker last (the tombstone
    is complete once it holds it), then delete them from the partition."""
    part = intent.partition
    found = out.file_sizes(part)
    old_files = intent.replaced_files or {}
    if out.read_bytes(f"{tombstone}/{COMMIT_MARKER}") is None:
        for name in sorted(old_files):
            if name in found:
                out.copy_file(f"{part}/{name}", f"{tombstone}/{name}")
        # Last: the tombstone is complete once it holds the old marker.
        out.write_atomic(f"{tombstone}/{COMMIT_MARKER}", (intent.replaced_marker or "{}").encode())
    for name in sorted(old_files):
        if name in found:
            out.delete_file(f"{part}/{name}")
    if log:
        log.info("zeta.publish.tombstoned: commit %s -> %s", intent.replaced, out.url_of(tombstone))


def _land_new_files(out: StateStorage, intent: Intent) -> str | None:
    """Copy the files of ``intent``'s manifest the partition lacks from its pending directory; what
    stands in the way of writing the marker (``core.publish.landing_problem``, or a marker that
    appeared meanwhile), or None."""
    part = intent.partition
    found = out.file_sizes(part)
    problem = landing_problem(intent, found)
    if problem is not None:
        return problem
    manifest = intent.marker.manifest or {}
    for name in sorted(manifest):
        if found.get(name) != manifest[name]:
            out.copy_file(f"{intent.pending}/{part}/{name}", f"{part}/{name}")
    # Checked again right before the marker: nothing but this commit's files, and no marker.
    problem = landing_problem(intent, out.file_sizes(part), complete=True)
    if problem is None and out.exists(f"{part}/{COMMIT_MARKER}"):
        problem = "a commit marker appeared meanwhile"
    return problem


def _remove_own_files(out: StateStorage, intent: Intent) -> None:
    """Remove what ``intent``'s commit copied into its partition. Where another owner's files lie
    beside them, only the files named after this commit's attempt tokens (metadata files such as
    ``_SUCCESS`` share names across commits and are left to their owner)."""
    found = out.file_sizes(intent.partition)
    manifest = intent.marker.manifest or {}
    others = landing_problem(intent, found) is not None
    prefixes = tuple(f"{token}-" for token in intent.marker.tokens.values())
    # The replaced partition's files are its own until its tombstone is complete (its marker there).
    moved = intent.tombstone is None or out.read_bytes(f"{intent.tombstone}/{COMMIT_MARKER}") is not None
    keep = set() if moved else set(intent.replaced_files or {})
    for name in sorted(set(manifest) & set(found) - keep):
        if not others or posixpath.basename(name).startswith(prefixes):
            out.delete_file(f"{intent.partition}/{name}")


def recover_interrupted(out: StateStorage, run_key: tuple[str, str], part: str, log: Any = None) -> list[str]:
    """Complete or roll back every commit of this run into ``part`` that a killed try left half
    done (its intent is still in the run's pending directory); the rules applied, in order.

    Only where a rename is not atomic: elsewhere a commit is one rename and nothing is half done."""
    run_pending = run_pending_dir(*run_key)
    applied = []
    for entry in out.list_dir(run_pending):
        pending = f"{run_pending}/{entry}"
        where = f"{pending}/{INTENT_FILE}"
        intent = parse_intent(out.read_bytes(where), out.url_of(where))
        if intent is None or intent.partition != part:
            continue
        current: CommitMarker | CorruptState | None
        try:
            current = parse_commit_marker(out.read_bytes(f"{part}/{COMMIT_MARKER}"), out.url_of(part))
        except CorruptState as error:
            current = error
        decision = recovery_rule(intent, current, out.file_sizes(part), out.file_sizes(f"{pending}/{part}"))
        if log:
            log.info("zeta.publish.%s -> %s: %s", decision.rule, decision.action.value, decision.reason)
        applied.append(decision.rule)
        if decision.action is RecoveryAction.FORWARD:
            try:
                _complete(out, intent, log)
            except PartitionTaken as error:
                if log:
                    log.info("zeta.publish.intent_partition_taken: %s; commit %s given up", error, intent.marker.commit_id)
        elif decision.action is RecoveryAction.BACK:
            _roll_back(out, intent, current)
        _discard_pending(out, pending, run_pending)
    return applied


def publishing_intents(out: StateStorage, part: str) -> list[CommitMarker]:
    """The markers of every intent in the table's pending directories that commits ``part``: who
    is publishing it right now, or was and left it to a retry. Lists every run's pending
    directory of the table: called only for a partition holding files without a marker."""
    found = []
    for dag in out.list_dir(PENDING_DIR):
        for run in out.list_dir(f"{PENDING_DIR}/{dag}"):
            for entry in out.list_dir(f"{PENDING_DIR}/{dag}/{run}"):
                where = f"{PENDING_DIR}/{dag}/{run}/{entry}/{INTENT_FILE}"
                try:
                    intent = parse_intent(out.read_bytes(where), out.url_of(where))
                except CorruptState:
                    continue
                if intent is not None and intent.partition == part:
                    found.append(intent.marker)
    return found


def _roll_back(out: StateStorage, intent: Intent, current: CommitMarker | CorruptState | None) -> None:
    """Give ``intent``'s commit up: remove the files it copied in; a replaced partition whose
    files were not moved yet gets its marker back, one already in its tombstone stays there."""
    _remove_own_files(out, intent)
    if current is not None or intent.tombstone is None:
        return
    old_files = intent.replaced_files or {}
    found = out.file_sizes(intent.partition)
    if out.read_bytes(f"{intent.tombstone}/{COMMIT_MARKER}") is None:
        if all(found.get(name) == size for name, size in old_files.items()) and intent.replaced_marker:
            out.write_atomic(f"{intent.partition}/{COMMIT_MARKER}", intent.replaced_marker.encode())
        return
    for name in sorted(old_files):  # already in the tombstone: finish moving them there
        if name in found:
            out.delete_file(f"{intent.partition}/{name}")
