"""CheckpointFreshnessSensor: fail when a running job stops checkpointing (G7).

Purpose
    A streaming job (or any long job) can stay "running" while it makes no progress: a stuck
    micro-batch, a source that hangs, a driver whose executors are gone. Its deploy task cannot
    tell: the driver still heartbeats. This sensor watches the job's *checkpoints* and fails, with a
    message naming the job and the age of its last checkpoint, when that age passes a threshold.
    While the job checkpoints it keeps watching, deferred, until the job's deploy task ends.

How it works
    The job is a ``ZetaSparkJobOperator`` task of the same DAG run (``job_task_id``). Its driver
    records a checkpoint on every ``zeta_context().checkpoint()`` call and, automatically, on every
    Structured Streaming progress or idle event (a micro-batch committed, or a poll found no new
    data); the driver bootstrap registers
    the ``StreamingQueryListener`` as soon as the job's SparkSession exists. The ledger carries the
    time of the last checkpoint.

    An evaluation reads the deploy task's state and the ledgers of its attempts
    (``runs/<dag>/<run>/attempts/<task>/<map_index>/*/ledger.json``) and asks
    ``core.freshness.judge_freshness`` (rules ``job_ended``, ``ledger_unreadable``, ``not_started``,
    ``between_attempts``, ``checkpoint_stale``, ``fresh``; each logged as ``zeta.freshness.<rule>``).
    While watching, the task defers on ``CheckpointFreshnessTrigger``, which runs the same
    evaluation every ``poll_interval`` seconds and also exactly when the current checkpoint would
    go stale, so a stall is noticed within ``threshold`` + one poll; the task fails when a worker
    has run its final evaluation (up to ~12 s later, ``MIN_DEFERRAL_SECONDS``, plus scheduling).
    Ages are measured against the ledger's absolute times: a triggerer restart re-creates the
    trigger from its kwargs and cannot stretch the wait. Idle streaming events (no new data) count
    as signs of life; Spark Connect sessions get no listener (``runtime/streaming.py``).

What it does not do
    It does not stop or restart the job: it only reports (G8: the deploy task, the trigger on a
    user action, and the cleanup stop drivers). It does not judge a job before its first driver has
    claimed its attempt, nor between a failed attempt and its retry. Until the first checkpoint,
    the age counts from the attempt's start (driver and JVM start-up included) and is compared
    with ``first_checkpoint_threshold`` (default: ``threshold``): a job that never checkpoints is
    stale after it — use the sensor on jobs that do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_zeta.core.durations import Duration, check_duration_unless_template, duration_or_default, duration_seconds
from airflow_provider_zeta.core.freshness import Freshness
from airflow_provider_zeta.observers import JobWatch
from airflow_provider_zeta.settings import ZetaSettings

if TYPE_CHECKING:
    from airflow.sdk import Context


class CheckpointFreshnessSensor(BaseOperator):
    """Fail when the running job ``job_task_id`` has not checkpointed for ``threshold`` seconds.

    :param job_task_id: task id of the ``ZetaSparkJobOperator`` to watch (same DAG run); for a
        ``zeta_pipeline`` source: ``"<pipeline_id>.deploy_<source>"``.
    :param threshold: how old (``timedelta`` or seconds) the last checkpoint may be (keep it well above the job's
        checkpoint interval plus ``[zeta] driver_heartbeat_interval``: checkpoints reach the ledger
        at most once a second, and at the latest with the next heartbeat; and above the driver's
        start-up time up to its first checkpoint).
    :param first_checkpoint_threshold: how long (``timedelta`` or seconds) an attempt may run
        before its first checkpoint (default: ``threshold``). Spark start-up, the first read of a
        backlog and a first micro-batch under load take longer than a steady batch interval:
        give them their own bound instead of raising ``threshold`` for the whole stream.
    :param map_index: map index of the job task (``-1``: not mapped).
    :param poll_interval: time between two looks of the trigger (default ``[zeta] poll_interval``).

    Place it beside the job (no upstream edge), as ``ReadyToCloseSensor`` is: it starts watching
    when the run starts and succeeds when the job's task ends, whatever its outcome.
    """

    ui_color = "#c9d6f0"

    def __init__(
        self,
        *,
        job_task_id: str,
        threshold: Duration,
        first_checkpoint_threshold: Duration | None = None,
        map_index: int = -1,
        poll_interval: Duration | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if not job_task_id:
            raise ValueError(f"{self.task_id}: 'job_task_id' must name the ZetaSparkJobOperator task to watch")
        check_duration_unless_template(poll_interval, f"{self.task_id}: 'poll_interval'")
        self.job_task_id = job_task_id
        self.threshold = duration_seconds(threshold, f"{self.task_id}: 'threshold'")
        self.first_checkpoint_threshold = (
            None
            if first_checkpoint_threshold is None
            else duration_seconds(first_checkpoint_threshold, f"{self.task_id}: 'first_checkpoint_threshold'")
        )
        self.map_index = int(map_index)
        self.poll_interval = poll_interval

    def execute(self, context: Context) -> Any:
        """Judge the job's checkpoint freshness: fail when stale, return when the job ended, else defer
        on the freshness trigger."""
        return self._evaluate(context)

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> Any:
        """Woken by the trigger: judge again here, whatever the event says."""
        if isinstance(event, dict):  # judged again here whatever it says (core.events)
            self.log.info("zeta.freshness: woken by the trigger: %s", event.get("message"))
        return self._evaluate(context)

    def _evaluate(self, context: Context) -> Any:
        settings = ZetaSettings.load()
        ti = context["ti"]
        watch = JobWatch(
            ti.dag_id,
            ti.run_id,
            self.job_task_id,
            self.map_index,
            settings.state_root,
            self.threshold,
            self.first_checkpoint_threshold,
        )
        judgement = watch.judge()
        self.log.info("zeta.freshness.%s: %s", judgement.rule, judgement.message)
        if judgement.verdict is Freshness.STALE:
            raise AirflowFailException(f"[zeta.freshness.{judgement.rule}] {judgement.message}")
        if judgement.verdict is Freshness.ENDED:
            return {"job": watch.job, "rule": judgement.rule, "token": judgement.token}
        from airflow_provider_zeta.triggers import not_before
        from airflow_provider_zeta.triggers.checkpoint_freshness import CheckpointFreshnessTrigger

        self.defer(
            trigger=CheckpointFreshnessTrigger(
                dag_id=ti.dag_id,
                run_id=ti.run_id,
                job_task_id=self.job_task_id,
                map_index=self.map_index,
                threshold=self.threshold,
                first_checkpoint_threshold=self.first_checkpoint_threshold,
                poll_interval=duration_or_default(self.poll_interval, settings.poll_interval, f"{self.task_id}: 'poll_interval'"),
                state_root=settings.state_root,
                not_before=not_before(),
            ),
            method_name="execute_complete",
        )
