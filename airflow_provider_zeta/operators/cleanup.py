"""The delayed cleanup (G4, G5): the run records what to delete and when; the cleanup DAG deletes it then.

Purpose
    After a pipeline run is done, successful or not, its staging data (every attempt's directory:
    ledger, output, driver log) and the partitions it replaced (tombstones) are kept for a
    retention window — late readers and late callbacks still find them — and then deleted, once,
    at the due time, even if the scheduler, the triggerer or a worker restarts in between. Drivers
    of the run still alive are stopped first (G8). The window never holds the run open: the run
    ends ``success`` or ``failed`` as soon as its work is done.

How it works
    Two operators; the rules are in ``core/cleanup.py``.

    ``DelayedCleanupOperator`` is the pipeline's last task, an Airflow *teardown* (it runs
    whatever its upstream tasks' states, and Airflow leaves it out when it decides the run's state:
    a run whose sources failed still ends ``failed``). It does not wait:

    1. ``decide_start`` over the record in its task state store and the record file of its
       incarnation: ``open_window`` (no record yet), ``resume_window`` / ``resume_from_file`` (a
       record exists: its due time stands), ``already_cleaned``, or ``corrupt_record`` /
       ``future_record`` (fail, delete nothing).
    2. ``open_window``: stop the run's drivers that have not ended, list the run's attempt
       directories (of its upstream tasks) and its pending/tombstone directories, adopt the pending
       records of its own earlier incarnations, and write the record — due time as an absolute
       moment, paths, owner incarnation: its unclaimed waiter entry (which a run of the cleanup
       DAG takes), the file (the durable intent), then the store.
    3. Emit an event of ``CLEANUP_ASSET`` naming the record, and end.

    ``CarryOutCleanupsOperator`` is the task of the cleanup DAG (``maintenance.zeta_cleanup_dag``),
    scheduled on ``CLEANUP_ASSET``. Each pending record has one waiter, a run of the cleanup DAG,
    recorded by where its waiter entry lies (``core.cleanup``, "one waiter per record"): the
    pipeline's cleanup task writes the entry unclaimed just before the record file, and a run
    becomes the waiter by moving it into its own folder. At its first look a run takes the
    unclaimed entries, its own (a retry), and those of waiters whose run is gone. Taking every
    unclaimed entry, not only the records its events name, is not a convenience: Airflow queues an
    asset-triggered DAG in one row per (asset, DAG), and an event that arrives while that row exists
    is folded into it; the run then created lists only the events up to the row's creation, and no
    later run lists the folded one (seen in the chaos run: a backfill's record, announced in the
    same second as another run's, was named by no run). Its entry was written before its event,
    hence before the next run of the cleanup DAG starts, so that run takes it.

    A run reads only its own records, and of those only the ones that are due
    (``core.cleanup.schedule_carry_out``); a record another live waiter holds costs it nothing.

    * defers on ``triggers.cleanup_wait.CleanupWaitTrigger`` until its soonest due time (absolute:
      a triggerer restart re-creates the same wait; within 12 s it waits in the task instead); the
      trigger lists the unclaimed entries every ``rescan_interval`` (600 s) and wakes the task
      early only when there is one, which it then takes;
    * at the due time asks Airflow for the run's state and incarnation and follows
      ``core.cleanup.decide_due``: ``due`` / ``run_gone`` (delete exactly the recorded paths,
      idempotently, then the record files), ``adopted`` (a newer incarnation's cleanup took the
      paths over: only the file goes), ``newer_incarnation_active`` (look again after
      ``recheck_interval``), ``newer_incarnation_ended`` (a newer incarnation read these attempts
      and its own cleanup was not cleared: the old paths, its staging and the tombstone it made get
      a new record with a full window, waited for in turn).

    Progress lives on storage (a carried-out record's file and entry are gone), so a retry, a worker
    kill or a scheduler restart resumes where it was: nothing is deleted twice and no window restarts.
    The crash windows are named (``failure_window``): ``after_record_file`` (the record file
    written, not yet stored nor announced), ``before_delete`` and ``after_delete`` (around the
    deletion of a due record); each is tested with a SIGKILL there (tests/test_cleanup_windows.py).

What it does not do
    It never deletes a published partition, nor anything outside the run's own directories
    (``core.cleanup.check_paths`` refuses such a record). Without a cleanup DAG deployed, or when a
    run's cleanup task never ran (the run was marked failed by hand, the task was removed), the
    sweep (``ZetaSweepOperator``) carries the records out once they are past due, a sweep period
    late. The check of the run's incarnation and the deletion are not one atomic step: a run
    cleared while its cleanup deletes (the deletion takes as long as its paths do, minutes on an
    object store) can find an attempt gone; its completed
    point then fails on the missing attempt (``unverified_attempt``) and publishes nothing.
"""

from __future__ import annotations

import datetime as dt
import posixpath
import time
import uuid
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import Asset, BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_zeta.core.cleanup import (
    CLEANUP_DAG_ID,
    DEFAULT_RESCAN_INTERVAL,
    RECORD_KEY,
    RUN_NONCE_KEY,
    UNCLAIMED_WAITER,
    WAITER_INFO_FILE,
    WAITERS_DIR,
    CleanupRecord,
    DueAction,
    RecordKey,
    RecordStatus,
    StartAction,
    cleanup_dag_problem,
    cleared_since,
    decide_due,
    decide_start,
    new_record,
    parse_cleanup_record,
    parse_waiter_entry,
    parse_waiter_info,
    record_from_store,
    record_store_values,
    schedule_carry_out,
    waiter_entry,
    waiter_entry_name,
    waiter_folder_name,
    waiter_gone,
    waiter_info,
)
from airflow_provider_zeta.core.durations import (
    Duration,
    check_duration_unless_template,
    duration_or_default,
    duration_seconds,
)
from airflow_provider_zeta.core.ledger import CorruptState
from airflow_provider_zeta.core.paths import cleanup_record_path
from airflow_provider_zeta.janitor import (
    carry_out,
    delete_record_files,
    driver_views,
    find_leftovers,
    finish_record,
    read_records,
    stop_drivers,
    write_record_file,
)
from airflow_provider_zeta.settings import ZetaSettings, open_state_storage
from airflow_provider_zeta.storage import register_run
from airflow_provider_zeta.task_state import set_kept

if TYPE_CHECKING:
    from airflow.sdk import Context

#: Every pipeline cleanup emits an event of this Asset when it records a window; the cleanup DAG
#: (``maintenance.zeta_cleanup_dag``) is scheduled on it. The event's ``extra["zeta_cleanup"]``
#: names the record: dag_id, run_id, owner (the cleanup task id), incarnation, due_at.
CLEANUP_ASSET = Asset(name="zeta_cleanup_recorded", uri="zeta://cleanup/recorded")
EVENT_KEY = "zeta_cleanup"
#: The id ``maintenance.zeta_cleanup_dag`` gives the cleanup DAG; a pipeline's cleanup task warns when
#: no DAG of this id is deployed, or it is paused.
DEFAULT_CLEANUP_DAG_ID = CLEANUP_DAG_ID


class DelayedCleanupOperator(BaseOperator):
    """Record the run's cleanup (what to delete, when) and end; a teardown task.

    :param retention: how long to keep the data after the run's other tasks are done, a
        ``timedelta`` or seconds (templated);
        default ``[zeta] cleanup_retention``.
    :param task_ids: tasks whose attempt directories this cleanup owns; default its upstream tasks.
    :param output_roots: output tables whose pending directories and tombstones of this run it
        deletes (templated); default every output table the run registered.
    :param cleanup_dag_id: the cleanup DAG that carries the record out (default ``zeta_cleanup``, the
        id ``maintenance.zeta_cleanup_dag`` gives it): the task warns in its log
        (``zeta.cleanup.cleanup_dag_missing`` / ``cleanup_dag_paused``) when it is not deployed or
        paused. ``None``: no check.
    :param pipeline_id: the pipeline whose pending directories and tombstones it records (by the
        pipeline their commit markers name, as ``CompletedPointOperator(pipeline_id=)``); default
        its TaskGroup id, or the whole run outside a group.
    """

    template_fields = ("retention", "output_roots")
    ui_color = "#d3d3d3"

    def __init__(
        self,
        *,
        retention: Duration | None = None,
        task_ids: Sequence[str] | None = None,
        output_roots: Sequence[str] | None = None,
        cleanup_dag_id: str | None = DEFAULT_CLEANUP_DAG_ID,
        pipeline_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        # A retry takes up the record it wrote (the due time stands), so retrying is always safe.
        kwargs.setdefault("retries", 3)
        kwargs.setdefault("retry_delay", dt.timedelta(seconds=5))
        # The cleanup DAG is scheduled on this Asset: it is added to any outlets the user gives.
        outlets = list(kwargs.pop("outlets", None) or [])
        kwargs["outlets"] = outlets if CLEANUP_ASSET in outlets else [*outlets, CLEANUP_ASSET]
        super().__init__(**kwargs)
        check_duration_unless_template(retention, f"{self.task_id}: 'retention'", allow_zero=True)
        self.retention = retention
        self.task_ids = list(task_ids) if task_ids is not None else None
        self.output_roots = list(output_roots) if output_roots is not None else None
        self.cleanup_dag_id = cleanup_dag_id
        self.pipeline_id = pipeline_id
        self.as_teardown()

    def execute(self, context: Context) -> Any:
        """Record what to delete and when (or take up the record this incarnation already wrote),
        announce it to the cleanup DAG and end; fail when a record cannot be trusted."""
        state, retention = self._state_and_retention()
        dag_id, run_id, incarnation = self._owner(context)
        stored = self._stored(context)
        run_nonce = self._run_nonce(context)
        file_path = cleanup_record_path(dag_id, run_id, self.task_id, incarnation)
        on_file: CleanupRecord | CorruptState | None
        try:
            on_file = parse_cleanup_record(state.read_bytes(file_path), state.url_of(file_path))
        except CorruptState as error:
            on_file = error
        decision = decide_start(incarnation, stored, on_file, run_nonce)
        self.log.info("zeta.cleanup.%s: %s", decision.rule, decision.reason)
        if decision.action is StartAction.FAIL:
            raise AirflowFailException(f"[zeta.cleanup.{decision.rule}] {decision.reason}")
        if decision.action is StartAction.ALREADY_CLEANED:
            assert decision.record is not None
            return _summary(decision.record)
        if decision.action is StartAction.RESUME:
            record = decision.record
            assert record is not None
            if stored != record:
                self._store(context, record)
        else:
            # A foreign file (a deleted run of this id) is replaced by the new record: its paths go in.
            foreign = [on_file] if decision.rule == "foreign_record_file" and isinstance(on_file, CleanupRecord) else []
            record = self._open_window(context, state, dag_id, run_id, incarnation, retention, stored, run_nonce, foreign)
        self._announce(context, record)
        self._warn_unless_carried_out(context)
        return _summary(record)

    def execute_complete(self, context: Context, event: Any = None) -> Any:
        """A try deferred by an earlier version (which waited inside the run): hand over and end."""
        _, _, incarnation = self._owner(context)
        stored = self._stored(context)
        if not isinstance(stored, CleanupRecord) or stored.incarnation != incarnation:
            raise AirflowFailException(
                f"[zeta.cleanup.missing_record] no cleanup record of incarnation {incarnation} in the task "
                "state store after the wait; nothing was deleted (the sweep deletes the run's data once it has ended)"
            )
        self.log.info("zeta.cleanup.handed_over: the cleanup DAG carries out the record (due %.0f)", stored.due_at)
        self._announce(context, stored)
        return _summary(stored)

    def failure_window(self, name: str, context: Context) -> None:
        """Hook for tests: called at ``after_record_file``."""

    def _warn_unless_carried_out(self, context: Context) -> None:
        """Say so in the log when no cleanup DAG will carry the record out (``cleanup_dag_problem``).

        Asked through the Task SDK (``ti.get_dag``: the DAG's row, paused or not); a task has no ORM.
        """
        if not self.cleanup_dag_id:
            return
        found: bool | None
        paused: bool | None = None
        try:
            paused = bool(context["ti"].get_dag(self.cleanup_dag_id).is_paused)
            found = True
        except Exception as error:  # the Task SDK answers a missing DAG with an error naming not_found
            found = False if "not_found" in str(error) or "404" in str(error) else None
            if found is None:
                self.log.warning("zeta.cleanup: asking Airflow for DAG %r failed: %s", self.cleanup_dag_id, error)
        problem = cleanup_dag_problem(self.cleanup_dag_id, found, paused)
        if problem is not None:
            self.log.warning("zeta.cleanup.%s: %s", *problem)

    def _open_window(
        self, context, state, dag_id, run_id, incarnation, retention, stored, run_nonce=None, foreign=()
    ) -> CleanupRecord:
        leftovers, attempts = find_leftovers(
            state,
            dag_id,
            run_id,
            open_state_storage,
            task_ids=self._owned_tasks(),
            roots=self.output_roots,
            pipeline_id=self._pipeline_id(),
        )
        live = [d for d in driver_views(state, attempts) if d.live]
        stopped = stop_drivers(state, live) if live else []
        if stopped:
            self.log.info("zeta.cleanup: stopped %d driver(s) still alive for the ended run", len(stopped))
        older = [*self._own_older_records(state, dag_id, run_id, incarnation, stored), *foreign]
        record = new_record(
            dag_id,
            run_id,
            incarnation,
            self.task_id,
            time.time(),
            retention,
            leftovers,
            older,
            stopped,
            run_nonce=run_nonce,
            pipeline_id=self._pipeline_id(),
            tasks=self._owned_tasks(),
        )
        # The cleanup DAG and the sweep list runs by their run.json, which a deploy writes when it
        # launches: a run that launched nothing (marked failed first) has none without this.
        register_run(state, dag_id, run_id)
        # 0. its unclaimed waiter entry, which a run of the cleanup DAG takes (first: a record file
        # never exists without one; an entry whose record never came is dropped at its due time)
        enqueue_waiter_entry(state, record)
        write_record_file(state, record)  # 1. the file: the durable intent, found by the cleanup DAG and the sweep
        self.failure_window("after_record_file", context)
        self._store(context, record)  # 2. the task's own copy (a retry resumes from it)
        self.log.info(
            "zeta.cleanup: record of incarnation %d: %d paths, adopted %s, due at %s",
            incarnation,
            record.paths_count,
            list(record.adopted),
            dt.datetime.fromtimestamp(record.due_at, dt.UTC).isoformat(),
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

    def _announce(self, context: Context, record: CleanupRecord) -> None:
        """Name the record in the Asset event the cleanup DAG is scheduled on."""
        if CLEANUP_ASSET not in (self.outlets or []):
            return
        context["outlet_events"][CLEANUP_ASSET].extra = {
            EVENT_KEY: {
                "dag_id": record.dag_id,
                "run_id": record.run_id,
                "owner": record.owner,
                "incarnation": record.incarnation,
                "due_at": record.due_at,
            }
        }

    def _state_and_retention(self):
        settings = ZetaSettings.load()
        name = f"{self.task_id}: 'retention'"
        retention = duration_or_default(self.retention, settings.cleanup_retention, name, allow_zero=True)
        return open_state_storage(settings.state_root), retention

    def _owner(self, context: Context) -> tuple[str, str, int]:
        ti = context["ti"]
        return ti.dag_id, ti.run_id, int(getattr(context["dag_run"], "clear_number", 0) or 0)

    def _pipeline_id(self) -> str | None:
        """The pipeline this cleanup belongs to, as the completed point names it in its commit
        markers: ``pipeline_id``, or the task's TaskGroup id; ``None`` outside a group (the whole run)."""
        if self.pipeline_id:
            return self.pipeline_id
        group = getattr(self, "task_group", None)
        return group.group_id if group is not None and group.group_id else None

    def _owned_tasks(self) -> list[str]:
        return list(self.task_ids) if self.task_ids is not None else sorted(self.upstream_task_ids)

    @staticmethod
    def _run_nonce(context: Context) -> str:
        """This run's nonce (``CleanupRecord.run_nonce``): kept in the task state store, which lives
        and dies with the run and survives retries and clears; written before any record."""
        store = context["task_state_store"]
        nonce = store.get(RUN_NONCE_KEY)
        if isinstance(nonce, str) and nonce:
            return nonce
        nonce = uuid.uuid4().hex
        set_kept(store, RUN_NONCE_KEY, nonce)
        return nonce

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
            set_kept(store, key, value)


class CarryOutCleanupsOperator(BaseOperator):
    """The cleanup DAG's task: be the one waiter of the records it takes, and carry each out at its
    due time (G4, G5).

    :param recheck_interval: time between looks at a run whose newer incarnation is still active, a
        ``timedelta`` or seconds.
    :param rescan_interval: while the task waits, how often its trigger looks for records nobody
        waits for (unclaimed waiter entries), a ``timedelta`` or seconds (default
        ``core.cleanup.DEFAULT_RESCAN_INTERVAL``, 600 s): a record whose announcement no run of the
        cleanup DAG could take is taken at most this late.
    """

    ui_color = "#d3d3d3"

    def __init__(
        self, *, recheck_interval: Duration = 15.0, rescan_interval: Duration = DEFAULT_RESCAN_INTERVAL, **kwargs: Any
    ) -> None:
        kwargs.setdefault("retries", 3)
        kwargs.setdefault("retry_delay", dt.timedelta(seconds=5))
        super().__init__(**kwargs)
        self.recheck_interval = duration_seconds(recheck_interval, f"{self.task_id}: 'recheck_interval'")
        self.rescan_interval = duration_seconds(rescan_interval, f"{self.task_id}: 'rescan_interval'")

    def execute(self, context: Context) -> dict[str, Any]:
        """First look: take this run's waiter entries, the unclaimed ones and those of waiters gone,
        carry out what is due, then wait for the rest."""
        # First look (a retry too): this run's own waiter entries (a retry finds those it took),
        # the unclaimed ones and those of waiters gone. The triggering events only wake the DAG:
        # the records they name are among the unclaimed (see the module docstring for the events
        # Airflow folds away).
        named = _named_records_of(context)
        if named:
            self.log.info("zeta.cleanup: %d record(s) announced by this run's events", len(named))
        return self._work(context, waiting=None, take_unclaimed=True)

    def resume(
        self,
        context: Context,
        event: Any = None,
        waiting: Sequence[Sequence[Any]] | None = None,
        renewed: Sequence[Sequence[Any]] = (),
    ) -> dict[str, Any]:
        """Back from a wait (``triggers.cleanup_wait``). ``waiting``: the records this run is the
        waiter of, with their due times (``None``: a wait deferred by an earlier version, which
        kept ``renewed`` only: a first look). Woken for an unclaimed entry: it takes them."""
        if waiting is None:
            return self._work(context, waiting=None, take_unclaimed=True)
        woke_for_unclaimed = isinstance(event, dict) and event.get("woke_for") == "unclaimed"
        return self._work(context, waiting={_key(item): float(item[4]) for item in waiting}, take_unclaimed=woke_for_unclaimed)

    def failure_window(self, name: str, context: Context, record: CleanupRecord | None = None) -> None:
        """Hook for tests: called at ``before_delete`` and ``after_delete`` with the record being
        carried out (the run's cleanup DAG task handles every record it waits for, a test arms one)."""

    def _work(self, context: Context, waiting: dict[RecordKey, float] | None, take_unclaimed: bool) -> dict[str, Any]:
        """One look: take what nobody waits for (``_scan``), carry out what is due
        (``core.cleanup.schedule_carry_out``), then wait: in the task for a moment under
        ``MIN_DEFERRAL_SECONDS``, deferred otherwise."""
        from airflow_provider_zeta.triggers import MIN_DEFERRAL_SECONDS
        from airflow_provider_zeta.triggers.cleanup_wait import CleanupWaitTrigger

        state_root = ZetaSettings.load().state_root
        state = open_state_storage(state_root)
        ti = context["ti"]
        folder = f"{WAITERS_DIR}/{waiter_folder_name(ti.dag_id, ti.run_id)}"
        first_look = waiting is None
        waiting = dict(waiting or {})
        not_before: dict[RecordKey, float] = {}
        handled: set[tuple[Any, ...]] = set()
        summary: dict[str, Any] = {"records": 0, "carried_out": [], "renewed": [], "dropped": [], "deleted": 0}
        if first_look or take_unclaimed:
            taken = self._scan(state, ti, folder, first_look)
            waiting.update(taken)
            summary["records"] = len(taken)
        while True:
            plan = schedule_carry_out(waiting, time.time(), not_before)
            for key in plan.due:
                self._look_at(context, state, folder, key, waiting, not_before, handled, summary)
            if plan.due:
                continue
            if plan.look_again_at is None:
                _delete_quietly(state, folder)  # nothing held: the folder goes (a retry writes it again)
                self.log.info("zeta.cleanup: nothing left to wait for: %s", summary)
                return summary
            moment = plan.look_again_at
            if moment - time.time() >= MIN_DEFERRAL_SECONDS:
                self.log.info(
                    "zeta.cleanup.waiting: until %s (the waiter of %d record(s))",
                    dt.datetime.fromtimestamp(moment, dt.UTC).isoformat(),
                    len(waiting),
                )
                self.defer(
                    trigger=CleanupWaitTrigger(moment, state_root, self.rescan_interval),
                    method_name="resume",
                    kwargs={"waiting": [[*key, due_at] for key, due_at in sorted(waiting.items())]},
                )
            time.sleep(max(0.0, moment - time.time()))

    def _scan(self, state: Any, ti: Any, folder: str, first_look: bool) -> dict[RecordKey, float]:
        """Become the waiter of the records nobody waits for: move the unclaimed entries into this
        run's folder; at the first look also those of waiters gone (``waiter_gone``), and read this
        run's own (a retry, or a run cleared and run again, holds them still).

        Costs one listing of ``_unclaimed/`` and one call per entry taken; at the first look also
        one listing of the waiters, one read per waiter and one Airflow request for all of them
        (then one per waiter only when some are gone). Never anything per record another live
        waiter holds."""
        state.write_atomic(f"{folder}/{WAITER_INFO_FILE}", waiter_info(ti.dag_id, ti.run_id))
        sources = [UNCLAIMED_WAITER]
        if first_look:
            sources += self._gone_waiter_folders(state, ti, own=posixpath.basename(folder))
        names = _take_waiter_entries(state, sources, folder)
        if first_look:
            names = [n for n in state.list_dir(folder) if n.endswith(".json") and n != WAITER_INFO_FILE]
        taken: dict[RecordKey, float] = {}
        for name in names:
            entry = parse_waiter_entry(state.read_bytes(f"{folder}/{name}"))
            if entry is None:
                self.log.warning("zeta.cleanup: waiter entry %s is unreadable; dropped", state.url_of(f"{folder}/{name}"))
                _delete_quietly(state, f"{folder}/{name}")
            else:
                taken[entry[0]] = entry[1]
        return taken

    def _gone_waiter_folders(self, state: Any, ti: Any, own: str) -> list[str]:
        """The folders of the other waiters whose run is gone (``waiter_gone``), each logged."""
        others: dict[str, tuple[str, str]] = {}
        for name in state.list_dir(WAITERS_DIR):
            if name not in (own, UNCLAIMED_WAITER):
                who = parse_waiter_info(state.read_bytes(f"{WAITERS_DIR}/{name}/{WAITER_INFO_FILE}"))
                if who is not None:  # else a waiter's folder being created: not ours to judge
                    others[name] = who
        gone = self._gone_waiters(ti, others)
        for name in gone:
            self.log.info("zeta.cleanup.waiter_gone: %s %s no longer waits; its records are taken", *others[name])
        return gone

    @staticmethod
    def _gone_waiters(ti: Any, others: dict[str, tuple[str, str]]) -> list[str]:
        """The folders of the waiters whose run is gone (``waiter_gone``): one request per DAG for
        how many are queued or running; each one is asked about only when some are not."""
        from airflow_provider_zeta.operators.sweep import run_status

        by_dag: dict[str, list[str]] = {}
        for name, (dag_id, _) in others.items():
            by_dag.setdefault(dag_id, []).append(name)
        gone = []
        for dag_id, names in by_dag.items():
            run_ids = [others[n][1] for n in names]
            if ti.get_dr_count(dag_id=dag_id, run_ids=run_ids, states=["queued", "running"]) >= len(set(run_ids)):
                continue
            for name in names:
                status = run_status(ti, *others[name])
                if waiter_gone(status.state if status is not None else None):
                    gone.append(name)
        return sorted(gone)

    def _look_at(
        self,
        context: Context,
        state: Any,
        folder: str,
        key: RecordKey,
        waiting: dict[RecordKey, float],
        not_before: dict[RecordKey, float],
        handled: set[tuple[Any, ...]],
        summary: dict[str, Any],
    ) -> None:
        """Decide one due record by ``decide_due`` and do it; only its run's records are read.
        ``waiting`` and ``not_before`` (the in-memory schedule) and this run's waiter entries follow
        what was done."""
        from airflow_provider_zeta.operators.sweep import run_status

        dag_id, run_id, owner, incarnation = key
        ti = context["ti"]
        valid = [r for r in read_records(state, dag_id, run_id) if isinstance(r, CleanupRecord)]
        record = next(
            (r for r in valid if r.owner == owner and r.incarnation == incarnation and r.status is RecordStatus.PENDING),
            None,
        )

        def settled(*keys: RecordKey) -> None:
            _settle(state, folder, waiting, not_before, keys)

        if record is None:
            settled(key)  # carried out meanwhile (by the sweep), or adopted and finished
            return
        now = time.time()
        if record.due_at > now:
            waiting[key] = record.due_at  # rewritten since the entry: its own due time stands
            return
        record_key = (dag_id, run_id, owner, record.incarnation, record.created_at)
        if record_key in handled:
            # Carried out by this task already, yet its file is back or never went:
            # leave it to the sweep rather than loop.
            self.log.warning("zeta.cleanup: record %s is still pending after it was carried out", record_key)
            settled(key)
            return
        status = run_status(ti, dag_id, run_id)
        uncovered, _ = find_leftovers(
            state,
            dag_id,
            run_id,
            open_state_storage,
            task_ids=record.tasks or None,
            pipeline_id=record.pipeline_id,
        )
        uncovered = uncovered.minus([r for r in valid if r.status is RecordStatus.PENDING])
        decision = decide_due(record, status, valid, uncovered, now, self.recheck_interval)
        label = f"{dag_id} {run_id} {owner} incarnation {record.incarnation}"
        self.log.info("zeta.cleanup.%s: %s: %s", decision.rule, label, decision.reason)
        if decision.action is DueAction.CARRY_OUT:
            deleted = self._carry_out(context, state, key, record, label)
            if deleted is not None:
                summary["deleted"] += deleted
                handled.add(record_key)
                settled(key, *[(dag_id, run_id, owner, i) for i in record.adopted])
                summary["carried_out"].append(label)
                self.log.info("zeta.cleanup.cleaned: %s, %s late", label, f"{time.time() - record.due_at:.1f}s")
        elif decision.action is DueAction.DROP:
            delete_record_files(state, [record])
            settled(key)
            summary["dropped"].append(label)
        elif decision.action is DueAction.RENEW:
            assert decision.record is not None
            renewal = decision.record
            renewed_key = (dag_id, run_id, owner, int(renewal.incarnation or 0))
            # This run waits for the renewal: its entry first, then the record, then the files it replaces.
            state.write_atomic(f"{folder}/{waiter_entry_name(renewed_key)}", waiter_entry(renewed_key, renewal.due_at))
            write_record_file(state, renewal)
            replaced = [r for r in valid if r.owner == owner and r.incarnation in renewal.adopted]
            delete_record_files(state, replaced)
            settled(key, *[(dag_id, run_id, owner, int(r.incarnation)) for r in replaced if r.incarnation is not None])
            waiting[renewed_key] = renewal.due_at
            summary["renewed"].append(label)
        elif decision.until is not None:
            not_before[key] = decision.until

    def _carry_out(self, context: Context, state: Any, key: RecordKey, record: CleanupRecord, label: str) -> int | None:
        """Carry out a due record (``DueAction.CARRY_OUT``) and finish it: how many paths were
        deleted, or None when its run was cleared a moment ago and nothing was done."""
        from airflow_provider_zeta.operators.sweep import run_status

        # Asked again just before deleting: a run cleared a moment ago is left to its new
        # incarnation (this record is then renewed or adopted at the next look at it).
        again = run_status(context["ti"], key[0], key[1])
        if cleared_since(record, again):
            self.log.info("zeta.cleanup.cleared_meanwhile: %s", label)
            return None  # still pending and due: looked at again at once
        self.failure_window("before_delete", context, record)
        deleted = carry_out(state, record, open_state_storage)
        self.failure_window("after_delete", context, record)
        finish_record(state, record)  # its file and the files of the records it adopted
        return deleted


def enqueue_waiter_entry(state: Any, record: CleanupRecord) -> None:
    """The unclaimed waiter entry of a pipeline cleanup task's record (``core.cleanup`` "one waiter
    per record"), written before the record file: a run of the cleanup DAG takes it and waits."""
    if record.incarnation is None:
        return  # the sweep's own records: carried out by the sweep
    key = (record.dag_id, record.run_id, record.owner, int(record.incarnation))
    state.write_atomic(f"{WAITERS_DIR}/{UNCLAIMED_WAITER}/{waiter_entry_name(key)}", waiter_entry(key, record.due_at))


def _take_waiter_entries(state: Any, sources: list[str], folder: str) -> list[str]:
    """Move the waiter entries of the ``sources`` waiter folders into ``folder`` (this run's); the
    names of those moved. Any folder but ``_unclaimed/`` is deleted once emptied."""
    names: list[str] = []
    for waiter in sources:
        source = f"{WAITERS_DIR}/{waiter}"
        for name in state.list_dir(source):
            if not name.endswith(".json") or name == WAITER_INFO_FILE:
                continue
            try:
                state.move(f"{source}/{name}", f"{folder}/{name}")
            except FileNotFoundError:
                continue  # another run took it first: it is that run's to wait for
            names.append(name)
        if waiter != UNCLAIMED_WAITER:
            _delete_quietly(state, source)
    return names


def _settle(
    state: Any, folder: str, waiting: dict[RecordKey, float], not_before: dict[RecordKey, float], keys: Iterable[RecordKey]
) -> None:
    """Records this run no longer waits for: out of the in-memory schedule, their waiter entries deleted."""
    for done in keys:
        if waiting.pop(done, None) is not None:
            _delete_quietly(state, f"{folder}/{waiter_entry_name(done)}")
        not_before.pop(done, None)

def _key(item: Sequence[Any]) -> RecordKey:
    return (str(item[0]), str(item[1]), str(item[2]), int(item[3]))


def _delete_quietly(state: Any, relative: str) -> None:
    """Delete a file or folder; one another run removed at the same moment is gone all the same."""
    try:
        state.delete_tree(relative)
    except FileNotFoundError:
        pass


def _named_records_of(context: Context) -> set[tuple[str, str, str, int]]:
    return set(_named_records(_triggering_events(context)))


def _triggering_events(context: Context) -> Iterable[Any]:
    events = context.get("triggering_asset_events") or {}
    for key in list(events):
        yield from events[key]


def _named_records(events: Iterable[Any]) -> Iterable[tuple[str, str, str, int]]:
    for event in events:
        named = (getattr(event, "extra", None) or {}).get(EVENT_KEY)
        if isinstance(named, dict) and all(isinstance(named.get(k), str) for k in ("dag_id", "run_id", "owner")):
            if isinstance(named.get("incarnation"), int):
                yield named["dag_id"], named["run_id"], named["owner"], named["incarnation"]


def _summary(record: CleanupRecord) -> dict[str, Any]:
    return {
        "status": record.status.value,
        "incarnation": record.incarnation,
        "due_at": record.due_at,
        "cleaned_at": record.cleaned_at,
        "paths": record.paths_count,
        "adopted": list(record.adopted),
        "stopped_drivers": len(record.stopped_drivers),
    }
