"""Cheap signatures of local files for the triggers of one triggerer, one thread hop per tick.

Theory of operation
    A trigger that waits on a ledger takes the ledger's *signature* (inode, size, modification time)
    every ``tick`` and reads the ledger only when it changed (``core.pacing``). A ``stat`` costs a
    few microseconds, but it must not run on the triggerer's event loop (a hung NFS mount would
    stall every trigger) and a thread hop per stat costs ~30 times the stat itself: at 500 waits
    and two looks a second that alone would be ~10 % of a core. So the driver triggers of one event
    loop share a ``StatBatch``: each asks for its path and awaits; once per tick the batch stats every
    path asked for since the previous tick in one thread hop and answers them all.

    A signature is ``storage.stat_signature``'s: atomic replaces (``os.replace``) change the
    inode, so a rewrite of equal size within the filesystem's timestamp granularity still changes
    it.

What it does not do
    Read files, or watch object stores (a stat there is an HTTP request: the triggers fall back to
    their backoff). A cancelled waiter is simply dropped from its batch.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any, Iterable

from airflow_provider_zeta.storage import stat_signature


def _signatures(paths: Iterable[str]) -> dict[str, Any]:
    return {path: stat_signature(path) for path in paths}


class StatBatch:
    """Stats the paths its waiters ask for, all of one tick in one thread hop."""

    def __init__(self, tick: float) -> None:
        self.tick = float(tick)
        self._waiting: dict[str, list[asyncio.Future[Any]]] = {}
        self._runner: asyncio.Task[None] | None = None
        self.hops = 0  # thread hops made so far (for tests and the footprint benchmark)

    async def signature(self, path: str) -> Any:
        """The signature of ``path`` as of the next tick."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(path, []).append(future)
        if self._runner is None or self._runner.done():
            self._runner = asyncio.get_running_loop().create_task(self._run())
        return await future

    async def _run(self) -> None:
        while self._waiting:
            await asyncio.sleep(self.tick)
            batch, self._waiting = self._waiting, {}
            live = {path: [f for f in futures if not f.done()] for path, futures in batch.items()}
            live = {path: futures for path, futures in live.items() if futures}
            if not live:
                continue
            self.hops += 1
            try:
                found = await asyncio.to_thread(_signatures, list(live))
            except Exception as error:  # answer every waiter, never leave one hanging
                for futures in live.values():
                    for future in futures:
                        if not future.done():
                            future.set_exception(error)
                continue
            for path, futures in live.items():
                for future in futures:
                    if not future.done():
                        future.set_result(found[path])


_BATCHES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[float, StatBatch]] = weakref.WeakKeyDictionary()


def stat_batch(tick: float) -> StatBatch:
    """The batch of the running event loop for this tick (created on first use)."""
    by_tick = _BATCHES.setdefault(asyncio.get_running_loop(), {})
    batch = by_tick.get(tick)
    if batch is None:
        batch = by_tick[tick] = StatBatch(tick)
    return batch
