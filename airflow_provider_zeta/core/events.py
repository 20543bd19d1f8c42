"""Trigger events reach the task they were meant for, or none: the rules, I/O-free.

Why
---
Airflow's triggerer knows a running trigger only by its row id, and hands its event to every task
instance deferred on that id. On SQLite a new row takes the id after the highest one present, so
when the row with the highest id is deleted (its task no longer waits on it: the task was marked
failed, its run ended) and a new deferral takes that id before the triggerer's next look, the
triggerer keeps running the *old* trigger under that id — it never starts the new one — and when
the old trigger fires, its event wakes the new task. Seen in this project's suite after a
triggerer restart: a deploy task woken by another run's driver trigger, a ready-to-close sensor
failed by another run's verdict.

The rules
---------
* Every event of the provider's triggers names the task instance it is for (``task_key``: dag id,
  run id, task id, map index). A task woken by an event for another task instance — or by one that
  is not a mapping, or, without a key (a trigger deferred by an earlier version), lacks the fields
  its own trigger always sends — ignores its content and looks for itself (``event_is_for``).
* A trigger that would end its task itself (a ``TaskSuccessEvent``, which no task code sees) does
  so only when it proves it is the trigger its task instance waits on now
  (``may_end_task_from_trigger``): that task instance reads ``deferred`` *and* its latest deferral
  mark (an XCom the task writes just before it defers, also in the trigger's kwargs) is this
  trigger's. A trigger cleared and deferred again, or resumed and deferred again, wrote a new mark.
  Otherwise it wakes whoever holds its id with a keyed event, and that task's code decides.
* A trigger re-reads its task instance's state now and then (``STALE_CHECK_EVERY``); once that
  one no longer waits deferred, the trigger is stale — it runs only because its id was reused — and
  it wakes the holder of the id at once with a keyed event instead of holding it until it fires.
  It never exits without an event: Airflow would fail the holder.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

TASK_KEY_FIELDS = ("dag_id", "run_id", "task_id", "map_index")


#: The deploy task's XCom naming its latest deferral, written just before it defers on a driver
#: trigger that may end it (``core.deploy.trigger_reports_success``).
DEPLOY_DEFERRAL_XCOM = "zeta_deploy_deferral"

#: The deploy task's XCom holding the report its driver trigger is about to end it with, written
#: just before the ``TaskSuccessEvent`` that carries the same report as the task's return value: a
#: ready-to-close wait may count it a beat before the task reads ``success``
#: (``core.ready.REPORTED_WHILE_DEFERRED``). Never the return value itself: a trigger that proved
#: itself current and then froze may write it late, after the task ran again, and the return value
#: of the new try must stay its own (Airflow stores the event's XCom only while the task still
#: waits on that trigger).
DEPLOY_EARLY_REPORT_XCOM = "zeta_deploy_report_while_deferred"

#: The field of a report stored by a driver trigger (the deploy task's return value) that names
#: the deferral it was stored under (its ``DEPLOY_DEFERRAL_XCOM`` mark): a ready-to-close wait
#: counts such a report before the task ends only while that deferral is the task's latest
#: (``core.ready.REPORTED_WHILE_DEFERRED``), never one a stale trigger stored late.
REPORT_DEFERRAL_FIELD = "deferral_mark"

#: Seconds between two looks of a trigger at its own task instance's state (one API call each).
STALE_CHECK_EVERY = 60.0


def task_key(dag_id: str, run_id: str, task_id: str, map_index: int | None = -1) -> dict[str, Any]:
    """The key an event carries: which task instance it is for."""
    return {"dag_id": dag_id, "run_id": run_id, "task_id": task_id, "map_index": -1 if map_index is None else int(map_index)}


def event_is_for(event: object, own: Mapping[str, Any], required: tuple[str, ...] = ()) -> bool:
    """Whether a woken task may act on ``event``: a mapping that names this task instance, or
    names none but has every ``required`` field its own trigger sends."""
    if event is None:
        return True
    if not isinstance(event, Mapping):
        return False
    key = event.get("task_key")
    if not isinstance(key, Mapping):
        return all(field in event for field in required)
    return all(_same(field, key.get(field), own.get(field)) for field in TASK_KEY_FIELDS)


def may_end_task_from_trigger(own_state: str | None, latest_mark: object, own_mark: str | None) -> bool:
    """Whether a trigger may end its task instance itself: only when that one waits deferred and
    its latest deferral mark is this trigger's. Anything unreadable (``None``) says no: the trigger
    then wakes the task, whose own code checks the event."""
    return own_state == "deferred" and own_mark is not None and latest_mark == own_mark


def trigger_is_stale(own_state: str | None, latest_mark: object = None, own_mark: str | None = None) -> bool:
    """A trigger still running although its task instance no longer waits on it — not deferred, or
    deferred again with a newer mark: only its id, reused by another deferral, keeps it alive.
    Anything unreadable (``None``) is no proof."""
    if own_state is not None and own_state != "deferred":
        return True
    return own_mark is not None and latest_mark is not None and latest_mark != own_mark


def _same(field: str, theirs: Any, ours: Any) -> bool:
    if field == "map_index":
        return int(theirs if theirs is not None else -1) == int(ours if ours is not None else -1)
    return theirs == ours
