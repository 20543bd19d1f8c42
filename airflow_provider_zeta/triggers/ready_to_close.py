"""ReadyToCloseTrigger: the ready-to-close wait, in the triggerer (G2).

Runs the same evaluation as ``ReadyToCloseSensor`` (``observers.RunObserver`` +
``core.ready.evaluate``): soon after a source's driver ends — ``RunObserver.ended_drivers``, taken
every ``READY_WATCH_TICK`` (0.5 s; less often beyond 100 unreported sources), shows a new terminal
ledger; the API is then asked every ``READY_CHASE_EVERY`` (0.25 s) for ``READY_CHASE_FOR`` (5 s),
while the deploy task that reports it ends — and otherwise on a backoff from 1 s up to
``poll_interval`` (``core.pacing``). A source whose driver this trigger saw end and whose task is
still deferred has its stored report and its deploy task's latest deferral mark read too: its
trigger stores the report before it ends the task, and such a report counts once it was stored
under that latest deferral, is of this incarnation, and verifies
(``core.ready.REPORTED_WHILE_DEFERRED``). So this trigger usually yields in the same
triggerer beat as the last deploy trigger, instead of a beat after the deploy task's success
(Airflow 3.3's trigger runner hands events over once a second). Its kwargs hold the absolute ``deadline`` and the
reports the sensor already verified (``verified``), so neither a poll nor a triggerer restart reads those again; a poll costs
one task-state call plus one XCom and one ledger read per source that finished since the previous
poll (and, for a deferred source whose driver it saw end, two XCom reads and a ledger read at each
look until its task succeeds). It logs only what changed (``Evaluation.progress_from``): the log grows with the changes,
not with changes × sources.

When every source is ready it writes the sensor's decision record
(``core.incarnation.SENSOR_DECISION_XCOM``), looks at the sources once more (one no longer ready:
the record is taken back and the wait goes on), then ends the sensor from here, without a worker:
``TaskSuccessEvent(xcoms={"return_value": ready set})``. Airflow 3.3.2 stores such an XCom
JSON-encoded once more, so the completed point reads it back as JSON text and decodes it
(``core.ready.parse_ready_set``). On any other verdict it wakes the sensor with the verdict and its
message: the sensor fails with it, or judges again in its worker where only the task's own context
knows the current incarnation (``corrupt``).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from airflow.triggers.base import BaseTrigger, TaskSuccessEvent, TriggerEvent

from airflow_provider_zeta.airflow_internals import xcom_get, xcom_set
from airflow_provider_zeta.core.events import STALE_CHECK_EVERY, may_end_task_from_trigger, task_key, trigger_is_stale
from airflow_provider_zeta.core.pacing import Pacer, listing_interval
from airflow_provider_zeta.core.ready import Verdict
from airflow_provider_zeta.crash_points import READY_SUCCESS_EVENT, crash_when_armed
from airflow_provider_zeta.triggers import wait_for_full_look, wait_out_min_deferral

#: How often the trigger lists which drivers of its unreported sources ended (a listing and a
#: stat per unreported source; one trigger per run, not per source) ...
READY_WATCH_TICK = 0.5
#: ... but no more than this many listings a second on average: every 0.5 s up to 100 unreported
#: sources, every 5 s at 1000 (on NFS a listing is a round trip).
READY_LISTINGS_PER_SECOND = 200.0
#: After a driver of an unreported source ended, the trigger asks Airflow this often for
#: ``READY_CHASE_FOR`` seconds, then backs off: the driver's trigger stores the report within about
#: a second (or its task resumes on a worker and returns it a few seconds later). Asking soon lets
#: this trigger end the sensor in the same triggerer beat as the deploy task ends.
READY_CHASE_EVERY = 0.25
READY_CHASE_FOR = 5.0
#: The sensor's XCom naming its latest deferral (core.events), written just before it defers.
READY_DEFERRAL_XCOM = "zeta_ready_deferral"


class ReadyToCloseTrigger(BaseTrigger):
    """Wait in the triggerer until every source of a run is ready, then end the sensor with the ready
    set; wake it on any other verdict."""

    def __init__(
        self,
        *,
        dag_id: str,
        run_id: str,
        sources: dict[str, str],
        incarnation: int,
        deadline: float,
        poll_interval: float,
        state_root: str,
        not_before: float = 0.0,
        verified: dict[str, Any] | None = None,
        recorded: list[str] | None = None,
        task_id: str | None = None,
        deferral_mark: str | None = None,
        map_index: int | None = -1,
        publish_incarnation: int | None = None,
    ) -> None:
        super().__init__()
        self.dag_id = dag_id
        self.run_id = run_id
        self.sources = dict(sources)
        self.incarnation = int(incarnation)
        # What the ready set carries (core.incarnation.publish_incarnation); a trigger deferred by
        # an earlier version has none and publishes under clear_number, as that version did.
        self.publish_incarnation = self.incarnation if publish_incarnation is None else int(publish_incarnation)
        self.deadline = float(deadline)
        self.poll_interval = float(poll_interval)
        self.state_root = state_root
        self.not_before = float(not_before)
        self.verified = dict(verified or {})
        # Kept for the kwargs of triggers deferred by an earlier version; no longer used.
        self.recorded = sorted(recorded or ())
        # The sensor's own task id (None from an earlier version): events name their task instance.
        self.task_id = task_id
        # The sensor's XCom READY_DEFERRAL_XCOM at this deferral (core.events): proves this trigger
        # is the one the sensor waits on before it ends the sensor itself.
        self.deferral_mark = deferral_mark
        self.map_index = -1 if map_index is None else int(map_index)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """The trigger's class path and its kwargs."""
        return (
            "airflow_provider_zeta.triggers.ready_to_close.ReadyToCloseTrigger",
            {
                "dag_id": self.dag_id,
                "run_id": self.run_id,
                "sources": self.sources,
                "incarnation": self.incarnation,
                "deadline": self.deadline,
                "poll_interval": self.poll_interval,
                "state_root": self.state_root,
                "not_before": self.not_before,
                "verified": self.verified,
                "recorded": self.recorded,
                "task_id": self.task_id,
                "deferral_mark": self.deferral_mark,
                "map_index": self.map_index,
                "publish_incarnation": self.publish_incarnation,
            },
        )

    def ready_set(self, evaluation: Any) -> dict[str, Any]:
        """The ready set this trigger ends the sensor with: under the sensor's publish incarnation."""
        return evaluation.ready_set(self.publish_incarnation)

    def _event(self, evaluation: Any) -> dict[str, Any]:
        event = {"verdict": evaluation.verdict.value, "message": evaluation.message}
        if self.task_id is not None:
            event["task_key"] = task_key(self.dag_id, self.run_id, self.task_id, self.map_index)
        return event

    async def _own_wait(self) -> tuple[str | None, object, str | None]:
        """(the sensor's state, its latest deferral mark, this trigger's mark), for core.events."""
        from asgiref.sync import sync_to_async

        from airflow_provider_zeta.triggers.driver import read_task_state

        own = task_key(self.dag_id, self.run_id, self.task_id or "", self.map_index)
        state = await sync_to_async(read_task_state)(own, self.log, "ready-to-close")
        return state, await sync_to_async(self._latest_mark)(), self.deferral_mark

    def _latest_mark(self) -> object:
        try:
            return xcom_get(key=READY_DEFERRAL_XCOM, dag_id=self.dag_id, task_id=self.task_id or "", run_id=self.run_id, map_index=self.map_index)
        except Exception:  # unreadable: no proof either way
            self.log.info("zeta.ready: could not read the sensor's deferral mark", exc_info=True)
            return None

    async def _decide(self, evaluation: Any, look: Callable[[], Awaitable[Any]]) -> Any:
        """All ready: write the sensor's decision record, then look once more before ending it
        (``core.incarnation.SENSOR_DECISION_XCOM``: a deploy task cleared before that look is seen
        not ready; one cleared after it reads the record and refuses to re-run). Returns the look's
        evaluation (a decision it does not confirm is taken back), or None when the record cannot
        be written (a trigger of an earlier version, or the API failing: look again later)."""
        from asgiref.sync import sync_to_async

        from airflow_provider_zeta.core.incarnation import SENSOR_DECISION_XCOM, sensor_decision

        if self.task_id is None:  # deferred by an earlier version: it knows no task to write to
            return evaluation

        def write(value: Any) -> None:
            xcom_set(key=SENSOR_DECISION_XCOM, value=value, dag_id=self.dag_id, task_id=self.task_id or "", run_id=self.run_id, map_index=self.map_index)

        decision = sensor_decision(evaluation.ready)
        try:
            await sync_to_async(write)(decision)
        except Exception:
            self.log.warning("zeta.ready: could not write the sensor's decision record; looking again", exc_info=True)
            return None
        again = await look()
        if again.verdict is Verdict.ALL_READY and sensor_decision(again.ready) == decision:
            return again
        self.log.info("zeta.ready.changed_while_deciding: %s", again.message)
        try:
            await sync_to_async(write)(sensor_decision({}))
        except Exception:
            self.log.warning("zeta.ready: could not take the sensor's decision record back", exc_info=True)
        return again if again.verdict is not Verdict.ALL_READY else None

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Evaluate the sources when a driver ends and on a backoff; end the sensor with the ready set
        once confirmed, or wake it with the verdict."""
        from asgiref.sync import sync_to_async

        from airflow_provider_zeta.observers import RunObserver

        observer = RunObserver(self.dag_id, self.run_id, self.sources, self.state_root, verified=self.verified)
        look = functools.partial(self._look, sync_to_async(observer.observe), observer)
        # After a driver ends, its deploy task reports a moment later (its trigger stores the
        # report and ends it, or it resumes on a worker): ask every READY_CHASE_EVERY for
        # READY_CHASE_FOR (at most 20 calls per ended driver), then back off.
        pacer = Pacer(
            tick=READY_WATCH_TICK, first=1.0, slowest=self.poll_interval, after_change=READY_CHASE_EVERY, chase_for=READY_CHASE_FOR
        )
        cheap_look = await self._cheap_look(observer)
        previous = None
        next_stale_check = time.monotonic() + STALE_CHECK_EVERY
        while True:
            signature = await wait_for_full_look(pacer, cheap_look)
            evaluation = await look()
            change = evaluation.progress_from(previous)
            if change is not None:
                self.log.info("zeta.ready.%s: %s", evaluation.verdict.value, change)
            previous = evaluation
            if evaluation.verdict is Verdict.ALL_READY:
                event, changed = await self._end_all_ready(evaluation, look)
                if event is not None:
                    yield event
                    return
                if changed is None:  # not decided: look again
                    pacer.looked(time.monotonic(), signature)
                    continue
                evaluation = previous = changed  # a source changed while deciding: judged as any look
            if evaluation.verdict is not Verdict.WAITING:
                await wait_out_min_deferral(self.not_before)
                yield TriggerEvent(self._event(evaluation))
                return
            if self.task_id is not None and time.monotonic() >= next_stale_check:
                next_stale_check = time.monotonic() + STALE_CHECK_EVERY
                stale = await self._stale_event(evaluation)
                if stale is not None:
                    yield stale
                    return
            pacer.looked(time.monotonic(), signature)

    async def _look(self, observe: Callable[..., Awaitable[Any]], observer: Any) -> Any:
        """One evaluation of the sources (``RunObserver.observe``)."""
        # Only ledgers seen turning terminal: a report counts before its task's success only
        # for an attempt seen ending (core.ready.REPORTED_WHILE_DEFERRED), and an old terminal
        # ledger (a cleared run's earlier attempt) costs no reads at every look.
        return await observe(self.incarnation, self.deadline, frozenset(observer.seen_ending))

    async def _cheap_look(self, observer: Any) -> Callable[[Any, float], Awaitable[Any]] | None:
        """What the pacer looks at between full looks: the drivers that ended (``_EndedDrivers``);
        None when the ledgers cannot be watched (the backoff alone paces the looks)."""
        try:
            if await asyncio.to_thread(observer.ledgers_watchable):
                return _EndedDrivers(observer)
        except Exception:  # storage unreachable for a moment: the backoff alone paces the looks
            self.log.exception("zeta.ready: could not open the state root; polling on the backoff")
        return None

    async def _end_all_ready(self, evaluation: Any, look: Callable[[], Awaitable[Any]]) -> tuple[TriggerEvent | None, Any]:
        """Every source ready: the event that ends the sensor with the ready set once the decision is
        confirmed (``_decide``), or wakes it when this trigger is not proven to be the one it waits
        on. Without an event: None when not decided (look again), else the evaluation of a source
        that changed while deciding."""
        # The sensor's work is done: end it from here, its ready set pushed as its return
        # value, without a worker (the completed point starts one task start sooner). The
        # evaluation is this moment's: a source cleared before it is not counted ready.
        # A triggerer killed now loses the event before it is stored; the trigger then
        # runs again from its kwargs on the next triggerer and finds the same ready set.
        await crash_when_armed(READY_SUCCESS_EVENT, self.run_id)
        if not (self.task_id is None or may_end_task_from_trigger(*await self._own_wait())):
            # Not proven to be the trigger the sensor waits on: maybe a stale one whose id
            # Airflow gave to another deferral (core.events). Wake whoever holds the id; the
            # sensor's own code checks whom the event is for.
            self.log.info("zeta.ready: not proven to be the sensor's current trigger: waking it instead of ending it")
            return await self._wake_all_ready(evaluation, look)
        confirmed = await self._decide(evaluation, look)
        if confirmed is not None and confirmed.verdict is Verdict.ALL_READY:
            return TaskSuccessEvent(xcoms={"return_value": self.ready_set(confirmed)}), None
        return None, confirmed

    async def _wake_all_ready(self, evaluation: Any, look: Callable[[], Awaitable[Any]]) -> tuple[TriggerEvent | None, Any]:
        """The event that wakes the sensor with the ready set, past the minimum deferral (only a
        wake-up needs it: an event that ends the sensor sets it to success, which its deferring
        worker's late exit cannot turn into a retry); a source that changed during that wait is
        judged as any look."""
        if time.time() < self.not_before:
            await wait_out_min_deferral(self.not_before)
            # A source may have been cleared meanwhile (alone: its downstream not with it).
            evaluation = await look()
            if evaluation.verdict is not Verdict.ALL_READY:
                return None, evaluation
        return TriggerEvent({**self._event(evaluation), "ready_set": self.ready_set(evaluation)}), None

    async def _stale_event(self, evaluation: Any) -> TriggerEvent | None:
        """The event that wakes the holder of the sensor's trigger id when the sensor no longer
        waits on this trigger (``core.events.trigger_is_stale``); None while it does."""
        own_state, latest_mark, own_mark = await self._own_wait()
        if trigger_is_stale(own_state, latest_mark, own_mark):
            self.log.info("zeta.ready: the sensor no longer waits on this trigger (%s): waking the holder of its id", own_state)
            return TriggerEvent({**self._event(evaluation), "verdict": Verdict.WAITING.value, "stale": True})
        return None


class _EndedDrivers:
    """The pacer's cheap look (``core.pacing``): every terminal ledger of the sources' drivers seen
    so far, a signature that only grows."""

    def __init__(self, observer: Any) -> None:
        self.observer = observer
        self.ended: set[tuple[str, str]] = set()  # every terminal ledger seen: the signature only grows
        self.listed_at = float("-inf")

    async def __call__(self, known: Any, timeout: float) -> Any:
        # One trigger per run (not per source): a listing of the unreported sources every
        # READY_WATCH_TICK, slower for many (core.pacing.listing_interval); a chase look due
        # sooner waits only until then and lists nothing.
        interval = listing_interval(self.observer.unreported, READY_WATCH_TICK, READY_LISTINGS_PER_SECOND)
        until_listing = self.listed_at + interval - time.monotonic()
        if self.listed_at > float("-inf") and until_listing > timeout:
            await asyncio.sleep(max(timeout, 0.05))
            return frozenset(self.ended)
        await asyncio.sleep(max(until_listing, 0.0))
        found = await asyncio.to_thread(self.observer.ended_drivers)
        self.listed_at = time.monotonic()
        if found is None:
            return None
        self.ended.update(found)
        return frozenset(self.ended)
