"""Rules of the completed point (core/publish.py) that the other tests did not pin down: each
decision's reason word for word, nested partitions below one level, an intent whose marker is
unreadable or names no manifest. Each kills a surviving mutant of the module's measurement."""

from __future__ import annotations

import json

import pytest

from airflow_provider_zeta.core.ledger import CorruptState
from airflow_provider_zeta.core.publish import (
    CommitMarker,
    Intent,
    Owner,
    PublishAction,
    PublishDecision,
    RecoveryAction,
    RecoveryDecision,
    asset_extra,
    commit_id,
    decide_publish,
    landing_problem,
    manifest_problem,
    marker_for,
    nested_partitions,
    owner_run_to_look_up,
    parse_intent,
    recovery_rule,
    staging_problem,
)
from airflow_provider_zeta.core.ready import Report

DS = "2026-07-01"
OURS = Owner("dag_a", "pipe", "run_now")
DATE = "2026-07-01T00:00:00+00:00"
ROOT = "root-1"


def marker(commit="c-old", incarnation=0, owner=OURS, logical_date=DATE, state_root_id=ROOT, **more):
    return CommitMarker(
        commit_id=commit,
        ds=DS,
        incarnation=incarnation,
        tokens={"eu": "tok-eu"},
        rows={"eu": 3},
        published_at=1.0,
        run_id=owner.run_id,
        dag_id=owner.dag_id,
        pipeline_id=owner.pipeline_id,
        logical_date=logical_date,
        state_root_id=state_root_id,
        **more,
    )


def decide(existing, incarnation=1, **kwargs):
    return decide_publish("c-new", incarnation, True, existing, OURS, logical_date=DATE, state_root_id=ROOT, **kwargs)


def test_a_partition_published_two_levels_below_is_named_by_its_whole_folder():
    files = ["hour=13/minute=05/_zeta_commit.json", "hour=13/minute=05/source=eu/part-0", "hour=14/_zeta_commit.json"]
    assert nested_partitions("ds=1", files) == ("ds=1/hour=13/minute=05", "ds=1/hour=14")


def test_a_newer_incarnation_replaces_the_older_commit_saying_so():
    decision = decide(marker(incarnation=1), incarnation=2)
    assert (decision.action, decision.rule) == (PublishAction.REPLACE, "newer_incarnation")
    assert decision.reason == "incarnation 2 replaces commit c-old of incarnation 1; the old partition becomes a tombstone"


def test_a_late_report_of_the_same_incarnation_is_ignored_naming_the_commits_tokens():
    decision = decide(marker(incarnation=2), incarnation=2)
    assert (decision.action, decision.rule) == (PublishAction.NO_OP, "late_report_ignored")
    assert decision.reason == (
        "commit c-old already published this incarnation from tokens {'eu': 'tok-eu'}; "
        "a later report of the same incarnation is not published twice"
    )


def test_an_older_incarnation_fails_before_a_newer_ones_commit():
    decision = decide(marker(incarnation=3), incarnation=2)
    assert (decision.action, decision.rule) == (PublishAction.FAIL, "stale_commit")
    assert decision.reason == (
        "commit c-old of a newer incarnation (3 > 2) is published; an older incarnation must not overwrite it"
    )


def test_a_deleted_runs_partition_is_replaced_saying_whose_it_was():
    deleted = Owner("dag_a", "pipe", "run_deleted")
    decision = decide(marker(owner=deleted), owner_run_deleted=True)
    assert (decision.action, decision.rule) == (PublishAction.REPLACE, "owner_run_deleted")
    assert decision.reason == (
        "the partition was published by pipeline 'pipe' of DAG 'dag_a', run 'run_deleted' (commit c-old), "
        "a run that no longer exists in Airflow; pipeline 'pipe' of DAG 'dag_a', run 'run_now' replaces it "
        "and the old partition becomes a tombstone"
    )


def another_owners_reason(state):
    return (
        f"the partition was published by pipeline 'pipe' of DAG 'dag_b', run 'run_other' (commit c-old){state}; "
        "pipeline 'pipe' of DAG 'dag_a', run 'run_now' renders the same partition. One partition belongs to one "
        "pipeline run: give each DAG/pipeline its own output table, give runs distinct partitions (a partition "
        "spec matching the schedule, e.g. partition=\"ds={{ ds }}/hour={{ logical_date.strftime('%H') }}\" for "
        "an hourly one), or clear the owning run to reprocess it. Nothing was changed."
    )


def test_another_owners_partition_is_refused_saying_what_to_do_and_whether_it_is_complete():
    other = Owner("dag_b", "pipe", "run_other")
    complete = decide(marker(owner=other))
    assert (complete.action, complete.rule) == (PublishAction.FAIL, "partition_of_another_owner")
    assert complete.reason == another_owners_reason("")
    incomplete = decide(marker(owner=other), incomplete="1 of 2 files missing (e.g. a)")
    assert (incomplete.action, incomplete.rule) == (PublishAction.FAIL, "partition_of_another_owner")
    assert incomplete.reason == another_owners_reason(" (not complete: its files do not match its marker's manifest)")


def intent_bytes(marker_value):
    return json.dumps({"marker": marker_value, "partition": f"ds={DS}", "pending": "_zeta_pending/x"}).encode()


def test_an_intent_whose_marker_is_unreadable_is_refused_naming_the_intent_in_both_messages():
    where = "/t/_zeta_pending/x/_zeta_intent.json"
    with pytest.raises(CorruptState) as raised:
        parse_intent(intent_bytes({"ds": DS}), where)
    assert str(raised.value) == (
        f"publish intent {where} is unreadable (commit marker {where} is unreadable ('commit_id'); the "
        "partition's provenance is unknown. Inspect it; nothing was changed.); what the interrupted publish "
        "was doing is unknown. Inspect the partition and the intent; nothing was changed."
    )


def test_an_intent_whose_marker_names_no_manifest_is_refused():
    without = json.loads(marker().to_json())
    with pytest.raises(CorruptState, match=r"is unreadable \(its marker names no manifest\)"):
        parse_intent(intent_bytes(without), "the intent")
    with_manifest = json.loads(marker(manifest={"source=eu/a": 3}).to_json())
    assert parse_intent(intent_bytes(with_manifest), "the intent").marker.manifest == {"source=eu/a": 3}


@pytest.mark.parametrize(
    "replaced",
    [
        {},
        {
            "replaced": "c-old",
            "replaced_marker": '{"commit_id": "c-old"}',
            "replaced_files": {"source=eu/a": 3},
            "tombstone": "_zeta_tombstones/dag_a/run_now/c-old",
        },
    ],
    ids=["first publish", "replacement"],
)
def test_an_intent_reads_back_as_written_with_or_without_a_replaced_commit(replaced):
    intent = Intent(marker=marker(manifest={"source=eu/a": 4}), partition=f"ds={DS}", pending="_zeta_pending/x", **replaced)
    assert parse_intent(intent.to_json(), "the intent") == intent


def interrupted(manifest=None):
    ours = marker(commit="c-new", incarnation=1, manifest=manifest or {"source=eu/tok-eu-a": 4})
    return Intent(ours, f"ds={DS}", "_zeta_pending/x", "c-old", "{}", {"source=eu/tok-old-a": 2}, "_zeta_tombstones/t")


def test_an_intent_whose_commit_is_in_place_and_verifies_is_done_saying_so():
    intent = interrupted()
    decision = recovery_rule(intent, intent.marker, {"source=eu/tok-eu-a": 4, "_zeta_commit.json": 9}, {})
    assert decision == RecoveryDecision(RecoveryAction.DONE, "intent_committed", "commit c-new is in place and verifies")


def test_a_marker_of_the_intents_commit_that_names_no_manifest_is_not_taken_for_done():
    intent = interrupted()
    unverifiable = marker(commit="c-new", incarnation=1)
    pending = {"source=eu/tok-eu-a": 4}
    decision = recovery_rule(intent, unverifiable, {"source=eu/tok-eu-a": 4}, pending)
    assert (decision.action, decision.rule) == (RecoveryAction.FORWARD, "intent_completed")


def test_a_partition_taken_by_another_commit_gives_the_intent_up_naming_who_holds_it():
    intent = interrupted()
    other = marker(commit="c-else", owner=Owner("dag_b", "pipe", "run_other"))
    by_other = recovery_rule(intent, other, {}, {"source=eu/tok-eu-a": 4})
    assert by_other == RecoveryDecision(
        RecoveryAction.BACK,
        "intent_partition_taken",
        "the partition now holds pipeline 'pipe' of DAG 'dag_b', run 'run_other' (commit c-else): "
        "commit c-new is given up without touching it",
    )
    unreadable = recovery_rule(intent, CorruptState("bad marker"), {}, {"source=eu/tok-eu-a": 4})
    assert unreadable == RecoveryDecision(
        RecoveryAction.BACK,
        "intent_partition_taken",
        "the partition now holds an unreadable marker: commit c-new is given up without touching it",
    )


def test_an_intent_whose_assembled_partition_is_incomplete_is_rolled_back_saying_why():
    intent = interrupted(manifest={"source=eu/tok-eu-a": 4, "source=eu/tok-eu-b": 5})
    decision = recovery_rule(intent, None, {}, {"source=eu/tok-eu-a": 4})
    assert decision == RecoveryDecision(
        RecoveryAction.BACK,
        "intent_pending_lost",
        "the assembled partition of commit c-new is not complete (1 of 2 files missing (e.g. source=eu/tok-eu-b)): "
        "the files it copied into the partition are removed; a replaced partition stays in its tombstone",
    )


def test_an_intent_whose_assembled_partition_is_whole_is_completed_saying_so():
    intent = interrupted()
    old = marker(commit="c-old")
    decision = recovery_rule(intent, old, {"source=eu/tok-old-a": 2}, {"source=eu/tok-eu-a": 4})
    assert decision == RecoveryDecision(RecoveryAction.FORWARD, "intent_completed", "commit c-new was interrupted; completing it")


def test_landing_before_the_marker_names_how_many_files_are_foreign_and_how_many_lacking():
    intent = interrupted(manifest={"a": 1, "b": 2})
    assert landing_problem(intent, {"a": 1, "b": 2, "_zeta_commit.json": 7}, complete=True) is None
    assert landing_problem(intent, {"a": 1, "b": 3, "z": 1, "y": 1}, complete=True) == (
        "the partition holds 2 files commit c-new does not name and lacks 1 it names (e.g. y) right before its "
        "marker is written: another owner writes there"
    )
    assert landing_problem(intent, {"a": 1}, complete=True) == (
        "the partition holds 0 files commit c-new does not name and lacks 1 it names (e.g. b) right before its "
        "marker is written: another owner writes there"
    )


def test_landing_names_how_many_files_neither_commit_names():
    intent = interrupted(manifest={"a": 1})
    assert landing_problem(intent, {"a": 1, "source=eu/tok-old-a": 2, "_zeta_commit.json": 7}) is None
    assert landing_problem(intent, {"a": 1, "z": 1, "x": 1}) == (
        "the partition holds 2 files that neither commit c-new nor the partition it replaces names (e.g. x): "
        "another owner writes there"
    )
    first = Intent(marker(commit="c-new", manifest={"a": 1}), f"ds={DS}", "_zeta_pending/x")
    assert landing_problem(first, {"a": 1}) is None
    assert landing_problem(first, {"source=eu/tok-old-a": 2}) is not None


def test_a_manifest_problem_lists_missing_extra_and_resized_files_with_counts_and_examples():
    listed = marker(manifest={"a": 1, "b": 2, "c": 3})
    assert manifest_problem(listed, {"a": 1, "b": 2, "c": 3, "_zeta_commit.json": 10}, atomic_rename=False) is None
    assert manifest_problem(listed, {"a": 5, "c": 3, "y": 1, "x": 1}, atomic_rename=False) == (
        "1 of 3 files missing (e.g. b); 2 files it does not name (e.g. x); 1 files of another size (e.g. a)"
    )
    assert manifest_problem(marker(), {"a": 1}, atomic_rename=False) == (
        "the marker names no manifest (written before manifests), so it cannot be verified"
    )
    assert manifest_problem(marker(), {"a": 1}, atomic_rename=True) is None


def test_a_staging_problem_names_the_source_attempt_staging_and_each_difference():
    recorded = {"part-0": 10, "part-1": 11, "part-2": 12}
    found = {"part-0": 3, "part-2": 12, "part-9": 1, "part-8": 1}
    assert staging_problem("eu", "tok1", recorded, found, "file:///s") == (
        "source 'eu', attempt tok1: staging file:///s differs from what its driver recorded at finish: "
        "1 recorded files missing (e.g. part-1); 2 files the driver did not record (e.g. part-8); "
        "1 files of another size (e.g. part-0: 3 bytes, recorded 10)"
    )
    assert staging_problem("eu", "tok1", recorded, {}, "file:///s") == (
        "source 'eu', attempt tok1: staging file:///s is missing or empty, but its driver recorded 3 files at finish"
    )
    assert staging_problem("eu", "tok1", None, found, "file:///s") == (
        "source 'eu', attempt tok1: staging file:///s: its driver ledger records no list of output files (a driver "
        "of an older provider version), so the staging cannot be checked. Clear the source's deploy task to run it "
        "again."
    )
    assert staging_problem("eu", "tok1", {}, {"part-0": 1}, "w") == (
        "source 'eu', attempt tok1: staging w differs from what its driver recorded at finish: "
        "1 files the driver did not record (e.g. part-0)"
    )


def test_each_refusal_before_a_marker_is_read_says_what_is_there_and_what_to_do():
    assert decide_publish("c-new", 1, False, None, OURS) == PublishDecision(
        PublishAction.PUBLISH, "first_publish", "the partition does not exist yet"
    )
    assert decide_publish("c-new", 1, True, CorruptState("marker m is unreadable"), OURS) == PublishDecision(
        PublishAction.FAIL, "corrupt_marker", "marker m is unreadable"
    )
    assert decide_publish("c-new", 1, True, None, OURS) == PublishDecision(
        PublishAction.FAIL,
        "foreign_partition",
        "the partition exists without a commit marker: it was not published by this provider (or, on a store "
        "without atomic rename, another owner's publish is under way there), and replacing it could lose data. "
        "Move it away, then clear the completed point.",
    )


def test_another_owners_publish_under_way_is_named_and_ones_own_is_not():
    other = marker(commit="c-else", owner=Owner("dag_b", "pipe", "run_other"))
    mine = marker(commit="c-mine")
    decision = decide_publish("c-new", 1, True, None, OURS, publishing=[mine, other])
    assert decision == PublishDecision(
        PublishAction.FAIL,
        "partition_being_published",
        "pipeline 'pipe' of DAG 'dag_b', run 'run_other' is publishing this partition (commit c-else; its files "
        "are there, its marker not yet: under way, or interrupted until its retry); pipeline 'pipe' of DAG "
        "'dag_a', run 'run_now' renders the same partition. One partition belongs to one pipeline run: give each "
        "DAG/pipeline its own output table or runs distinct partitions. Nothing was changed.",
    )
    assert decide_publish("c-new", 1, True, None, OURS, publishing=[mine]).rule == "foreign_partition"


def test_an_incomplete_commit_of_this_or_an_earlier_incarnation_is_moved_aside_saying_why():
    expected = PublishDecision(
        PublishAction.REPLACE,
        "incomplete_commit",
        "the partition's marker (commit c-old, incarnation 1) does not match its files (1 of 2 files missing): "
        "it is not committed. pipeline 'pipe' of DAG 'dag_a', run 'run_now' moves what is there aside as a "
        "tombstone and publishes",
    )
    assert decide(marker(incarnation=1), incarnation=1, incomplete="1 of 2 files missing") == expected
    assert decide(marker(incarnation=1), incarnation=2, incomplete="1 of 2 files missing").rule == "incomplete_commit"
    assert decide(marker(incarnation=3), incarnation=2, incomplete="1 of 2 files missing").rule == "stale_commit"


def test_a_commit_already_in_place_is_a_no_op_naming_it():
    assert decide(marker(commit="c-new", incarnation=1)) == PublishDecision(
        PublishAction.NO_OP, "already_published", "commit c-new is already published"
    )


def test_a_partition_inside_another_is_refused_naming_the_enclosing_one_and_its_owner():
    daily = marker(commit="c-daily", owner=Owner("dag_b", "pipe", "run_other"))
    decision = decide_publish("c-new", 1, False, None, OURS, enclosing={"ds=x": daily, "a=1": CorruptState("bad")})
    assert decision == PublishDecision(
        PublishAction.FAIL,
        "partition_inside_another",
        "the partition lies inside partition 'a=1', published by an unknown owner (its marker is unreadable); "
        "pipeline 'pipe' of DAG 'dag_a', run 'run_now' would write into it. Partitions of one table must not "
        "nest: give both pipelines the same partition keys (e.g. both hourly) or separate output tables. "
        "Nothing was changed.",
    )
    named = decide_publish("c-new", 1, False, None, OURS, enclosing={"ds=x": daily})
    assert named.reason.startswith(
        "the partition lies inside partition 'ds=x', published by pipeline 'pipe' of DAG 'dag_b', run "
        "'run_other' (commit c-daily); "
    )


def test_a_partition_around_others_is_refused_counting_them():
    decision = decide_publish("c-new", 1, True, None, OURS, nested=iter(["ds=x/hour=13", "ds=x/hour=14"]))
    assert decision == PublishDecision(
        PublishAction.FAIL,
        "partition_holds_others",
        "the partition directory holds 2 partitions published by other runs (e.g. 'ds=x/hour=13'); publishing "
        "the partition of pipeline 'pipe' of DAG 'dag_a', run 'run_now' there would swallow them. Partitions of "
        "one table must not nest: give both pipelines the same partition keys or separate output tables. "
        "Nothing was changed.",
    )
    mine = marker(commit="c-new", incarnation=1)
    assert decide_publish("c-new", 1, True, mine, OURS, nested=["ds=x/hour=13"]).rule == "already_published"


def test_an_intent_is_written_as_sorted_json():
    raw = interrupted().to_json()
    data = json.loads(raw)
    assert list(data) == sorted(data) and list(data["marker"]) == sorted(data["marker"])
    assert data["replaced_files"] == {"source=eu/tok-old-a": 2} and data["marker"]["commit_id"] == "c-new"


def test_a_marker_written_before_owners_were_recorded_is_this_runs_by_its_run_id():
    legacy = marker(incarnation=1, owner=Owner("", "", "run_now"))
    assert decide(legacy, incarnation=1).rule == "late_report_ignored"
    assert decide(legacy, incarnation=2).rule == "newer_incarnation"
    other_run = marker(incarnation=1, owner=Owner("", "", "run_other"))
    assert decide(other_run, incarnation=2).rule == "partition_of_another_owner"


def reports():
    return {
        "us": Report("us", "deploy_us", 1, "tok-us", "out/us", None),
        "eu": Report("eu", "deploy_eu", 1, "tok-eu", "out/eu", 3),
    }


def test_a_marker_made_without_a_logical_date_or_state_root_names_neither_and_is_written_sorted():
    made = marker_for("c-new", DS, 1, reports(), 5.0, OURS)
    assert (made.logical_date, made.state_root_id, made.partition) == ("", "", f"ds={DS}")
    data = json.loads(made.to_json())
    assert list(data) == sorted(data)
    assert (data["logical_date"], data["state_root_id"]) == ("", "")
    assert owner_run_to_look_up(made, Owner("dag_a", "pipe", "run_later"), "", "") is None


def test_the_asset_event_carries_the_commit_its_partition_rows_tokens_and_owner():
    made = marker_for("c-new", DS, 1, reports(), 5.0, OURS, "ds=2026-07-01/hour=10", DATE, ROOT)
    assert asset_extra(made) == {
        "commit_id": "c-new",
        "ds": DS,
        "partition": "ds=2026-07-01/hour=10",
        "incarnation": 1,
        "rows": {"eu": 3, "us": None},
        "tokens": {"eu": "tok-eu", "us": "tok-us"},
        "run_id": "run_now",
        "dag_id": "dag_a",
        "pipeline_id": "pipe",
    }
    assert (made.logical_date, made.state_root_id) == (DATE, ROOT)


def test_a_commit_id_stays_the_one_markers_on_storage_already_name():
    """A re-execution finds its own commit only if the id is computed as when the marker was
    written: these ids are those of the provider as released, for a daily and an hourly partition."""
    owner = Owner("dag_a", "pipe", "scheduled__2026-07-01T00:00:00+00:00")
    sources = {"us": Report("us", "deploy_us", 2, "tok-us", "o", None), "eu": Report("eu", "deploy_eu", 2, "tok-eu", "o", 3)}
    assert commit_id(DS, 2, sources, owner) == "740433d3d1a592fb"
    assert commit_id(DS, 2, sources, owner, f"ds={DS}") == "740433d3d1a592fb"
    assert commit_id(DS, 2, sources, owner, f"ds={DS}/hour=10") == "1d5d06598f26f105"
