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

    The deadline is absolute: fixed at the first try and kept in the task state store, so retries,
    restarts and re-deferrals never stretch it. While waiting, the task defers on
    ``ReadyToCloseTrigger``, which runs the same evaluation; every ready source is also recorded in
    the task state store (one key per source) so progress is visible and survives everything.

What it does not do
    It never publishes; it does not judge a source by anything but its task state and its report.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Mapping

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_zeta.core.ledger import CorruptState, parse_ledger
from airflow_provider_zeta.core.paths import LEDGER_FILE, attempt_dir
from airflow_provider_zeta.core.ready import (
    Evaluation,
    Verdict,
    attempt_problem,
    evaluate,
    parse_report,
    wait_deadline,
)
from airflow_provider_zeta.settings import ZetaSettings, open_state_storage

if TYPE_CHECKING:
    from airflow.sdk import Context

DEADLINE_KEY = "zeta_ready_deadline"
READY_KEY_PREFIX = "zeta_ready_"


class RunObserver:
    """Reads what ``core.ready.evaluate`` needs, for one run; usable in a task and in a trigger.

    Remembers reports it already read and verified, so a poll costs one task-state call plus one
    XCom read (and one ledger read) per source that finished since the previous poll.
    """

    def __init__(self, dag_id: str, run_id: str, expected: Mapping[str, str], state_root: str) -> None:
        self.dag_id = dag_id
        self.run_id = run_id
        self.expected = dict(expected)
        self.state_root = state_root
        self._reports: dict[str, Any] = {}  # task id -> raw report, for sources seen in success
        self._unverified: dict[str, str] = {}
        self._storage = None

    def _ledger_problem(self, source: str, task_id: str, raw: Any) -> str | None:
        try:
            report = parse_report(raw, source, task_id)
        except CorruptState:
            return None  # evaluate() reports it as corrupt
        if self._storage is None:
            self._storage = open_state_storage(self.state_root)
        attempt = self._storage.child(attempt_dir(self.dag_id, self.run_id, task_id, -1, report.token))
        try:
            ledger = parse_ledger(attempt.read_bytes(LEDGER_FILE), report.token, attempt.url_of(LEDGER_FILE))
        except CorruptState as error:
            ledger = error
        return attempt_problem(report, ledger)

    def observe(self, incarnation: int, deadline: float) -> Evaluation:
        from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance
        from airflow.sdk.execution_time.xcom import XCom

        states_by_run = RuntimeTaskInstance.get_task_states(
            dag_id=self.dag_id, task_ids=list(self.expected.values()), run_ids=[self.run_id]
        )
        states = dict(states_by_run.get(self.run_id, {}))
        for source, task_id in self.expected.items():
            if states.get(task_id) != "success":
                # A source that runs again has its XComs wiped: forget what we read of it.
                self._reports.pop(task_id, None)
                self._unverified.pop(source, None)
                continue
            if task_id in self._reports and source not in self._unverified:
                continue
            raw = XCom.get_one(key="return_value", dag_id=self.dag_id, run_id=self.run_id, task_id=task_id, map_index=-1)
            if raw is None:
                continue
            self._reports[task_id] = raw
            problem = self._ledger_problem(source, task_id, raw)
            if problem:
                self._unverified[source] = problem
            else:
                self._unverified.pop(source, None)
        return evaluate(self.expected, states, self._reports, incarnation, time.time(), deadline, self._unverified)


class ReadyToCloseSensor(BaseOperator):
    """Wait until every source of the run has reported ready-to-close; return the ready set.

    :param sources: source name -> task id of its deploy task (same DAG run).
    :param timeout: seconds from the sensor's first try after which a missing source fails it.
    :param poll_interval: upper bound of the trigger's polling backoff (default ``[zeta] poll_interval``).
    """

    ui_color = "#9fd3c7"

    def __init__(
        self,
        *,
        sources: Mapping[str, str],
        timeout: float = 6 * 3600,
        poll_interval: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if not sources:
            raise ValueError(f"{self.task_id}: 'sources' must name at least one source -> task id")
        if timeout <= 0:
            raise ValueError(f"{self.task_id}: 'timeout' must be positive seconds, got {timeout!r}")
        self.sources = dict(sources)
        self.timeout = float(timeout)
        self.poll_interval = poll_interval

    def execute(self, context: Context) -> Any:
        return self._evaluate(context)

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> Any:
        if event:
            self.log.info("zeta.ready: woken by the trigger: %s", event.get("message"))
        return self._evaluate(context)

    def _deadline(self, context: Context) -> float:
        store = context["task_state_store"]
        max_tries = getattr(context["ti"], "max_tries", None)
        try:
            record, changed = wait_deadline(store.get(DEADLINE_KEY), time.time(), self.timeout, max_tries)
        except CorruptState as error:
            raise AirflowFailException(f"[zeta.ready] task state {DEADLINE_KEY} of {self.task_id}: {error}") from None
        if changed:
            store.set(DEADLINE_KEY, record)
        return record["deadline"]

    def _evaluate(self, context: Context) -> Any:
        settings = ZetaSettings.load()
        ti = context["ti"]
        incarnation = int(getattr(context["dag_run"], "clear_number", 0) or 0)
        deadline = self._deadline(context)
        observer = RunObserver(ti.dag_id, ti.run_id, self.sources, settings.state_root)
        evaluation = observer.observe(incarnation, deadline)
        self._record_progress(context, evaluation)
        self.log.info("zeta.ready.%s: %s", evaluation.verdict.value, evaluation.message)
        if evaluation.verdict is Verdict.ALL_READY:
            return evaluation.ready_set(incarnation)
        if evaluation.verdict is not Verdict.WAITING:
            raise AirflowFailException(f"[zeta.ready.{evaluation.verdict.value}] {evaluation.message}")
        from airflow_provider_zeta.triggers import not_before
        from airflow_provider_zeta.triggers.ready_to_close import ReadyToCloseTrigger

        self.defer(
            trigger=ReadyToCloseTrigger(
                dag_id=ti.dag_id,
                run_id=ti.run_id,
                sources=self.sources,
                incarnation=incarnation,
                deadline=deadline,
                poll_interval=float(self.poll_interval or settings.poll_interval),
                state_root=settings.state_root,
                not_before=not_before(),
            ),
            method_name="execute_complete",
        )

    def _record_progress(self, context: Context, evaluation: Evaluation) -> None:
        store = context["task_state_store"]
        for source, report in evaluation.ready.items():
            key = f"{READY_KEY_PREFIX}{source}"
            if store.get(key) != report.token:
                store.set(key, report.token)
