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
      connection; the conf gains OpenLineage's parent job / transport when asked, ``launch_conf``),
      write the *intent* (new token) to the task state store, launch the driver detached (its own
      session: it outlives the task process, the worker and the scheduler), record the handle, defer;
    * ``reattach`` / ``wait_for_launch``: defer on ``ZetaDriverTrigger``, which polls the ledger;
    * ``wait_for_stop``: (re)write the cancel marker and defer until the given-up driver has
      certainly stopped (terminal ledger, or heartbeat silent past its lease plus a margin);
    * ``wait_for_self_stop``: the attempt of an earlier incarnation was deleted by its run's
      cleanup; defer, writing nothing, until it has been seen deleted for as long (its driver, if
      one still ran, stops itself when it finds its files gone);
    * ``reuse_result``: return the finished driver's result (output path, token, rows) as XCom;
    * ``fence``: write the token's cancel marker, stop its local processes, mark the record
      abandoned, observe again (the claim/fence handshake decides who wins);
    * ``report_failure``: stop the driver (cancel marker, local processes), record that this try
      reported it, then fail the try (Airflow's retries decide whether a new try redeploys);
    * ``job_timeout``: the driver may still run past ``job_timeout`` after its (durable) intent:
      stopped as for ``report_failure``, the try fails naming the task and the timeout;
    * ``fail``: corrupt state, an unshared state root or a contradiction; stop the token's driver,
      fail without retry, launch nothing.

    Liveness is judged by observation (``core.ledger.HeartbeatSeen``): the heartbeat mark and how
    long it has been seen unchanged — a duration, on the observer's own monotonic clock — are kept
    in the task state store (``zeta_heartbeat_seen``) and handed to and back from the trigger, so a
    worker crash or a deferral carries the count on; no host's timestamp is ever subtracted from
    another host's (a clock skew between Airflow hosts can only stretch a wait). With
    ``deferrable=False`` the task keeps its worker slot and waits in ``execute``
    (the trigger's own loop, run in the task) — required under the KubernetesExecutor, whose pod
    would exit on deferral and kill the driver started inside it.

What it does not do
    It does not cover YARN/Kubernetes cluster mode (use ``SparkSubmitOperator`` with its
    ``ResumableJobMixin`` there; ``docs/deployment.md`` designs it as the next backend) nor
    standalone cluster mode, which rejects Python apps. A client-mode driver dies with its host: it
    is then detected as lost (no heartbeat change seen for ``[zeta] driver_lost_after``) and
    redeployed by a later try once it has certainly stopped. Drivers on another host than the task
    can only be judged by their ledger; ``[zeta] state_root`` must be shared by all hosts. It never publishes or deletes data: the driver
    writes under its own attempt directory, and the completed point publishes.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_provider_zeta.airflow_internals import airflow_config, run_task_states, xcom_get
from airflow_provider_zeta.core.deploy import (
    Action,
    Decision,
    DeployObservation,
    ProcessView,
    Timing,
    decide,
    deferral_refusal,
    fence_incarnation,
    launch_timing,
    launch_wait_deadline,
    self_stop_wait_deadline,
    stop_driver_on_failure,
    success_report,
    timeout_wake_at,
    trigger_may_end_task,
)
from airflow_provider_zeta.core.durations import Duration, check_duration_unless_template, duration_or_default
from airflow_provider_zeta.core.events import DEPLOY_DEFERRAL_XCOM, DEPLOY_EARLY_REPORT_XCOM, event_is_for, task_key
from airflow_provider_zeta.core.incarnation import (
    REFUSAL_KEY,
    SENSOR_DECIDING_STATES,
    SENSOR_DECISION_XCOM,
    cleared_without_downstream,
    refusal_record,
    sensor_still_deciding,
)
from airflow_provider_zeta.core.ledger import (
    AttemptRecord,
    CorruptState,
    HeartbeatSeen,
    Ledger,
    LedgerView,
    Phase,
    attempt_deleted_mark,
    attempt_record_key,
    continue_observation,
    driver_output_ended,
    lease_timing_error,
    observe_heartbeat,
)
from airflow_provider_zeta.core.paths import (
    CANCEL_MARKER,
    DRIVER_LOG,
    DRIVER_LOG_CHUNKS,
    INTENT_FILE,
    OUTPUT_DIR,
    attempt_dir,
    task_attempts_dir,
)
from airflow_provider_zeta.core.publish import (
    BadPartitionSpec,
    MissingPartitionKey,
    check_partition_spec,
    partition_key,
    partition_path,
)
from airflow_provider_zeta.core.ready import task_ref
from airflow_provider_zeta.core.submit_options import SPARK_SUBMIT_OPTIONS, TEMPLATED_OPTIONS, hook_arguments
from airflow_provider_zeta.hooks.spark_driver import driver_environment, launch_driver, shipped_command, spark_submit_command
from airflow_provider_zeta.lineage import inject_openlineage_properties, openlineage_default, openlineage_listener_enabled
from airflow_provider_zeta.observers import AttemptLook, claimed_tokens, latest_attempt_record, look_at_attempt
from airflow_provider_zeta.plugins.links import ZetaDriverLink
from airflow_provider_zeta.processes import ProcessHandle, host_id, observer_clock, process_view, stop_token_processes
from airflow_provider_zeta.runtime.driver import SPEC_FLAG
from airflow_provider_zeta.settings import ZetaSettings, driver_url, open_state_storage
from airflow_provider_zeta.storage import StateStorage, register_run, state_root_identity
from airflow_provider_zeta.task_state import set_kept

if TYPE_CHECKING:
    from airflow.sdk import Context

#: At most this many fence-and-look-again steps in one execution: each one changes the record, so
#: the table converges in two; more means storage is not showing our own writes.
_MAX_DECISIONS = 5
# The operator's duration parameters, each a timedelta or seconds (core/durations.py).
_DURATIONS = ("heartbeat_interval", "lost_after", "poll_interval", "launch_grace", "job_timeout")

#: Task-state key of this task's heartbeat observation (``core.ledger.HeartbeatSeen``).
HEARTBEAT_SEEN_KEY = "zeta_heartbeat_seen"


def _default_deferrable() -> bool:
    return airflow_config().getboolean("zeta", "default_deferrable", fallback=True)


class ZetaSparkJobOperator(BaseOperator):
    """Run a PySpark application exactly once per task key and incarnation; deferrable.

    :param application: path of the PySpark file to run (unchanged; it may call
        ``airflow_provider_zeta.runtime.zeta_context()``).
    :param application_args: arguments for the application (templated).
    :param source: name of the source this job produces (defaults to the task id); the job sees it
        as ``zeta_context().source``. Mapped (``partial(...).expand(...)``/``expand_kwargs``), each
        map index must have its own (a mapped instance without one fails, naming the task); each
        map index has its own attempts, staging, ledger, task state and report (every path and
        key holds the map index; an unmapped task's stay at ``-1``).
    :param conn_id: Airflow Spark connection (master ``local[N]`` or ``spark://host:7077``, client
        mode). A missing connection is an error, not a silent fallback to YARN.
    :param conf: Spark configuration (``--conf``), templated.
    :param py_files, files, archives, jars, driver_class_path, packages, exclude_packages,
        repositories, name, driver_memory, executor_memory, executor_cores, num_executors,
        total_executor_cores, principal, keytab, proxy_user, properties_file, verbose: the
        spark-submit options of ``SparkSubmitOperator``, same names and meaning, templated where it
        templates them (``core.submit_options``). ``name`` is the Spark app name (default
        ``zeta-<token>``). A value of the wrong type fails at DAG parse time (or once rendered).
    :param spark_submit_kwargs: any further ``SparkSubmitHook`` argument (``spark_binary``, ...).
    :param env_vars: environment variables for the driver.
    :param job_params: JSON-able values the job reads as ``zeta_context().params`` (templated).
    :param heartbeat_interval, lost_after, poll_interval: override the ``[zeta]`` settings
        (``timedelta`` or seconds).
    :param job_timeout: how long (``timedelta`` or seconds) a driver may run, counted from its
        launch intent (stored durably, so neither a retry of the task nor a triggerer restart
        resets it). Past it the driver is stopped and the try fails naming the task and the
        timeout; Airflow's retries decide whether a new driver is launched. Default: no limit.
    :param launch_grace: how long an intent without a ledger may be a launch still starting before
        the token is fenced (default: ``lost_after``).
    :param require_logical_date: fail at once, launching nothing, in a run without a logical date
        (``zeta_pipeline`` sets it: such a run has no partition to publish).
    :param openlineage_inject_parent_job_info: add the OpenLineage parent job (this task's
        namespace, job name and run id, and the DAG run's as root) to the driver's Spark conf, as
        ``SparkSubmitOperator`` does (default ``[openlineage] spark_inject_parent_job_info``, false).
        Needs ``apache-airflow-providers-openlineage``; without it nothing is added.
    :param openlineage_inject_transport_info: add the OpenLineage transport (HTTP only, as the
        OpenLineage provider supports it) to the driver's Spark conf (default ``[openlineage]
        spark_inject_transport_info``, false). Same condition.
    :param partition: the pipeline's partition spec (templated; ``zeta_pipeline`` passes its own).
        Once rendered and checked (``core.publish.parse_partition``) the job reads it as
        ``zeta_context().partition``; default: none (``zeta_context().partition`` is ``None``).
    :param deferrable: defer while the driver runs (default ``[zeta] default_deferrable``, true).
        ``False`` keeps the worker slot and polls in ``execute``: required under the
        KubernetesExecutor, where a deferred task's pod exits and kills the driver inside it
        (deferring there is refused at runtime).

    The return value (XCom) is the source's ready-to-close report: ``source``, ``task_id``,
    ``incarnation``, ``token``, ``output_path``, ``rows``, ``spark_app_id``, ``metrics`` (and
    ``deferral_mark`` when the task's trigger ended it: ``core.events.REPORT_DEFERRAL_FIELD``).
    """

    template_fields: Sequence[str] = (
        "application",
        "application_args",
        "conf",
        "env_vars",
        "job_params",
        "source",
        "partition",
        *TEMPLATED_OPTIONS,
    )
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
        py_files: str | None = None,
        files: str | None = None,
        archives: str | None = None,
        jars: str | None = None,
        driver_class_path: str | None = None,
        packages: str | None = None,
        exclude_packages: str | None = None,
        repositories: str | None = None,
        name: str | None = None,
        driver_memory: str | None = None,
        executor_memory: str | None = None,
        executor_cores: int | None = None,
        num_executors: int | None = None,
        total_executor_cores: int | None = None,
        principal: str | None = None,
        keytab: str | None = None,
        proxy_user: str | None = None,
        properties_file: str | None = None,
        verbose: bool = False,
        heartbeat_interval: Duration | None = None,
        lost_after: Duration | None = None,
        poll_interval: Duration | None = None,
        launch_grace: Duration | None = None,
        job_timeout: Duration | None = None,
        require_logical_date: bool = False,
        openlineage_inject_parent_job_info: bool | None = None,
        openlineage_inject_transport_info: bool | None = None,
        partition: str | None = None,
        deferrable: bool | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        # SparkSubmitOperator's names and defaults: [openlineage] spark_inject_*, false when unset.
        self.openlineage_inject_parent_job_info = (
            openlineage_default("spark_inject_parent_job_info")
            if openlineage_inject_parent_job_info is None
            else bool(openlineage_inject_parent_job_info)
        )
        self.openlineage_inject_transport_info = (
            openlineage_default("spark_inject_transport_info")
            if openlineage_inject_transport_info is None
            else bool(openlineage_inject_transport_info)
        )
        # Airflow's convention (a ``deferrable`` argument defaulting from config), read from the
        # provider's own ``[zeta] default_deferrable``: ``[operators] default_deferrable`` defaults
        # to false, which would silently turn every existing deploy task into a blocking one.
        self.deferrable = _default_deferrable() if deferrable is None else bool(deferrable)
        self.require_logical_date = require_logical_date
        if partition is not None:
            partition = check_partition_spec(partition, self.task_id)
        self.partition = partition
        if not application:
            raise ValueError(f"{self.task_id}: 'application' must be the path of a PySpark file")
        reserved = {"conf", "application_args", "conn_id", "env_vars"} & set(spark_submit_kwargs or {})
        if reserved:
            raise ValueError(f"{self.task_id}: pass {sorted(reserved)} as operator arguments, not in spark_submit_kwargs")
        options = dict(
            py_files=py_files,
            files=files,
            archives=archives,
            jars=jars,
            driver_class_path=driver_class_path,
            packages=packages,
            exclude_packages=exclude_packages,
            repositories=repositories,
            name=name,
            driver_memory=driver_memory,
            executor_memory=executor_memory,
            executor_cores=executor_cores,
            num_executors=num_executors,
            total_executor_cores=total_executor_cores,
            principal=principal,
            keytab=keytab,
            proxy_user=proxy_user,
            properties_file=properties_file,
            verbose=verbose or None,
        )
        # Checked at DAG parse time (a template string is a string: checked again once rendered).
        hook_arguments(
            token="parse-time-check",
            conf=None,
            application_args=[],
            options=options,
            hook_kwargs=spark_submit_kwargs,
            where=self.task_id,
        )
        for option in SPARK_SUBMIT_OPTIONS:  # same attribute names as SparkSubmitOperator's
            setattr(self, option, options[option])
        self.verbose = verbose
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
        self.job_timeout = job_timeout
        for duration in _DURATIONS:  # timedelta or seconds, checked at DAG parse time
            check_duration_unless_template(getattr(self, duration), f"{self.task_id}: {duration!r}")
        self._heartbeat_interval = 5.0
        self._current_token: str | None = None
        self._waiting_trigger: Any = None
        self._current_handle: ProcessHandle | None = None

    def spark_submit_options(self) -> dict[str, Any]:
        """The spark-submit options as they stand now (rendered, once the task runs)."""
        options = {option: getattr(self, option) for option in SPARK_SUBMIT_OPTIONS}
        options["verbose"] = options["verbose"] or None
        return options

    def launch_conf(self, context: Context) -> dict[str, Any]:
        """The Spark conf of a launch: ``conf`` plus the OpenLineage properties asked for.

        Computed once per launch, in the launching try, and handed to that launch only: ``conf``
        itself is not changed, nothing of it is stored, and the attempt's identity (token,
        incarnation, try) does not depend on it. A re-attach or a reused result launches nothing,
        so the running driver keeps the properties of the try that launched it.
        """
        return inject_openlineage_properties(
            self.conf,
            context,
            parent_job_info=self.openlineage_inject_parent_job_info,
            transport_info=self.openlineage_inject_transport_info,
        )

    # ------------------------------------------------------------------ settings and identity

    def _settings(self) -> tuple[ZetaSettings, Timing, float, float]:
        settings = ZetaSettings.load()

        def seconds(name: str, default: float) -> float:
            return duration_or_default(getattr(self, name), default, f"{self.task_id}: {name!r}")

        lost_after = seconds("lost_after", settings.driver_lost_after)
        job_timeout = None if self.job_timeout is None else seconds("job_timeout", 0.0)
        timing = Timing(lost_after=lost_after, launch_grace=seconds("launch_grace", lost_after), job_timeout=job_timeout)
        heartbeat = seconds("heartbeat_interval", settings.driver_heartbeat_interval)
        refused = lease_timing_error(heartbeat, lost_after, f"{self.task_id}: heartbeat_interval", f"{self.task_id}: lost_after")
        if refused:  # the task's own values (or one of them with a [zeta] default) cannot keep a lease
            raise AirflowFailException(f"[zeta.settings.lease_timing] {refused}")
        poll = seconds("poll_interval", settings.poll_interval)
        return settings, timing, heartbeat, poll

    @staticmethod
    def _key(context: Context) -> tuple[str, str, str, int]:
        ti = context["ti"]
        return ti.dag_id, ti.run_id, ti.task_id, int(getattr(ti, "map_index", -1) if ti.map_index is not None else -1)

    def _task_ref(self, context: Context) -> str:
        """How the ready-to-close wait names this task instance (``core.ready.task_ref``)."""
        _, _, task_id, map_index = self._key(context)
        return task_ref(task_id, map_index)

    def _task_label(self, context: Context) -> str:
        dag_id, _, task_id, map_index = self._key(context)
        return f"{dag_id}.{task_id}" + (f"[{map_index}]" if map_index >= 0 else "")

    @staticmethod
    def _incarnation(context: Context) -> int:
        return int(getattr(context["dag_run"], "clear_number", 0) or 0)

    # ------------------------------------------------------------------ observe

    def _observe(
        self, context: Context, storage: StateStorage, timing: Timing, event: dict[str, Any] | None = None
    ) -> DeployObservation:
        """What ``core.deploy.decide`` looks at now: this task's latest attempt record (task state
        store), its attempt on the state root and its driver process (``observers.look_at_attempt``)."""
        record = self._latest_record(context)
        look, root_id, end_reported = _NOTHING_LOOKED_AT, None, False
        claimed: tuple[str, ...] = ()
        if record is None:
            # No try's record: a driver of this task may still have claimed a ledger (the records
            # expired or were deleted). Those tokens must keep this try from launching beside it.
            claimed = claimed_tokens(storage.child(task_attempts_dir(*self._key(context))))
        if isinstance(record, AttemptRecord):
            look = self._look_at_attempt(context, storage, record, event)
            root_id, end_reported = self._when_nothing_visible(context, storage, record, look)
            if record.heartbeat_interval:
                self._heartbeat_interval = record.heartbeat_interval  # the driver's own, for its cancel wait
        return DeployObservation(
            now=time.time(),
            incarnation=self._incarnation(context),
            try_number=int(context["ti"].try_number),
            record=record,
            ledger=look.ledger,
            process=look.process,
            # Judged by the lease it was launched with, not today's settings (the trigger too).
            timing=launch_timing(timing, record),
            max_tries=_max_tries(context),
            heartbeat_unchanged_for=look.heartbeat_silence,
            intent_visible=look.intent_visible,
            task=self._task_label(context),
            state_root_id=root_id,
            deleted_for=look.deleted_for,
            end_reported_downstream=end_reported,
            claimed_without_record=claimed,
            trigger_saw_nothing=_trigger_saw_nothing(event, record),
        )

    def _look_at_attempt(
        self, context: Context, storage: StateStorage, record: AttemptRecord, event: dict[str, Any] | None
    ) -> AttemptLook:
        """The record's attempt as this task sees it: every local process of the token and the
        recorded handle, and each mark counted on from this task's stored observation and the
        trigger's event (``_count_mark``). An invisible attempt's absence is counted under
        this incarnation's mark (the table reads it only for an attempt deleted from the root it
        was launched to)."""
        store = context["task_state_store"]
        return look_at_attempt(
            storage.child(attempt_dir(*self._key(context), record.token)),
            record.token,
            _handle_of(record),
            check_process=process_view,
            count_mark=lambda token, mark: self._count_mark(store, token, mark, event),
            intent_written=record.intent_on_storage,
            deleted_mark=attempt_deleted_mark(self._incarnation(context)),
        )

    def _when_nothing_visible(
        self, context: Context, storage: StateStorage, record: AttemptRecord, look: AttemptLook
    ) -> tuple[str | None, bool]:
        """(the state root's identity, whether downstream recorded the driver's end), read only
        when nothing of the record's attempt is visible; (None, False) otherwise."""
        if look.intent_visible is not False:
            return None, False
        root_id = None if record.state_root_id is None else state_root_identity(storage, create=False)
        end_reported = not record.driver_ended and self._end_reported_downstream(context, record.token)
        return root_id, end_reported

    def _end_reported_downstream(self, context: Context, token: str) -> bool:
        """Whether this run's pipeline recorded that ``token``'s driver ended, though no try of this
        task did (its trigger ended the task, and a trigger cannot write the task state store): the
        return value of a completed point that published this source from ``token``
        (``core.publish.commit_names``), or of a ready-to-close sensor whose ready set holds this
        task's report of ``token`` (``core.ready.ready_set_names``). Both outlive this task's
        clear: the completed point runs again only after this task succeeded again, the sensor
        (which a clear of the whole run starts at once) only when it is cleared too.
        """
        from airflow_provider_zeta.core.publish import commit_names
        from airflow_provider_zeta.core.ready import ready_set_names

        dag_id, run_id, _, _ = self._key(context)
        own = self._task_ref(context)
        sensors, completed_points = self._pipeline_readers()
        checks = [(point, lambda value: commit_names(value, token)) for point in completed_points]
        checks += [(sensor, lambda value: ready_set_names(value, own, token)) for sensor in sensors]
        for reader, names in checks:
            try:
                value = xcom_get(key="return_value", dag_id=dag_id, task_id=reader, run_id=run_id, map_index=-1)
            except Exception:  # unreadable: no proof (the slower rule waits instead)
                self.log.warning("zeta.deploy: could not read the return value of %s", reader, exc_info=True)
                continue
            if names(value):
                self.log.info("zeta.deploy: %s recorded that driver %s ended", reader, token)
                return True
        return False

    def _pipeline_readers(self) -> tuple[list[str], list[str]]:
        """The task ids of this DAG's ready-to-close sensors that wait on this task, and of the
        completed points that publish from those sensors' ready sets."""
        tasks = list(getattr(getattr(self, "dag", None), "tasks", None) or ())
        sensors = [
            task.task_id
            for task in tasks
            if getattr(task, "is_zeta_ready_to_close", False)
            and (
                getattr(task, "mapped_task_id", None) == self.task_id
                or (isinstance(getattr(task, "sources", None), dict) and self.task_id in task.sources.values())
            )
        ]
        points = [task.task_id for task in tasks if getattr(task, "is_zeta_completed_point", False) and getattr(task, "ready_task_id", None) in sensors]
        return sensors, points

    def _count_mark(self, store: Any, token: str, mark: str, event: dict[str, Any] | None) -> HeartbeatSeen:
        """The driver's heartbeat ``mark`` and how long it has been seen unchanged: a duration, never a
        clock difference (``ATTEMPT_DELETED_MARK``: how long its attempt has been seen deleted).

        ``core.ledger.continue_observation`` combines this task's stored observation (this or a
        crashed earlier try, possibly on another worker) with the one its trigger handed back in
        its event, each counted on only on its own clock; the result is stored again, re-based on
        this host's monotonic clock.
        """
        clock, now = observer_clock()
        stored = HeartbeatSeen.from_value(store.get(HEARTBEAT_SEEN_KEY))
        reported = HeartbeatSeen.from_value((event or {}).get("seen"))
        seen = continue_observation(stored, reported, token, mark, clock, now)
        set_kept(store, HEARTBEAT_SEEN_KEY, seen.to_value())  # one small fixed-shape value, replaced
        self._seen = seen
        return seen

    # ------------------------------------------------------------------ the loop

    def execute(self, context: Context) -> Any:
        """Fail when this deploy cannot run as configured (``deferral_refusal``); otherwise decide and
        act on the task's attempt (launch, re-attach, wait, return the result) until the task returns
        or defers."""
        refusal = deferral_refusal(
            _executor_of(self, context), self.deferrable, _in_kubernetes_pod(), _executor_classes(self, context)
        )
        if refusal:
            raise AirflowFailException(f"[zeta.deploy.deferral_refused] {refusal}")
        if self._key(context)[3] >= 0 and not self.source:
            # Every map index would be named by the one task id: their partitions would collide.
            raise AirflowFailException(
                f"[zeta.deploy.mapped_without_source] {self._task_label(context)}: a mapped deploy task needs a "
                "'source' per map index (expand(source=[...]), or a 'source' key in each expand_kwargs entry)"
            )
        return self._drive(context)

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> Any:
        """Woken by the driver trigger: log the rest of the driver's output and decide again (from the
        task's own state when the event is not for this task)."""
        if event is not None and not event_is_for(event, task_key(*self._key(context)), required=("token", "view")):
            # Another task instance's trigger, run under a reused trigger id (core.events): its
            # token, views and durations are not this task's. Decide from this task's own state.
            self.log.warning("zeta.deploy.foreign_event: woken by an event not for this task (%.200r); deciding afresh", event)
            return self._drive(context)
        if event:
            self.log.info("zeta.deploy: woken by the driver trigger: %s", event)
            self._log_rest_of_driver_output(context, event)
        return self._drive(context, event)

    def _log_rest_of_driver_output(self, context: Context, event: dict[str, Any]) -> None:
        """The trigger streamed the driver's output up to ``driver_output_offset``; what the driver
        wrote after (its trigger drains about 1 MiB at the end) goes into this try's log now."""
        from airflow_provider_zeta.triggers.driver_output import DriverOutput, drain_in_worker, register_worker_secrets

        offset, token = event.get("driver_output_offset"), event.get("token")
        if offset is None or not token or not driver_output_ended(event.get("view")):
            return  # a driver that may still write: the next trigger streams on from the offset
        try:
            settings, *_ = self._settings()
            register_worker_secrets(self.conn_id, self.env_vars, self.conf, self.application_args, self.log)
            drain_in_worker(DriverOutput(settings.state_root, attempt_dir(*self._key(context), token), int(offset)), self.log)
        except Exception:  # the output is a convenience: never fail the try over it
            self.log.exception("zeta.deploy: could not log the rest of the driver's output")

    def failure_window(self, name: str, context: Context) -> None:
        """Called at each named point where a crash changes what the next try finds.

        ``before_intent``, ``after_intent`` (token stored, nothing launched), ``after_launch``
        (driver started, handle not recorded), ``after_handle`` (before deferring) and
        ``before_result`` (driver succeeded, XCom not yet returned). A no-op here; tests override
        it to kill the task process exactly there.
        """

    def _drive(self, context: Context, event: dict[str, Any] | None = None) -> Any:
        """Decide and act until the task returns or defers; without deferral, wait here instead."""
        try:
            while True:
                outcome = self._decide_and_act(context, event)
                if not isinstance(outcome, _Waited):
                    return outcome
                event = outcome.event
                self.log.info("zeta.deploy: woken by the driver watch: %s", event)
                self._log_rest_of_driver_output(context, event)
        except Exception as error:  # TaskDeferred is a BaseException: a deferral passes through
            self._stop_after_failure(context, error, self._current_token, self._current_handle)
            raise

    def resume_execution(self, next_method: str, next_kwargs: dict[str, Any] | None, context: Context) -> Any:
        """Resume as Airflow does; when the driver trigger failed or timed out, stop the driver of the
        latest record unless a later try re-attaches to it."""
        try:
            return super().resume_execution(next_method, next_kwargs, context)
        except Exception as error:
            if next_method == "__fail__":
                # The driver trigger raised or timed out (Airflow fails the try): the driver it
                # watched is the one of this task's latest record.
                record = self._latest_record(context)
                if isinstance(record, AttemptRecord):
                    self._stop_after_failure(context, error, record.token, _handle_of(record))
            raise

    def _latest_record(self, context: Context) -> AttemptRecord | CorruptState | None:
        """This task's latest attempt record in its task state store (the operator's record source)."""
        return latest_attempt_record(context["task_state_store"], int(context["ti"].try_number), self.task_id)

    def _stop_after_failure(self, context: Context, error: Exception, token: str | None, handle: ProcessHandle | None) -> None:
        """The try fails while it owns a driver (launched or watched): stop it unless a later try
        will re-attach to it (``zeta.deploy.failure_stop``)."""
        if not token:
            return
        retry = not isinstance(error, AirflowFailException)  # Airflow never retries a fail exception
        if retry and not stop_driver_on_failure(int(context["ti"].try_number), _max_tries(context)):
            self.log.info("zeta.deploy.failure_stop: the try failed; driver %s is left to the next try, which re-attaches", token)
            return
        self.log.info("zeta.deploy.failure_stop: the try failed with no try left to own driver %s: stopping it", token)
        try:
            settings, *_ = self._settings()
            self._cancel_token(context, open_state_storage(settings.state_root), token, handle)
        except Exception:  # the original error is what the try reports
            self.log.exception("zeta.deploy.failure_stop: could not stop driver %s", token)

    def render_template_fields(self, context: Any, jinja_env: Any = None) -> None:
        """Fail with a plain message on a run without a required logical date, before the templates are rendered."""
        # Said plainly before a partition spec's template fails on the missing ``ds``.
        if not context.get("ds"):
            self._require_logical_date(context)
        super().render_template_fields(context, jinja_env)

    def _require_logical_date(self, context: Any) -> None:
        if self.require_logical_date and not context.get("logical_date"):
            ti = context.get("ti")
            try:
                partition_key(None, getattr(ti, "run_id", None) or context.get("run_id") or "?")
            except MissingPartitionKey as error:
                raise AirflowFailException(str(error)) from None

    def _rendered_partition(self) -> str | None:
        """The rendered partition spec, checked; ``None`` when the task has none."""
        if self.partition is None:
            return None
        try:
            return partition_path(self.partition)
        except BadPartitionSpec as error:
            raise AirflowFailException(f"[zeta.deploy.bad_partition] {self.task_id}: {error}") from None

    def _decide_and_act(self, context: Context, event: dict[str, Any] | None) -> Any:
        self._require_logical_date(context)
        self._rendered_partition()  # a bad partition launches nothing
        settings, timing, heartbeat, poll = self._settings()
        self._heartbeat_interval = heartbeat
        storage = open_state_storage(settings.state_root)
        for _ in range(_MAX_DECISIONS):
            observation = self._observe(context, storage, timing, event)
            decision = self._decide(context, observation)
            if decision.action is Action.FAIL:
                self._fail(context, storage, observation, decision)
            if decision.action is Action.REUSE_RESULT:
                return self._reuse_result(context, observation)
            if decision.action is Action.REPORT_FAILURE:
                self._report_failure(context, storage, observation, decision)
            if decision.action is Action.WAIT_FOR_STOP:
                self._write_cancel_marker(context, storage, decision.token or "")
            if decision.action in _WAITS:
                return self._defer_on(context, observation, decision, settings, poll)
            if decision.action is Action.FENCE:
                self._fence(context, storage, observation)
                continue
            if decision.action is Action.FRESH_LAUNCH:
                return self._replace_and_launch(context, storage, observation, decision, (settings, heartbeat, poll, timing))
        raise AirflowFailException(
            f"zeta.deploy: no stable decision after {_MAX_DECISIONS} steps; the state root "
            f"{settings.state_root!r} may not show this task its own writes"
        )

    def _decide(self, context: Context, observation: DeployObservation) -> Decision:
        """``core.deploy.decide`` on the observation, logged under its rule; a try about to replace
        a cleared task's attempt is refused first when nothing would publish the new one."""
        decision = decide(observation)
        self.log.info("zeta.deploy.%s -> %s: %s", decision.rule, decision.action.value, decision.reason)
        if decision.action in (Action.FRESH_LAUNCH, Action.FENCE) and isinstance(observation.record, AttemptRecord):
            self._refuse_if_cleared_without_downstream(context, observation)
        return decision

    def _fail(self, context: Context, storage: StateStorage, observation: DeployObservation, decision: Decision) -> None:
        """``fail``: log a corrupt ledger's error (masked), stop the token's driver, fail without retry."""
        if isinstance(observation.ledger, CorruptState):  # job-written: the task log only, masked
            from airflow_provider_zeta.triggers.driver_output import mask_driver_line, register_worker_secrets

            register_worker_secrets(self.conn_id, self.env_vars, self.conf, self.application_args, self.log)
            self.log.error("zeta.deploy.%s: %s", decision.rule, mask_driver_line(str(observation.ledger)[:_MAX_ERROR_CHARS]))
        # Ending the try without a reusable driver: stop the token's driver first.
        if decision.token:
            self._cancel_token(context, storage, decision.token, _handle_of(observation.record))
        raise AirflowFailException(f"[zeta.deploy.{decision.rule}] {decision.reason}")

    def _reuse_result(self, context: Context, observation: DeployObservation) -> dict[str, Any]:
        """``reuse_result``: the finished driver's report, once the record says its driver ended."""
        assert isinstance(observation.ledger, Ledger) and isinstance(observation.record, AttemptRecord)
        # Durable before the result: a later incarnation (a clear, a reprocessing backfill)
        # may find the attempt deleted by the run's cleanup and must know it ended.
        if not observation.record.driver_ended:
            self._write_record(context, self._own_record(context, observation, driver_ended=True))
        self.failure_window("before_result", context)
        # The return value is this source's ready-to-close report (G2): one durable write.
        return success_report(
            observation.ledger.result(),
            self.source or context["ti"].task_id,
            context["ti"].task_id,
            observation.record.incarnation,
        )

    def _replace_and_launch(
        self, context: Context, storage: StateStorage, observation: DeployObservation, decision: Decision, launch: tuple[Any, ...]
    ) -> Any:
        """``fresh_launch``: stop the token it replaces (when the decision names one), then launch."""
        settings, heartbeat, poll, timing = launch
        if decision.cancel_token:
            self._cancel_token(context, storage, decision.cancel_token, _handle_of(observation.record))
        return self._launch(context, storage, settings, heartbeat, poll, timing)

    def _refuse_if_cleared_without_downstream(self, context: Context, observation: DeployObservation) -> None:
        """A try about to replace a cleared task's attempt fails first when nothing would publish
        the new one (``core.incarnation.cleared_without_downstream``)."""
        if not observation.task_cleared_since_record:
            return
        sensors, points = self._pipeline_readers()
        if not sensors:
            return
        task_id = self._task_ref(context)  # how the sensors' decision records name this task instance
        token = observation.record.token if isinstance(observation.record, AttemptRecord) else None
        waited_until = time.monotonic() + _SENSOR_DECIDING_WAIT
        while True:
            states = _run_task_states(context, sensors + points)
            # A sensor not success yet may be ending with this task's earlier attempt: its decision record.
            decisions = {s: _sensor_decision(context, s) for s in sensors if states.get(s) in SENSOR_DECIDING_STATES}
            sensor_states = {s: states.get(s) for s in sensors}
            reason = cleared_without_downstream(task_id, sensor_states, any(states.get(p) == "success" for p in points), decisions, token)
            if reason:
                self.log.info("zeta.incarnation.cleared_without_downstream: %s", reason)
                # Kept for the monitoring page, which shows it beside the source while this try is
                # the task's current one (core.incarnation.current_refusal).
                record = refusal_record(context["ti"].try_number, "cleared_without_downstream", reason)
                set_kept(context["task_state_store"], REFUSAL_KEY, record)
                raise AirflowFailException(f"[zeta.deploy.cleared_without_downstream] {reason}")
            deciding = sensor_still_deciding(task_id, sensor_states, decisions, token)
            if not deciding:
                return
            if time.monotonic() >= waited_until:
                raise AirflowException(f"zeta.deploy: {', '.join(deciding)} still running with a decision naming attempt {token}; a retry looks again")
            self.log.info("zeta.incarnation.sensor_deciding: %s running with a decision naming attempt %s; looking again", deciding, token)
            time.sleep(1.0)

    # ------------------------------------------------------------------ actions

    def _write_record(self, context: Context, record: AttemptRecord) -> None:
        set_kept(context["task_state_store"], attempt_record_key(record.try_number), record.to_value())

    def _own_record(self, context: Context, observation: DeployObservation, **changes: Any) -> AttemptRecord:
        assert isinstance(observation.record, AttemptRecord)
        return observation.record.with_changes(try_number=observation.try_number, **changes)

    def _report_failure(self, context, storage, observation, decision: Decision) -> None:
        # The try ends without a reusable driver: a lost one may still run somewhere; stop it first.
        if decision.token:
            self._cancel_token(context, storage, decision.token, _handle_of(observation.record))
        ended = isinstance(observation.ledger, Ledger) and observation.ledger.status.terminal
        record = self._own_record(context, observation, failure_reported_try=observation.try_number)
        self._write_record(context, record.with_changes(driver_ended=record.driver_ended or ended))
        from airflow_provider_zeta.triggers.driver_output import mask_driver_line, register_worker_secrets

        # The driver's error and tail go into this try's log only, through the task's (masked)
        # logger, masked here by value first: this process's masker must know what the driver had.
        # The exception carries no driver text: Airflow hands it to failure e-mails, callbacks and
        # listeners unmasked.
        register_worker_secrets(self.conn_id, self.env_vars, self.conf, self.application_args, self.log)
        token = decision.token or ""
        error = observation.ledger.error if isinstance(observation.ledger, Ledger) else None
        if error:
            self.log.error("zeta.deploy.%s: driver %s reported: %s", decision.rule, token, mask_driver_line(str(error)[:_MAX_ERROR_CHARS]))
        tail = _log_tail(storage.child(attempt_dir(*self._key(context), token)))
        if tail:
            self.log.error("zeta.deploy.%s: driver %s, %s", decision.rule, token, tail.lstrip("\n"))
        raise AirflowException(
            f"[zeta.deploy.{decision.rule}] {decision.reason} (attempt {token}); the driver's error and the last "
            "lines of its output are in the task log of this try"
        )

    def _fence(self, context, storage, observation: DeployObservation) -> None:
        assert isinstance(observation.record, AttemptRecord)
        record = observation.record
        # Marker first, then record; the next observation re-reads the ledger (the handshake). A
        # token fenced because this task was cleared takes this try's incarnation and is then
        # judged by the fenced rows (never reused: its ledger carries the older incarnation); any
        # other fence keeps the record's own, so a success of it is still this task's result.
        self._cancel_token(context, storage, record.token, _handle_of(record))
        incarnation = fence_incarnation(observation)
        self._write_record(context, self._own_record(context, observation, phase=Phase.ABANDONED, incarnation=incarnation))

    def _write_cancel_marker(self, context, storage, token: str) -> None:
        attempt = storage.child(attempt_dir(*self._key(context), token))
        attempt.write_atomic(CANCEL_MARKER, f"cancelled by {self.task_id} try {context['ti'].try_number}\n".encode())

    def _cancel_token(self, context, storage, token: str, handle: ProcessHandle | None) -> None:
        self._write_cancel_marker(context, storage, token)
        stopped = stop_token_processes(token, handle, self_exit_s=self._heartbeat_interval + 2)
        self.log.info("zeta.deploy: cancel marker written for attempt %s; stopped local pids %s", token, stopped)

    def _launch(self, context, storage: StateStorage, settings, heartbeat, poll, timing: Timing) -> Any:
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
            "partition": self._rendered_partition(),
            "params": self.job_params,
            # The intent file is written before the launch: a driver that finds it gone when it
            # claims was deleted by its run's cleanup meanwhile, and must not re-create the attempt.
            "intent_file": True,
            # launch_driver starts spark-submit in its own session: the driver's lease ends that
            # whole process group (the JVM with it), never anything else.
            "process_group": True,
        }
        # Bad input (unknown connection, cluster deploy mode) fails here, before any intent exists.
        command = spark_submit_command(
            conn_id=self.conn_id,
            token=token,
            bootstrap_args=[SPEC_FLAG, json.dumps(spec), "--", *map(str, self.application_args)],
            conf=self.launch_conf(context),
            hook_kwargs=self.spark_submit_kwargs,
            options=self.spark_submit_options(),
            where=task_id,
        )
        try_number = int(context["ti"].try_number)
        launching_host = host_id()
        intent = AttemptRecord(
            token=token,
            incarnation=self._incarnation(context),
            try_number=try_number,
            phase=Phase.INTENT,
            intent_at=time.time(),
            launch_try=try_number,
            max_tries=_max_tries(context),
            host_id=launching_host,
            intent_on_storage=True,
            state_root_id=state_root_identity(storage, create=True),
            lost_after=timing.lost_after,
            heartbeat_interval=heartbeat,
        )
        register_run(storage, dag_id, run_id)  # lets the sweep find this run's attempts
        # 0. the intent file on the state root, before the record that promises it: any observer
        #    that reads the record but cannot see this file does not share the state root.
        storage.child(relative).write_atomic(
            INTENT_FILE,
            json.dumps({"token": token, "host_id": launching_host, "try_number": try_number}).encode(),
        )
        self.failure_window("before_intent", context)
        self._write_record(context, intent)  # 1. intent, durable before the launch
        self._current_token = token
        self.failure_window("after_intent", context)
        log_path = _driver_log_path(storage, relative, token)
        if not storage.is_local:  # the triggerer reads the output as chunks on the state root
            command = shipped_command(command, driver_url(storage, relative), log_path)
        handle = launch_driver(command, driver_environment(self.env_vars), log_path)  # 2. launch
        self._current_handle = handle
        self.failure_window("after_launch", context)
        self.log.info("zeta.deploy: launched driver %s (pid %s on %s), log %s", token, handle.pid, handle.host, log_path)
        launched = intent.with_changes(
            phase=Phase.LAUNCHED, host=handle.host, pid=handle.pid, pid_start=handle.start_time, host_id=handle.host_id
        )
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
            task=self._task_label(context),
        )
        return self._defer_on(
            context,
            observation,
            Decision(Action.WAIT_FOR_LAUNCH, "fresh_submit", "just launched", token=token),
            settings,
            poll,
        )

    def _defer_on(self, context, observation: DeployObservation, decision: Decision, settings, poll) -> Any:
        """Defer on the driver trigger; with ``deferrable=False`` run its loop here and return what it saw."""
        from airflow_provider_zeta.triggers import not_before
        from airflow_provider_zeta.triggers.driver import ZetaDriverTrigger

        record = observation.record
        assert isinstance(record, AttemptRecord) and decision.token
        handle = _handle_of(record)
        deleted = decision.action is Action.WAIT_FOR_SELF_STOP
        if deleted:
            missing_deadline = self_stop_wait_deadline(
                time.time(), observation.deleted_for, observation.timing.stopped_after, poll
            )
        else:
            missing_deadline = launch_wait_deadline(record.intent_at, observation.timing.launch_grace, time.time(), poll)
        self._current_token = decision.token
        # The trigger may end this task itself once the driver succeeded (core.deploy), with this
        # report and only while it proves itself this deferral's trigger: the task's latest
        # deferral mark, an XCom written now, is its own. Every deferral writes a new mark, so an
        # older trigger never finds its own mark the latest (core.events).
        ends_task = trigger_may_end_task(
            decision, record.token, deferrable=self.deferrable, has_outlets=bool(self.outlets), lineage_listener=openlineage_listener_enabled()
        )
        mark = None
        if self.deferrable:
            # An empty early report and return value (None: "not reported", as their absence)
            # stored before the mark: the ready-to-close trigger reads this task's early report
            # while it is deferred and its driver has ended (observers.RunObserver), and in the
            # triggerer a read of an XCom that does not exist is logged by Airflow at error level,
            # on every healthy run. It also wipes a report an earlier deferral's trigger may have
            # stored.
            context["ti"].xcom_push(key=DEPLOY_EARLY_REPORT_XCOM, value=None)
            context["ti"].xcom_push(key="return_value", value=None)
            mark = uuid.uuid4().hex
            context["ti"].xcom_push(key=DEPLOY_DEFERRAL_XCOM, value=mark)
        seen = getattr(self, "_seen", None)
        if seen is not None and seen.token == decision.token:
            # Hand the trigger the silence as of now: it may run on another clock (host).
            seen = observe_heartbeat(seen, seen.token, seen.mark, *observer_clock())
        trigger = ZetaDriverTrigger(
            state_root=settings.state_root,
            attempt_dir=attempt_dir(*self._key(context), decision.token),
            token=decision.token,
            lost_after=observation.timing.lost_after,
            poll_interval=poll,
            missing_deadline=missing_deadline,
            handle=None if handle is None else handle.__dict__,
            heartbeat_interval=self._heartbeat_interval,
            # Only a deferral meets Airflow's spurious-retry race that not_before() guards against.
            not_before=not_before() if self.deferrable else 0.0,
            task_key=dict(zip(("dag_id", "run_id", "task_id", "map_index"), self._key(context), strict=True)),
            seen=seen.to_value() if seen is not None and seen.token == decision.token else None,
            wait_for_stop=decision.action is Action.WAIT_FOR_STOP,
            intent_expected=record.intent_on_storage and record.token == decision.token and not deleted,
            attempt_deleted=deleted,
            # The driver's output in the task log (none for a deleted attempt: reading it would write there).
            driver_output=None if deleted else self._driver_output_kwargs(),
            # From the record's durable intent time: a new try or a new trigger keeps the deadline.
            timeout_at=timeout_wake_at(observation, decision),
            stale_check=self.deferrable,
            deferral_mark=mark if ends_task else None,
            report=None
            if not ends_task
            else {"source": self.source or context["ti"].task_id, "task_id": context["ti"].task_id, "incarnation": record.incarnation},
        )
        if not self.deferrable:
            import asyncio

            self._waiting_trigger = trigger  # on_kill: stop the driver if a user ends the task meanwhile
            try:
                return _Waited(asyncio.run(_first_event(trigger)))
            finally:
                self._waiting_trigger = None
        self.defer(trigger=trigger, method_name="execute_complete")

    def _driver_output_kwargs(self) -> dict[str, Any]:
        """The trigger's ``driver_output`` kwargs. Waiting here (``deferrable=False``), the trigger
        runs in this process: the secret values go straight to this process's masker, unsealed."""
        from airflow_provider_zeta.triggers.driver_output import driver_output_kwargs, register_worker_secrets

        if self.deferrable:
            return driver_output_kwargs(self.conn_id, self.env_vars, self.conf, self.application_args, self.log)
        register_worker_secrets(self.conn_id, self.env_vars, self.conf, self.application_args, self.log)
        return driver_output_kwargs(self.conn_id, self.env_vars, seal=False)

    def on_kill(self) -> None:
        """The task process is being killed while it runs on a worker (not while deferred).

        While a ``deferrable=False`` task waits for its driver here, a user's mark-failed/success
        (the task's state says so: ``cancel_on_worker_kill``) stops the driver the way the trigger's
        ``on_kill`` does for a deferred task. Otherwise the driver is deliberately left running: the
        same signal arrives when the worker shuts down or the scheduler gives the task up as an
        orphan, and then the next try must re-attach to it, not redeploy. A cleared run's next
        incarnation cancels the old token before it launches.
        """
        from airflow_provider_zeta.core.deploy import cancel_on_worker_kill
        from airflow_provider_zeta.triggers.driver import read_task_state

        trigger = getattr(self, "_waiting_trigger", None)
        if trigger is not None:
            state = read_task_state(trigger.task_key, self.log, trigger.token)
            if cancel_on_worker_kill(state):
                self.log.info("zeta.deploy: task ended by a user action (state %r): stopping driver %s", state, trigger.token)
                trigger.cancel_driver()
                return
            self.log.info("zeta.deploy: task process killed (state %r); driver %s keeps running", state, trigger.token)
            return
        if self._current_token:
            self.log.info(
                "zeta.deploy: task process killed; driver %s keeps running for the next try to re-attach",
                self._current_token,
            )


class _Waited:
    """What a non-deferrable wait returns to ``_drive``: the trigger's event, to decide again on."""

    def __init__(self, event: dict[str, Any]) -> None:
        self.event = event


async def _first_event(trigger: Any) -> dict[str, Any]:
    async for event in trigger.run():
        return dict(event.payload)
    raise RuntimeError("the driver trigger ended without an event")  # pragma: no cover


def _executor_of(task: Any, context: Context) -> str | None:
    """The executor this task runs on: its own ``executor`` argument, else the default of ``[core] executor``."""
    named = getattr(task, "executor", None) or getattr(context["ti"], "executor", None)
    if named:
        return str(named)
    configured = airflow_config().get("core", "executor", fallback="") or ""
    return configured.split(",")[0].strip() or None


def _executor_classes(task: Any, context: Context) -> tuple[str, ...]:
    """Class names in the MRO of the executor this task runs on, resolved through ``[core] executor``
    (aliases, core names and module paths, as Airflow's executor loader reads them); () when it
    cannot be resolved (the name's text then decides, in ``core.deploy.deferral_refusal``)."""
    import importlib

    named = _executor_of(task, context)
    if not named:
        return ()
    core_paths = {
        "LocalExecutor": "airflow.executors.local_executor.LocalExecutor",
        "CeleryExecutor": "airflow.providers.celery.executors.celery_executor.CeleryExecutor",
        "KubernetesExecutor": "airflow.providers.cncf.kubernetes.executors.kubernetes_executor.KubernetesExecutor",
    }
    path = core_paths.get(named, named)
    for entry in (airflow_config().get("core", "executor", fallback="") or "").split(","):
        alias, _, target = entry.strip().partition(":")
        target = target.strip()
        if target and named in (alias.strip(), target, target.rsplit(".", 1)[-1]):
            path = core_paths.get(target, target)
            break
    try:
        module, _, attribute = path.rpartition(".")
        cls = getattr(importlib.import_module(module), attribute)
    except Exception:  # not importable here (provider not installed): its class name still tells
        return (path.rsplit(".", 1)[-1],) if "." in path else ()
    if not isinstance(cls, type):
        return ()
    try:  # optional: the cncf.kubernetes provider is not a dependency of this one
        kubernetes = importlib.import_module("airflow.providers.cncf.kubernetes.executors.kubernetes_executor")
        KubernetesExecutor = kubernetes.KubernetesExecutor  # noqa: N806
    except Exception:
        KubernetesExecutor = None  # noqa: N806
    names = tuple(klass.__name__ for klass in cls.__mro__)
    if KubernetesExecutor is not None and issubclass(cls, KubernetesExecutor) and "KubernetesExecutor" not in names:
        names += ("KubernetesExecutor",)
    return names


def _in_kubernetes_pod() -> bool:
    import os

    return bool(os.environ.get("KUBERNETES_SERVICE_HOST"))


def _run_task_states(context: Context, task_ids: list[str]) -> dict[str, str | None]:
    """The states of ``task_ids`` in this task's run (one Task SDK call)."""
    ti = context["ti"]
    states = run_task_states(dag_id=ti.dag_id, task_ids=task_ids, run_ids=[ti.run_id]).get(ti.run_id, {})
    return {task_id: states.get(task_id) for task_id in task_ids}


#: How long a cleared deploy task looks again at a running sensor whose decision record names its
#: previous attempt (``core.incarnation.sensor_still_deciding``) before its try fails and is retried.
_SENSOR_DECIDING_WAIT = 60.0


def _sensor_decision(context: Context, sensor: str) -> Any:
    """The ready-to-close sensor's decision record in this task's run (``SENSOR_DECISION_XCOM``).
    Unreadable: the try fails and is retried, launching nothing (no proof it may)."""
    ti = context["ti"]
    try:
        return xcom_get(key=SENSOR_DECISION_XCOM, dag_id=ti.dag_id, task_id=sensor, run_id=ti.run_id, map_index=-1)
    except Exception as error:
        raise AirflowException(f"zeta.deploy: could not read the decision record of {sensor}: {error}") from error


#: The decisions that defer on the driver trigger (or wait in the task, ``deferrable=False``).
_WAITS = (Action.REATTACH, Action.WAIT_FOR_LAUNCH, Action.WAIT_FOR_STOP, Action.WAIT_FOR_SELF_STOP)

#: The look of a task without an attempt record: no process, no ledger, nothing counted.
_NOTHING_LOOKED_AT = AttemptLook(ProcessView.UNKNOWN, None)


def _trigger_saw_nothing(event: dict[str, Any] | None, record: AttemptRecord | CorruptState | None) -> bool:
    """The event that woke this try is its trigger's, which saw neither the record's intent file
    nor its ledger (``LedgerView.INVISIBLE``)."""
    return bool(
        event
        and event.get("view") == LedgerView.INVISIBLE.value
        and isinstance(record, AttemptRecord)
        and event.get("token") == record.token
    )


def _max_tries(context: Context) -> int | None:
    value = getattr(context["ti"], "max_tries", None)
    return None if value is None else int(value)


def _handle_of(record: Any) -> ProcessHandle | None:
    if isinstance(record, AttemptRecord) and record.pid is not None and record.host:
        return ProcessHandle(host=record.host, pid=record.pid, start_time=record.pid_start, host_id=record.host_id)
    return None


def _driver_log_path(storage: StateStorage, relative: str, token: str) -> str:
    local = storage.local_path(relative)
    if local:
        return f"{local}/driver.log"
    import tempfile

    return f"{tempfile.gettempdir()}/zeta-driver-logs/{token}.log"


#: The driver's error text logged at most (a job can write megabytes there).
_MAX_ERROR_CHARS = 8192


def _log_tail(attempt: StateStorage, lines: int = 25) -> str:
    """The last ``lines`` of the driver's output for the task log: read with ``read_local_tail``'s
    checks (no symlink, hard link or foreign file), masked by value first (every registered value,
    whole), then by form."""
    from airflow_provider_zeta.core.redaction import redact_tail
    from airflow_provider_zeta.triggers.driver_output import mask_by_value

    try:
        if attempt.is_local:
            raw, where = attempt.read_local_tail(DRIVER_LOG, 20000), attempt.local_path(DRIVER_LOG)
        else:  # shipped in chunks by runtime/log_shipper.py
            found = attempt.read_chunked_range(DRIVER_LOG_CHUNKS, -20000, 20000)
            raw, where = (None if found is None else found[0]), attempt.url_of(DRIVER_LOG_CHUNKS)
    except (PermissionError, OSError) as refused:
        return f"\n--- the driver log is not shown: {refused} ---"
    if not raw:
        return ""
    text = raw.decode(errors="replace")
    starts_mid_file = len(raw) >= 20000
    if starts_mid_file:  # the first, partial line may hold a fragment of a value: never shown
        newline = text.find("\n")
        text = "" if newline < 0 else text[newline + 1 :]
    text = redact_tail(mask_by_value(text), starts_mid_file=False)
    tail = "\n".join(text.splitlines()[-lines:])
    return f"\n--- last lines of the driver log {where} ---\n{tail}" if tail else ""
