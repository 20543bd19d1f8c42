"""ZetaDriverTrigger: waits on a driver's ledger in the triggerer (G1, G6, G8).

Purpose
    Keep a deploy task deferred while its detached Spark driver runs, without a worker slot.

How it works
    Polls the attempt's ledger (in a thread, so the event loop never blocks on storage) with a
    backoff from 1 s up to ``poll_interval``. ``core.ledger.classify_ledger`` turns the ledger into
    running / succeeded / failed / cancelled / lost / missing, and ``core.deploy.trigger_should_fire``
    decides whether to wake the task; the task then decides what to do with ``core.deploy.decide``.
    Everything it needs is in its kwargs, with absolute times only (``missing_deadline``), so a
    triggerer restart re-creates it without stretching any wait.

What it does not do
    It makes no coordination decision itself, and it never cancels a driver when the triggerer
    restarts or hands the trigger to another triggerer (``cleanup``). Only ``on_kill`` — a user
    marking the task failed/success or clearing it — writes the cancel marker and stops the local
    driver process.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, AsyncIterator

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_provider_zeta.core.deploy import cancel_on_trigger_kill, trigger_should_fire
from airflow_provider_zeta.core.ledger import CorruptState, LedgerView, classify_ledger, parse_ledger
from airflow_provider_zeta.core.paths import CANCEL_MARKER, LEDGER_FILE
from airflow_provider_zeta.processes import ProcessHandle, handle_alive, stop_token_processes
from airflow_provider_zeta.settings import open_state_storage
from airflow_provider_zeta.triggers import sleep_until


class ZetaDriverTrigger(BaseTrigger):
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

    def serialize(self) -> tuple[str, dict[str, Any]]:
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
            },
        )

    def _handle(self) -> ProcessHandle | None:
        return ProcessHandle(**self.handle) if self.handle else None

    def _look(self) -> tuple[LedgerView, str]:
        attempt = open_state_storage(self.state_root).child(self.attempt_dir)
        where = attempt.url_of(LEDGER_FILE)
        try:
            ledger = parse_ledger(attempt.read_bytes(LEDGER_FILE), self.token, where)
        except CorruptState as error:
            return LedgerView.LOST, f"unreadable ledger: {error}"
        handle = self._handle()
        process_gone = handle is not None and handle_alive(handle) is False
        view = classify_ledger(ledger, time.time(), self.lost_after, process_gone=process_gone)
        return view, ("" if ledger is None else f"heartbeat {time.time() - ledger.heartbeat_at:.0f}s ago")

    async def run(self) -> AsyncIterator[TriggerEvent]:
        delay = 1.0
        while True:
            view, detail = await asyncio.to_thread(self._look)
            if trigger_should_fire(view, time.time(), self.missing_deadline):
                self.log.info("zeta driver %s: %s %s", self.token, view.value, detail)
                await sleep_until(self.not_before)
                yield TriggerEvent({"token": self.token, "view": view.value, "detail": detail})
                return
            await asyncio.sleep(delay)
            delay = min(self.poll_interval, delay * 2)

    async def on_kill(self) -> None:
        # A user acted on the task (mark failed/success, clear): the driver must not outlive it.
        # But Airflow also lands here when a recovered triggerer drops a trigger that was moved
        # to another triggerer: then the task is still deferred and the driver must live on.
        state = await self._task_state()
        if not cancel_on_trigger_kill(state):
            self.log.info("zeta driver %s: trigger killed but task state is %r: driver left running", self.token, state)
            return
        await asyncio.to_thread(self._cancel_driver)

    async def _task_state(self) -> str | None:
        if not self.task_key:
            return "unknown-task"  # kwargs of an older version: behave as before (cancel)
        try:
            from asgiref.sync import sync_to_async
            from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

            key = self.task_key
            states = await sync_to_async(RuntimeTaskInstance.get_task_states)(
                dag_id=key["dag_id"], task_ids=[key["task_id"]], run_ids=[key["run_id"]]
            )
            by_task = states.get(key["run_id"], {})
            task_id = key["task_id"] if int(key.get("map_index", -1)) < 0 else f"{key['task_id']}_{key['map_index']}"
            if task_id not in by_task:
                return None
            # A cleared task instance has no state yet: that is an answer ("none"), not "unknown".
            return by_task[task_id] or "none"
        except Exception:
            self.log.exception("zeta driver %s: could not read the task's state", self.token)
            return None

    def _cancel_driver(self) -> None:
        attempt = open_state_storage(self.state_root).child(self.attempt_dir)
        attempt.write_atomic(CANCEL_MARKER, b"cancelled: the deferred task was killed by a user action\n")
        # The driver polls its marker every heartbeat: give it that long to stop cleanly (and record
        # "cancelled"), then signal it. on_kill has a bounded time ([triggerer] on_kill_timeout).
        stop_token_processes(self.token, self._handle(), grace_s=5, self_exit_s=self.heartbeat_interval + 2)
        self.log.info("zeta driver %s: cancel marker written (task killed by user action)", self.token)
