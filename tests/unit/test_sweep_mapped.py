"""The sweep sees the task state of a mapped deploy task's instances.

Airflow's task-states call (``ti.get_task_states``, the execution API's ``/task-instances/states``)
names an unmapped task instance by its task id and a mapped one ``<task id>_<map index>``. A
driver's attempt directory (``core.paths.attempt_dir``) holds its map index, so the sweep looks a
driver's task up by both: a live driver of a finished mapped instance is stopped in an active run,
and a run whose drivers all belong to finished tasks is listed as retained, mapped or not.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from airflow_provider_zeta import janitor
from airflow_provider_zeta.core.cleanup import Leftovers, RunPhase, RunStatus, RunView, new_record, plan_sweep, task_state_key
from airflow_provider_zeta.core.paths import attempt_dir, run_attempts_dir
from airflow_provider_zeta.core.ready import task_ref, task_state_name
from airflow_provider_zeta.storage import StateStorage, register_run

DAG, RUN = "sales", "scheduled__2026-11-01T00:00:00+00:00"
RETENTION = 3600.0


def write_attempt(state: StateStorage, task_id: str, map_index: int, token: str, status: str = "running") -> str:
    attempt = attempt_dir(DAG, RUN, task_id, map_index, token)
    ledger = {"token": token, "status": status, "started_at": 1, "heartbeat_at": 2, "task_id": task_id}
    state.write_atomic(f"{attempt}/ledger.json", json.dumps(ledger).encode())
    return attempt


@pytest.fixture()
def state(tmp_path: Path) -> StateStorage:
    storage = StateStorage.from_url(str(tmp_path / "state"))
    register_run(storage, DAG, RUN)
    return storage


def views_by_token(state: StateStorage, task_states):
    _, attempts = janitor.find_leftovers(state, DAG, RUN, StateStorage.from_url)
    return {v.token: v for v in janitor.driver_views(state, attempts, task_states)}


@pytest.mark.parametrize(
    ("task_id", "map_index", "name"),
    [("p.deploy", -1, "p.deploy"), ("p.deploy", None, "p.deploy"), ("p.deploy", 0, "p.deploy_0"), ("p.deploy", 12, "p.deploy_12")],
)
def test_a_task_instance_is_named_as_airflows_task_states_name_it(task_id, map_index, name):
    assert task_state_key(task_id, map_index) == name
    assert task_state_name(task_ref(task_id, map_index)) == name  # the ready-to-close wait names it alike


def test_a_mapped_drivers_task_state_is_found_by_task_id_and_map_index(state):
    write_attempt(state, "p.deploy", 0, "mapped0")
    write_attempt(state, "p.deploy", 1, "mapped1")
    write_attempt(state, "q.deploy", -1, "plain")
    views = views_by_token(state, {"p.deploy_0": "success", "p.deploy_1": "deferred", "q.deploy": "success"})
    assert {t: (v.task_id, v.map_index, v.task_state) for t, v in views.items()} == {
        "mapped0": ("p.deploy", 0, "success"),
        "mapped1": ("p.deploy", 1, "deferred"),
        "plain": ("q.deploy", -1, "success"),
    }


def test_without_task_states_no_driver_has_one(state):
    write_attempt(state, "p.deploy", 0, "mapped0")
    assert views_by_token(state, None)["mapped0"].task_state is None


def test_an_attempt_directory_whose_map_index_is_no_number_has_no_task_state(state):
    """Not a directory this provider writes: its task's state is unknown (never stopped in an active run)."""
    state.write_atomic(f"{run_attempts_dir(DAG, RUN)}/p.deploy/x/odd/ledger.json", b"")
    views = views_by_token(state, {"p.deploy": "success", "p.deploy_x": "success"})
    assert (views["odd"].map_index, views["odd"].task_state) == (None, None)


def active_plan(state: StateStorage, task_states, pending: bool = True):
    _, attempts = janitor.find_leftovers(state, DAG, RUN, StateStorage.from_url)
    records = (new_record(DAG, RUN, 0, "p.cleanup", time.time(), RETENTION, Leftovers()),) if pending else ()
    view = RunView(DAG, RUN, "running", records, drivers=tuple(janitor.driver_views(state, attempts, task_states)))
    return plan_sweep(view, time.time(), RETENTION)


def test_active_run_stops_the_live_driver_of_a_finished_mapped_instance_and_is_retained(state):
    """The reviewer's case: a mapped and an unmapped deploy task both succeeded, their drivers still live."""
    write_attempt(state, "p.deploy", 0, "mapped0")
    write_attempt(state, "q.deploy", -1, "plain")
    plan = active_plan(state, {"p.deploy_0": "success", "q.deploy": "success"})
    assert plan.rule == "run_active"
    assert sorted(d.token for d in plan.stop) == ["mapped0", "plain"]
    assert plan.phase is RunPhase.RETAINED


def test_active_run_stops_a_removed_mapped_instances_driver_but_not_its_running_sibling(state):
    """A mapped task re-expanded to fewer sources: index 1 is ``removed``, index 0 still runs."""
    write_attempt(state, "p.deploy", 0, "mapped0")
    write_attempt(state, "p.deploy", 1, "mapped1")
    plan = active_plan(state, {"p.deploy_0": "running", "p.deploy_1": "removed"})
    assert [d.token for d in plan.stop] == ["mapped1"]
    assert plan.phase is RunPhase.RUNNING


def test_the_sweeps_run_view_looks_mapped_instances_up_by_airflows_names(state, monkeypatch):
    """The sweep operator's own path: run state and task states through the Task SDK (faked here)."""
    from airflow_provider_zeta.operators import sweep

    write_attempt(state, "p.deploy", 2, "mapped2")
    write_attempt(state, "q.deploy", -1, "plain")
    monkeypatch.setattr(sweep, "run_status", lambda ti, dag_id, run_id: RunStatus("running", 0))

    class FakeTI:
        def get_task_states(self, dag_id, run_ids):
            # as the execution API builds it: ``<task id>_<map index>`` for a mapped instance
            return {run_ids[0]: {"p.deploy_2": "success", "q.deploy": "running"}}

    view = sweep._run_view(FakeTI(), state, DAG, RUN)
    assert {d.token: d.task_state for d in view.drivers} == {"mapped2": "success", "plain": "running"}
    assert [d.token for d in plan_sweep(view, time.time(), RETENTION).stop] == ["mapped2"]


def test_the_delayed_cleanup_finds_and_stops_every_map_index_of_its_tasks(state):
    """The delayed cleanup names its tasks by task id alone (``task_ids``) and asks no task state:
    every map index's attempts are its leftovers, and every live driver among them is stopped."""
    write_attempt(state, "p.deploy", 0, "mapped0")
    write_attempt(state, "p.deploy", 1, "mapped1", status="succeeded")
    write_attempt(state, "q.deploy", -1, "other")
    leftovers, attempts = janitor.find_leftovers(state, DAG, RUN, StateStorage.from_url, task_ids=["p.deploy"])
    assert leftovers.state_paths == tuple(sorted(attempt_dir(DAG, RUN, "p.deploy", i, f"mapped{i}") for i in (0, 1)))
    assert [v.token for v in janitor.driver_views(state, attempts) if v.live] == ["mapped0"]
