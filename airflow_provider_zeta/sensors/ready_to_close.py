"""ReadyToCloseSensor: wait until every source of the run reported ready-to-close (G2).

Purpose
    The completed point may publish only when every expected source of the run has staged its
    output. This sensor waits for that, durably and without a worker slot, and outputs the
    consolidated ready set — the completed point's only input.

How it works
    Each source's deploy task reports by returning its report (XCom ``return_value``): one durable
    write per source when it finishes, independent of the number of sources. An evaluation reads
    the states of all source tasks in one call, then the report of each source that finished since
    the last look, and checks each newly seen attempt's ledger (its token must be a succeeded
    attempt whose output is the reported one). ``core.ready.evaluate`` decides: all ready, waiting,
    a source failed with no retries left (fail now, naming it), a corrupt report (fail now), or the
    deadline passed (fail, naming who is missing).

    A report whose attempt cannot be verified (its ledger is gone, unreadable, not ``succeeded``,
    another output or row count) fails the wait at once (``unverifiable_report``), naming the source
    and the token: waiting cannot repair it.

    The deadline is absolute: fixed at the first try and kept in the task state store, so retries,
    restarts and re-deferrals never stretch it. While waiting, the task defers on
    ``ReadyToCloseTrigger``, which runs the same evaluation. The reports the sensor already
    verified travel in the trigger's kwargs (up to ``MAX_VERIFIED_IN_TRIGGER``, so the trigger row
    stays bounded; the trigger reads any others once when it starts), so it does not read them
    again; the trigger then reads only sources that finish and logs only what changed. When all are
    ready — judged by an evaluation of that moment, so a source cleared before it does not count —
    the trigger ends the sensor itself (``TaskSuccessEvent``) with the ready set as its return
    value: no worker starts for the end of the wait. On any other verdict it wakes the sensor,
    which fails with the trigger's message without reading anything again (or, for ``corrupt``,
    judges afresh: only its own context knows the current incarnation). The sources ready at the
    sensor's own evaluation are recorded in its task state store (one key per source).

    Before it ends with a ready set, the sensor (or its trigger) writes its decision record, the
    XCom ``core.incarnation.SENSOR_DECISION_XCOM`` (deploy task id -> attempt token), then looks at
    the sources once more: one no longer ready is waited for (the record is taken back); a deploy
    task cleared after that look reads the record and refuses to re-run
    (``core.incarnation.cleared_without_downstream``), its success being in flight.

    The ready set's incarnation is the run's ``clear_number`` plus this sensor's count of its own
    clears (``core.incarnation.clear_epoch``, kept under ``CLEAR_EPOCH_KEY``), never derived from
    ``retries``.

    The return value reads back as a dict when the sensor ended on a worker and as its JSON text
    when the trigger ended it (Airflow 3.3.2 stores an XCom pushed by a trigger event JSON-encoded
    once more); ``core.ready.parse_ready_set`` takes either.

Cost
    The first evaluation of a try reads every finished source once (1 task-state call, one XCom
    and one ledger read per finished source, one task-state-store write per ready source). Each
    trigger poll: 1 task-state call plus one XCom and one ledger read per *newly* finished source
    (and two XCom reads and a ledger read per deferred source whose driver the trigger saw end,
    until its task succeeds).
    Each evaluation on a worker also reads the clear count (one store key; written after a clear).
    Each deferral writes one more XCom (an empty decision record). The end: one XCom write (the
    decision record) and one more task-state call (the look after it), no wake.
    See ``docs/benchmarks.md``.

What it does not do
    It never publishes; it does not judge a source by anything but its task state and its report.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException

from airflow_provider_zeta.airflow_internals import run_task_states
from airflow_provider_zeta.core.durations import Duration, check_duration_unless_template, duration_or_default, duration_seconds
from airflow_provider_zeta.core.events import task_key
from airflow_provider_zeta.core.incarnation import (
    CLEAR_EPOCH_KEY,
    SENSOR_DECISION_XCOM,
    clear_epoch,
    publish_incarnation,
    sensor_decision,
)
from airflow_provider_zeta.core.ledger import CorruptState
from airflow_provider_zeta.core.ready import (
    Evaluation,
    Verdict,
    mapped_expected,
    parse_ready_set,
    ref_states,
    ref_task_ids,
    sensor_event_is_for,
    wait_deadline,
)
from airflow_provider_zeta.observers import RunObserver
from airflow_provider_zeta.settings import ZetaSettings
from airflow_provider_zeta.task_state import set_kept

if TYPE_CHECKING:
    from airflow.sdk import Context

DEADLINE_KEY = "zeta_ready_deadline"
READY_KEY_PREFIX = "zeta_ready_"
#: Reports the sensor hands to its trigger in the kwargs (about 250 bytes each): enough that a
#: typical run's trigger starts with nothing to re-read, bounded so the trigger row stays small.
MAX_VERIFIED_IN_TRIGGER = 200


class ReadyToCloseSensor(BaseOperator):
    """Wait until every source of the run has reported ready-to-close; return the ready set.

    :param sources: source name -> task id of its deploy task (same DAG run), when the sources are
        known when the DAG is parsed.
    :param mapped_task_id: for sources decided at run time instead: the task id of the mapped deploy
        task (``ZetaSparkJobOperator.partial(...).expand(...)``), one map index per source ...
    :param mapped_sources: ... and the run's source list it was expanded over, in map-index order:
        a list of names, or of per-source dicts with a ``source`` key (templated; usually the same
        ``XComArg`` the deploy task was expanded from, which makes this sensor wait for that task).
        The wait expects exactly the sources of this list. An empty list skips the sensor (and so
        the completed point): the run mapped no source, so there is nothing to publish.
    :param timeout: how long (``timedelta`` or seconds) from the sensor's first try until a missing
        source fails it.
    :param poll_interval: upper bound of the trigger's polling backoff (default ``[zeta] poll_interval``).

    ``retries`` defaults to 3 and ``retry_delay`` to 5 seconds: a worker killed while the sensor
    evaluates (before it defers, or when the trigger woke it) must not fail a run whose sources all
    succeeded. Its verdicts (a failed source, a corrupt or unverifiable report, the deadline) raise
    ``AirflowFailException`` and are not retried; the deadline is absolute, so retries do not
    extend it.
    """

    template_fields = ("mapped_sources",)
    ui_color = "#9fd3c7"
    #: A deploy task looks for its run's ready sets by this mark (``ZetaSparkJobOperator``): a
    #: cleared deploy task learns from one that its earlier driver ended.
    is_zeta_ready_to_close = True

    def __init__(
        self,
        *,
        sources: Mapping[str, str] | None = None,
        mapped_task_id: str | None = None,
        mapped_sources: Any = None,
        timeout: Duration = 6 * 3600,
        poll_interval: Duration | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("retries", 3)
        kwargs.setdefault("retry_delay", dt.timedelta(seconds=5))
        super().__init__(**kwargs)
        if mapped_task_id is None and not sources:
            raise ValueError(f"{self.task_id}: 'sources' must name at least one source -> task id (or give 'mapped_task_id')")
        if mapped_task_id is not None and (sources or mapped_sources is None):
            raise ValueError(f"{self.task_id}: 'mapped_task_id' needs 'mapped_sources' (the run's source list) and no 'sources'")
        check_duration_unless_template(poll_interval, f"{self.task_id}: 'poll_interval'")
        self.sources = dict(sources or {})
        self.mapped_task_id = mapped_task_id
        self.mapped_sources = mapped_sources
        self.timeout = duration_seconds(timeout, f"{self.task_id}: 'timeout'")
        self.poll_interval = poll_interval

    def waits_on(self, task_id: str) -> bool:
        """Whether this sensor reads the reports of deploy task ``task_id`` (mapped or not)."""
        return task_id == self.mapped_task_id or task_id in self.sources.values()

    def _expected(self) -> dict[str, str]:
        """Source name -> task reference (``core.ready.task_ref``) of this run's sources: the static
        ones, or one per map index of the run's mapped source list (rendered by now)."""
        if self.mapped_task_id is None:
            return self.sources
        try:
            expected = mapped_expected(self.mapped_task_id, self.mapped_sources, self.task_id)
        except ValueError as error:
            raise AirflowFailException(f"[zeta.ready.bad_source_list] {error}") from None
        if not expected:
            self.log.info("zeta.ready.no_sources: the run mapped no source (an empty source list): nothing to publish")
            raise AirflowSkipException("[zeta.ready.no_sources] the run mapped no source: nothing to publish; the completed point is skipped")
        return expected

    def execute(self, context: Context) -> Any:
        """Evaluate the sources: return the ready set when all are ready, fail on a final verdict, else
        defer on the ready-to-close trigger."""
        return self._evaluate(context)

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> Any:
        """Woken by the trigger: return its ready set, or fail with its verdict, reading no report again."""
        ti = context["ti"]
        if not sensor_event_is_for(event, task_key(ti.dag_id, ti.run_id, ti.task_id, getattr(ti, "map_index", -1))):
            # Another task instance's trigger, run under a reused trigger id (core.events).
            self.log.warning("zeta.ready.foreign_event: woken by an event not for this task (%.200r); evaluating again", event)
            return self._evaluate(context)
        event = event or {}
        verdict, message = event.get("verdict"), event.get("message")
        if verdict == Verdict.ALL_READY.value and isinstance(event.get("ready_set"), Mapping):
            # The trigger ends the sensor itself, except when it cannot prove it is the trigger
            # this sensor waits on (core.events) or was deferred by an earlier version: then it
            # wakes the sensor with "all ready" and its ready set.
            return self._trigger_ready_set(context, event)
        if verdict == Verdict.CORRUPT.value:
            # The trigger judges with the incarnation it was deferred with; a source cleared since
            # (the run's clear_number rose, this sensor was not cleared) reports a newer one. Only
            # the task's own context knows the current incarnation: judge again here.
            self.log.info("zeta.ready.recheck_in_worker: the trigger saw %s; evaluating again", message)
            return self._evaluate(context)
        if verdict and verdict != Verdict.WAITING.value:
            self.log.info("zeta.ready.%s: %s", verdict, message)
            raise AirflowFailException(f"[zeta.ready.{verdict}] {message}")
        self.log.info("zeta.ready: woken by the trigger (%s): evaluating again", verdict)
        return self._evaluate(context)

    def _trigger_ready_set(self, context: Context, event: dict[str, Any]) -> Any:
        ti = context["ti"]
        # Written before the look below, which it must precede (core.incarnation.SENSOR_DECISION_XCOM).
        ti.xcom_push(key=SENSOR_DECISION_XCOM, value=sensor_decision(parse_ready_set(event["ready_set"])[1]))
        expected = self._expected()
        states = ref_states(
            expected.values(), run_task_states(dag_id=ti.dag_id, task_ids=ref_task_ids(expected.values()), run_ids=[ti.run_id]).get(ti.run_id, {})
        )
        rerunning = sorted(source for source, ref in expected.items() if states.get(ref) != "success")
        if rerunning:
            # Cleared between the trigger's look and this wake (its report is gone), or counted on
            # a report stored while its task was still deferred (core.ready.REPORTED_WHILE_DEFERRED),
            # which this worker does not judge: look again.
            self.log.info("zeta.ready.changed_since_trigger: %s not success now; evaluating again", rerunning)
            ti.xcom_push(key=SENSOR_DECISION_XCOM, value=sensor_decision({}))
            return self._evaluate(context)
        ready_set = dict(event["ready_set"])
        store = context["task_state_store"]
        for source in event.get("ready_since_deferral") or ():
            report = ready_set["sources"].get(source)
            if isinstance(report, Mapping):
                set_kept(store, f"{READY_KEY_PREFIX}{source}", report.get("token"))
        self.log.info("zeta.ready.all_ready: %s", event.get("message"))
        return ready_set

    def _clear_epoch(self, context: Context) -> int:
        """This sensor's count of its own clears (``core.incarnation.clear_epoch``), kept."""
        store = context["task_state_store"]
        try:
            record, changed = clear_epoch(store.get(CLEAR_EPOCH_KEY), getattr(context["ti"], "max_tries", None), self.retries)
        except CorruptState as error:
            raise AirflowFailException(f"[zeta.ready] task state {CLEAR_EPOCH_KEY} of {self.task_id}: {error}") from None
        if changed:
            set_kept(store, CLEAR_EPOCH_KEY, record)
        return int(record["epoch"])

    def _decide(self, context: Context, look: Any, evaluation: Evaluation) -> Evaluation:
        """All ready: write the decision record, then look once more (``core.incarnation``
        ``SENSOR_DECISION_XCOM``: a deploy task cleared before that look is seen not ready; one
        cleared after it reads the record and refuses to re-run). Returns the look's evaluation;
        a decision it does not confirm is taken back."""
        ti = context["ti"]
        for _ in range(3):
            decision = sensor_decision(evaluation.ready)
            ti.xcom_push(key=SENSOR_DECISION_XCOM, value=decision)
            again = look()
            if again.verdict is Verdict.ALL_READY and sensor_decision(again.ready) == decision:
                return again
            self.log.info("zeta.ready.changed_while_deciding: %s", again.message)
            ti.xcom_push(key=SENSOR_DECISION_XCOM, value=sensor_decision({}))
            if again.verdict is not Verdict.ALL_READY:
                return again
            evaluation = again
        raise AirflowException(f"[zeta.ready] {self.task_id}: the sources' attempts kept changing while it decided; a retry looks again")

    def _deadline(self, context: Context) -> float:
        store = context["task_state_store"]
        max_tries = getattr(context["ti"], "max_tries", None)
        try:
            record, changed = wait_deadline(store.get(DEADLINE_KEY), time.time(), self.timeout, max_tries)
        except CorruptState as error:
            raise AirflowFailException(f"[zeta.ready] task state {DEADLINE_KEY} of {self.task_id}: {error}") from None
        if changed:
            set_kept(store, DEADLINE_KEY, record)
        return record["deadline"]

    def _evaluate(self, context: Context) -> Any:
        settings = ZetaSettings.load()
        ti = context["ti"]
        # The reports name the run's clear_number and are judged against it; the ready set carries
        # the incarnation the completed point commits under, which also rises on a clear of this
        # sensor that left clear_number alone (REST reset_dag_runs=false; core.incarnation).
        incarnation = int(getattr(context["dag_run"], "clear_number", 0) or 0)
        publishing = publish_incarnation(incarnation, self._clear_epoch(context))
        if publishing != incarnation:
            self.log.info(
                "zeta.incarnation.publish_incarnation: %d (clear_number %d, clears of this sensor seen %d)",
                publishing, incarnation, publishing - incarnation,
            )
        deadline = self._deadline(context)
        expected = self._expected()
        observer = RunObserver(ti.dag_id, ti.run_id, expected, settings.state_root)
        evaluation = observer.observe(incarnation, deadline)
        if evaluation.verdict is Verdict.ALL_READY:
            evaluation = self._decide(context, lambda: observer.observe(incarnation, deadline), evaluation)
        self._record_progress(context, evaluation)
        self.log.info("zeta.ready.%s: %s", evaluation.verdict.value, evaluation.message)
        if evaluation.verdict is Verdict.ALL_READY:
            return evaluation.ready_set(publishing)
        if evaluation.verdict is not Verdict.WAITING:
            raise AirflowFailException(f"[zeta.ready.{evaluation.verdict.value}] {evaluation.message}")
        import uuid

        from airflow_provider_zeta.triggers import not_before
        from airflow_provider_zeta.triggers.ready_to_close import READY_DEFERRAL_XCOM, ReadyToCloseTrigger

        # This deferral's mark, before the trigger exists: the trigger ends the sensor itself only
        # when the sensor's latest mark is its own (core.events).
        mark = uuid.uuid4().hex
        # No decision yet, stored: a deploy task cleared while this sensor waits reads it (a read of
        # a missing XCom is logged by Airflow at error level).
        ti.xcom_push(key=SENSOR_DECISION_XCOM, value=sensor_decision({}))
        ti.xcom_push(key=READY_DEFERRAL_XCOM, value=mark)
        self.defer(
            trigger=ReadyToCloseTrigger(
                dag_id=ti.dag_id,
                run_id=ti.run_id,
                sources=expected,
                verified=observer.verified_reports(limit=MAX_VERIFIED_IN_TRIGGER),
                incarnation=incarnation,
                publish_incarnation=publishing,
                deadline=deadline,
                poll_interval=duration_or_default(self.poll_interval, settings.poll_interval, f"{self.task_id}: 'poll_interval'"),
                state_root=settings.state_root,
                not_before=not_before(),
                task_id=ti.task_id,
                map_index=getattr(ti, "map_index", -1),
                deferral_mark=mark,
            ),
            method_name="execute_complete",
        )

    def _record_progress(self, context: Context, evaluation: Evaluation) -> None:
        # One write per ready source and no read: the value is the token, the same on every try.
        store = context["task_state_store"]
        for source, report in evaluation.ready.items():
            set_kept(store, f"{READY_KEY_PREFIX}{source}", report.token)
