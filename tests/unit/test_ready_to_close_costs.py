"""Ready-to-close costs grow with what changes, not with the number of sources.

The trigger runs for real (``ReadyToCloseTrigger.run``) against an in-process stand-in for the
Airflow API (task states, XCom reads) and real ledgers on a local state root; sources finish one
per poll. Counted: API calls per poll, ledger reads, and the bytes the trigger logs.
"""

from __future__ import annotations

import asyncio
from unittest import mock

import pytest
from airflow.triggers.base import TaskSuccessEvent

from airflow_provider_zeta.core.ledger import Ledger, LedgerStatus
from airflow_provider_zeta.core.paths import LEDGER_FILE, attempt_dir
from airflow_provider_zeta.storage import StateStorage

DAG, RUN = "costs", "scheduled__2026-01-01T00:00:00+00:00"


class FakeApi:
    """Sources finish one per poll (after ``already`` at the start); counts every call."""

    def __init__(self, root: str, n: int, already: int = 0) -> None:
        self.storage = StateStorage.from_url(root)
        self.expected, self.reports = {}, {}
        for i in range(n):
            source, task_id, token = f"src{i:04d}", f"pipe.deploy_src{i:04d}", f"tok{i:08d}"
            output = f"file://{root}/{attempt_dir(DAG, RUN, task_id, -1, token)}/output"
            ledger = Ledger(token=token, status=LedgerStatus.SUCCEEDED, started_at=1, heartbeat_at=2, output_path=output, rows=5)
            self.storage.write_atomic(f"{attempt_dir(DAG, RUN, task_id, -1, token)}/{LEDGER_FILE}", ledger.to_json())
            self.expected[source] = task_id
            self.reports[task_id] = {**ledger.result(), "source": source, "task_id": task_id, "incarnation": 0}
        self.finished = already
        self.calls = {"task_states": 0, "xcom_reads": 0}
        self.per_poll: list[int] = []  # API calls of each poll

    def get_task_states(self, **kwargs):
        self.calls["task_states"] += 1
        self.per_poll.append(0)
        tasks = list(self.expected.values())
        states = {t: ("success" if i < self.finished else "running") for i, t in enumerate(tasks)}
        self.finished += 1  # the next poll sees one more
        return {RUN: states}

    def get_one(self, **kwargs):
        self.calls["xcom_reads"] += 1
        self.per_poll[-1] += 1
        return self.reports[kwargs["task_id"]]


class Lines:
    """Stands in for the trigger's logger: keeps every line it logs."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, message, *args):
        self.lines.append(message % args)

    warning = error = debug = info


def run_trigger(api: FakeApi, root: str, verified=None, recorded=None):
    from airflow_provider_zeta.triggers.ready_to_close import ReadyToCloseTrigger

    trigger = ReadyToCloseTrigger(
        dag_id=DAG, run_id=RUN, sources=api.expected, incarnation=0, deadline=4e9, poll_interval=1,
        state_root=root, verified=verified or {}, recorded=recorded or [],
    )

    async def no_sleep(*_):
        return None

    async def collect():
        return [event async for event in trigger.run()]

    log = Lines()
    # Costs per poll, not pacing: every poll is due at once (core.pacing is tested on its own, in
    # test_trigger_pacing.py); with sleeps patched out the pacer would wait out its backoff in
    # real time.
    with mock.patch("airflow_provider_zeta.core.pacing.Pacer.full_look_due", return_value=True), \
         mock.patch("airflow.sdk.execution_time.task_runner.RuntimeTaskInstance.get_task_states", side_effect=api.get_task_states), \
         mock.patch("airflow.sdk.execution_time.xcom.XCom.get_one", side_effect=api.get_one), \
         mock.patch.object(ReadyToCloseTrigger, "log", new_callable=mock.PropertyMock, return_value=log), \
         mock.patch("asyncio.sleep", no_sleep):
        return log.lines, asyncio.run(collect())


@pytest.mark.parametrize("n", [50, 200])
def test_trigger_logs_and_reads_grow_with_changes_not_with_sources(tmp_path, n):
    root = str(tmp_path)
    api = FakeApi(root, n)
    lines, events = run_trigger(api, root)
    # Every poll: one task-state call and at most one XCom read (the source that just finished).
    assert api.calls["task_states"] == n + 1 and api.calls["xcom_reads"] == n
    assert max(api.per_poll) <= 1
    logged = sum(len(line) for line in lines)
    # One line per change, each bounded: O(N) bytes in all. The old trigger logged the whole
    # missing list on every change: O(N²) (about 11 bytes x N²/2: 55 kB at 100 sources).
    assert logged < 250 * (n + 2), f"{logged} bytes logged for {n} sources"
    assert lines and max(len(line) for line in lines) < 2000
    # All ready: the trigger ends the sensor itself, its ready set pushed as the return value.
    assert len(events) == 1 and isinstance(events[0], TaskSuccessEvent)
    ready_set = events[0].xcoms["return_value"]
    assert ready_set["incarnation"] == 0 and len(ready_set["sources"]) == n


def test_reports_verified_before_deferring_are_not_read_again(tmp_path):
    root = str(tmp_path)
    api = FakeApi(root, 100, already=90)
    verified = {api.expected[f"src{i:04d}"]: api.reports[api.expected[f"src{i:04d}"]] for i in range(90)}
    _, events = run_trigger(api, root, verified=verified, recorded=[f"src{i:04d}" for i in range(90)])
    assert api.calls["xcom_reads"] == 10, api.calls  # only the ten that finished after the deferral
    assert len(events[0].xcoms["return_value"]["sources"]) == 100


def test_a_report_whose_ledger_is_gone_fails_the_wait_at_once(tmp_path):
    """A report whose ledger is gone fails the wait at once, not only at ready_timeout (6 h by default) as it once did."""
    root = str(tmp_path)
    api = FakeApi(root, 3, already=3)
    gone = api.reports["pipe.deploy_src0001"]["token"]
    api.storage.delete_tree(attempt_dir(DAG, RUN, "pipe.deploy_src0001", -1, gone))
    _, events = run_trigger(api, root)
    assert api.calls["task_states"] == 1, "decided on the first poll, not after the deadline"
    payload = events[0].payload
    assert payload["verdict"] == "unverifiable_report"
    assert "src0001" in payload["message"] and gone in payload["message"]


def test_a_success_report_naming_an_earlier_deferral_fails_the_wait_naming_it(tmp_path):
    """The observer reads the deferral mark of a report that names one and refuses a report stored
    late by an earlier deferral's trigger (core.ready.stale_store_problem), as unverifiable."""
    from airflow_provider_zeta.observers import RunObserver

    root = str(tmp_path)
    api = FakeApi(root, 2, already=2)
    late = "pipe.deploy_src0001"
    api.reports[late] = {**api.reports[late], "deferral_mark": "m1"}
    marks = {late: "m2"}

    def get_one(**kwargs):
        if kwargs["key"] == "zeta_deploy_deferral":
            return marks.get(kwargs["task_id"])
        return api.get_one(**kwargs)

    observer = RunObserver(DAG, RUN, api.expected, root)
    with mock.patch("airflow.sdk.execution_time.task_runner.RuntimeTaskInstance.get_task_states", side_effect=api.get_task_states), \
         mock.patch("airflow.sdk.execution_time.xcom.XCom.get_one", side_effect=get_one):
        evaluation = observer.observe(0, 4e9)
        assert evaluation.verdict.value == "unverifiable_report", evaluation
        assert "src0001" in evaluation.message and api.reports[late]["token"] in evaluation.message
        marks[late] = "m1"  # the same report under its own deferral is fine
        fresh = RunObserver(DAG, RUN, api.expected, root)
        assert fresh.observe(0, 4e9).verdict.value == "all_ready"
