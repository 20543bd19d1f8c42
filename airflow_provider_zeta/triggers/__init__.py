"""Triggers of the provider, and what they share."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from airflow_provider_zeta.core.pacing import Pacer, min_deferral_wait

#: A trigger of this provider never wakes its task sooner than this after the task deferred.
#: Airflow 3.3 turns a wake-up that arrives before the scheduler processed the executor's
#: "success" for the deferring worker into a spurious retry ("finished with state success, but the
#: task instance's state attribute is queued"); the scheduler loop on a busy host took 6 s to get
#: there in our tests. Each spurious retry is harmless here (the next try re-observes) but burns a
#: retry. An event that ends the task (``TaskSuccessEvent``) goes at once: it sets the task to
#: success, which that late processing leaves alone. A Spark job never finishes this fast anyway.
#: The default of ``[zeta] min_deferral`` (``min_deferral_seconds``), which a deployment whose
#: scheduler loop is quick may lower.
MIN_DEFERRAL_SECONDS = 12.0

#: How often a trigger takes the cheap signature of what it waits on (a ledger file's stat; which
#: drivers' ledgers are terminal) to notice a change without reading it (``core.pacing``).
LEDGER_WATCH_TICK = 0.5


def min_deferral_seconds() -> float:
    """The minimum deferral in force: ``[zeta] min_deferral``, ``MIN_DEFERRAL_SECONDS`` when unset."""
    from airflow_provider_zeta.settings import min_deferral

    return min_deferral(default=MIN_DEFERRAL_SECONDS)


def not_before() -> float:
    """The absolute time before which a trigger created now may not fire."""
    return time.time() + min_deferral_seconds()


async def wait_out_min_deferral(not_before: float) -> None:
    """Wait until ``not_before`` (from ``not_before()``, on the deferring worker's wall clock), but
    never longer than the minimum deferral (``min_deferral_seconds``) on this process's clock: the
    triggerer may run on another host, and a worker whose clock runs minutes ahead must not keep
    its task deferred for the difference (the rule: ``core.pacing.min_deferral_wait``)."""
    delay = min_deferral_wait(not_before, time.time(), min_deferral_seconds())
    if delay > 0:
        await asyncio.sleep(delay)


async def sleep_until(moment: float) -> None:
    """Sleep until ``moment`` (epoch seconds); return at once when it has passed."""
    delay = moment - time.time()
    if delay > 0:
        await asyncio.sleep(delay)


async def wait_for_full_look(pacer: Pacer, cheap_look: Callable[[Any, float], Awaitable[Any]] | None) -> Any:
    """Wait until ``pacer`` says a full look is due; return the signature taken just before it.

    ``cheap_look(known, timeout)`` waits at least about a tick and returns a signature: as soon as
    it differs from ``known`` (the pacer's), or after ``timeout`` (until the backoff's next full
    look), whichever comes first — or any time earlier; ``None`` when it has none this time (a
    failure counts as ``None``). Without a signature, sleep until the backoff's moment. The caller
    makes the full look, then tells the pacer: ``pacer.looked(time.monotonic(), signature)``.
    """
    while True:
        signature = None
        if cheap_look is not None:
            try:
                signature = await cheap_look(pacer.known_signature, pacer.until_full_look(time.monotonic()))
            except Exception:  # no cheap look this time: the backoff still paces the full looks
                signature = None
        now = time.monotonic()
        if pacer.full_look_due(now, signature):
            return signature
        if cheap_look is None:
            await asyncio.sleep(pacer.sleep_for(now, has_signature=False))
        elif signature is None:  # no cheap look this time (it failed): try again in a tick
            await asyncio.sleep(pacer.sleep_for(now, has_signature=True))
