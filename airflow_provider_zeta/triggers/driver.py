"""ZetaDriverTrigger: waits on a driver's ledger in the triggerer (G1, G6, G8).

Purpose
    Keep a deploy task deferred while its detached Spark driver runs, without a worker slot.

How it works
    Reads the attempt's ledger (in a thread, so the event loop never blocks on storage) whenever
    the ledger file changed — its stat is taken every ``LEDGER_WATCH_TICK`` (0.5 s) in one thread
    hop shared by every driver trigger of the triggerer (``triggers.file_watch``), so a finished driver is
    noticed within about a tick — and otherwise on a backoff from 1 s up to ``poll_interval``
    (``core.pacing``); on an object store the backoff alone paces the reads.
    Each full look is ``observers.look_at_attempt``, the deploy task's own reading of an attempt,
    with the trigger's differences as its arguments: the process is checked by its recorded handle
    only, each mark is counted on from the observation the task handed over, and what is known of
    the attempt comes from the kwargs.
    ``core.ledger.classify_ledger`` turns the ledger into running / succeeded / failed / cancelled
    / lost / missing, and ``core.deploy.trigger_should_fire`` decides whether to wake the task; the
    task then decides what to do with ``core.deploy.decide``.
    Everything it needs is in its kwargs: ``missing_deadline`` (absolute), and the heartbeat
    observation ``seen`` the task handed over (the mark and how long it had been seen unchanged, a
    duration). A triggerer restart re-creates the trigger from them: the silence it had measured
    since the hand-over is not counted again, so a wait can stretch, never shorten. ``timeout_at``
    (the driver's ``job_timeout`` as an absolute moment, from the durable intent time) wakes the
    task once passed.

    Liveness is judged by observation: the driver is lost when its heartbeat mark has not changed
    for ``lost_after``, counted on this process's monotonic clock from the task's hand-over
    (``core.ledger.observe_heartbeat``) — neither the driver's timestamp nor the task host's clock
    is compared with this clock. The event hands the silence back to the task, as a duration. In
    ``wait_for_stop`` mode (the task gave the driver up) a lost driver wakes the task only once it
    has certainly stopped.

    A storage error while reading is retried (backing off) rather than failing the trigger: a
    failed trigger fails the task without stopping its driver. A missing intent file that the task
    wrote (``intent_expected``) means this triggerer does not share ``[zeta] state_root``: the
    event says so at once and the task fails, launching nothing. With ``attempt_deleted`` (the task
    found the attempt of an earlier incarnation deleted by its run's cleanup, on the very root it
    was launched to) the trigger counts on how long it stays deleted, like a silent heartbeat
    (``core.ledger.attempt_deleted_mark``, carried on from the task's count), wakes the task once
    that count reaches the wait (``missing_deadline`` is only a fallback) and writes nothing into
    the attempt, not even on ``on_kill``.

    A succeeded driver ends the task here, without a worker, where ``core.deploy`` allows it
    (``trigger_may_end_task`` when the task deferred, ``trigger_reports_success`` now) and the
    trigger proves itself the one the task waits on (``core.events``): it stores an early copy of the
    report (``core.events.DEPLOY_EARLY_REPORT_XCOM``, which a ready-to-close wait may count a beat
    sooner) and yields ``TaskSuccessEvent`` carrying the report as the task's return value, which
    Airflow stores in the transaction that ends the task and only while the task still waits on this
    trigger — so a triggerer that froze after the proof cannot store an old report over a newer
    try's. Any error on that way wakes the task. (Airflow 3.3.2 stores such an XCom JSON-encoded once more: readers
    decode it with ``core.ready.stored_document``.)

What it does not do
    It takes no other coordination decision itself, and it never cancels a driver when the triggerer
    restarts or hands the trigger to another triggerer (``cleanup``). Only ``on_kill`` — a user
    marking the task failed/success or clearing it, or deleting its run — writes the cancel marker
    and stops the local driver process.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from airflow.triggers.base import BaseTrigger, TaskSuccessEvent, TriggerEvent

from airflow_provider_zeta.airflow_internals import deadlock_imminent_error, run_task_states, xcom_get, xcom_set
from airflow_provider_zeta.core.cleanup import task_state_key
from airflow_provider_zeta.core.deploy import (
    TASK_INSTANCE_GONE,
    ProcessView,
    Timing,
    cancel_on_trigger_kill,
    success_report,
    trigger_reports_success,
    trigger_should_fire,
)
from airflow_provider_zeta.core.events import (
    DEPLOY_DEFERRAL_XCOM,
    DEPLOY_EARLY_REPORT_XCOM,
    STALE_CHECK_EVERY,
    may_end_task_from_trigger,
    trigger_is_stale,
)
from airflow_provider_zeta.core.ledger import (
    ATTEMPT_DELETED_MARK,
    OUTPUT_ENDED_VIEWS,
    CorruptState,
    HeartbeatSeen,
    Ledger,
    LedgerView,
    classify_ledger,
    observe_heartbeat,
)
from airflow_provider_zeta.core.pacing import Pacer
from airflow_provider_zeta.core.paths import CANCEL_MARKER, INTENT_FILE, LEDGER_FILE
from airflow_provider_zeta.crash_points import DRIVER_EVENT, DRIVER_REPORT_PROVEN, DRIVER_SUCCESS_EVENT, crash_when_armed
from airflow_provider_zeta.observers import handle_view, look_at_attempt
from airflow_provider_zeta.processes import ProcessHandle, observer_clock, stop_token_processes
from airflow_provider_zeta.settings import open_state_storage
from airflow_provider_zeta.triggers import LEDGER_WATCH_TICK, wait_for_full_look, wait_out_min_deferral
from airflow_provider_zeta.triggers.file_watch import StatBatch, stat_batch


class ZetaDriverTrigger(BaseTrigger):
    """Wait on one driver's ledger in the triggerer; wake the deploy task when the driver ends, is lost
    or missing, or times out."""

    def __init__(
        self,
        *,
        state_root: str,
        attempt_dir: str,
        token: str,
        lost_after: float,
        poll_interval: float,
        missing_deadline: float,
        handle: dict[str, Any] | None = None,
        heartbeat_interval: float = 5.0,
        not_before: float = 0.0,
        task_key: dict[str, Any] | None = None,
        seen: dict[str, Any] | None = None,
        wait_for_stop: bool = False,
        intent_expected: bool = False,
        driver_output: dict[str, Any] | None = None,
        timeout_at: float | None = None,
        attempt_deleted: bool = False,
        stale_check: bool = True,
        deferral_mark: str | None = None,
        report: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.state_root = state_root
        self.attempt_dir = attempt_dir
        self.token = token
        self.lost_after = float(lost_after)
        self.poll_interval = float(poll_interval)
        self.missing_deadline = float(missing_deadline)
        self.handle = handle
        self.heartbeat_interval = float(heartbeat_interval)
        self.not_before = float(not_before)
        self.task_key = task_key  # dag_id, run_id, task_id, map_index of the deploy task
        self.seen = seen  # HeartbeatSeen as the task handed it over (a duration, re-based on this clock)
        self.wait_for_stop = bool(wait_for_stop)
        self.intent_expected = bool(intent_expected)
        self._seen = HeartbeatSeen.from_value(seen)
        # The driver's output streamed into the task's log (triggers/driver_output.py).
        self.driver_output = driver_output
        # The driver's job_timeout as an absolute moment (core.deploy.job_deadline), or None.
        self.timeout_at = None if timeout_at is None else float(timeout_at)
        # The attempt (of an earlier incarnation) was deleted by its run's cleanup: measure how long
        # it stays so, and never write into it (core.deploy, earlier_incarnation_cleanup_wait).
        self.attempt_deleted = bool(attempt_deleted)
        # Look now and then whether the task still waits deferred (core.events: a trigger run under
        # a reused id). Off for a deferrable=False wait, which runs this loop in the task itself.
        self.stale_check = bool(stale_check)
        # Set when the task may be ended from here once its driver succeeded: the task's XCom
        # DEPLOY_DEFERRAL_XCOM at this deferral (core.events) and the report's source, task id and
        # incarnation (core.deploy.success_report). None: always wake the task.
        self.deferral_mark = deferral_mark
        self.report = report
        self._ledger: Ledger | None = None

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """The trigger's class path and its kwargs."""
        return (
            "airflow_provider_zeta.triggers.driver.ZetaDriverTrigger",
            {
                "state_root": self.state_root,
                "attempt_dir": self.attempt_dir,
                "token": self.token,
                "lost_after": self.lost_after,
                "poll_interval": self.poll_interval,
                "missing_deadline": self.missing_deadline,
                "handle": self.handle,
                "heartbeat_interval": self.heartbeat_interval,
                "not_before": self.not_before,
                "task_key": self.task_key,
                "seen": self.seen,
                "wait_for_stop": self.wait_for_stop,
                "intent_expected": self.intent_expected,
                "driver_output": self.driver_output,
                "timeout_at": self.timeout_at,
                "attempt_deleted": self.attempt_deleted,
                "stale_check": self.stale_check,
                "deferral_mark": self.deferral_mark,
                "report": self.report,
            },
        )

    def _handle(self) -> ProcessHandle | None:
        return ProcessHandle(**self.handle) if self.handle else None

    def _look(self) -> tuple[LedgerView, str, bool, float]:
        """(view, detail, fire?, silence) after one read; the process is checked before the ledger."""
        attempt = open_state_storage(self.state_root).child(self.attempt_dir)
        now = time.time()
        look = look_at_attempt(
            attempt,
            self.token,
            self._handle(),
            check_process=handle_view,  # the recorded handle only: no scan of the process table
            count_mark=self._count_mark,
            intent_written=self.intent_expected,
            deleted_mark=self._deleted_mark() if self.attempt_deleted else None,
            known_deleted=self.attempt_deleted,
        )
        process_gone = look.process is ProcessView.GONE
        silent = 0.0
        if isinstance(look.ledger, CorruptState):
            # The parse error may quote the job-written file, and this text travels in the trigger
            # event (stored in the metadata database): only the error's class goes there. The task
            # reads the ledger again when it resumes and logs the detail, masked, in the task log.
            error = look.ledger
            view, detail = LedgerView.LOST, f"unreadable ledger ({type(error.__cause__ or error).__name__}; the deploy task's log has the detail)"
        else:
            self._ledger = look.ledger
            if look.intent_visible is False:
                return LedgerView.INVISIBLE, f"no intent file at {attempt.url_of(INTENT_FILE)}", True, 0.0
            silent = look.unchanged_for
            view = classify_ledger(look.ledger, now, self.lost_after, process_gone=process_gone, unchanged_for=silent)
            detail = "" if look.ledger is None else f"heartbeat unchanged for {silent:.0f}s by the triggerer's clock"
        fire = self._should_fire(view, now, silent, process_gone)
        if fire and self.timeout_at is not None and now >= self.timeout_at and not self.wait_for_stop:
            detail = f"{detail}; job_timeout reached".lstrip("; ")
        return view, detail, fire, silent

    def _count_mark(self, token: str, mark: str) -> HeartbeatSeen:
        """Count ``mark`` on from the observation this trigger holds (handed over by the task), on
        this process's monotonic clock."""
        clock, reading = observer_clock()
        self._seen = observe_heartbeat(self._seen, token, mark, clock, reading)
        return self._seen

    def _deleted_mark(self) -> str:
        """The mark a deleted attempt is counted under: the task's (it names its incarnation),
        carried on; ``ATTEMPT_DELETED_MARK`` when the task handed over none."""
        seen = self._seen
        return seen.mark if seen is not None and seen.mark.startswith(ATTEMPT_DELETED_MARK) else ATTEMPT_DELETED_MARK

    def _should_fire(self, view: LedgerView, now: float, silent: float, process_gone: bool) -> bool:
        """``core.deploy.trigger_should_fire`` with this trigger's kwargs."""
        return trigger_should_fire(
            view,
            now,
            self.missing_deadline,
            wait_for_stop=self.wait_for_stop,
            unchanged_for=silent,
            stopped_after=Timing(self.lost_after, self.lost_after).stopped_after,
            process_gone=process_gone,
            timeout_at=self.timeout_at,
            attempt_deleted=self.attempt_deleted,
        )

    def _ledger_path(self) -> str | None:
        """The ledger's OS path when the state root is local (NFS included), else None."""
        try:
            return open_state_storage(self.state_root).child(self.attempt_dir).local_path(LEDGER_FILE)
        except Exception:  # storage unreachable for a moment: pace by the backoff alone
            return None

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Watch the ledger and stream the driver's output into the task's log; when the task must know,
        end it with the driver's report (a proven success) or wake it with the driver's view."""
        # A full look (ledger read, process check) on every change of the ledger file, seen by its
        # stat every LEDGER_WATCH_TICK, and otherwise on a backoff up to poll_interval (core.pacing).
        cheap_look = await self._cheap_look()
        pacer = Pacer(
            tick=LEDGER_WATCH_TICK, first=1.0, slowest=self.poll_interval, after_change=self.poll_interval
        )
        output = await self._driver_output()
        next_stale_check = time.monotonic() + STALE_CHECK_EVERY
        while True:
            signature = await wait_for_full_look(pacer, cheap_look)
            view, detail, fire = await self._full_look()
            if output is not None:
                await self._stream_output(output, view, fire)
            if fire:
                assert view is not None
                yield await self._final_event(view, detail or "", output)
                return
            if self.stale_check and self.task_key and time.monotonic() >= next_stale_check:
                next_stale_check = time.monotonic() + STALE_CHECK_EVERY
                stale = await self._stale_event()
                if stale is not None:
                    yield stale
                    return
            pacer.looked(time.monotonic(), signature)

    async def _cheap_look(self) -> Callable[[Any, float], Awaitable[Any]] | None:
        """The ledger file's stat signature, watched in the triggerer's shared stat batch; None when
        the state root is not local (the backoff alone paces the looks)."""
        ledger_path = await asyncio.to_thread(self._ledger_path)
        if not ledger_path:
            return None
        return functools.partial(_ledger_signature, stat_batch(LEDGER_WATCH_TICK), ledger_path)

    async def _driver_output(self) -> Any:
        """The driver's output to stream into the task's log (all its logic is in
        triggers/driver_output.py), its secrets registered; None when not asked for."""
        from airflow_provider_zeta.triggers.driver_output import DriverOutput

        output = DriverOutput.from_kwargs(self.state_root, self.attempt_dir, self.driver_output)
        if output is not None:
            await output.register_secrets(self.log)
        return output

    async def _full_look(self) -> tuple[LedgerView | None, str | None, bool]:
        """(view, detail, fire?) of one full look; (None, None, False) when storage cannot be read."""
        try:
            view, detail, fire, _ = await asyncio.to_thread(self._look)
        except Exception:  # storage unreachable for a moment: keep waiting, never fail the task
            self.log.exception("zeta driver %s: could not read the ledger; retrying", self.token)
            return None, None, False
        return view, detail, fire

    async def _stream_output(self, output: Any, view: LedgerView | None, fire: bool) -> None:
        """Stream the driver's new output into the task's log: all of it once the trigger fires."""
        from airflow_provider_zeta.triggers.driver_output import log_lines

        try:
            if fire and view in OUTPUT_ENDED_VIEWS:  # a shipped log's last chunks come a moment later
                await output.settle()
            log_lines(self.log, self.token, await asyncio.to_thread(output.drain if fire else output.poll))
        except Exception:  # the output is a convenience: never fail the wait over it
            self.log.exception("zeta driver %s: could not read the driver's output", self.token)

    async def _final_event(self, view: LedgerView, detail: str, output: Any) -> TriggerEvent:
        """The event the trigger ends with once it fires: ``TaskSuccessEvent`` with the driver's
        report when this trigger is proven to end the task, else the view that wakes the task."""
        self.log.info("zeta driver %s: %s %s", self.token, view.value, detail)
        event = self._event(view, detail)
        if output is not None:
            event["driver_output_offset"] = output.offset
        run_id = str((self.task_key or {}).get("run_id"))
        report = await self._report_to_end_task_with(view, output)
        if report is not None:
            # The report goes with the event that ends the task without a worker: Airflow
            # stores it as the task's return value in the transaction that ends the task,
            # and only if the task still waits on this trigger. A triggerer that froze after
            # the proof and goes on after the task ran again stores no return value (its
            # early copy names an old deferral, which no wait counts); one killed before the
            # event reaches the database loses the event, and the next triggerer runs this
            # trigger again from its kwargs and reads the same ledger.
            await crash_when_armed(DRIVER_SUCCESS_EVENT, run_id)
            return TaskSuccessEvent(xcoms={"return_value": report})
        # Only a wake-up waits out the minimum deferral: the event that ends the task above sets
        # it to success, which the deferring worker's late exit cannot turn into a retry.
        await wait_out_min_deferral(self.not_before)
        # A triggerer killed now loses the event; the trigger runs again from its kwargs on
        # the next triggerer and reads the same ledger.
        await crash_when_armed(DRIVER_EVENT, run_id)
        return TriggerEvent(event)

    async def _stale_event(self) -> TriggerEvent | None:
        """The event that wakes the holder of this trigger's id when the task no longer waits on
        this trigger (``core.events.trigger_is_stale``); None while it does."""
        state = await self._task_state()
        if not trigger_is_stale(state):
            return None
        # Only a reused id keeps this trigger running: wake its holder, whose own code
        # sees the event is not its own. The driver is left alone (the task may be
        # deciding about it right now); the run's cleanup or the sweep stops strays.
        self.log.info("zeta driver %s: the task no longer waits on this trigger (%s): waking the holder of its id", self.token, state)
        return TriggerEvent({"token": self.token, "view": "stale", "detail": "", "seen": None, "task_key": self.task_key})

    async def _report_to_end_task_with(self, view: LedgerView, output: Any) -> dict[str, Any] | None:
        """The task's report once this trigger is proven to be the one to end it; None (the task is
        woken instead) on anything unproven and on any error: a storage or API error here must not
        fail the trigger, and so the task."""
        try:
            if not await self._may_end_task(view, output):
                return None
            await crash_when_armed(DRIVER_REPORT_PROVEN, str((self.task_key or {}).get("run_id")))
            report = self._report()
            await asyncio.to_thread(self._store_early_report, report)
            return report
        except Exception:
            self.log.exception("zeta driver %s: could not end the task from here; waking it", self.token)
            return None

    async def _may_end_task(self, view: LedgerView, output: Any) -> bool:
        """Whether to end the task from here with its driver's result: the rule is
        ``core.deploy.trigger_reports_success``; the proof that this is the trigger the task waits
        on now, ``core.events.may_end_task_from_trigger``. Anything unproven wakes the task."""
        from asgiref.sync import sync_to_async

        ledger = self._ledger
        if self.report is None or self.deferral_mark is None or not self.task_key or ledger is None:
            return False
        complete = output is None or await asyncio.to_thread(output.reached_end)
        if not trigger_reports_success(
            view,
            ledger.incarnation,
            int(self.report["incarnation"]),
            wait_for_stop=self.wait_for_stop,
            attempt_deleted=self.attempt_deleted,
            output_complete=complete,
        ):
            return False
        state = await self._task_state()
        latest = await sync_to_async(self._latest_mark)()
        if may_end_task_from_trigger(state, latest, self.deferral_mark):
            return True
        self.log.info("zeta driver %s: not proven to be the task's current trigger: waking it instead of ending it", self.token)
        return False

    def _latest_mark(self) -> object:
        assert self.task_key
        try:
            key = self.task_key
            return xcom_get(
                key=DEPLOY_DEFERRAL_XCOM, dag_id=key["dag_id"], task_id=key["task_id"], run_id=key["run_id"], map_index=int(key.get("map_index", -1))
            )
        except Exception:  # unreadable: no proof either way
            self.log.info("zeta driver %s: could not read the task's deferral mark", self.token, exc_info=True)
            return None

    def _store_early_report(self, report: dict[str, Any]) -> None:
        """The report where a ready-to-close wait may count it before the task reads ``success``
        (``core.events.DEPLOY_EARLY_REPORT_XCOM``), never over the task's return value."""
        assert self.task_key
        key = self.task_key
        xcom_set(
            key=DEPLOY_EARLY_REPORT_XCOM,
            value=report,
            dag_id=key["dag_id"],
            task_id=key["task_id"],
            run_id=key["run_id"],
            map_index=int(key.get("map_index", -1)),
        )

    def _report(self) -> dict[str, Any]:
        """The task's return value, as ``already_succeeded`` would return it."""
        assert self.report is not None and self._ledger is not None
        value = success_report(
            self._ledger.result(), str(self.report["source"]), str(self.report["task_id"]), int(self.report["incarnation"]), self.deferral_mark
        )
        self.log.info("zeta driver %s: succeeded; its report goes with the event that ends the task from the triggerer", self.token)
        return value

    def _event(self, view: LedgerView, detail: str) -> dict[str, Any]:
        """What wakes the task: the view, and the silence measured here, re-based to this moment."""
        seen = self._seen
        if seen is not None:
            seen = observe_heartbeat(seen, seen.token, seen.mark, *observer_clock())
        return {
            "token": self.token,
            "view": view.value,
            "detail": detail,
            "seen": None if seen is None else seen.to_value(),
            # Whom the event is for (core.events): Airflow may run this trigger under a reused id.
            "task_key": self.task_key,
        }

    async def on_kill(self) -> None:
        """Cancel the driver when a user acted on the task; leave it running when the task is still
        deferred (the trigger moved to another triggerer)."""
        # A user acted on the task (mark failed/success, clear): the driver must not outlive it.
        # But Airflow also lands here when a recovered triggerer drops a trigger that was moved
        # to another triggerer: then the task is still deferred and the driver must live on.
        state = await self._task_state()
        if not cancel_on_trigger_kill(state):
            self.log.info("zeta driver %s: trigger killed but task state is %r: driver left running", self.token, state)
            return
        await asyncio.to_thread(self.cancel_driver)

    async def _task_state(self) -> str | None:
        from asgiref.sync import sync_to_async

        return await sync_to_async(read_task_state)(self.task_key, self.log, self.token)

    def cancel_driver(self) -> None:
        """Stop this trigger's driver for good (its task was ended by a user action): cancel
        marker, then a signal to its local processes. Also called by a ``deferrable=False`` task's
        ``on_kill``, which runs this loop in its worker."""
        attempt = open_state_storage(self.state_root).child(self.attempt_dir)
        if self.attempt_deleted or (self.intent_expected and not attempt.exists("")):
            # The launch wrote its intent file into this directory before the driver started, so
            # the directory is gone only because the delayed cleanup deleted it (the driver then
            # stops on its own). A marker would re-create a directory no cleanup deletes again.
            self.log.info("zeta driver %s: attempt directory already cleaned up; no cancel marker", self.token)
        else:
            attempt.write_atomic(CANCEL_MARKER, b"cancelled: the task was ended by a user action\n")
        # The driver polls its marker every heartbeat: give it that long to stop cleanly (and record
        # "cancelled"), then signal it. on_kill has a bounded time ([triggerer] on_kill_timeout).
        stop_token_processes(self.token, self._handle(), grace_s=5, self_exit_s=self.heartbeat_interval + 2)
        self.log.info("zeta driver %s: cancel marker written (task ended by a user action)", self.token)


async def _ledger_signature(watch: StatBatch, path: str, known: Any, timeout: float) -> Any:
    """The ledger file's stat signature once the batch sees it differ from ``known``, or after
    ``timeout`` (the backoff's next full look); ``None`` when the stat hangs (an NFS server gone):
    that must not hold back the backoff's looks.

    ``asyncio.timeout``, not ``asyncio.wait_for``: on Python 3.11 ``wait_for`` returns the result
    instead of raising when its task is cancelled in the loop pass in which that result arrives
    (CPython gh-86296). The triggerer's cancel of this trigger (moved to another triggerer,
    removed) was then lost, and the trigger ran on until it fired.
    """
    try:
        async with asyncio.timeout(timeout + 4 * LEDGER_WATCH_TICK):
            return await watch.changed(path, known, timeout)
    except TimeoutError:
        return None


def read_task_state(task_key: dict[str, Any] | None, log: Any, token: str) -> str | None:
    """The current state of the task instance ``task_key`` names, through the Task SDK (from the
    triggerer or from the task's own process): ``"none"`` for a cleared one, ``TASK_INSTANCE_GONE``
    when its run was deleted, ``None`` when it cannot be read."""
    if not task_key:
        return "unknown-task"  # kwargs of an older version: behave as before (cancel)
    # A BaseException: the Task SDK raises it when this runs in a signal handler (a worker's
    # on_kill) that interrupted the task's own request to its supervisor.
    deadlock_imminent = deadlock_imminent_error()

    try:
        states = run_task_states(dag_id=task_key["dag_id"], task_ids=[task_key["task_id"]], run_ids=[task_key["run_id"]])
        by_task = states.get(task_key["run_id"], {})
        map_index = int(task_key.get("map_index", -1))
        task_id = task_state_key(task_key["task_id"], map_index)
        if task_id not in by_task:
            # The answer came, without this task instance: its run was deleted. Nothing will
            # wait on the driver again, and a run re-created under this id must not find it.
            return TASK_INSTANCE_GONE
        # A cleared task instance has no state yet: that is an answer ("none"), not "unknown".
        return by_task[task_id] or "none"
    except (Exception, deadlock_imminent):
        log.exception("zeta driver %s: could not read the task's state", token)
        return None

