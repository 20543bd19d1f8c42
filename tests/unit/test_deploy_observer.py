"""observers.look_at_attempt: the one reading of a deploy attempt, by the task and by its trigger.

The deploy task (``ZetaSparkJobOperator._observe``) and its driver trigger (``ZetaDriverTrigger._look``)
read an attempt the same way; what differs between them (the process check, how a mark is counted,
what is known of the attempt) is passed in. These tests pin the reading itself, each branch of it,
and that both sides go through it.
"""

from __future__ import annotations

import json
import os
import time
from types import SimpleNamespace

import pytest

from airflow_provider_zeta import observers
from airflow_provider_zeta.core.deploy import ProcessView, Timing
from airflow_provider_zeta.core.ledger import (
    AttemptRecord,
    CorruptState,
    HeartbeatSeen,
    Ledger,
    LedgerStatus,
    Phase,
    attempt_record_key,
)
from airflow_provider_zeta.core.paths import INTENT_FILE, LEDGER_FILE, attempt_dir
from airflow_provider_zeta.observers import AttemptLook, handle_view, look_at_attempt
from airflow_provider_zeta.processes import ProcessHandle, handle_alive, host_id, process_start_time, this_host
from airflow_provider_zeta.settings import open_state_storage


class Counter:
    """A mark counter that records what it was asked to count."""

    def __init__(self) -> None:
        self.counted: list[tuple[str, str]] = []

    def __call__(self, token: str, mark: str) -> HeartbeatSeen:
        self.counted.append((token, mark))
        return HeartbeatSeen(token, mark, silent_for=7.0, at=0.0, clock="test")


def _attempt(tmp_path, ledger: bytes | None = None, intent: bool = False):
    directory = tmp_path / "attempt"
    directory.mkdir(exist_ok=True)
    if ledger is not None:
        (directory / LEDGER_FILE).write_bytes(ledger)
    if intent:
        (directory / INTENT_FILE).write_text("{}")
    return open_state_storage(str(tmp_path)).child("attempt")


def _running() -> Ledger:
    return Ledger(token="tok", status=LedgerStatus.RUNNING, started_at=1.0, heartbeat_at=123.0, beat=3)


def _look(attempt, counter, **kw) -> AttemptLook:
    arguments = dict(check_process=lambda token, handle: ProcessView.ALIVE, count_mark=counter, intent_written=True, deleted_mark="gone/0")
    arguments.update(kw)
    return look_at_attempt(attempt, "tok", None, **arguments)


def test_a_ledger_has_its_heartbeat_mark_counted_and_no_intent_file_is_looked_for(tmp_path):
    counter = Counter()
    look = _look(_attempt(tmp_path, _running().to_json()), counter)
    assert isinstance(look.ledger, Ledger) and look.process is ProcessView.ALIVE
    assert counter.counted == [("tok", _running().heartbeat_mark)]
    assert (look.heartbeat_silence, look.deleted_for, look.unchanged_for, look.intent_visible) == (7.0, 0.0, 7.0, None)


def test_an_unreadable_ledger_is_returned_as_corrupt_state_and_nothing_is_counted(tmp_path):
    counter = Counter()
    look = _look(_attempt(tmp_path, b'{"token": "tok", "status": "runn'), counter)
    assert isinstance(look.ledger, CorruptState)
    assert counter.counted == [] and look.intent_visible is None and look.unchanged_for == 0.0


def test_no_ledger_and_a_visible_intent_file_is_a_launch_still_starting(tmp_path):
    counter = Counter()
    look = _look(_attempt(tmp_path, intent=True), counter)
    assert (look.ledger, look.intent_visible, counter.counted) == (None, True, [])


def test_no_ledger_and_no_intent_file_has_its_absence_counted_under_the_mark_given(tmp_path):
    counter = Counter()
    look = _look(_attempt(tmp_path), counter)
    assert look.intent_visible is False and counter.counted == [("tok", "gone/0")]
    assert (look.deleted_for, look.heartbeat_silence, look.unchanged_for) == (7.0, 0.0, 7.0)


def test_without_a_deleted_mark_an_invisible_attempt_is_only_reported(tmp_path):
    # The trigger, unless the task found the attempt deleted: it reports "invisible" instead.
    counter = Counter()
    look = _look(_attempt(tmp_path), counter, deleted_mark=None)
    assert look.intent_visible is False and counter.counted == [] and look.deleted is None


def test_an_attempt_known_deleted_is_counted_without_looking_for_its_intent_file(tmp_path):
    counter = Counter()
    look = _look(_attempt(tmp_path, intent=True), counter, known_deleted=True, intent_written=False)
    assert look.intent_visible is None and counter.counted == [("tok", "gone/0")]


def test_an_intent_never_written_on_this_root_is_not_looked_for(tmp_path):
    counter = Counter()
    look = _look(_attempt(tmp_path), counter, intent_written=False)
    assert (look.ledger, look.intent_visible, counter.counted) == (None, None, [])


def test_the_process_is_checked_before_the_ledger_is_read(tmp_path, monkeypatch):
    order: list[str] = []
    real_parse = observers.parse_ledger
    monkeypatch.setattr(observers, "parse_ledger", lambda *a: order.append("ledger") or real_parse(*a))
    _look(_attempt(tmp_path, _running().to_json()), Counter(), check_process=lambda token, handle: order.append("process") or ProcessView.UNKNOWN)
    assert order == ["process", "ledger"]


def _own_handle(start_shift: float = 0.0) -> ProcessHandle:
    start = process_start_time(os.getpid())
    assert start is not None
    return ProcessHandle(host=this_host(), pid=os.getpid(), start_time=start + start_shift, host_id=host_id())


@pytest.mark.parametrize(
    "handle",
    [
        None,
        pytest.param(_own_handle(), id="alive"),
        pytest.param(_own_handle(start_shift=1000.0), id="pid-reused"),
        pytest.param(ProcessHandle(host="elsewhere", pid=1, start_time=1.0, host_id="another-host"), id="other-host"),
        pytest.param(ProcessHandle(host="here", pid=os.getpid(), start_time=None, host_id=host_id()), id="no-start-time"),
    ],
)
def test_the_handle_check_is_gone_exactly_when_the_handle_says_its_process_exited(handle):
    # The trigger's process check before it shared the observer: gone = the handle's own check said False.
    alive = None if handle is None else handle_alive(handle)
    view = handle_view("tok", handle)
    assert (view is ProcessView.GONE) == (alive is False)
    assert (view is ProcessView.ALIVE) == (alive is True)


def test_the_handle_check_tells_this_process_alive_and_a_reused_pid_gone():
    assert handle_view("tok", _own_handle()) is ProcessView.ALIVE
    assert handle_view("tok", _own_handle(start_shift=1000.0)) is ProcessView.GONE


# -- both sides read through look_at_attempt ------------------------------------------------------


class Store(dict):
    def set(self, key, value):
        self[key] = json.loads(json.dumps(value))


def test_the_operator_and_its_trigger_read_the_attempt_through_the_one_observer(tmp_path, monkeypatch):
    from airflow_provider_zeta.operators.spark_job import ZetaSparkJobOperator
    from airflow_provider_zeta.triggers.driver import ZetaDriverTrigger

    root = tmp_path / "state"
    relative = attempt_dir("d", "r", "job", -1, "tok")
    (root / relative).mkdir(parents=True)
    (root / relative / LEDGER_FILE).write_bytes(_running().to_json())
    store = Store()
    record = AttemptRecord(token="tok", incarnation=0, try_number=1, phase=Phase.LAUNCHED, intent_at=time.time() - 30, launch_try=1)
    store.set(attempt_record_key(1), record.to_value())
    ti = SimpleNamespace(dag_id="d", run_id="r", task_id="job", map_index=-1, try_number=1, max_tries=3)
    context = {"ti": ti, "dag_run": SimpleNamespace(clear_number=0), "task_state_store": store}

    reads: list[str] = []
    real_parse = observers.parse_ledger
    monkeypatch.setattr(observers, "parse_ledger", lambda raw, token, where: reads.append(where) or real_parse(raw, token, where))
    operator = ZetaSparkJobOperator(task_id="job", application="/x.py")
    observation = operator._observe(context, open_state_storage(str(root)), Timing(60, 20))
    trigger = ZetaDriverTrigger(
        state_root=str(root), attempt_dir=relative, token="tok", lost_after=60, poll_interval=1, missing_deadline=time.time() + 600
    )
    view, _, fire, _ = trigger._look()

    assert len(reads) == 2 and reads[0] == reads[1]
    assert isinstance(observation.ledger, Ledger) and observation.ledger == trigger._ledger
    assert (view.value, fire) == ("running", False)
