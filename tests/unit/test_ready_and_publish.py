"""Ready-to-close evaluation (G2) and the completed point's publish decisions (G3)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from airflow_provider_zeta.core.ledger import CorruptState, Ledger, LedgerStatus
from airflow_provider_zeta.core.publish import (
    MissingPartitionKey,
    Owner,
    PublishAction,
    commit_id,
    commit_names,
    decide_publish,
    marker_for,
    owner_run_to_look_up,
    parse_commit_marker,
    partition_key,
)
from airflow_provider_zeta.core.ready import (
    StoredWhileDeferred,
    Verdict,
    attempt_problem,
    evaluate,
    parse_ready_set,
    parse_report,
    ready_set_names,
    stale_store_problem,
    wait_deadline,
)

EXPECTED = {"eu": "deploy_eu", "us": "deploy_us", "apac": "deploy_apac"}
NOW, DEADLINE = 1000.0, 2000.0


def report(source, incarnation=0, token=None, rows=10):
    return {
        "source": source,
        "incarnation": incarnation,
        "token": token or f"tok-{source}",
        "output_path": f"file:///s/{source}/output",
        "rows": rows,
    }


def run(states, reports, incarnation=0, now=NOW, unverified=None):
    return evaluate(EXPECTED, states, reports, incarnation, now, DEADLINE, unverified)


def test_partial_restore_sees_exactly_the_reports_made():
    states = {"deploy_eu": "success", "deploy_us": "running", "deploy_apac": "deferred"}
    ev = run(states, {"deploy_eu": report("eu")})
    assert ev.verdict is Verdict.WAITING
    assert set(ev.ready) == {"eu"} and ev.missing == ("apac", "us")
    assert "1 of 3 sources ready" in ev.message and "apac, us" in ev.message


def test_full_restore_and_restoring_twice_is_idempotent():
    states = {t: "success" for t in EXPECTED.values()}
    reports = {t: report(s) for s, t in EXPECTED.items()}
    first, second = run(states, reports), run(states, reports)
    assert first == second and first.verdict is Verdict.ALL_READY
    assert first.ready_set(0) == second.ready_set(0)
    assert sorted(first.ready_set(0)["sources"]) == ["apac", "eu", "us"]


def test_missing_value_of_a_running_source_waits_then_hits_the_deadline():
    states = {"deploy_eu": "success", "deploy_us": "success", "deploy_apac": "running"}
    reports = {"deploy_eu": report("eu"), "deploy_us": report("us")}
    assert run(states, reports).verdict is Verdict.WAITING
    late = run(states, reports, now=DEADLINE)
    assert late.verdict is Verdict.DEADLINE and "apac" in late.message


def test_success_without_report_is_a_clear_error():
    states = {t: "success" for t in EXPECTED.values()}
    reports = {"deploy_eu": report("eu"), "deploy_us": report("us")}
    ev = run(states, reports)
    assert ev.verdict is Verdict.CORRUPT and "deploy_apac" in ev.message and "without a ready-to-close report" in ev.message


@pytest.mark.parametrize(
    "bad,needle",
    [("text", "not a report"), ({"source": "eu"}, "lacks"), ({**report("eu"), "incarnation": "x"}, "invalid value"),
     ({**report("eu"), "source": "us"}, "names source")],
)
def test_corrupted_value_is_a_clear_error_and_nothing_is_ready(bad, needle):
    states = {t: "success" for t in EXPECTED.values()}
    reports = {"deploy_eu": bad, "deploy_us": report("us"), "deploy_apac": report("apac")}
    ev = run(states, reports)
    assert ev.verdict is Verdict.CORRUPT and needle in ev.message
    with pytest.raises(CorruptState):
        parse_report(bad, "eu", "deploy_eu")


def test_report_from_an_older_incarnation_is_ignored_while_its_source_reruns():
    states = {"deploy_eu": "running", "deploy_us": "success", "deploy_apac": "success"}
    reports = {"deploy_eu": report("eu", incarnation=0), "deploy_us": report("us", 1), "deploy_apac": report("apac", 1)}
    ev = run(states, reports, incarnation=1)
    assert ev.verdict is Verdict.WAITING and ev.missing == ("eu",)


MARK = "mark-2"  # the deploy task's latest deferral (its XCom zeta_deploy_deferral)


def stored(report_value, latest_mark=MARK, ended=("tok-apac",)):
    """What the trigger read of deploy_apac, still deferred: its stored report under MARK."""
    raw = report_value if not isinstance(report_value, dict) or "source" not in report_value else {**report_value, "deferral_mark": MARK}
    return {"deploy_apac": StoredWhileDeferred(raw, latest_mark, frozenset(ended))}


def run_deferred(early, incarnation=1, unverified=None):
    states = {"deploy_eu": "success", "deploy_us": "success", "deploy_apac": "deferred"}
    reports = {"deploy_eu": report("eu", 1), "deploy_us": report("us", 1)}
    return evaluate(EXPECTED, states, reports, incarnation, NOW, DEADLINE, unverified, early)


def test_a_report_stored_while_its_task_is_still_deferred_counts_a_beat_early():
    """The driver trigger stores the report, then ends its task with TaskSuccessEvent,
    which Airflow applies at the triggerer's next beat. The stored report of this incarnation,
    under the task's latest deferral, of an attempt seen ending, verified, already counts; the
    ready set is the same as after the task's success."""
    early = run_deferred(stored(report("apac", 1)))
    reports = {t: report(s, incarnation=1) for s, t in EXPECTED.items()}
    succeeded = run({t: "success" for t in EXPECTED.values()}, reports, incarnation=1)
    assert early.verdict is Verdict.ALL_READY and early.ready_set(1) == succeeded.ready_set(1)


def test_a_stale_triggers_late_report_never_counts_for_a_cleared_source():
    """The race the deferral mark closes: deploy_apac's trigger (incarnation 1, deferral mark-1)
    proves itself current, then its store lands late — after the user cleared deploy_apac alone
    (the run's clear number 1 -> 2, this sensor still at 1), the clear's start wiped the XComs and
    the new try deferred with mark-2 on a new attempt. The slot holds the old attempt's report of
    incarnation 1, verified (that attempt did succeed). It must not count: the user asked for a
    re-run."""
    late = {**report("apac", 1, token="tok-old"), "deferral_mark": "mark-1"}
    early = {"deploy_apac": StoredWhileDeferred(late, "mark-2", frozenset({"tok-old", "tok-new"}))}
    ev = run_deferred(early, incarnation=1)
    assert ev.verdict is Verdict.WAITING and ev.missing == ("apac",), ev


@pytest.mark.parametrize(
    "early,unverified",
    [
        ({}, None),  # not stored yet (nothing read)
        (stored(None), None),  # read, not stored yet
        (stored(report("apac", incarnation=0)), None),  # of an earlier incarnation
        (stored(report("apac", 1), latest_mark=None), None),  # the deferral mark unreadable
        (stored(report("apac", 1), latest_mark="mark-3"), None),  # the task deferred again since
        (stored(report("apac", 1), ended=("tok-other",)), None),  # an attempt not seen ending
        ({"deploy_apac": StoredWhileDeferred(report("apac", 1), MARK, frozenset({"tok-apac"}))}, None),  # stored by a task, no mark
        (stored(report("apac", 1)), "source 'apac', attempt tok-apac: the attempt did not succeed (running)"),
        (stored({"source": "apac"}), None),  # unreadable
        (stored(report("apac", incarnation=2)), None),  # newer than this wait
    ],
)
def test_a_deferred_tasks_report_that_cannot_count_yet_leaves_it_waiting_never_failed(early, unverified):
    """Only the task's end judges a report it has not ended with: while deferred, anything less than
    all of the rule is 'missing', not corrupt or unverifiable."""
    ev = run_deferred(early, incarnation=1, unverified={"apac": unverified} if unverified else None)
    assert ev.verdict is Verdict.WAITING and ev.missing == ("apac",), ev


def test_a_report_read_early_counts_only_while_its_task_is_deferred():
    early = stored(report("apac", 1))
    for state in ("running", "queued", "up_for_retry", "scheduled", None):
        states = {"deploy_eu": "success", "deploy_us": "success", "deploy_apac": state}
        reports = {"deploy_eu": report("eu", 1), "deploy_us": report("us", 1)}
        ev = evaluate(EXPECTED, states, reports, 1, NOW, DEADLINE, None, early)
        assert ev.verdict is Verdict.WAITING and ev.missing == ("apac",), (state, ev)


def test_a_success_report_stored_late_by_an_earlier_deferrals_trigger_is_refused():
    """A driver trigger proved itself current, then its store hung until after the task was cleared,
    ran again and succeeded: the new try's report is overwritten with one naming the old deferral.
    Waiting cannot bring the new report back; the message names the source and the token."""
    mine = {**report("eu", 1), "deferral_mark": "m1"}
    parsed = parse_report(mine, "eu", "deploy_eu")
    assert stale_store_problem(parsed, mine, "m1") is None
    assert stale_store_problem(parsed, report("eu", 1), None) is None  # returned by the task: no mark
    for latest in ("m2", None):  # deferred again since; or the new try never deferred
        problem = stale_store_problem(parsed, mine, latest)
        assert problem and "'eu'" in problem and "tok-eu" in problem and "clear" in problem


def test_report_from_a_newer_incarnation_is_a_contradiction():
    states = {t: "success" for t in EXPECTED.values()}
    reports = {t: report(s, incarnation=2) for s, t in EXPECTED.items()}
    assert run(states, reports, incarnation=1).verdict is Verdict.CORRUPT


def test_a_reported_attempt_whose_ledger_is_gone_fails_fast_naming_source_and_token():
    """Waiting cannot bring a deleted ledger back (the report exists only because the
    source task succeeded), so the wait fails now instead of after ready_timeout."""
    states = {t: "success" for t in EXPECTED.values()}
    reports = {t: report(s) for s, t in EXPECTED.items()}
    problem = attempt_problem(parse_report(report("us"), "us", "deploy_us"), None)
    assert "unknown attempt token" in problem
    ev = run(states, reports, unverified={"us": problem})
    assert ev.verdict is Verdict.UNVERIFIABLE and ev.verdict is not Verdict.WAITING
    assert "'us'" in ev.message and "tok-us" in ev.message and "unknown attempt token" in ev.message


def test_attempt_problem_checks_the_ledger():
    r = parse_report(report("eu"), "eu", "deploy_eu")
    ok = Ledger(token=r.token, status=LedgerStatus.SUCCEEDED, started_at=1, heartbeat_at=2, output_path=r.output_path, rows=10)
    assert attempt_problem(r, ok) is None
    assert "did not succeed" in attempt_problem(r, Ledger(token=r.token, status=LedgerStatus.FAILED, started_at=1, heartbeat_at=2))
    assert "names output" in attempt_problem(r, Ledger(token=r.token, status=LedgerStatus.SUCCEEDED, started_at=1, heartbeat_at=2, output_path="x"))
    other_rows = Ledger(token=r.token, status=LedgerStatus.SUCCEEDED, started_at=1, heartbeat_at=2, output_path=r.output_path, rows=9)
    assert "10 rows, the driver ledger 9" in attempt_problem(r, other_rows)


def test_failed_source_fails_fast_naming_it():
    states = {"deploy_eu": "failed", "deploy_us": "running", "deploy_apac": "upstream_failed"}
    ev = run(states, {})
    assert ev.verdict is Verdict.SOURCE_FAILED and "apac (upstream_failed)" in ev.message and "eu (failed)" in ev.message


def test_up_for_retry_is_not_a_failure():
    assert run({"deploy_eu": "up_for_retry"}, {}).verdict is Verdict.WAITING


# -- the completed point ----------------------------------------------------------------------


def sources(incarnation=0, **tokens):
    return {s: parse_report(report(s, incarnation, token), s, f"deploy_{s}") for s, token in tokens.items()}


OWNER = Owner("dag_a", "pipe", "scheduled__2026-01-01T00:00:00+00:00")


def test_commit_id_depends_on_owner_tokens_partition_and_incarnation_only():
    a = commit_id("2026-01-01", 0, sources(eu="a", us="b"), OWNER)
    assert a == commit_id("2026-01-01", 0, sources(us="b", eu="a"), OWNER)
    assert a != commit_id("2026-01-01", 0, sources(eu="a", us="c"), OWNER)
    assert a != commit_id("2026-01-02", 0, sources(eu="a", us="b"), OWNER)
    assert a != commit_id("2026-01-01", 1, sources(eu="a", us="b"), OWNER)
    assert a != commit_id("2026-01-01", 0, sources(eu="a", us="b"), Owner("dag_a", "pipe", "other_run"))
    # scheduled__<ts> repeats in every DAG; the DAG and the pipeline are part of it.
    assert a != commit_id("2026-01-01", 0, sources(eu="a", us="b"), Owner("dag_b", "pipe", OWNER.run_id))
    assert a != commit_id("2026-01-01", 0, sources(eu="a", us="b"), Owner("dag_a", "pipe2", OWNER.run_id))


def test_publish_decisions():
    srcs = sources(eu="a", us="b")
    ours = commit_id("d", 1, srcs, OWNER)
    same = marker_for(ours, "d", 1, srcs, 5.0, OWNER)
    older = marker_for("old", "d", 0, srcs, 5.0, OWNER)
    same_incarnation_other = marker_for("other", "d", 1, srcs, 5.0, OWNER)
    newer = marker_for("new", "d", 2, srcs, 5.0, OWNER)
    assert decide_publish(ours, 1, False, None, OWNER).action is PublishAction.PUBLISH
    assert decide_publish(ours, 1, True, same, OWNER).rule == "already_published"  # re-executing: no-op
    assert decide_publish(ours, 1, True, older, OWNER).action is PublishAction.REPLACE
    late = decide_publish(ours, 1, True, same_incarnation_other, OWNER)
    assert late.action is PublishAction.NO_OP and late.rule == "late_report_ignored"
    assert decide_publish(ours, 1, True, newer, OWNER).rule == "stale_commit"
    assert decide_publish(ours, 1, True, None, OWNER).rule == "foreign_partition"
    other_run = marker_for("x", "d", 0, srcs, 5.0, Owner("dag_a", "pipe", "scheduled__other"))
    taken = decide_publish(ours, 1, True, other_run, Owner("dag_a", "pipe", "manual__mine"))
    assert taken.action is PublishAction.FAIL and taken.rule == "partition_of_another_owner"
    assert "scheduled__other" in taken.reason
    assert decide_publish(ours, 1, True, CorruptState("bad"), OWNER).action is PublishAction.FAIL


@pytest.mark.parametrize("other", [Owner("dag_b", "pipe", OWNER.run_id), Owner("dag_a", "pipe2", OWNER.run_id)])
@pytest.mark.parametrize("other_incarnation", [0, 1, 2])
def test_a_partition_of_another_dag_or_pipeline_with_the_same_run_id_is_never_ours(other, other_incarnation):
    """Same run id, same ds, another DAG (or pipeline): whatever the incarnations,
    never a no-op that reports the other's commit as ours, never a replacement (tombstone)."""
    srcs = sources(eu="a", us="b")
    theirs = marker_for(commit_id("d", other_incarnation, srcs, other), "d", other_incarnation, srcs, 5.0, other)
    decision = decide_publish(commit_id("d", 1, srcs, OWNER), 1, True, theirs, OWNER)
    assert decision.action is PublishAction.FAIL and decision.rule == "partition_of_another_owner"
    assert other.dag_id in decision.reason and other.pipeline_id in decision.reason


DAY, ROOT = "2026-01-01T00:00:00+00:00", "root-1"


def test_a_deleted_runs_partition_of_the_same_dag_pipeline_date_and_deployment_is_replaced():
    """Another run of this DAG and pipeline, of the same logical date and deployment, published the
    partition: refused while that run exists; once it was deleted (``owner_run_deleted``, which the
    operator asks Airflow about only for the owner ``owner_run_to_look_up`` names) the partition is
    replaced and becomes a tombstone."""
    srcs = sources(eu="a")
    mine = Owner("dag_a", "pipe", "backfill__2026-01-01")
    deleted = marker_for("old", "d", 3, srcs, 5.0, OWNER, logical_date=DAY, state_root_id=ROOT)
    assert owner_run_to_look_up(deleted, mine, DAY, ROOT) == OWNER
    refused = decide_publish("new", 0, True, deleted, mine, logical_date=DAY, state_root_id=ROOT)
    assert refused.rule == "partition_of_another_owner" and refused.action is PublishAction.FAIL
    replaced = decide_publish("new", 0, True, deleted, mine, owner_run_deleted=True, logical_date=DAY, state_root_id=ROOT)
    assert replaced.action is PublishAction.REPLACE and replaced.rule == "owner_run_deleted"
    assert OWNER.run_id in replaced.reason and "no longer exists" in replaced.reason


@pytest.mark.parametrize(
    ("existing_owner", "day", "root"),
    [
        (Owner("dag_b", "pipe", "manual__x"), DAY, ROOT),
        (Owner("dag_a", "pipe2", "manual__x"), DAY, ROOT),
        (Owner("", "", "manual__x"), DAY, ROOT),
        (OWNER, DAY, ROOT),
        (Owner("dag_a", "pipe", "manual__x"), "2026-01-01T05:00:00+00:00", ROOT),
        (Owner("dag_a", "pipe", "manual__x"), DAY, "root-2"),
        (Owner("dag_a", "pipe", "manual__x"), "", ROOT),
        (Owner("dag_a", "pipe", "manual__x"), DAY, ""),
    ],
    ids=[
        "another DAG",
        "another pipeline",
        "no owner recorded",
        "this run",
        "another logical date",
        "another deployment",
        "no logical date recorded",
        "no deployment recorded",
    ],
)
def test_no_run_is_looked_up_unless_it_could_only_be_this_dates_earlier_run(existing_owner, day, root):
    """Another DAG or pipeline sharing a table is refused whether or not its run exists; so is a run
    of another logical date rendering the same partition (an hourly run with the daily spec), a
    run of another deployment (its runs are not in this metadata database) and a marker written
    before the date and deployment were recorded. A marker of one's own run is decided by
    incarnation. None of them is looked up, and a stray ``owner_run_deleted`` changes nothing."""
    srcs = sources(eu="a")
    existing = marker_for("old", "d", 0, srcs, 5.0, existing_owner, logical_date=day, state_root_id=root)
    assert owner_run_to_look_up(existing, OWNER, DAY, ROOT) is None
    assert owner_run_to_look_up(None, OWNER, DAY, ROOT) is None
    assert owner_run_to_look_up(CorruptState("bad"), OWNER, DAY, ROOT) is None
    decision = decide_publish("new", 1, True, existing, OWNER, logical_date=DAY, state_root_id=ROOT)
    stray = decide_publish("new", 1, True, existing, OWNER, owner_run_deleted=True, logical_date=DAY, state_root_id=ROOT)
    assert stray == decision and decision.rule != "owner_run_deleted"


def test_a_marker_without_owner_is_matched_by_run_id():
    """Markers written before the owner was recorded (empty dag_id) still decide by run id."""
    srcs = sources(eu="a")
    legacy = marker_for("old", "d", 0, srcs, 5.0, Owner("", "", OWNER.run_id))
    assert decide_publish("new", 1, True, legacy, OWNER).action is PublishAction.REPLACE


def test_commit_marker_round_trip_and_corruption():
    marker = marker_for("c", "d", 0, sources(eu="a"), 7.0, OWNER)
    assert parse_commit_marker(marker.to_json(), "x") == marker
    with_manifest = dataclasses.replace(marker, manifest={"source=eu/a-part-0.json": 12, "source=eu/_SUCCESS": 0})
    assert parse_commit_marker(with_manifest.to_json(), "x").manifest == with_manifest.manifest
    assert parse_commit_marker(marker.to_json(), "x").manifest is None  # a marker from before manifests
    assert parse_commit_marker(None, "x") is None
    with pytest.raises(CorruptState, match="unreadable"):
        parse_commit_marker(b'{"commit_id": "c"', "x")


def test_ready_set_round_trip_and_bad_input():
    states = {t: "success" for t in EXPECTED.values()}
    ev = run(states, {t: report(s) for s, t in EXPECTED.items()})
    incarnation, parsed = parse_ready_set(ev.ready_set(0))
    assert incarnation == 0 and parsed == ev.ready
    # Pushed by the trigger's TaskSuccessEvent, Airflow 3.3.2 hands it back as its JSON text.
    assert parse_ready_set(json.dumps(ev.ready_set(0))) == (0, ev.ready)
    for bad in (None, {"sources": {}}, {"incarnation": 0, "sources": {}}, {"incarnation": 0, "sources": {"eu": 3}},
                "not json", json.dumps([1])):
        with pytest.raises(CorruptState):
            parse_ready_set(bad)


def test_a_ready_set_names_the_token_of_each_source_it_holds():
    # A cleared deploy task reads from it that its earlier driver ended (core.deploy).
    states = {t: "success" for t in EXPECTED.values()}
    ready_set = run(states, {t: report(s) for s, t in EXPECTED.items()}).ready_set(0)
    assert ready_set_names(ready_set, "deploy_eu", "tok-eu")
    assert ready_set_names(json.dumps(ready_set), "deploy_eu", "tok-eu")  # as the trigger's event stores it
    assert not ready_set_names(ready_set, "deploy_eu", "tok-us")  # another source's token
    assert not ready_set_names(ready_set, "deploy_us", "tok-eu")
    for unreadable in (None, "not json", {"sources": {}}, 3):
        assert not ready_set_names(unreadable, "deploy_eu", "tok-eu")


def test_a_completed_points_return_value_names_the_token_each_source_was_published_from():
    value = {"commit_id": "c", "tokens": {"eu": "tok-eu", "us": "tok-us"}, "rows": {"eu": 1, "us": 2}}
    assert commit_names(value, "tok-eu") and commit_names(value, "tok-us")
    assert not commit_names(value, "tok-apac")
    for unreadable in (None, "text", {"tokens": "x"}, {}):
        assert not commit_names(unreadable, "tok-eu")


def test_partition_key_requires_a_logical_date():
    assert partition_key("2026-01-01", "r") == "2026-01-01"
    with pytest.raises(MissingPartitionKey, match="no logical date"):
        partition_key(None, "manual__x")


def test_wait_deadline_is_fixed_once_and_renewed_only_by_a_clear_of_the_sensor():
    first, changed = wait_deadline(None, 100.0, 50.0, max_tries=2)
    assert changed and first == {"deadline": 150.0, "max_tries": 2}
    # retries, restarts, re-deferrals: same deadline, even long after it passed
    assert wait_deadline(first, 10_000.0, 50.0, max_tries=2) == (first, False)
    # the sensor was cleared (max_tries rose): a fresh wait
    renewed, changed = wait_deadline(first, 10_000.0, 50.0, max_tries=5)
    assert changed and renewed["deadline"] == 10_050.0
    # an old plain-number value is read, a bad one is a clear error
    assert wait_deadline(123.0, 0, 1, None) == ({"deadline": 123.0, "max_tries": None}, False)
    for bad in ("soon", {"deadline": "x"}, [1]):
        with pytest.raises(CorruptState, match="delete the key"):
            wait_deadline(bad, 0, 1, 1)


def test_a_commit_is_announced_once():
    """One Asset event per new commit; none for a no-op re-execution; the retry of
    a try killed after its rename announces what that try could not."""
    from airflow_provider_zeta.core.publish import PublishDecision, should_announce

    new = PublishDecision(PublishAction.PUBLISH, "first_publish", "")
    replace = PublishDecision(PublishAction.REPLACE, "newer_incarnation", "")
    no_op = PublishDecision(PublishAction.NO_OP, "already_published", "")
    assert should_announce(new, "c1", None, None) and should_announce(replace, "c2", {"commit_id": "c2"}, "c1")
    assert not should_announce(no_op, "c1", {"commit_id": "c1"}, "c1")  # a clear's re-execution
    assert should_announce(no_op, "c1", {"commit_id": "c1"}, None)  # killed after its rename
    assert not should_announce(no_op, "c1", None, None)  # this task never published it
    assert not should_announce(no_op, "c1", {"commit_id": "c0"}, "c0")  # late report: c1 was someone else's
    assert not should_announce(PublishDecision(PublishAction.FAIL, "stale_commit", ""), "c1", {"commit_id": "c1"}, None)
