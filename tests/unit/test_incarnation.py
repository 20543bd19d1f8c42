"""The incarnation a run publishes under changes on every clear Airflow 3.3 can make, including a
REST clear with ``reset_dag_runs`` false (which leaves ``dag_run.clear_number`` alone)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from airflow_provider_zeta.core.deploy import Action, DeployObservation, ProcessView, Timing, decide
from airflow_provider_zeta.core.incarnation import clear_epoch, publish_incarnation
from airflow_provider_zeta.core.ledger import AttemptRecord, Ledger, LedgerStatus, Phase
from airflow_provider_zeta.core.publish import CommitMarker, Owner, PublishAction, commit_id, decide_publish
from airflow_provider_zeta.core.ready import Evaluation, Report, Verdict, parse_ready_set

RETRIES = 3
NOW = 1_000_000.0


class _Store(dict):
    def set(self, key, value):
        self[key] = value


def _epoch_after(looks: list[tuple[int, int]]) -> list[int]:
    """The sensor's clear epoch at each of its looks ``(max_tries, retries now)``, its record kept."""
    stored, epochs = None, []
    for max_tries, retries in looks:
        record, changed = clear_epoch(stored, max_tries, retries)
        assert changed == (stored is None or record != stored)
        stored, epochs = record, epochs + [record["epoch"]]
    return epochs


def test_a_sensors_clear_epoch_counts_the_max_tries_it_sees_whatever_retries_is_now():
    # never cleared, then cleared after try 1, retried (max_tries unchanged), cleared after try 3
    assert _epoch_after([(RETRIES, RETRIES), (1 + RETRIES, RETRIES), (1 + RETRIES, RETRIES), (3 + RETRIES, RETRIES)]) == [0, 1, 1, 2]
    # a DAG edit of retries between two clears (or a clear made with another DAG version than the
    # one the sensor runs) never lowers it nor keeps it, and a retry under the edit keeps it
    assert _epoch_after([(RETRIES, RETRIES), (1 + RETRIES, RETRIES), (2 + RETRIES, RETRIES + 2), (2 + RETRIES, 0)]) == [0, 1, 2, 2]
    assert _epoch_after([(5, 5), (1 + 1, 1), (2 + 7, 7)]) == [0, 1, 2]  # retries lowered, then raised
    # unknown max_tries: nothing seen, nothing counted
    assert _epoch_after([(RETRIES, RETRIES), (None, RETRIES), (RETRIES, RETRIES)]) == [0, 0, 0]
    # the first look of a sensor cleared before it counted starts where it published before
    assert _epoch_after([(4 + RETRIES, RETRIES), (4 + RETRIES, RETRIES)]) == [4, 4]


@pytest.mark.parametrize("stored", ["3", 3, [1], {"epoch": "x"}, {"max_tries": 3}, {"epoch": -1}, {"epoch": True}])
def test_a_clear_epoch_record_that_is_not_one_is_corrupt(stored):
    from airflow_provider_zeta.core.ledger import CorruptState

    with pytest.raises(CorruptState, match="clear epoch"):
        clear_epoch(stored, RETRIES, RETRIES)


# Each clear path of Airflow 3.3.2 as (clear_number delta, sensor cleared?), applied to a sensor
# that ran try 1 (and a retry, try 2) before the clear: the incarnation must rise on each.
CLEARS = {
    "ui_or_rest_reset_dag_runs_true": (1, True),
    "rest_reset_dag_runs_false": (0, True),
    "cli_tasks_clear_downstream": (1, True),
    "backfill_reprocessing": (1, True),
}


@pytest.mark.parametrize("path", sorted(CLEARS))
def test_every_clear_that_reruns_the_sensor_raises_the_publish_incarnation(path):
    bump, sensor_cleared = CLEARS[path]
    clear_number, try_number, max_tries = 0, 2, RETRIES  # try 2 was a retry: max_tries unchanged
    record, _ = clear_epoch(None, max_tries, RETRIES)
    before = publish_incarnation(clear_number, record["epoch"])
    assert before == 0  # a run never cleared publishes under clear_number, as before
    clear_number += bump
    if sensor_cleared:
        max_tries = try_number + RETRIES  # what clear_task_instances writes
    record, _ = clear_epoch(record, max_tries, RETRIES)
    after = publish_incarnation(clear_number, record["epoch"])
    assert after > before
    # a retry or an orphan reset of the re-run sensor (try_number + 1, nothing else) keeps it
    record, changed = clear_epoch(record, max_tries, RETRIES)
    assert not changed and publish_incarnation(clear_number, record["epoch"]) == after


def test_two_clears_without_reset_each_raise_it():
    first, second, third = _epoch_after([(RETRIES, RETRIES), (1 + RETRIES, RETRIES), (2 + RETRIES, RETRIES)])
    assert publish_incarnation(0, first) < publish_incarnation(0, second) < publish_incarnation(0, third)


def _report(source: str, token: str, incarnation: int = 0) -> Report:
    return Report(source, f"p.deploy_{source}", incarnation, token, f"/attempts/{token}/output", 5)


def _sensor_ready_set(monkeypatch, clear_number: int, max_tries: int, reports: dict[str, Report], store=None, retries: int = RETRIES):
    """The ready set the sensor returns when every source is ready, for a run in that state
    (``store``: the sensor's task state store, kept across its tries; ``retries``: the DAG version's)."""
    import airflow_provider_zeta.sensors.ready_to_close as sensor_module
    from airflow_provider_zeta.sensors.ready_to_close import ReadyToCloseSensor

    class Observer:
        def __init__(self, *args, **kwargs):
            pass

        def observe(self, incarnation, deadline):
            # the reports' own incarnation is the run's clear_number, judged as before
            assert incarnation == clear_number
            return Evaluation(Verdict.ALL_READY, dict(reports))

    monkeypatch.setattr(sensor_module, "RunObserver", Observer)
    monkeypatch.setattr(sensor_module.ZetaSettings, "load", staticmethod(lambda: SimpleNamespace(state_root="/nowhere", poll_interval=1.0)))
    sensor = ReadyToCloseSensor(task_id="p.ready_to_close", sources={s: r.task_id for s, r in reports.items()}, retries=retries)
    ti = SimpleNamespace(dag_id="d", run_id="r", task_id="p.ready_to_close", map_index=-1, max_tries=max_tries, try_number=2)
    ti.xcom_push = lambda key, value: None
    context = {"ti": ti, "dag_run": SimpleNamespace(clear_number=clear_number), "task_state_store": _Store() if store is None else store}
    return sensor.execute(context)


def test_a_reset_dag_runs_false_clear_with_downstream_republishes_the_rerun_source(monkeypatch):
    """Published from (eu: tok-eu-1, us: tok-us-1); then deploy_eu is cleared with downstream through
    REST with reset_dag_runs false: clear_number stays 0, the sensor's max_tries rises. The new
    ready set must replace the published partition, not be ignored as a late report."""
    owner = Owner("d", "p", "r")
    first = _sensor_ready_set(monkeypatch, 0, RETRIES, {"eu": _report("eu", "tok-eu-1"), "us": _report("us", "tok-us-1")})
    inc1, sources1 = parse_ready_set(first)
    published = CommitMarker(
        commit_id("x", inc1, sources1, owner, "ds=x"), "x", inc1, {s: r.token for s, r in sources1.items()},
        {s: r.rows for s, r in sources1.items()}, 0.0, run_id="r", dag_id="d", pipeline_id="p", partition="ds=x",
    )

    second = _sensor_ready_set(monkeypatch, 0, 1 + RETRIES, {"eu": _report("eu", "tok-eu-2"), "us": _report("us", "tok-us-1")})
    inc2, sources2 = parse_ready_set(second)
    ours = commit_id("x", inc2, sources2, owner, "ds=x")
    decision = decide_publish(ours, inc2, True, published, owner)
    assert decision.action is PublishAction.REPLACE and decision.rule == "newer_incarnation", decision


def test_a_dag_edit_of_retries_between_two_clears_still_raises_the_publish_incarnation(monkeypatch):
    """The sensor ran (try 1), was cleared with downstream through REST with reset_dag_runs false
    after try 1 and published; then cleared again the same way after try 2, by a clear that wrote
    ``max_tries = 2 + 3`` while the sensor's re-run runs a DAG version with ``retries=5``. Its
    ready set must still replace the published partition: the incarnation never depends on what
    ``retries`` is now."""
    owner = Owner("d", "p", "r")
    store = _Store()
    reports = {"eu": _report("eu", "tok-eu-1"), "us": _report("us", "tok-us-1")}
    first = parse_ready_set(_sensor_ready_set(monkeypatch, 0, RETRIES, reports, store))[0]
    inc1, sources1 = parse_ready_set(_sensor_ready_set(monkeypatch, 0, 1 + RETRIES, reports, store))
    assert inc1 > first
    published = CommitMarker(
        commit_id("x", inc1, sources1, owner, "ds=x"), "x", inc1, {s: r.token for s, r in sources1.items()},
        {s: r.rows for s, r in sources1.items()}, 0.0, run_id="r", dag_id="d", pipeline_id="p", partition="ds=x",
    )
    reports["eu"] = _report("eu", "tok-eu-2")
    second = _sensor_ready_set(monkeypatch, 0, 2 + RETRIES, reports, store, retries=RETRIES + 2)
    inc2, sources2 = parse_ready_set(second)
    assert inc2 > inc1, (first, inc1, inc2)
    decision = decide_publish(commit_id("x", inc2, sources2, owner, "ds=x"), inc2, True, published, owner)
    assert decision.action is PublishAction.REPLACE and decision.rule == "newer_incarnation", decision
    # a retry or an orphan reset of that sensor (max_tries unchanged), whatever retries is now,
    # keeps the incarnation it published under
    for retries in (RETRIES + 2, RETRIES, 0, 40):
        assert parse_ready_set(_sensor_ready_set(monkeypatch, 0, 2 + RETRIES, reports, store, retries=retries))[0] == inc2


def test_the_trigger_ends_the_sensor_with_the_publish_incarnation_it_was_deferred_with():
    from airflow_provider_zeta.triggers.ready_to_close import ReadyToCloseTrigger

    trigger = ReadyToCloseTrigger(
        dag_id="d", run_id="r", sources={"eu": "p.deploy_eu"}, incarnation=0, publish_incarnation=4,
        deadline=NOW, poll_interval=1.0, state_root="/nowhere",
    )
    _, kwargs = trigger.serialize()
    assert kwargs["publish_incarnation"] == 4 and kwargs["incarnation"] == 0
    again = ReadyToCloseTrigger(**kwargs)
    evaluation = Evaluation(Verdict.ALL_READY, {"eu": _report("eu", "tok-eu-2")})
    assert parse_ready_set(again.ready_set(evaluation))[0] == 4
    # a trigger deferred by an earlier version (no publish_incarnation) publishes under clear_number
    old = {k: v for k, v in kwargs.items() if k != "publish_incarnation"}
    assert parse_ready_set(ReadyToCloseTrigger(**old).ready_set(evaluation))[0] == 0


def _observe(record: AttemptRecord, ledger: Ledger, incarnation: int, try_number: int, max_tries: int) -> DeployObservation:
    return DeployObservation(
        now=NOW, incarnation=incarnation, try_number=try_number, record=record, ledger=ledger,
        process=ProcessView.UNKNOWN, timing=Timing(lost_after=30.0, launch_grace=30.0), max_tries=max_tries,
    )


def test_a_deploy_task_cleared_without_reset_dag_runs_runs_its_job_again():
    """clear_number stays 0, the task's max_tries rose (a clear of it): its finished driver is not
    reused, a new attempt is launched."""
    record = AttemptRecord(token="tok-a", incarnation=0, try_number=1, phase=Phase.LAUNCHED, intent_at=NOW - 50, launch_try=1, max_tries=RETRIES)
    done = Ledger(token="tok-a", status=LedgerStatus.SUCCEEDED, started_at=NOW - 40, heartbeat_at=NOW - 30, incarnation=0)
    cleared = decide(_observe(record, done, incarnation=0, try_number=2, max_tries=1 + RETRIES))
    assert cleared.action is Action.FRESH_LAUNCH and cleared.rule == "earlier_incarnation_ended", cleared
    # a retry or an orphan reset (max_tries unchanged) still reuses it
    retried = decide(_observe(record, done, incarnation=0, try_number=2, max_tries=RETRIES))
    assert retried.action is Action.REUSE_RESULT and retried.rule == "already_succeeded", retried


def test_a_deploy_cleared_without_downstream_after_its_sensor_succeeded_is_refused_naming_what_to_clear():
    from airflow_provider_zeta.core.incarnation import cleared_without_downstream

    reason = cleared_without_downstream("p.deploy_eu", {"p.ready_to_close": "success"}, published=True)
    assert reason is not None and "include_downstream=true" in reason
    assert "task_ids=['p.deploy_eu', 'p.ready_to_close']" in reason, reason
    # cleared with downstream (the sensor re-runs or waits), or the wait failed: it may run
    for state in (None, "scheduled", "queued", "deferred", "running", "up_for_retry", "failed", "upstream_failed"):
        assert cleared_without_downstream("p.deploy_eu", {"p.ready_to_close": state}, published=False) is None, state
    assert cleared_without_downstream("p.deploy_eu", {}, published=False) is None  # a bare deploy task


def test_a_deploy_cleared_without_downstream_while_its_sensor_ends_with_its_attempt_is_refused():
    """The sensor (or its trigger) decided with the task's attempt tok-a; its success is not
    stored yet. Its decision record names tok-a: refused, whatever state the sensor shows now."""
    from airflow_provider_zeta.core.incarnation import cleared_without_downstream, sensor_decision

    decided = {"p.ready_to_close": sensor_decision({"eu": _report("eu", "tok-a"), "us": _report("us", "tok-us")})}
    from airflow_provider_zeta.core.incarnation import sensor_still_deciding

    reason = cleared_without_downstream("p.deploy_eu", {"p.ready_to_close": "deferred"}, False, decided, "tok-a")
    assert reason is not None and "task_ids=['p.deploy_eu', 'p.ready_to_close']" in reason
    assert sensor_still_deciding("p.deploy_eu", {"p.ready_to_close": "deferred"}, decided, "tok-a") == []
    # running: the record is this try's decision or the previous try's, not yet wiped by a try
    # cleared with this task: neither refused nor run, looked at again
    assert cleared_without_downstream("p.deploy_eu", {"p.ready_to_close": "running"}, False, decided, "tok-a") is None
    assert sensor_still_deciding("p.deploy_eu", {"p.ready_to_close": "running"}, decided, "tok-a") == ["p.ready_to_close"]
    assert sensor_still_deciding("p.deploy_eu", {"p.ready_to_close": "running"}, decided, "tok-b") == []
    # a sensor in any other state is not ending with a decision (woken, it decides on its worker;
    # its next try wipes its XComs): the record is left aside
    for state in ("queued", "scheduled", "up_for_retry", "failed", None):
        assert cleared_without_downstream("p.deploy_eu", {"p.ready_to_close": state}, False, decided, "tok-a") is None, state
        assert sensor_still_deciding("p.deploy_eu", {"p.ready_to_close": state}, decided, "tok-a") == [], state
    # read back as JSON text (a record stored JSON-encoded once more) counts the same
    import json

    as_text = {"p.ready_to_close": json.dumps(decided["p.ready_to_close"])}
    assert cleared_without_downstream("p.deploy_eu", {"p.ready_to_close": "deferred"}, False, as_text, "tok-a") is not None
    # a record naming another attempt or another task, taken back, unreadable, or none: it may run
    for record in (sensor_decision({"eu": _report("eu", "tok-older")}), sensor_decision({"us": _report("us", "tok-a")}),
                   sensor_decision({}), "not json", {"tokens": "x"}, None):
        assert cleared_without_downstream("p.deploy_eu", {"p.ready_to_close": "deferred"}, False, {"p.ready_to_close": record}, "tok-a") is None
    assert cleared_without_downstream("p.deploy_eu", {"p.ready_to_close": "deferred"}, False, decided, None) is None


def _decision_xcom(monkeypatch, sensor_xcoms: dict[str, object]):
    """The sensor's XComs as a deploy task reads them (``XCom.get_one``): key -> value."""
    from airflow.sdk.execution_time.xcom import XCom

    def get_one(*, key, dag_id, task_id, run_id, map_index=-1, **_):
        return sensor_xcoms.get(key) if task_id == "p.ready_to_close" else None

    monkeypatch.setattr(XCom, "get_one", staticmethod(get_one))


class _Log:
    def __init__(self):
        self.lines = []

    def info(self, message, *args):
        self.lines.append(message % args)

    warning = exception = info


def _cleared_deploy_task(monkeypatch):
    """The deploy task ``p.deploy_eu`` of a two-source pipeline at try 2 after a clear of it alone
    (its max_tries rose): its finished attempt tok-a observed, launches recorded instead of made."""
    from airflow.sdk import DAG

    from airflow_provider_zeta import zeta_pipeline
    from airflow_provider_zeta.operators import spark_job

    with DAG(dag_id="d", schedule=None):
        group = zeta_pipeline("p", sources={"eu": "/jobs/job.py", "us": "/jobs/job.py"}, output="/tmp/out")
    deploy = group.children["p.deploy_eu"]
    record = AttemptRecord(token="tok-a", incarnation=0, try_number=1, phase=Phase.LAUNCHED, intent_at=NOW - 50, launch_try=1, max_tries=0)
    done = Ledger(token="tok-a", status=LedgerStatus.SUCCEEDED, started_at=NOW - 40, heartbeat_at=NOW - 30, incarnation=0)
    observation = _observe(record, done, incarnation=1, try_number=2, max_tries=1)
    launched = []
    monkeypatch.setattr(deploy, "_observe", lambda *a, **k: observation)
    monkeypatch.setattr(deploy, "_launch", lambda *a, **k: launched.append(1) or "launched")
    monkeypatch.setattr(deploy, "_settings", lambda: (SimpleNamespace(state_root="/nowhere"), observation.timing, 1.0, 1.0))
    monkeypatch.setattr(spark_job, "open_state_storage", lambda root: None)
    monkeypatch.setattr(deploy, "partition", "ds=2026-01-01")  # rendered
    return deploy, launched


def test_the_deploy_task_refuses_a_clear_without_downstream_of_a_published_run_before_launching(monkeypatch):
    """The adapter: a try after a clear of the task alone (its max_tries rose) whose run's sensor
    is still success fails before it launches anything, naming what to clear."""
    from airflow.sdk.exceptions import AirflowFailException

    from airflow_provider_zeta.operators import spark_job

    deploy, launched = _cleared_deploy_task(monkeypatch)
    states = {"p.ready_to_close": "success", "p.completed_point": "success"}
    monkeypatch.setattr(spark_job, "_run_task_states", lambda context, task_ids: {t: states.get(t) for t in task_ids})
    ti = SimpleNamespace(dag_id="d", run_id="r", task_id="p.deploy_eu", map_index=-1, try_number=2, max_tries=1)
    context = {"ti": ti, "dag_run": SimpleNamespace(clear_number=1), "task_state_store": _Store(), "logical_date": "x", "ds": "x"}
    with pytest.raises(AirflowFailException, match="cleared_without_downstream"):
        deploy._decide_and_act(context, None)
    assert launched == []
    # cleared with downstream: the sensor waits again (its XComs, the decision record among them,
    # were wiped when it started afresh), the task launches
    states["p.ready_to_close"] = "deferred"
    _decision_xcom(monkeypatch, {})
    assert deploy._decide_and_act(context, None) == "launched"


# The sensor's states at the deploy task's successive looks, and whether its decision record
# (naming tok-a) is still there at each: deferred (its trigger's success event on its way), running
# then success (returning on its worker), or running with its previous try's record, which the try
# (cleared with the deploy task) wipes as it starts, then defers with an empty one.
LOOKS = {
    "trigger_ending": ([("deferred", True)], "refused"),
    "worker_ending": ([("running", True), ("running", True), ("success", True)], "refused"),
    "cleared_with_it": ([("running", True), ("running", None), ("deferred", False)], "launched"),
    # still so after the wait: the try fails, to be retried (not for good), launching nothing
    "still_running": ([("running", True)], "retried"),
}


@pytest.mark.parametrize("case", sorted(LOOKS))
def test_the_deploy_task_refuses_a_clear_without_downstream_while_the_sensors_success_is_in_flight(monkeypatch, case):
    """The sensor (or its trigger) already took this task's attempt tok-a into its ready set, but
    its task instance is not ``success`` yet: a try after a clear of the task alone must still fail
    before it launches, or its new attempt would run and never be published. A sensor cleared with
    the task, still showing its previous try's record as its new try starts, does not refuse it."""
    from airflow.sdk.exceptions import AirflowFailException

    from airflow_provider_zeta.core.incarnation import SENSOR_DECISION_XCOM, sensor_decision
    from airflow_provider_zeta.operators import spark_job

    deploy, launched = _cleared_deploy_task(monkeypatch)
    decided = sensor_decision({"eu": _report("eu", "tok-a"), "us": _report("us", "tok-us-1")})
    looks, outcome = LOOKS[case]
    xcoms: dict = {}

    def run_task_states(context, task_ids):
        state, record = looks.pop(0) if len(looks) > 1 else looks[0]
        xcoms.clear()
        if record is not None:
            xcoms[SENSOR_DECISION_XCOM] = decided if record else sensor_decision({})
        return {t: (state if t == "p.ready_to_close" else None) for t in task_ids}

    monkeypatch.setattr(spark_job, "_run_task_states", run_task_states)
    monkeypatch.setattr(spark_job.time, "sleep", lambda seconds: None)
    _decision_xcom(monkeypatch, xcoms)
    ti = SimpleNamespace(dag_id="d", run_id="r", task_id="p.deploy_eu", map_index=-1, try_number=2, max_tries=1)
    context = {"ti": ti, "dag_run": SimpleNamespace(clear_number=1), "task_state_store": _Store(), "logical_date": "x", "ds": "x"}
    if outcome == "launched":
        assert deploy._decide_and_act(context, None) == "launched"
        return
    if outcome == "retried":
        from airflow.sdk.exceptions import AirflowException

        monkeypatch.setattr(spark_job, "_SENSOR_DECIDING_WAIT", 0.0)
        with pytest.raises(AirflowException, match="still running with a decision naming attempt tok-a") as raised:
            deploy._decide_and_act(context, None)
        assert not isinstance(raised.value, AirflowFailException) and launched == []
        return
    with pytest.raises(AirflowFailException, match="cleared_without_downstream"):
        deploy._decide_and_act(context, None)
    assert launched == []
    monkeypatch.setattr(spark_job, "_run_task_states", lambda context, task_ids: {t: ("deferred" if t == "p.ready_to_close" else None) for t in task_ids})
    # the sensor's decision names another attempt of this task, or none (it waits, or took it
    # back when it saw this task cleared): the task launches
    for decision in (sensor_decision({"eu": _report("eu", "tok-older")}), sensor_decision({}), None):
        xcoms[SENSOR_DECISION_XCOM] = decision
        assert deploy._decide_and_act(context, None) == "launched"
