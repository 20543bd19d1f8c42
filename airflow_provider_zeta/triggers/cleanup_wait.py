"""The wait of a run of the cleanup DAG (``CarryOutCleanupsOperator``).

Purpose
    A run of the cleanup DAG is the one waiter of the records it took (``core.cleanup``, "one
    waiter per record"). It waits, deferred, until the soonest due time among them — and should a
    record appear that nobody waits for (its announcement named by no run that could start), it
    takes it without waiting for its own due time.

How it works
    ``moment`` is absolute (a triggerer restart re-creates the same wait). Every ``rescan_interval``
    until then the trigger lists the unclaimed waiter entries (one listing of
    ``cleanup_waiters/_unclaimed/`` in a thread, never on the event loop) and fires early
    (``woke_for: unclaimed``) only when there is one; otherwise it fires at ``moment``
    (``woke_for: due``). The task is resumed in a worker only then: a waiting run costs the
    triggerer a sleep and one listing per ``rescan_interval``, and no worker slot.

What it does not do
    Read records, or judge other waiters (the task does that at its first look). A listing that
    fails (the state root unreachable for a moment) is tried again at the next interval.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_provider_zeta.core.cleanup import UNCLAIMED_WAITER, WAITERS_DIR
from airflow_provider_zeta.triggers import MIN_DEFERRAL_SECONDS, sleep_until


class CleanupWaitTrigger(BaseTrigger):
    """Fire at ``moment`` (epoch seconds), or at a look every ``rescan_interval`` that finds an
    unclaimed waiter entry in the state root ``state_root`` (a URL)."""

    def __init__(self, moment: float, state_root: str, rescan_interval: float, created_at: float | None = None) -> None:
        super().__init__()
        self.moment = float(moment)
        self.state_root = state_root
        self.rescan_interval = float(rescan_interval)
        self.created_at = float(created_at if created_at is not None else time.time())

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """The trigger's class path and its kwargs."""
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "moment": self.moment,
                "state_root": self.state_root,
                "rescan_interval": self.rescan_interval,
                "created_at": self.created_at,
            },
        )

    def unclaimed(self) -> int:
        """How many unclaimed waiter entries the state root holds (one listing; blocking)."""
        from airflow_provider_zeta.settings import open_state_storage

        names = open_state_storage(self.state_root).list_dir(f"{WAITERS_DIR}/{UNCLAIMED_WAITER}")
        return sum(1 for name in names if name.endswith(".json"))

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Fire at ``moment`` (``woke_for: due``), or earlier when a look every ``rescan_interval``
        finds unclaimed waiter entries."""
        # The first look is a full interval after the task's own scan, and never sooner than a
        # trigger of this provider may fire (``MIN_DEFERRAL_SECONDS``).
        interval = max(self.rescan_interval, MIN_DEFERRAL_SECONDS) if self.rescan_interval > 0 else None
        next_look = self.created_at + interval if interval is not None else float("inf")
        while time.time() < self.moment:
            await sleep_until(min(self.moment, next_look))
            if time.time() >= self.moment or interval is None:
                continue
            try:
                found = await asyncio.to_thread(self.unclaimed)
            except OSError:
                found = 0
            if found:
                yield TriggerEvent({"woke_for": "unclaimed", "entries": found})
                return
            next_look = time.time() + interval
        yield TriggerEvent({"woke_for": "due"})
