"""ReadyToCloseTrigger: the ready-to-close wait, in the triggerer (G2).

Runs the same evaluation as ``ReadyToCloseSensor`` (``RunObserver`` + ``core.ready.evaluate``)
with a backoff from 1 s up to ``poll_interval``, and wakes the sensor when the verdict is anything
but "waiting". Its kwargs hold the absolute ``deadline``; a triggerer restart re-creates it and it
re-derives progress from the durable reports (its in-memory cache only saves reads).
"""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_provider_zeta.core.ready import Verdict
from airflow_provider_zeta.triggers import sleep_until


class ReadyToCloseTrigger(BaseTrigger):
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
    ) -> None:
        super().__init__()
        self.dag_id = dag_id
        self.run_id = run_id
        self.sources = dict(sources)
        self.incarnation = int(incarnation)
        self.deadline = float(deadline)
        self.poll_interval = float(poll_interval)
        self.state_root = state_root
        self.not_before = float(not_before)

    def serialize(self) -> tuple[str, dict[str, Any]]:
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
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from asgiref.sync import sync_to_async

        from airflow_provider_zeta.sensors.ready_to_close import RunObserver

        observer = RunObserver(self.dag_id, self.run_id, self.sources, self.state_root)
        observe = sync_to_async(observer.observe)
        delay = 1.0
        last_message = None
        while True:
            evaluation = await observe(self.incarnation, self.deadline)
            if evaluation.message != last_message:
                self.log.info("zeta.ready.%s: %s", evaluation.verdict.value, evaluation.message)
                last_message = evaluation.message
            if evaluation.verdict is not Verdict.WAITING:
                await sleep_until(self.not_before)
                yield TriggerEvent({"verdict": evaluation.verdict.value, "message": evaluation.message})
                return
            await asyncio.sleep(delay)
            delay = min(self.poll_interval, delay * 2)
