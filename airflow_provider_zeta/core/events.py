"""Trigger events reach the task they were meant for, or none: the rules, I/O-free.

Why
---
Airflow's triggerer knows a running trigger only by its row id, and hands its event to every task
instance deferred on that id. On SQLite a deleted row's id is given to the next new row: when the
row of a trigger whose task no longer waits on it (the task was marked failed, its run ended) is
deleted and its id goes to a new deferral, the triggerer keeps running the *old* trigger under that
id — it never starts the new one — and when the old trigger fires, its event wakes the new task.
Seen in this project's suite: a deploy task woken by another run's driver trigger, a ready-to-close
sensor failed by another run's verdict.

The rules
---------
* Every event of the provider's triggers names the task instance it is for (``task_key``: dag id,
  run id, task id, map index). A task woken by an event for another task instance ignores its
  content and looks for itself (``event_is_for``); an event without a key (a trigger deferred by an
  earlier version) is taken as before.
* A trigger that would end its task itself (a ``TaskSuccessEvent``, which no task code sees) first
  checks that its task instance still waits deferred (``may_end_task_from_trigger``); otherwise it
  is a stale trigger and ends without an event. (The remaining window: its task instance cleared
  and deferred again on a new trigger, and this old one's id reused meanwhile. The completed point
  then finds the foreign reports' attempts missing under its own run and publishes nothing.)
"""

from __future__ import annotations

from typing import Any, Mapping

TASK_KEY_FIELDS = ("dag_id", "run_id", "task_id", "map_index")


def task_key(dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> dict[str, Any]:
    """The key an event carries: which task instance it is for."""
    return {"dag_id": dag_id, "run_id": run_id, "task_id": task_id, "map_index": int(map_index)}


def event_is_for(event: Mapping[str, Any] | None, own: Mapping[str, Any]) -> bool:
    """Whether a woken task may act on ``event``: it names this task instance, or names none."""
    key = (event or {}).get("task_key")
    if not isinstance(key, Mapping):
        return True
    return all(_same(field, key.get(field), own.get(field)) for field in TASK_KEY_FIELDS)


def may_end_task_from_trigger(own_state: str | None) -> bool:
    """Whether a trigger may end its task instance itself: only while that one still waits on a
    trigger. An unreadable state (``None``) does not count as waiting: the trigger then wakes the
    task instead, whose own code checks the event."""
    return own_state == "deferred"


def _same(field: str, theirs: Any, ours: Any) -> bool:
    if field == "map_index":
        return int(theirs if theirs is not None else -1) == int(ours if ours is not None else -1)
    return theirs == ours
