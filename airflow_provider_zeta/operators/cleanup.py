"""DelayedCleanupOperator: keep a run's staging and replaced partitions for a window, then delete them (G4, G5).

Purpose
    After a pipeline run is done, successful or not, its staging data (every attempt's directory:
    ledger, output, driver log) and the partitions it replaced (tombstones) are kept for a
    retention window — late readers and late callbacks still find them — and then deleted, once,
    even if the scheduler, the triggerer or the worker restarts in between. Drivers of the run
    still alive are stopped first (G8).

How it works
    The rules are in ``core/cleanup.py``; this operator is the adapter. It is an Airflow *teardown*:
    it runs when all its upstream tasks are done, whatever their state, and Airflow leaves it out
    when it decides the run's state — a run whose sources failed still ends ``failed``, a run that
    published ends ``success``.

    1. ``decide_start`` over the record in its task state store (kept across retries and clears)
       and the record file of its incarnation: ``open_window`` (no record yet), ``resume_window``
       / ``resume_from_file`` (a record exists: its original due time stands), ``already_cleaned``,
       or ``corrupt_record`` / ``future_record`` (fail, delete nothing).
    2. ``open_window``: stop the run's drivers that have not ended, list the run's attempt
       directories (of its upstream tasks) and its pending/tombstone directories, adopt the pending
       records of its own earlier incarnations, and write the record: file first, then the store.
    3. Defer on Airflow's ``DateTimeTrigger`` until the due time (absolute). Within 12 s of it,
       wait in the task instead (a trigger firing that soon makes Airflow retry the task).
    4. At the due time: write to the task state store (a cleared or reset try is refused here,
       before it deletes anything), delete exactly the recorded paths, mark the record cleaned,
       delete the record files.

What it does not do
    It never deletes a published partition, nor anything outside the run's own directories
    (``core.cleanup.check_paths`` refuses such a record). If the cleanup task never runs (the run
    was marked failed by hand, the task was removed), the sweep (``ZetaSweepOperator``) does it.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import TYPE_CHECKING, Any, Sequence

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_zeta.core.cleanup import (
    RECORD_KEY,
    CleanupRecord,
    RecordStatus,
    StartAction,
    decide_resume,
    decide_start,
    new_record,
    parse_cleanup_record,
    record_from_store,
    record_store_values,
    wait_until,
)
from airflow_provider_zeta.core.ledger import CorruptState
from airflow_provider_zeta.core.paths import cleanup_record_path, run_attempts_dir
from airflow_provider_zeta.janitor import (
    carry_out,
    delete_record_files,
    driver_views,
    find_leftovers,
    forget_run,
    read_records,
    stop_drivers,
    write_record_file,
)
from airflow_provider_zeta.settings import ZetaSettings, open_state_storage

if TYPE_CHECKING:
    from airflow.sdk import Context

#: Written just before deleting: the execution API refuses it from a try that was cleared or reset.
FENCE_KEY = "zeta_cleanup_deleting"


class DelayedCleanupOperator(BaseOperator):
    """Delete a run's staging and tombstones after a retention window; a teardown task.

    :param retention: seconds to keep the data after the run's other tasks are done (templated);
        default ``[zeta] cleanup_retention``.
    :param task_ids: tasks whose attempt directories this cleanup owns; default its upstream tasks.
    :param output_roots: output tables whose pending directories and tombstones of this run it
        deletes (templated); default every output table the run registered.
    """

    template_fields = ("retention", "output_roots")
    ui_color = "#d3d3d3"

    def __init__(
        self,
        *,
        retention: float | str | None = None,
        task_ids: Sequence[str] | None = None,
        output_roots: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> None:
        # A retry resumes the same window from the record (the due time stands), so retrying is
        # always safe; it also absorbs Airflow's spurious "executor reports success but the task is
        # queued" failure when a trigger wakes the task within seconds of its deferral.
        kwargs.setdefault("retries", 3)
        kwargs.setdefault("retry_delay", dt.timedelta(seconds=5))
        super().__init__(**kwargs)
        if retention is not None and not isinstance(retention, str):
            _seconds(retention, self.task_id)  # a template is checked once rendered
        self.retention = retention
        self.task_ids = list(task_ids) if task_ids is not None else None
        self.output_roots = list(output_roots) if output_roots is not None else None
        self.as_teardown()

    # -- entry points

    def execute(self, context: Context) -> Any:
        state, retention = self._state_and_retention()
        dag_id, run_id, incarnation = self._owner(context)
        stored = self._stored(context)
        file_path = cleanup_record_path(dag_id, run_id, self.task_id, incarnation)
        try:
            on_file = parse_cleanup_record(state.read_bytes(file_path), state.url_of(file_path))
        except CorruptState as error:
            on_file = error
        decision = decide_start(incarnation, stored, on_file, _max_tries(context))
        self.log.info("zeta.cleanup.%s: %s", decision.rule, decision.reason)
        if decision.action is StartAction.FAIL:
            raise AirflowFailException(f"[zeta.cleanup.{decision.rule}] {decision.reason}")
        if decision.action is StartAction.ALREADY_CLEANED:
            assert decision.record is not None
            self._finish(state, decision.record)  # a crash may have come between cleaned and the files
            return self._summary(decision.record, deleted=None)
        if decision.action is StartAction.RESUME:
            record = decision.record
            assert record is not None
            if stored != record:
                self._store(context, record)
        else:
            record = self._open_window(context, state, dag_id, run_id, incarnation, retention, stored)
        return self._wait_or_clean(context, state, record, retention)

    def execute_complete(self, context: Context, event: Any = None) -> Any:
        state, retention = self._state_and_retention()
        _, _, incarnation = self._owner(context)
        decision = decide_resume(incarnation, self._stored(context), _max_tries(context))
        self.log.info("zeta.cleanup.%s: %s", decision.rule, decision.reason)
        if decision.action is StartAction.FAIL:
            raise AirflowFailException(f"[zeta.cleanup.{decision.rule}] {decision.reason}")
        assert decision.record is not None
        if decision.action is StartAction.ALREADY_CLEANED:
            self._finish(state, decision.record)
            return self._summary(decision.record, deleted=None)
        return self._wait_or_clean(context, state, decision.record, retention)

    def failure_window(self, name: str, context: Context) -> None:
        """Hook for tests: called at ``after_record_file``, ``before_delete``, ``after_delete``."""

    # -- steps

    def _open_window(self, context, state, dag_id, run_id, incarnation, retention, stored) -> CleanupRecord:
        leftovers, attempts = find_leftovers(
            state, dag_id, run_id, open_state_storage, task_ids=self._owned_tasks(), roots=self.output_roots
        )
        live = [d for d in driver_views(state, attempts) if d.live]
        stopped = stop_drivers(state, live) if live else []
        if stopped:
            self.log.info("zeta.cleanup: stopped %d driver(s) still alive for the ended run: %s", len(stopped), stopped)
        older = self._own_older_records(state, dag_id, run_id, incarnation, stored)
        record = new_record(
            dag_id, run_id, incarnation, self.task_id, time.time(), retention, leftovers, older, stopped,
            task_max_tries=_max_tries(context),
        )
        write_record_file(state, record)  # 1. the file: the sweep finds it even if this task never returns
        self.failure_window("after_record_file", context)
        self._store(context, record)  # 2. the task's own copy
        self.log.info(
            "zeta.cleanup: record of incarnation %d: %d paths, adopted %s, due in %.0fs",
            incarnation,
            record.paths_count,
            list(record.adopted),
            record.due_at - time.time(),
        )
        return record

    def _own_older_records(self, state, dag_id, run_id, incarnation, stored) -> list[CleanupRecord]:
        older: dict[int, CleanupRecord] = {}
        for record in read_records(state, dag_id, run_id):
            if isinstance(record, CorruptState):
                self.log.warning("zeta.cleanup: %s (left for the sweep, which reports it)", record)
            elif record.owner == self.task_id and record.incarnation is not None and record.incarnation < incarnation:
                older[record.incarnation] = record
        if isinstance(stored, CleanupRecord) and stored.incarnation is not None and stored.incarnation < incarnation:
            older.setdefault(stored.incarnation, stored)
        return [older[i] for i in sorted(older)]

    def _wait_or_clean(self, context, state, record: CleanupRecord, retention: float) -> Any:
        from airflow_provider_zeta.triggers import MIN_DEFERRAL_SECONDS

        now = time.time()
        moment = wait_until(record, now, retention)
        if moment is not None and moment - now >= MIN_DEFERRAL_SECONDS:
            from airflow.providers.standard.triggers.temporal import DateTimeTrigger

            self.log.info("zeta.cleanup: waiting until %s", dt.datetime.fromtimestamp(moment, dt.timezone.utc))
            self.defer(
                trigger=DateTimeTrigger(moment=dt.datetime.fromtimestamp(moment, dt.timezone.utc)),
                method_name="execute_complete",
            )
        if moment is not None:
            time.sleep(max(0.0, moment - time.time()))
        return self._clean(context, state, record)

    def _clean(self, context, state, record: CleanupRecord) -> dict[str, Any]:
        store = context["task_state_store"]

        def fence() -> None:
            store.set(FENCE_KEY, {"incarnation": record.incarnation, "at": time.time()})

        self.failure_window("before_delete", context)
        deleted = carry_out(state, record, open_state_storage, before_delete=fence)
        done = record.with_changes(status=RecordStatus.CLEANED, cleaned_at=time.time())
        self._store(context, done)
        self.failure_window("after_delete", context)
        self._finish(state, done)
        self.log.info("zeta.cleanup.cleaned: %d of %d paths deleted", deleted, record.paths_count)
        return self._summary(done, deleted)

    def _finish(self, state, record: CleanupRecord) -> None:
        """After the deletion (and again on a re-run that finds it done): the record files of this
        window and of the windows it adopted go, and with nothing else left, the run's bookkeeping."""
        remaining = []
        for other in read_records(state, record.dag_id, record.run_id):
            if isinstance(other, CleanupRecord) and other.owner == record.owner and (
                other.incarnation == record.incarnation or other.incarnation in record.adopted
            ):
                delete_record_files(state, [other])
            else:
                remaining.append(other)
        if not remaining and not state.list_dir(run_attempts_dir(record.dag_id, record.run_id)):
            forget_run(state, record.dag_id, record.run_id)

    # -- helpers

    def _state_and_retention(self):
        settings = ZetaSettings.load()
        retention = settings.cleanup_retention if self.retention in (None, "") else _seconds(self.retention, self.task_id)
        return open_state_storage(settings.state_root), retention

    def _owner(self, context: Context) -> tuple[str, str, int]:
        ti = context["ti"]
        return ti.dag_id, ti.run_id, int(getattr(context["dag_run"], "clear_number", 0) or 0)

    def _owned_tasks(self) -> list[str]:
        return list(self.task_ids) if self.task_ids is not None else sorted(self.upstream_task_ids)

    def _stored(self, context: Context) -> CleanupRecord | CorruptState | None:
        store = context["task_state_store"]
        try:
            return record_from_store(
                store.get(RECORD_KEY), store.get, f"in the task state store of {self.task_id} ({RECORD_KEY}*)"
            )
        except CorruptState as error:
            return error

    @staticmethod
    def _store(context: Context, record: CleanupRecord) -> None:
        store = context["task_state_store"]
        for key, value in record_store_values(record):
            store.set(key, value)

    @staticmethod
    def _summary(record: CleanupRecord, deleted: int | None) -> dict[str, Any]:
        return {
            "status": record.status.value,
            "incarnation": record.incarnation,
            "due_at": record.due_at,
            "cleaned_at": record.cleaned_at,
            "paths": record.paths_count,
            "deleted": deleted,
            "adopted": list(record.adopted),
            "stopped_drivers": list(record.stopped_drivers),
        }


def _seconds(value: Any, task_id: str) -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = -1.0
    if seconds < 0 or seconds != seconds:
        raise ValueError(f"{task_id}: 'retention' must be a number of seconds >= 0, got {value!r}")
    return seconds


def _max_tries(context: Context) -> int | None:
    value = getattr(context["ti"], "max_tries", None)
    return None if value is None else int(value)
