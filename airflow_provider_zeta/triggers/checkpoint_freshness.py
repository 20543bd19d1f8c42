"""CheckpointFreshnessTrigger: the checkpoint-freshness watch, in the triggerer (G7).

Runs the same evaluation as ``CheckpointFreshnessSensor`` (``observers.JobWatch`` + ``core.freshness``) every
``poll_interval`` seconds, and also just past the moment the current checkpoint would go stale
(``core.freshness.next_look``), so a stall is seen within the threshold plus one poll of the last
checkpoint. It wakes the sensor when the verdict is anything but "watching" (no earlier than
``not_before``; the task then fails once a worker has run it). Its kwargs hold durations
(``threshold``, ``first_checkpoint_threshold``, ``poll_interval``), which are only ever added to the ledger's own absolute times
or to the present, and one absolute moment, ``not_before``; nothing counts from when the trigger
started: a triggerer restart re-creates it without stretching anything, and it keeps no state that
matters.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_provider_zeta.core.freshness import Freshness, next_look
from airflow_provider_zeta.triggers import sleep_until, wait_out_min_deferral


class CheckpointFreshnessTrigger(BaseTrigger):
    """Watch one job's checkpoint freshness in the triggerer; wake the sensor on a stale or ended verdict."""

    def __init__(
        self,
        *,
        dag_id: str,
        run_id: str,
        job_task_id: str,
        map_index: int,
        threshold: float,
        poll_interval: float,
        state_root: str,
        not_before: float = 0.0,
        first_checkpoint_threshold: float | None = None,
    ) -> None:
        super().__init__()
        self.dag_id = dag_id
        self.run_id = run_id
        self.job_task_id = job_task_id
        self.map_index = int(map_index)
        self.threshold = float(threshold)
        self.poll_interval = float(poll_interval)
        self.state_root = state_root
        self.not_before = float(not_before)
        self.first_checkpoint_threshold = None if first_checkpoint_threshold is None else float(first_checkpoint_threshold)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """The trigger's class path and its kwargs."""
        return (
            "airflow_provider_zeta.triggers.checkpoint_freshness.CheckpointFreshnessTrigger",
            {
                "dag_id": self.dag_id,
                "run_id": self.run_id,
                "job_task_id": self.job_task_id,
                "map_index": self.map_index,
                "threshold": self.threshold,
                "poll_interval": self.poll_interval,
                "state_root": self.state_root,
                "not_before": self.not_before,
                "first_checkpoint_threshold": self.first_checkpoint_threshold,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Judge the job every poll and just past the moment its checkpoint would go stale; fire once
        the verdict is not watching."""
        from asgiref.sync import sync_to_async

        from airflow_provider_zeta.observers import JobWatch

        watch = JobWatch(
            self.dag_id,
            self.run_id,
            self.job_task_id,
            self.map_index,
            self.state_root,
            self.threshold,
            self.first_checkpoint_threshold,
        )
        judge = sync_to_async(watch.judge)
        last_rule = None
        while True:
            judgement = await judge()
            if judgement.rule != last_rule:
                self.log.info("zeta.freshness.%s: %s", judgement.rule, judgement.message)
                last_rule = judgement.rule
            if judgement.verdict is not Freshness.WATCHING:
                await wait_out_min_deferral(self.not_before)
                yield TriggerEvent(
                    {
                        "verdict": judgement.verdict.value,
                        "rule": judgement.rule,
                        "message": judgement.message,
                        "age": judgement.age,
                        "detected_at": time.time(),
                    }
                )
                return
            await sleep_until(next_look(judgement, time.time(), self.poll_interval))
