"""Incarnations: which clear a task's work belongs to, for every clear Airflow 3.3 can make.

What each clear does (Airflow 3.3.2, ``models.taskinstance.clear_task_instances``)
--------------------------------------------------------------------------------------
* UI "Clear" (it posts ``clearTaskInstances`` without ``reset_dag_runs``, which defaults to true),
  REST ``clearTaskInstances`` with ``reset_dag_runs`` true, CLI ``airflow tasks clear`` and a
  backfill with reprocessing (``dag.clear(dag_run_state=QUEUED)``): the run's ``clear_number``
  rises by one, and every cleared task instance that is not running gets ``max_tries =
  try_number + retries``. A running one turns ``restarting`` and gets the same ``max_tries`` when
  its executor reports it ended.
* REST ``clearTaskInstances`` with ``reset_dag_runs`` false: the same for the task instances, but
  ``clear_number`` does **not** change.
* No clear changes ``try_number``; the scheduler raises it by one when it schedules the next try,
  as it does for a retry or an orphan reset. Neither a retry nor an orphan reset changes
  ``max_tries`` or ``clear_number``.

So ``clear_number`` alone misses the clears made with ``reset_dag_runs`` false, and each task
instance carries its own evidence: every clear of it writes a new ``max_tries`` (``try_number +
retries``, the try number having risen since the previous clear), and nothing else does. Its
*value* says nothing on its own: ``retries`` is the DAG version's, and a DAG edit between two clears
(or a clear made with another version than the one the task then runs) can make ``max_tries -
retries`` fall or stay. So the task that publishes counts the changes it sees instead.

Rules (pure, logged as ``zeta.incarnation.<rule>`` by their callers)
---------------------------------------------------------------------
* ``clear_epoch``: a ready-to-close sensor's count of its own clears, kept in its task state store
  (``CLEAR_EPOCH_KEY``, without expiry): one more each time it sees a ``max_tries`` it has not seen
  before for this run, whatever ``retries`` is now. It never falls, a retry or an orphan reset
  (``max_tries`` unchanged) keeps it, and the first look starts it at ``task_clear_epoch`` (0 for a
  sensor never cleared; what an earlier version published under for one cleared before it counted).
* ``publish_incarnation``: the incarnation a ready-to-close sensor puts in its ready set, which the
  completed point commits under: ``clear_number + clear_epoch``. Every clear that makes the sensor
  wait again raises it (a clear with ``reset_dag_runs`` raises ``clear_number``; any clear of the
  sensor, with or without it, raises its epoch), and nothing else does, so a retried or restarted
  sensor keeps the incarnation it published under (``already_published``) and a re-run one
  publishes a newer one (``newer_incarnation``: the old partition becomes a tombstone). A run never
  cleared publishes under ``clear_number``, as before.
* ``cleared_without_downstream``: a deploy task cleared without the sensor that reads it, after
  that sensor took the task's attempt into its ready set, launches nothing (below). "Took" is the
  sensor's state ``success`` or its decision record (``SENSOR_DECISION_XCOM``), written before its
  success is: a decision in flight counts. ``sensor_still_deciding``: a running sensor's record
  may be its previous try's, not yet wiped: the deploy task looks again until it knows.
* ``refusal_shown``: the deploy task keeps what it refused (``REFUSAL_KEY``, the try number and
  the reason, which names only task ids); the monitoring page shows it beside the source while
  that try is the task's current one and ``failed`` (``current_refusal``).

Not seen by any rule: a clear of a *running* task whose executor never reports the killed try (its
worker died with it): Airflow then retries it without raising ``max_tries``, as after a crash. Nor a
clear of the sensor (with ``reset_dag_runs`` false) that writes the very ``max_tries`` it had, which
takes a DAG edit lowering ``retries`` by exactly the number of tries run since its previous clear.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from airflow_provider_zeta.core.ledger import CorruptState

#: The sensor's task state store key of its ``clear_epoch`` record.
CLEAR_EPOCH_KEY = "zeta_clear_epoch"


def task_clear_epoch(max_tries: int | None, retries: int | None) -> int:
    """``max_tries - retries``: the try a task instance's latest clear came after, *if* ``retries``
    is still what that clear used (0: never cleared, or unknown). Only ``clear_epoch``'s starting
    value, for a sensor with no record yet: a DAG edit of ``retries`` makes it wrong, so no rule
    compares two of them."""
    if max_tries is None or max_tries < 0:
        return 0
    return max(0, int(max_tries) - max(0, int(retries or 0)))


def clear_epoch(stored: Any, max_tries: int | None, retries: int | None) -> tuple[dict[str, Any], bool]:
    """A sensor's clear count now, as the record to keep under ``CLEAR_EPOCH_KEY``, and whether it
    must be (re)written. One more than ``stored``'s when ``max_tries`` differs from the one it saw
    (a clear of the sensor: nothing else writes ``max_tries``), the same otherwise; the first look
    starts it at ``task_clear_epoch``. Raises ``CorruptState`` for a stored value that is not one."""
    seen = None if max_tries is None or max_tries < 0 else int(max_tries)
    if stored is None:
        return {"epoch": task_clear_epoch(max_tries, retries), "max_tries": seen}, True
    try:
        if not isinstance(stored, Mapping) or isinstance(stored.get("epoch"), bool):
            raise TypeError
        epoch = int(stored["epoch"])
        saw = None if stored.get("max_tries") is None else int(stored["max_tries"])
        if epoch < 0:
            raise ValueError
    except (KeyError, TypeError, ValueError):
        raise CorruptState(f"the stored clear epoch {stored!r} is not one; delete the key to count from max_tries - retries again") from None
    if seen is None or seen == saw:
        return {"epoch": epoch, "max_tries": saw}, False
    return {"epoch": epoch + 1, "max_tries": seen}, True


def publish_incarnation(clear_number: int | None, epoch: int) -> int:
    """The incarnation a ready-to-close sensor's ready set (and so the completed point's commit)
    carries: the run's ``clear_number`` plus the sensor's ``clear_epoch``. Rises on every clear that
    re-runs the sensor, whether or not the clear reset the run, whatever ``retries`` is now."""
    return max(0, int(clear_number or 0)) + max(0, int(epoch))


#: The sensor's XCom naming the attempts its ready set holds (``sensor_decision``), written before
#: it (or its trigger) ends the sensor with that ready set, and taken back (``{}``) if a look after
#: writing it finds a source no longer ready. An XCom, not the task state store: a deploy task can
#: read another task's XComs, not its task state store. Wiped with the sensor's other XComs when
#: it starts afresh (a retry, a clear): such a sensor has decided nothing yet.
SENSOR_DECISION_XCOM = "zeta_ready_decision"


def sensor_decision(reports: Mapping[str, Any]) -> dict[str, Any]:
    """The value of ``SENSOR_DECISION_XCOM`` for a ready set made of ``reports`` (source -> report
    with ``task_id`` and ``token``): deploy task id -> attempt token."""
    return {"tokens": {str(report.task_id): str(report.token) for report in reports.values()}}


def decision_names(value: Any, task_id: str, token: str | None) -> bool:
    """Whether a sensor's decision record (as read back: a dict, or its JSON text) names attempt
    ``token`` of ``task_id``. A missing, taken-back or unreadable record names nothing."""
    if not token or value is None:
        return False
    if isinstance(value, (str, bytes)):
        try:
            value = json.loads(value)
        except ValueError:
            return False
    tokens = value.get("tokens") if isinstance(value, Mapping) else None
    return isinstance(tokens, Mapping) and tokens.get(task_id) == token


#: What a clear without downstream looks like from a re-running deploy task: the ready-to-close
#: sensor reading it is still ``success`` (a clear with downstream, of the whole run or a
#: reprocessing backfill resets it, and while it waits it cannot be ``success`` before this task is),
#: or its decision record names the task's previous attempt (``cleared_without_downstream``).
SENSOR_DONE_STATES = frozenset({"success"})

#: The states of a sensor whose decision record is read: it may be ending with a decision not yet
#: stored as ``success``, running (returning its ready set on a worker) or deferred (its trigger's
#: success event on its way). In any other state (scheduled, queued, up_for_retry, ...) it decided
#: nothing that can still end it: a wake from its trigger decides on the worker, and its next try
#: wipes its XComs.
SENSOR_DECIDING_STATES = frozenset({"running", "deferred"})

#: Of those, the states in which a record naming the task's attempt is this try's decision: a
#: deferred sensor's try wiped the XComs of the try before and stored an empty record before it
#: deferred. A *running* one may still show the record of its previous try: Airflow wipes a task's
#: XComs only once its new try's process starts (``xcom_keys_to_clear``), seconds after it is
#: ``running`` (``sensor_still_deciding``).
SENSOR_ENDING_STATES = frozenset({"deferred"})


def cleared_without_downstream(
    task_id: str,
    sensor_states: dict[str, str | None],
    published: bool,
    decisions: Mapping[str, Any] | None = None,
    previous_token: str | None = None,
) -> str | None:
    """Why a deploy task that was just cleared must not run its job again (None: it may).

    Rule ``cleared_without_downstream`` (the deploy task was cleared without the sensor: the sensor
    is not downstream of the deploys): a ready-to-close sensor that reads this task (``sensor_states``:
    its task id -> state now) already took the task's attempt into its ready set and was not
    cleared with it: it succeeded, or it is deferred (``SENSOR_ENDING_STATES``) and its decision
    record (``decisions``: its task id -> its ``SENSOR_DECISION_XCOM`` as read now) names this
    task's previous attempt ``previous_token``, its success being still in flight (the sensor returning on its worker, or its trigger's success
    event not yet stored). Nothing would ever read a new attempt: the sensor's ready set and the
    completed point's commit keep the earlier one. Refusing before any launch keeps the published
    partition equal to the task's current attempt and fails the task, one of the run's last tasks,
    so the run ends ``failed`` with what to clear instead in the task's log.

    The sensor writes its record, then looks at the sources' states once more before it ends, and
    this task is cleared before it reads the record: one of the two sees the other.
    """
    decisions = decisions or {}
    done = sorted(
        sensor
        for sensor, state in sensor_states.items()
        if state in SENSOR_DONE_STATES
        or (state in SENSOR_ENDING_STATES and decision_names(decisions.get(sensor), task_id, previous_token))
    )
    if not done:
        return None
    where = "published from its earlier attempt" if published else "holds its earlier attempt in its ready set"
    return (
        f"{task_id} was cleared, but {', '.join(done)} already took its earlier attempt into its ready set (it "
        "succeeded, or is ending with it) and was not cleared with it: the run "
        f"{where}, and a new attempt would never be published. Nothing was launched; the earlier attempt "
        f"stays the published one. To reprocess this source, clear {task_id} together with {', '.join(done)} "
        "and its downstream tasks (UI: select both, Clear -> 'Downstream'; REST clearTaskInstances: "
        f"task_ids=[{task_id!r}, {', '.join(repr(d) for d in done)}] with include_downstream=true), which "
        "re-runs the ready-to-close wait and the completed point and republishes the partition."
    )


def sensor_still_deciding(
    task_id: str, sensor_states: dict[str, str | None], decisions: Mapping[str, Any], previous_token: str | None
) -> list[str]:
    """The sensors a deploy task just cleared must look at again before it may run (rule
    ``sensor_deciding``): running, with a decision record naming this task's previous attempt. That
    record is either this try's decision, the sensor returning on its worker (it is ``success`` a
    moment later: ``cleared_without_downstream``), or its previous try's, not yet wiped by a try
    that was cleared with this task and starts (it is gone a moment later and the try defers: run).
    Neither lasts: look again shortly."""
    return sorted(
        sensor
        for sensor, state in sensor_states.items()
        if state in SENSOR_DECIDING_STATES
        and state not in SENSOR_ENDING_STATES
        and decision_names(decisions.get(sensor), task_id, previous_token)
    )


#: The deploy task's record of a try it refused (``cleared_without_downstream``), kept in its task
#: state store for the monitoring page: ``{"try_number": n, "rule": ..., "reason": ...}``.
REFUSAL_KEY = "zeta_refusal"


def refusal_record(try_number: int, rule: str, reason: str) -> dict[str, Any]:
    """What the deploy task keeps under ``REFUSAL_KEY`` before it fails a try for ``rule``."""
    return {"try_number": int(try_number), "rule": rule, "reason": reason}


def current_refusal(value: Any, task_state: str | None, try_number: int) -> str | None:
    """Rule ``refusal_shown``: the refusal to show beside a deploy task, if any. Only the refusal of
    the task's current try while that try is ``failed``: a later try (cleared again, the right way)
    or a record of another shape shows nothing."""
    if task_state != "failed" or not isinstance(value, dict):
        return None
    if value.get("try_number") != try_number or not isinstance(value.get("reason"), str):
        return None
    rule = value.get("rule") if isinstance(value.get("rule"), str) else "refused"
    return f"[{rule}] {value['reason']}"
