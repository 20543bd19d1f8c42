"""Cheap signatures of local files for the triggers of one triggerer, one thread hop per tick.

Theory of operation
    A trigger that waits on a ledger takes the ledger's *signature* (inode, size, modification time)
    every ``tick`` and reads the ledger only when it changed (``core.pacing``). A ``stat`` costs a
    few microseconds, but it must not run on the triggerer's event loop (a hung NFS mount would
    stall every trigger) and a thread hop per stat costs ~30 times the stat itself: at 500 waits
    and two looks a second that alone would be ~10 % of a core. So the driver triggers of one event
    loop share a ``StatBatch``: once per tick the batch stats every watched path in one thread hop.

    A trigger does not wake every tick to compare: it asks ``changed(path, known, timeout)`` and
    sleeps until the batch sees a signature other than ``known`` (then it makes a full look) or
    until ``timeout`` (its backoff's next full look) has passed. Between two heartbeats of a live
    driver a trigger therefore costs a comparison per tick in the batch's loop, not a coroutine
    wake-up: at 500 waits that is 1,000 wake-ups a second fewer.

    A signature is ``storage.stat_signature``'s: atomic replaces (``os.replace``) change the
    inode, so a rewrite of equal size within the filesystem's timestamp granularity still changes
    it.

What it does not do
    Read files, or watch object stores (a stat there is an HTTP request: the triggers fall back to
    their backoff). A cancelled waiter is simply dropped from its batch.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Iterable
from typing import Any

from airflow_provider_zeta.core.pacing import NOTHING_SEEN
from airflow_provider_zeta.storage import stat_signature


def _signatures(paths: Iterable[str]) -> dict[str, Any]:
    return {path: stat_signature(path) for path in paths}


class StatBatch:
    """Stats the paths its waiters watch, all of one tick in one thread hop, and wakes a waiter only
    when its path's signature changed or its timeout passed."""

    def __init__(self, tick: float) -> None:
        self.tick = float(tick)
        # path -> waiters: (future, the signature the waiter knows, monotonic deadline)
        self._waiting: dict[str, list[tuple[asyncio.Future[Any], Any, float]]] = {}
        self._runner: asyncio.Task[None] | None = None
        self.hops = 0  # thread hops made so far (for tests and the footprint benchmark)

    async def signature(self, path: str) -> Any:
        """The signature of ``path`` as of the next tick."""
        return await self.changed(path, NOTHING_SEEN, 0.0)

    async def changed(self, path: str, known: Any, timeout: float) -> Any:
        """The signature of ``path`` once a tick finds it other than ``known`` (``NOTHING_SEEN``:
        at the next tick), or at the first tick after ``timeout`` seconds (then it may equal
        ``known``). While a tick's stats hang (an NFS server gone) no waiter is answered: a caller
        bounds its wait itself (the driver trigger: ``asyncio.timeout``)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._waiting.setdefault(path, []).append((future, known, time.monotonic() + max(0.0, timeout)))
        if self._runner is None or self._runner.done():
            self._runner = loop.create_task(self._run())
        return await future

    async def _run(self) -> None:
        while self._waiting:
            await asyncio.sleep(self.tick)
            self._drop_cancelled()
            if not self._waiting:
                continue
            self.hops += 1
            try:
                found = await asyncio.to_thread(_signatures, list(self._waiting))
            except Exception as error:  # answer every waiter, never leave one hanging
                self._fail_all(error)
                continue
            self._answer(found, time.monotonic())

    def _drop_cancelled(self) -> None:
        """Forget the waiters whose future is done (a trigger removed), and paths nobody waits on."""
        for path in list(self._waiting):
            live = [w for w in self._waiting[path] if not w[0].done()]
            if live:
                self._waiting[path] = live
            else:
                del self._waiting[path]

    def _fail_all(self, error: Exception) -> None:
        """Hand ``error`` (a tick's stats failed) to every waiter still waiting, and forget them all."""
        batch, self._waiting = self._waiting, {}
        for waiters in batch.values():
            for future, _, _ in waiters:
                if not future.done():
                    future.set_exception(error)

    def _answer(self, found: dict[str, Any], now: float) -> None:
        """Wake the waiters whose path's signature in ``found`` changed or whose deadline passed by
        ``now``; the others wait on."""
        for path in list(self._waiting):
            signature = found.get(path, NOTHING_SEEN)
            if signature is NOTHING_SEEN:
                continue  # asked for during the hop: the next tick stats it
            keep = []
            for future, known, deadline in self._waiting[path]:
                if future.done():
                    continue
                if signature != known or now >= deadline:
                    future.set_result(signature)
                else:
                    keep.append((future, known, deadline))
            if keep:
                self._waiting[path] = keep
            else:
                del self._waiting[path]

_BATCHES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[float, StatBatch]] = weakref.WeakKeyDictionary()


def stat_batch(tick: float) -> StatBatch:
    """The batch of the running event loop for this tick (created on first use)."""
    by_tick = _BATCHES.setdefault(asyncio.get_running_loop(), {})
    batch = by_tick.get(tick)
    if batch is None:
        batch = by_tick[tick] = StatBatch(tick)
    return batch
