"""Named crash points inside the triggerer, armed by a test (e.g. a triggerer killed while it emits an event).

Theory of operation
    A deploy task's crash windows are ``ZetaSparkJobOperator.failure_window`` calls, which a test
    DAG overrides to kill its worker. A trigger runs in the triggerer, which no DAG can subclass, so
    a trigger awaits ``crash_when_armed(name, key)`` at its windows instead. A point is armed when the
    environment variable ``ZETA_CRASH_POINTS`` names a directory (the test harness sets it for
    every component of its clusters) and a file called ``name`` exists there whose text is the
    caller's key (the run id: on a cluster shared by many tests only the armed run's trigger
    fires). The call removes the file (one shot: the restarted component runs on) and kills the
    caller's process group — in the triggerer, its supervisor and its trigger runner alike — with
    SIGKILL, at the next pass of the running event loop: the caller has by then handed over what
    it yields next, and nothing of it has reached the metadata database (the runner sends events to
    its supervisor in batches, the supervisor writes them).

    Armed with a hold (the file's text ``<key> hold=<seconds>``), the caller stops at the point for
    that long instead — everything else in the component runs on, the other triggers and the
    runner's hand-overs included — or until a file ``<name>.release`` appears beside it, and then
    kills its component: what other triggers did meanwhile reaches the database, the caller's next
    step never does. An unreadable hold counts as none.

    Armed with ``freeze`` (the file's text ``<key> freeze``), the caller stops its whole component
    with SIGSTOP instead, as a host that froze right there (VM paused, process stopped): nothing of
    the component runs until the test sends SIGCONT to its process group, and then the caller goes
    on from the point as if nothing happened — with whatever it proved before the freeze now old.

What it does not do
    Anything in production: without ``ZETA_CRASH_POINTS`` a call costs one environment lookup.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

ENV_VAR = "ZETA_CRASH_POINTS"

#: The ready-to-close trigger has every source ready and yields the event that ends its sensor.
READY_SUCCESS_EVENT = "ready_to_close.success_event"
#: The driver trigger yields the event that resumes its deploy task (the driver ended, or must be
#: judged by the task).
DRIVER_EVENT = "driver.event"
#: The driver trigger of a succeeded driver yields the event that ends the deploy task from the
#: triggerer, with the task's report as its return value.
DRIVER_SUCCESS_EVENT = "driver.success_event"
#: The driver trigger of a succeeded driver has proven itself the trigger its task waits on and has
#: not yet handed over the report that ends the task.
DRIVER_REPORT_PROVEN = "driver.report_proven"


#: What ``_take`` returns for a point armed with ``freeze``.
FREEZE = -1.0


def _take(name: str, key: str) -> float | None:
    """Once per arming, the hold in seconds (0: none; ``FREEZE``: stop the component) when the
    point's file names ``key``, which is then removed; None when the point is not armed for ``key``."""
    folder = os.environ.get(ENV_VAR)
    if not folder:
        return None
    armed = Path(folder) / name
    try:
        armed_key, *options = armed.read_text().split()
        if armed_key != key:
            return None
        armed.unlink()
    except (FileNotFoundError, ValueError):
        return None
    hold = 0.0
    for option in options:
        if option == "freeze":
            return FREEZE
        if option.startswith("hold="):
            try:
                hold = max(0.0, float(option.removeprefix("hold=")))
            except ValueError:
                hold = 0.0
    return hold


def _kill_component() -> None:
    # The harness starts each component as a process group of its own (a new session); the
    # triggerer's supervisor and its trigger runner share it. Only that group: never a session
    # or a group the caller does not lead (a task runner under the LocalExecutor has its own).
    os.killpg(os.getpgrp(), signal.SIGKILL)
    os._exit(137)


async def crash_when_armed(name: str, key: str) -> None:
    """Kill this component at the next pass of the event loop if ``name`` is armed for ``key``; with
    a hold, stop here for the hold and then kill it (this call never returns); armed to freeze,
    stop the component and return once it is continued."""
    hold = _take(name, key)
    if hold is None:
        return
    if hold == FREEZE:
        print(f"[zeta] crash point {name} armed: freezing this component until it gets SIGCONT", flush=True)
        os.killpg(os.getpgrp(), signal.SIGSTOP)  # this process too: it goes on from here on SIGCONT
        return
    if hold > 0:
        print(f"[zeta] crash point {name} armed: holding {hold:g} s (or until released), then killing this component", flush=True)
        release = Path(os.environ[ENV_VAR]) / f"{name}.release"
        until = time.monotonic() + hold
        while time.monotonic() < until and not release.exists():
            await asyncio.sleep(0.1)
        release.unlink(missing_ok=True)
        _kill_component()
        return  # only where _kill_component is replaced (unit tests)
    print(f"[zeta] crash point {name} armed: killing this component", flush=True)
    asyncio.get_running_loop().call_soon(_kill_component)
