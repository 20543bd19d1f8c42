"""When a waiting trigger looks again: cheap looks every tick, full looks on change.

Theory of operation
    A trigger's *full look* is costly: the driver trigger reads and parses a ledger and checks a
    process; the ready-to-close trigger calls Airflow's API. Polling those every second at 500
    waits would cost the triggerer far more CPU than waiting does today, so they were paced by a
    backoff up to ``poll_interval`` (5 s): a finished driver was noticed 2.5 s late on average,
    twice per pipeline (its deploy task, then ready-to-close).

    What the trigger waits for shows first in a *signature* that is cheap to take: the stat of a
    ledger file (its size and modification time), or which drivers' ledgers are terminal. The
    signature is taken every ``tick`` (for the driver triggers by one batch for all of them, which
    wakes a trigger only when its signature differs from ``known_signature`` or
    ``until_full_look`` has passed) and the trigger makes a full look when it changed since the
    previous full look, or when the backoff's moment has come (the backoff still bounds how long a
    silence goes unchecked: liveness, deadlines). After a changed signature the full looks come
    every ``after_change`` seconds for ``chase_for`` seconds, then back off again, doubling: the
    ready-to-close trigger sees a ledger turn terminal a few seconds before the deploy task that
    reports it ends (its trigger notices the ledger, stores the report and ends the task, or
    the task resumes on a worker when it must decide), so it keeps asking at a short pace
    until then; the driver trigger, whose ledger changes with every heartbeat, looks again only at
    the backoff's pace (``after_change = slowest``, no chase).

    Without a signature (``None``: an object store, where a stat is an HTTP request, or a cheap
    look that failed or timed out) only the backoff paces the full looks, from ``first`` doubling
    up to ``slowest``, as before; a ``None`` is no change. Times are readings of a monotonic clock:
    a wall clock stepped back would postpone the backoff's looks, the only ones that notice a
    silent driver, a dead process or a deadline while nothing changes.

What it does not do
    Any I/O, or judge what it sees: the signature is compared for equality, nothing more.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: The signature a pacer knows before its first full look (equal to no signature taken).
NOTHING_SEEN = object()


@dataclass
class Pacer:
    """Decides, for one trigger, whether to make a full look now and how long to sleep."""

    tick: float
    first: float
    slowest: float
    after_change: float
    chase_for: float = 0.0
    _signature: Any = field(default=NOTHING_SEEN, repr=False)
    _chase_until: float = field(default=float("-inf"), repr=False)
    _delay: float = field(default=0.0, repr=False)
    _next_full_at: float = field(default=float("-inf"), repr=False)

    def __post_init__(self) -> None:
        if min(self.tick, self.first, self.slowest, self.after_change) <= 0:
            raise ValueError(f"pacing intervals must be positive: {self}")
        self._delay = self.first / 2  # the first full look doubles it to ``first``

    def full_look_due(self, now: float, signature: Any) -> bool:
        """Whether to make a full look now (``now``: monotonic), given the signature just taken
        (``None``: none)."""
        changed = signature is not None and signature != self._signature
        return changed or now >= self._next_full_at

    def looked(self, now: float, signature: Any) -> None:
        """A full look was made at ``now``; ``signature`` is the one taken just before it."""
        changed = (
            signature is not None
            and self._signature is not NOTHING_SEEN
            and signature != self._signature
        )
        if changed:
            self._chase_until = now + self.chase_for
            self._delay = min(self.slowest, self.after_change)
        elif now < self._chase_until:
            self._delay = min(self.slowest, self.after_change)
        else:
            self._delay = min(self.slowest, self._delay * 2)
        if signature is not None:
            self._signature = signature
        self._next_full_at = now + self._delay

    @property
    def known_signature(self) -> Any:
        """The signature taken before the last full look (``NOTHING_SEEN`` before the first): a
        cheap look need not wake its trigger while the signature stays this one."""
        return self._signature

    def until_full_look(self, now: float) -> float:
        """Seconds until the backoff's next full look (0 when it is due)."""
        return max(0.0, self._next_full_at - now)

    def sleep_for(self, now: float, has_signature: bool) -> float:
        """How long to sleep before the next look: a tick while signatures can be taken, else
        until the next full look."""
        until_full = max(0.0, self._next_full_at - now)
        return min(self.tick, until_full) if has_signature else until_full


def listing_interval(directories: int, fastest: float, per_second: float) -> float:
    """Seconds between two cheap looks that list ``directories`` directories each: every
    ``fastest`` seconds, but no more than ``per_second`` directory listings a second on average
    (on NFS each listing is a round trip; the ready-to-close trigger lists one per unreported
    source)."""
    return max(fastest, directories / per_second)


def min_deferral_wait(not_before: float, now: float, min_deferral: float) -> float:
    """Seconds a trigger still waits before it fires: until ``not_before``, but never longer than
    ``min_deferral``.

    ``not_before`` is a moment on the deferring worker's wall clock (``now`` + ``min_deferral``
    there) and ``now`` the reading of the trigger's own wall clock: the triggerer may run on
    another host, and a worker whose clock runs minutes ahead must not keep its task deferred for
    the difference. A worker behind asks for no wait at all (0). The caller sleeps the result.
    """
    return max(0.0, min(not_before - now, min_deferral))
