"""ZetaSparkJobOperator: a durable, deferrable, idempotent PySpark deploy (G1, G6, G8).

Purpose
    Run one PySpark application per task key (run, task, map index) and incarnation, never twice:
    a retry, an orphan reset after a scheduler restart, or a worker crash re-attaches to the running
    driver or reuses the finished driver's result; only a failed or lost driver is redeployed, as a
    new try with a new attempt token. Covers PySpark in local mode and standalone client mode.

How it works
    Every time a try starts or resumes from deferral, the operator *observes* — the latest attempt
    record in the task state store (one key per try), the driver's ledger on storage, whether a
    process carrying the token is alive on this host — and asks ``core.deploy.decide`` what to do.
    It logs the decision under the table row's name (``zeta.deploy.<rule>``) and acts:

    * ``fresh_launch``: build the spark-submit command with ``SparkSubmitHook`` (Airflow Spark
      connection), write the *intent* (new token) to the task state store, launch the driver
      detached (its own session: it outlives the task process, the worker and the scheduler),
      record the handle, defer;
    * ``reattach`` / ``wait_for_launch``: defer on ``ZetaDriverTrigger``, which polls the ledger;
    * ``reuse_result``: return the finished driver's result (output path, token, rows) as XCom;
    * ``fence``: write the token's cancel marker, stop its local processes, mark the record
      abandoned, observe again (the claim/fence handshake decides who wins);
    * ``report_failure``: record that this try reported it, then fail the try (Airflow's retries
      decide whether a new try redeploys);
    * ``fail``: corrupt state or a contradiction; fail without retry, launch nothing.

What it does not do
    It does not cover YARN/Kubernetes cluster mode (use ``SparkSubmitOperator`` with its
    ``ResumableJobMixin`` there) nor standalone cluster mode, which rejects Python apps. A
    client-mode driver dies with its host: it is then detected as lost (heartbeat older than
    ``[zeta] driver_lost_after``) and redeployed by the next try. Drivers on another host than the
    task can only be judged by their heartbeat. It never publishes or deletes data: the driver
    writes under its own attempt directory, and the completed point publishes.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any, Sequence

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_provider_zeta.core.deploy import (
    Action,
    Decision,
    DeployObservation,
    Timing,
    decide,
    latest_record,
    launch_wait_deadline,
)
from airflow_provider_zeta.core.ledger import (
    AttemptRecord,
    CorruptState,
    Ledger,
    Phase,
    attempt_record_key,
    parse_attempt_record,
    parse_ledger,
)
from airflow_provider_zeta.core.paths import CANCEL_MARKER, LEDGER_FILE, OUTPUT_DIR, attempt_dir
from airflow_provider_zeta.plugins.links import ZetaDriverLink
from airflow_provider_zeta.hooks.spark_driver import driver_environment, launch_driver, spark_submit_command
from airflow_provider_zeta.processes import ProcessHandle, process_view, stop_token_processes
from airflow_provider_zeta.runtime.driver import SPEC_FLAG
from airflow_provider_zeta.settings import ZetaSettings, driver_url, open_state_storage
from airflow_provider_zeta.storage import StateStorage, register_run

if TYPE_CHECKING:
    from airflow.sdk import Context

#: At most this many fence-and-look-again steps in one execution: each one changes the record, so
#: the table converges in two; more means storage is not showing our own writes.
_MAX_DECISIONS = 5


class ZetaSparkJobOperator(BaseOperator):
    """Run a PySpark application exactly once per task key and incarnation; deferrable.

    :param application: path of the PySpark file to run (unchanged; it may call
        ``airflow_provider_zeta.runtime.zeta_context()``).
    :param application_args: arguments for the application (templated).
    :param source: name of the source this job produces (defaults to the task id); the job sees it
        as ``zeta_context().source``.
    :param conn_id: Airflow Spark connection (master ``local[N]`` or ``spark://host:7077``, client
        mode). A missing connection is an error, not a silent fallback to YARN.
    :param conf: Spark configuration (``--conf``), templated.
    :param spark_submit_kwargs: further ``SparkSubmitHook`` arguments (``py_files``, ``jars``,
        ``packages``, ``driver_memory``, ``executor_memory``, ``total_executor_cores``, ...).
    :param env_vars: environment variables for the driver.
    :param job_params: JSON-able values the job reads as ``zeta_context().params`` (templated).
    :param heartbeat_interval, lost_after, poll_interval: override the ``[zeta]`` settings.
    :param launch_grace: how long an intent without a ledger may be a launch still starting before
        the token is fenced (default: ``lost_after``).
    :param require_logical_date: fail at once, launching nothing, in a run without a logical date
        (``zeta_pipeline`` sets it: such a run has no partition to publish).

    The return value (XCom) is the source's ready-to-close report: ``source``, ``task_id``,
    ``incarnation``, ``token``, ``output_path``, ``rows``, ``spark_app_id``, ``metrics``.
    """

    template_fields: Sequence[str] = ("application", "application_args", "conf", "env_vars", "job_params", "source")
    ui_color = "#f4a460"
    # "Spark driver": the current driver's Spark UI while it runs, else its log (plugins/links.py).
    operator_extra_links = (ZetaDriverLink(),)

    def __init__(
        self,
        *,
        application: str,
        application_args: list[str] | None = None,
        source: str | None = None,
        conn_id: str = "spark_default",
        conf: dict[str, Any] | None = None,
        spark_submit_kwargs: dict[str, Any] | None = None,
        env_vars: dict[str, str] | None = None,
        job_params: dict[str, Any] | None = None,
        heartbeat_interval: float | None = None,
        lost_after: float | None = None,
        poll_interval: float | None = None,
        launch_grace: float | None = None,
        require_logical_date: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.require_logical_date = require_logical_date
        if not application:
            raise ValueError(f"{self.task_id}: 'application' must be the path of a PySpark file")
        reserved = {"conf", "name", "application_args", "conn_id", "env_vars"} & set(spark_submit_kwargs or {})
        if reserved:
            raise ValueError(f"{self.task_id}: pass {sorted(reserved)} as operator arguments, not in spark_submit_kwargs")
        self.application = application
        self.application_args = list(application_args or [])
        self.source = source
        self.conn_id = conn_id
        self.conf = dict(conf or {})
        self.spark_submit_kwargs = dict(spark_submit_kwargs or {})
        self.env_vars = dict(env_vars or {})
        self.job_params = dict(job_params or {})
        self.heartbeat_interval = heartbeat_interval
        self.lost_after = lost_after
        self.poll_interval = poll_interval
        self.launch_grace = launch_grace
        self._heartbeat_interval = 5.0
        self._current_token: str | None = None
        self._current_handle: ProcessHandle | None = None

    # ------------------------------------------------------------------ settings and identity

    def _settings(self) -> tuple[ZetaSettings, Timing, float, float]:
        settings = ZetaSettings.load()
        lost_after = float(self.lost_after or settings.driver_lost_after)
        timing = Timing(lost_after=lost_after, launch_grace=float(self.launch_grace or lost_after))
        heartbeat = float(self.heartbeat_interval or settings.driver_heartbeat_interval)
        poll = float(self.poll_interval or settings.poll_interval)
        return settings, timing, heartbeat, poll

    @staticmethod
    def _key(context: Context) -> tuple[str, str, str, int]:
        ti = context["ti"]
        return ti.dag_id, ti.run_id, ti.task_id, int(getattr(ti, "map_index", -1) if ti.map_index is not None else -1)

    @staticmethod
    def _incarnation(context: Context) -> int:
        return int(getattr(context["dag_run"], "clear_number", 0) or 0)

    # ------------------------------------------------------------------ observe

    def _observe(self, context: Context, storage: StateStorage, timing: Timing) -> DeployObservation:
        store = context["task_state_store"]
        try_number = int(context["ti"].try_number)
        records: dict[int, AttemptRecord | CorruptState | None] = {}
        for number in range(1, try_number + 1):
            key = attempt_record_key(number)
            try:
                records[number] = parse_attempt_record(store.get(key), f"{self.task_id}:{key}")
            except CorruptState as error:
                records[number] = error
        record = latest_record(records)
        ledger: Ledger | CorruptState | None = None
        process = process_view("", None)  # UNKNOWN
        if isinstance(record, AttemptRecord):
            attempt = storage.child(attempt_dir(*self._key(context), record.token))
            try:
                ledger = parse_ledger(attempt.read_bytes(LEDGER_FILE), record.token, attempt.url_of(LEDGER_FILE))
            except CorruptState as error:
                ledger = error
            process = process_view(record.token, _handle_of(record))
        return DeployObservation(
            now=time.time(),
            incarnation=self._incarnation(context),
            try_number=try_number,
            record=record,
            ledger=ledger,
            process=process,
            timing=timing,
            max_tries=_max_tries(context),
        )

    # ------------------------------------------------------------------ the loop

    def execute(self, context: Context) -> Any:
        return self._drive(context)

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> Any:
        if event:
            self.log.info("zeta.deploy: woken by the driver trigger: %s", event)
        return self._drive(context)

    def failure_window(self, name: str, context: Context) -> None:
        """Called at each named point where a crash changes what the next try finds.

        ``before_intent``, ``after_intent`` (token stored, nothing launched), ``after_launch``
        (driver started, handle not recorded), ``after_handle`` (before deferring) and
        ``before_result`` (driver succeeded, XCom not yet returned). A no-op here; tests override
        it to kill the task process exactly there.
        """

    def _drive(self, context: Context) -> Any:
        if self.require_logical_date and not context.get("logical_date"):
            from airflow_provider_zeta.core.publish import MissingPartitionKey, partition_key

            try:
                partition_key(None, context["ti"].run_id)
            except MissingPartitionKey as error:
                raise AirflowFailException(str(error)) from None
        settings, timing, heartbeat, poll = self._settings()
        self._heartbeat_interval = heartbeat
        storage = open_state_storage(settings.state_root)
        for _ in range(_MAX_DECISIONS):
            observation = self._observe(context, storage, timing)
            decision = decide(observation)
            self.log.info("zeta.deploy.%s -> %s: %s", decision.rule, decision.action.value, decision.reason)
            if decision.action is Action.FAIL:
                raise AirflowFailException(f"[zeta.deploy.{decision.rule}] {decision.reason}")
            if decision.action is Action.REUSE_RESULT:
                assert isinstance(observation.ledger, Ledger) and isinstance(observation.record, AttemptRecord)
                self.failure_window("before_result", context)
                # The return value is this source's ready-to-close report (G2): one durable write.
                return {
                    **observation.ledger.result(),
                    "source": self.source or context["ti"].task_id,
                    "task_id": context["ti"].task_id,
                    "incarnation": observation.record.incarnation,
                }
            if decision.action is Action.REPORT_FAILURE:
                self._report_failure(context, storage, observation, decision)
            if decision.action in (Action.REATTACH, Action.WAIT_FOR_LAUNCH):
                self._defer_on(context, observation, decision, settings, poll)
            if decision.action is Action.FENCE:
                self._fence(context, storage, observation)
                continue
            if decision.action is Action.FRESH_LAUNCH:
                if decision.cancel_token:
                    self._cancel_token(context, storage, decision.cancel_token, _handle_of(observation.record))
                self._launch(context, storage, settings, heartbeat, poll, timing)
        raise AirflowFailException(
            f"zeta.deploy: no stable decision after {_MAX_DECISIONS} steps; the state root "
            f"{settings.state_root!r} may not show this task its own writes"
        )

    # ------------------------------------------------------------------ actions

    def _write_record(self, context: Context, record: AttemptRecord) -> None:
        context["task_state_store"].set(attempt_record_key(record.try_number), record.to_value())

    def _own_record(self, context: Context, observation: DeployObservation, **changes: Any) -> AttemptRecord:
        assert isinstance(observation.record, AttemptRecord)
        return observation.record.with_changes(try_number=observation.try_number, **changes)

    def _report_failure(self, context, storage, observation, decision: Decision) -> None:
        self._write_record(context, self._own_record(context, observation, failure_reported_try=observation.try_number))
        tail = _log_tail(storage.child(attempt_dir(*self._key(context), decision.token or "")))
        raise AirflowException(f"[zeta.deploy.{decision.rule}] {decision.reason}{tail}")

    def _fence(self, context, storage, observation: DeployObservation) -> None:
        assert isinstance(observation.record, AttemptRecord)
        record = observation.record
        # Marker first, then record; the next observation re-reads the ledger (the handshake).
        self._cancel_token(context, storage, record.token, _handle_of(record))
        self._write_record(context, self._own_record(context, observation, phase=Phase.ABANDONED))

    def _cancel_token(self, context, storage, token: str, handle: ProcessHandle | None) -> None:
        attempt = storage.child(attempt_dir(*self._key(context), token))
        attempt.write_atomic(CANCEL_MARKER, f"cancelled by {self.task_id} try {context['ti'].try_number}\n".encode())
        stopped = stop_token_processes(token, handle, self_exit_s=self._heartbeat_interval + 2)
        self.log.info("zeta.deploy: cancel marker written for attempt %s; stopped local pids %s", token, stopped)

    def _launch(self, context, storage: StateStorage, settings, heartbeat, poll, timing: Timing) -> None:
        dag_id, run_id, task_id, map_index = self._key(context)
        token = uuid.uuid4().hex[:16]
        relative = attempt_dir(dag_id, run_id, task_id, map_index, token)
        logical_date = context.get("logical_date")
        spec = {
            "token": token,
            "attempt_url": driver_url(storage, relative),
            "output_url": driver_url(storage, f"{relative}/{OUTPUT_DIR}"),
            "application": self.application,
            "heartbeat_interval": heartbeat,
            "lost_after": timing.lost_after,
            "source": self.source or task_id,
            "dag_id": dag_id,
            "run_id": run_id,
            "task_id": task_id,
            "map_index": map_index,
            "incarnation": self._incarnation(context),
            "logical_date": logical_date.isoformat() if logical_date else None,
            "ds": context.get("ds"),
            "params": self.job_params,
        }
        import json

        # Bad input (unknown connection, cluster deploy mode) fails here, before any intent exists.
        command = spark_submit_command(
            conn_id=self.conn_id,
            token=token,
            bootstrap_args=[SPEC_FLAG, json.dumps(spec), "--", *map(str, self.application_args)],
            conf=self.conf,
            hook_kwargs=self.spark_submit_kwargs,
        )
        try_number = int(context["ti"].try_number)
        intent = AttemptRecord(
            token=token,
            incarnation=self._incarnation(context),
            try_number=try_number,
            phase=Phase.INTENT,
            intent_at=time.time(),
            launch_try=try_number,
            max_tries=_max_tries(context),
        )
        register_run(storage, dag_id, run_id)  # lets the sweep find this run's attempts
        self.failure_window("before_intent", context)
        self._write_record(context, intent)  # 1. intent, durable before the launch
        self._current_token = token
        self.failure_window("after_intent", context)
        log_path = _driver_log_path(storage, relative, token)
        handle = launch_driver(command, driver_environment(self.env_vars), log_path)  # 2. launch
        self._current_handle = handle
        self.failure_window("after_launch", context)
        self.log.info("zeta.deploy: launched driver %s (pid %s on %s), log %s", token, handle.pid, handle.host, log_path)
        launched = intent.with_changes(phase=Phase.LAUNCHED, host=handle.host, pid=handle.pid, pid_start=handle.start_time)
        self._write_record(context, launched)  # 3. handle
        self.failure_window("after_handle", context)
        observation = DeployObservation(
            now=time.time(),
            incarnation=intent.incarnation,
            try_number=try_number,
            record=launched,
            ledger=None,
            process=process_view(token, handle),
            timing=timing,
            max_tries=_max_tries(context),
        )
        self._defer_on(
            context,
            observation,
            Decision(Action.WAIT_FOR_LAUNCH, "fresh_submit", "just launched", token=token),
            settings,
            poll,
        )

    def _defer_on(self, context, observation: DeployObservation, decision: Decision, settings, poll) -> None:
        from airflow_provider_zeta.triggers import not_before
        from airflow_provider_zeta.triggers.driver import ZetaDriverTrigger

        record = observation.record
        assert isinstance(record, AttemptRecord) and decision.token
        handle = _handle_of(record)
        missing_deadline = launch_wait_deadline(record.intent_at, observation.timing.launch_grace, time.time(), poll)
        self._current_token = decision.token
        self.defer(
            trigger=ZetaDriverTrigger(
                state_root=settings.state_root,
                attempt_dir=attempt_dir(*self._key(context), decision.token),
                token=decision.token,
                lost_after=observation.timing.lost_after,
                poll_interval=poll,
                missing_deadline=missing_deadline,
                handle=None if handle is None else handle.__dict__,
                heartbeat_interval=self._heartbeat_interval,
                not_before=not_before(),
                task_key=dict(zip(("dag_id", "run_id", "task_id", "map_index"), self._key(context))),
            ),
            method_name="execute_complete",
        )

    def on_kill(self) -> None:
        """The task process is being killed while it runs on a worker (not while deferred).

        The driver is deliberately left running: the same signal arrives when the scheduler resets
        the task as an orphan, and then the next try must re-attach to it, not redeploy. A user's
        mark-failed/success or clear of a *deferred* task stops the driver through the trigger's
        ``on_kill``; a cleared run's next incarnation cancels the old token before it launches.
        """
        if self._current_token:
            self.log.info(
                "zeta.deploy: task process killed; driver %s keeps running for the next try to re-attach",
                self._current_token,
            )


def _max_tries(context: Context) -> int | None:
    value = getattr(context["ti"], "max_tries", None)
    return None if value is None else int(value)


def _handle_of(record: Any) -> ProcessHandle | None:
    if isinstance(record, AttemptRecord) and record.pid is not None and record.host:
        return ProcessHandle(host=record.host, pid=record.pid, start_time=record.pid_start)
    return None


def _driver_log_path(storage: StateStorage, relative: str, token: str) -> str:
    local = storage.local_path(relative)
    if local:
        return f"{local}/driver.log"
    import tempfile

    return f"{tempfile.gettempdir()}/zeta-driver-logs/{token}.log"


def _log_tail(attempt: StateStorage, lines: int = 25) -> str:
    local = attempt.local_path("driver.log")
    if not local:
        return ""
    try:
        with open(local, "rb") as handle:
            text = handle.read()[-20000:].decode(errors="replace")
    except OSError:
        return ""
    tail = "\n".join(text.splitlines()[-lines:])
    return f"\n--- last lines of the driver log {local} ---\n{tail}" if tail else ""
