"""Checkpoint freshness (G7): which attempt is a job's current one, and is it checkpointing?

Pure functions over ledgers and a task state: no storage, no Airflow, no clock.

Theory of operation
-------------------
A job is one deploy task (``ZetaSparkJobOperator``) of a run. Its attempts are the token
directories under ``runs/<dag>/<run>/attempts/<task>/<map_index>/``, each with the ledger its
driver writes. The driver records a checkpoint when the job calls ``zeta_context().checkpoint()``
and, automatically, on every Structured Streaming progress event (a micro-batch committed) and
idle event (polled, no new data: a sign of life); the ledger carries the time of the last one
(``last_checkpoint_at``). The current attempt is the newest by start (``current_attempt``,
``current_ledger``).

``judge_freshness`` looks at the job's task state and its current attempt's ledger, first match wins:

=====================  ==========  ==================================================================
rule                   verdict     when
=====================  ==========  ==================================================================
``job_ended``          ended       the deploy task is finished (success, failed, skipped, ...)
``ledger_unreadable``  stale       the current ledger cannot be parsed: nobody can tell its progress
``not_started``        watching    no attempt has written a ledger yet
``between_attempts``   watching    the latest attempt ended, the task has not (a retry may redeploy)
``checkpoint_stale``   stale       the running attempt's last checkpoint is older than the threshold,
                                   or, before its first checkpoint, its start is older than the
                                   first-checkpoint threshold (the threshold unless one is given)
``fresh``              watching    otherwise; ``stale_at`` is the absolute moment it would go stale
=====================  ==========  ==================================================================

The first checkpoint gets a threshold of its own (``first_checkpoint_threshold``) because a
driver's first micro-batch waits for the JVM, the session and the first read of a backlog: a
stream that commits every minute may need ten to start. Once the first checkpoint is recorded only
``threshold`` counts.

Ages are measured against the ledger's own absolute times, never against when the watch began, so
a restart of whoever watches cannot stretch a wait. A driver that stopped heartbeating also stops
checkpointing, so a lost driver is caught by the same rule (the message gives both ages).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

from airflow_provider_zeta.core.ledger import CorruptState, Ledger

#: Task states after which a deploy task will not run its job again (unless cleared).
JOB_FINISHED_STATES = frozenset({"success", "failed", "skipped", "upstream_failed", "removed"})


class Freshness(str, Enum):
    """A checkpoint-freshness verdict: still watching, stale, or the job ended."""

    WATCHING = "watching"
    STALE = "stale"
    ENDED = "ended"


@dataclass(frozen=True)
class FreshnessJudgement:
    """``judge_freshness``'s verdict on a job, the rule behind it and the checkpoint's age."""

    verdict: Freshness
    rule: str
    message: str
    token: str | None = None
    age: float | None = None  # seconds since the last checkpoint (or the start) of the running attempt
    stale_at: float | None = None  # WATCHING a running attempt: when it goes stale without a new checkpoint


def current_attempt(ledgers: Iterable[Ledger]) -> Ledger | None:
    """The attempt a job is on now: the newest one by start, whatever its status.

    At most one driver of a task is live at a time (G1): a newer attempt is only started once the
    older one is over, so the newest is the current one. An older ledger still saying ``running``
    is a driver that was killed without writing its end (SIGKILL, lost host), never the current one.
    """
    ledgers = list(ledgers)
    return max(ledgers, key=lambda ledger: (ledger.started_at, ledger.token)) if ledgers else None


def current_ledger(ledgers: Iterable[Ledger | CorruptState]) -> Ledger | CorruptState | None:
    """What counts for a job when some of its attempts' ledgers may be unreadable.

    The current readable attempt (``current_attempt``) wins; an unreadable ledger has no start time
    to be compared by, so it counts only when no ledger can be read: then nobody can tell the job's
    progress, and the first unreadable one is the answer (the watch fails, the page shows
    ``corrupt``). ``None`` when there is no ledger at all. Used by the sensor and by the page.
    """
    ledgers = list(ledgers)
    current = current_attempt(ledger for ledger in ledgers if isinstance(ledger, Ledger))
    if current is not None:
        return current
    return next((ledger for ledger in ledgers if isinstance(ledger, CorruptState)), None)


def progress_mark(ledger: Ledger) -> float:
    """The moment of the attempt's last progress: its last checkpoint, or its start before the first."""
    return ledger.last_checkpoint_at if ledger.last_checkpoint_at is not None else ledger.started_at


def checkpoint_age(ledger: Ledger, now: float) -> float:
    """Seconds since the attempt's last progress (``progress_mark``), never negative."""
    return max(0.0, now - progress_mark(ledger))


def describe_age(seconds: float | None) -> str:
    """``"7s"``, ``"3m 05s"``, ``"2h 04m"``; ``"-"`` for unknown."""
    if seconds is None:
        return "-"
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m {seconds % 60:02d}s"
    return f"{seconds // 3600}h {seconds % 3600 // 60:02d}m"


def judge_freshness(
    job: str,
    task_state: str | None,
    ledger: Ledger | CorruptState | None,
    now: float,
    threshold: float,
    first_checkpoint_threshold: float | None = None,
) -> FreshnessJudgement:
    """Judge one job (``job`` names it in messages, e.g. ``"dag.task"``) at ``now``.

    ``first_checkpoint_threshold`` bounds the time from the attempt's start to its first
    checkpoint (``None``: ``threshold``)."""
    if threshold <= 0:
        raise ValueError(f"threshold must be positive seconds, got {threshold!r}")
    if first_checkpoint_threshold is not None and first_checkpoint_threshold <= 0:
        raise ValueError(f"first_checkpoint_threshold must be positive seconds, got {first_checkpoint_threshold!r}")
    if task_state in JOB_FINISHED_STATES:
        token = ledger.token if isinstance(ledger, Ledger) else None
        return FreshnessJudgement(Freshness.ENDED, "job_ended", f"job {job} ended ({task_state})", token)
    if isinstance(ledger, CorruptState):
        return FreshnessJudgement(
            Freshness.STALE, "ledger_unreadable", f"job {job}: its progress cannot be read: {ledger}"
        )
    if ledger is None:
        return FreshnessJudgement(Freshness.WATCHING, "not_started", f"job {job} has not started a driver yet")
    if ledger.status.terminal:
        return FreshnessJudgement(
            Freshness.WATCHING,
            "between_attempts",
            f"job {job}: attempt {ledger.token} ended {ledger.status.value}; the task is {task_state or 'unknown'}",
            ledger.token,
        )
    age = checkpoint_age(ledger, now)
    if ledger.last_checkpoint_at is not None:
        since, limit, named = "its last checkpoint", threshold, "the threshold"
    else:
        since = "its start (no checkpoint yet)"
        limit = threshold if first_checkpoint_threshold is None else first_checkpoint_threshold
        named = "the threshold" if first_checkpoint_threshold is None else "the first-checkpoint threshold"
    where = f"job {job} (source {ledger.source or '?'}, attempt {ledger.token})"
    if age > limit:
        return FreshnessJudgement(
            Freshness.STALE,
            "checkpoint_stale",
            f"{where}: {since} was {describe_age(age)} ago ({age:.1f}s), more than {named} of "
            f"{limit:.0f}s; driver heartbeat {describe_age(ledger.heartbeat_age(now))} ago, "
            f"{ledger.checkpoints} checkpoint(s) so far",
            ledger.token,
            age,
        )
    return FreshnessJudgement(
        Freshness.WATCHING,
        "fresh",
        f"{where}: {since} was {describe_age(age)} ago ({named} {limit:.0f}s)",
        ledger.token,
        age,
        stale_at=progress_mark(ledger) + limit,
    )


def next_look(judgement: FreshnessJudgement, now: float, poll_interval: float) -> float:
    """When a watcher should look again: after one poll, or just past the moment it would go stale."""
    moment = now + poll_interval
    if judgement.stale_at is not None:
        moment = min(moment, judgement.stale_at + 0.5)
    return max(moment, now + 0.5)
