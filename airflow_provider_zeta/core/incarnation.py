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
instance carries its own evidence: ``max_tries - retries`` is the try number its latest clear came
after (0 when it was never cleared). It never falls, and every clear after which the task ran again
raises it (the cleared try number is at least one more than the previous clear's).

Rules (pure, logged as ``zeta.incarnation.<rule>`` by their callers)
---------------------------------------------------------------------
* ``task_clear_epoch``: a task's own clear evidence, as above.
* ``publish_incarnation``: the incarnation a ready-to-close sensor puts in its ready set, which the
  completed point commits under: ``clear_number + task_clear_epoch(sensor)``. Every clear that
  makes the sensor wait again raises it (a clear with ``reset_dag_runs`` raises ``clear_number``;
  any clear of the sensor, with or without it, raises its epoch), and nothing else does, so a
  retried or restarted sensor keeps the incarnation it published under (``already_published``)
  and a re-run one publishes a newer one (``newer_incarnation``: the old partition becomes a
  tombstone). A run never cleared publishes under ``clear_number``, as before.

Not seen by any rule: a clear of a *running* task whose executor never reports the killed try (its
worker died with it): Airflow then retries it without raising ``max_tries``, as after a crash.
"""

from __future__ import annotations


def task_clear_epoch(max_tries: int | None, retries: int | None) -> int:
    """The try number a task instance's latest clear came after (0: never cleared, or unknown).

    Airflow sets ``max_tries`` to ``retries`` when it creates the task instance and to
    ``try_number + retries`` on each clear of it; a retry or an orphan reset leaves it alone.
    Clamped at 0: a newer DAG version with more retries must not make the epoch negative.
    """
    if max_tries is None or max_tries < 0:
        return 0
    return max(0, int(max_tries) - max(0, int(retries or 0)))


def publish_incarnation(clear_number: int | None, max_tries: int | None, retries: int | None) -> int:
    """The incarnation a ready-to-close sensor's ready set (and so the completed point's commit)
    carries: the run's ``clear_number`` plus the sensor's own ``task_clear_epoch``. Rises on every
    clear that re-runs the sensor, whether or not the clear reset the run."""
    return max(0, int(clear_number or 0)) + task_clear_epoch(max_tries, retries)


#: What a clear without downstream looks like from a re-running deploy task: the ready-to-close
#: sensor reading it is still ``success`` (a clear with downstream, of the whole run or a
#: reprocessing backfill resets it, and while it waits it cannot be ``success`` before this task is).
SENSOR_DONE_STATES = frozenset({"success"})


def cleared_without_downstream(task_id: str, sensor_states: dict[str, str | None], published: bool) -> str | None:
    """Why a deploy task that was just cleared must not run its job again (None: it may).

    Rule ``cleared_without_downstream`` (the deploy task was cleared without the sensor: the sensor
    is not downstream of the deploys): the run's ready-to-close sensor that reads this task
    (``sensor_states``: its task id -> state now) already succeeded and was not cleared with it.
    Nothing would ever read a new attempt: the sensor's ready set and the completed point's commit
    keep the earlier one. Refusing before any launch keeps the published partition equal to the
    task's current attempt and fails the task, one of the run's last tasks, so the run ends
    ``failed`` with what to clear instead in the task's log.
    """
    done = sorted(sensor for sensor, state in sensor_states.items() if state in SENSOR_DONE_STATES)
    if not done:
        return None
    where = "published from its earlier attempt" if published else "holds its earlier attempt in its ready set"
    return (
        f"{task_id} was cleared, but {', '.join(done)} already succeeded and was not cleared with it: the run "
        f"{where}, and a new attempt would never be published. Nothing was launched; the earlier attempt "
        f"stays the published one. To reprocess this source, clear {task_id} together with {', '.join(done)} "
        "and its downstream tasks (UI: select both, Clear -> 'Downstream'; REST clearTaskInstances: "
        f"task_ids=[{task_id!r}, {', '.join(repr(d) for d in done)}] with include_downstream=true), which "
        "re-runs the ready-to-close wait and the completed point and republishes the partition."
    )
