"""What the ready-to-close evaluation says (core/ready.py): the one-line message of each verdict,
the progress line the trigger logs on a change, the cap on names per message, and the deadline's
edge. The decisions themselves are covered in test_ready_and_publish.py and test_ready_decision.py."""

from __future__ import annotations

import pytest

from airflow_provider_zeta.core.ledger import CorruptState
from airflow_provider_zeta.core.ready import (
    MAX_NAMES_IN_MESSAGE,
    Evaluation,
    Report,
    StoredWhileDeferred,
    Verdict,
    attempt_problem,
    evaluate,
    mapped_entry_kwargs,
    mapped_expected,
    mapped_source_names,
    parse_ready_set,
    parse_report,
    split_task_ref,
    stale_store_problem,
)

NOW = 5_000.0


def report_of(source, incarnation=0, token=None):
    return {"source": source, "incarnation": incarnation, "token": token or f"tok-{source}", "output_path": f"/out/{source}", "rows": 3}


def sources(*names):
    return {name: f"deploy_{name}" for name in names}


def test_the_wait_ends_at_its_deadline_not_a_moment_later():
    expected = sources("a", "b")
    states = {"deploy_a": "success", "deploy_b": "running"}
    reports = {"deploy_a": report_of("a")}
    assert evaluate(expected, states, reports, 0, now=NOW - 0.001, deadline=NOW).verdict is Verdict.WAITING
    at_deadline = evaluate(expected, states, reports, 0, now=NOW, deadline=NOW)
    assert at_deadline.verdict is Verdict.DEADLINE
    assert at_deadline.message == "1 of 2 sources ready; deadline passed, still missing: b"


def test_each_verdict_says_how_many_sources_are_ready_and_what_is_waited_for_or_failed():
    expected = sources("a", "b", "c")
    waiting = evaluate(expected, {"deploy_a": "success"}, {"deploy_a": report_of("a")}, 0, NOW, NOW + 60)
    assert waiting.message == "1 of 3 sources ready; waiting for: b, c"
    failed = evaluate(expected, {"deploy_a": "success", "deploy_b": "failed", "deploy_c": "upstream_failed"}, {"deploy_a": report_of("a")}, 0, NOW, NOW + 60)
    assert failed.verdict is Verdict.SOURCE_FAILED
    assert failed.message == "1 of 3 sources ready; source(s) failed with no retries left: b (failed), c (upstream_failed)"
    everyone = {f"deploy_{n}": "success" for n in "abc"}
    all_ready = evaluate(expected, everyone, {f"deploy_{n}": report_of(n) for n in "abc"}, 0, NOW, NOW + 60)
    assert (all_ready.verdict, all_ready.message) == (Verdict.ALL_READY, "3 of 3 sources ready")
    unverifiable = evaluate(
        expected, everyone, {f"deploy_{n}": report_of(n) for n in "abc"}, 0, NOW, NOW + 60, unverified={"c": "source 'c', attempt tok-c: gone"}
    )
    assert unverifiable.message == "2 of 3 sources ready; reported attempt(s) cannot be verified: source 'c', attempt tok-c: gone"
    corrupt = evaluate(expected, everyone, {"deploy_a": report_of("a"), "deploy_b": report_of("b"), "deploy_c": ["x"]}, 0, NOW, NOW + 60)
    assert corrupt.verdict is Verdict.CORRUPT
    assert "; the ready-to-close report of source 'c' (XCom return_value of task 'deploy_c') is list" in corrupt.message


def test_a_source_with_a_corrupt_report_still_counts_among_all_sources():
    expected = sources("a", "b", "c")
    everyone = {f"deploy_{n}": "success" for n in "abc"}
    corrupt = evaluate(expected, everyone, {"deploy_a": report_of("a"), "deploy_b": report_of("b"), "deploy_c": ["x"]}, 0, NOW, NOW + 60)
    assert corrupt.message.startswith("2 of 3 sources ready; ")


def test_a_message_names_at_most_the_cap_of_sources_and_counts_the_rest():
    def waiting_for(count):
        names = [f"s{i:03d}" for i in range(count)]
        return evaluate(sources(*names), {}, {}, 0, NOW, NOW + 60).message

    at_cap = waiting_for(MAX_NAMES_IN_MESSAGE)
    assert at_cap.endswith(", s019") and "more" not in at_cap
    over = waiting_for(MAX_NAMES_IN_MESSAGE + 1)
    assert over.endswith(", s019 and 1 more") and "s020" not in over
    assert waiting_for(MAX_NAMES_IN_MESSAGE + 7).endswith(" and 7 more")


def _ready(*names):
    return {name: Report(name, f"deploy_{name}", 0, f"tok-{name}", f"/out/{name}", 3) for name in names}


def test_the_progress_line_is_logged_only_on_a_change_and_names_only_what_changed():
    first = Evaluation(Verdict.WAITING, _ready("a"), ("b", "c"))
    assert first.progress_from(None) == "1 of 3 sources ready; newly ready: a"
    assert first.progress_from(first) is None
    assert Evaluation(Verdict.WAITING, _ready("a"), ("b", "c")).progress_from(first) is None
    second = Evaluation(Verdict.WAITING, _ready("a", "b"), ("c",))
    assert second.progress_from(first) == "2 of 3 sources ready; newly ready: b"
    rerun = Evaluation(Verdict.WAITING, _ready("b"), ("a", "c"))
    assert rerun.progress_from(second) == "1 of 3 sources ready; no longer ready (re-running): a"
    done = Evaluation(Verdict.ALL_READY, _ready("a", "b", "c"))
    assert done.progress_from(second) == "3 of 3 sources ready; newly ready: c; 3 of 3 sources ready"


@pytest.mark.parametrize(
    "before, after",
    [
        (Evaluation(Verdict.WAITING, _ready("a"), ("b",)), Evaluation(Verdict.SOURCE_FAILED, _ready("a"), (), {"b": "failed"})),
        (Evaluation(Verdict.SOURCE_FAILED, {}, (), {"b": "failed"}), Evaluation(Verdict.SOURCE_FAILED, {}, (), {"b": "upstream_failed"})),
        (Evaluation(Verdict.UNVERIFIABLE, {}, (), {}, (), ("x",)), Evaluation(Verdict.UNVERIFIABLE, {}, (), {}, (), ("y",))),
        (Evaluation(Verdict.CORRUPT, {}, (), {}, ("x",)), Evaluation(Verdict.CORRUPT, {}, (), {}, ("y",))),
        (Evaluation(Verdict.WAITING, _ready("a"), ("b",)), Evaluation(Verdict.WAITING, _ready("b"), ("a",))),
    ],
)
def test_any_change_of_verdict_failures_problems_or_ready_sources_is_logged(before, after):
    assert after.progress_from(before) is not None


# -- the mapped source list's refusals say what was given and what a source is ----------------------


def test_a_mapped_list_of_the_wrong_type_is_refused_naming_that_type():
    with pytest.raises(ValueError, match=r"per-source dicts, not dict$"):
        mapped_source_names({"source": "north"}, "p.ready")
    with pytest.raises(ValueError, match=r"per-source dicts, not int$"):
        mapped_source_names(3, "p.ready")


def test_a_mapped_list_entry_without_a_valid_name_is_refused_saying_what_a_source_is():
    with pytest.raises(ValueError) as error:
        mapped_source_names(["ok", "a=b"], "p.ready")
    assert str(error.value) == (
        "p.ready: entry 1 of the mapped source list ('a=b') names no valid source: a source is a "
        "non-empty name without '/' or '=' (or a dict with such a 'source')"
    )


def test_the_expected_sources_of_a_bad_mapped_list_are_refused_naming_the_waiting_task():
    with pytest.raises(ValueError, match=r"^p\.ready: the mapped source list is missing"):
        mapped_expected("p.deploy", None, "p.ready")


def test_an_entry_with_unknown_keys_is_refused_naming_its_source():
    with pytest.raises(ValueError, match=r"^p: source entry 'north' holds \['retries'\]; an entry may hold"):
        mapped_entry_kwargs({"source": "north", "retries": 3}, "/j.py", {}, "p")


@pytest.mark.parametrize("name", [5, ["north"], "", "a/b", "a=b", None])
def test_an_entry_whose_source_is_not_a_valid_name_is_refused(name):
    with pytest.raises(ValueError, match="names no valid source"):
        mapped_entry_kwargs({"source": name}, "/j.py", {}, "p")


# -- a report stored by a trigger of an earlier deferral --------------------------------------------


def test_a_report_stored_under_an_earlier_deferral_is_refused_saying_what_to_clear():
    report = Report("a", "deploy_a", 0, "tok-a", "/out/a", 3)
    raw = {**report.to_value(), "deferral_mark": "mark-1"}
    assert stale_store_problem(report, raw, "mark-1") is None
    assert stale_store_problem(report, raw, "mark-2") == (
        "source 'a', attempt tok-a: the report was stored by the trigger of an earlier deferral of its "
        "task, after the task was run again (a late write over the new try's report) — clear the "
        "source's deploy task to run it again"
    )


@pytest.mark.parametrize("raw", ['{"deferral_mark": "mark-1"}', ["deferral_mark"], None, 3])
def test_a_value_that_is_not_a_report_names_no_deferral_to_check(raw):
    report = Report("a", "deploy_a", 0, "tok-a", "/out/a", 3)
    assert stale_store_problem(report, raw, "mark-2") is None


@pytest.mark.parametrize("mark", ["", 7])
def test_a_deferred_tasks_report_whose_mark_is_empty_or_not_a_text_never_counts_early(mark):
    """Even when the task's latest deferral mark reads back as the very same value."""
    expected = sources("a")
    raw = {**report_of("a", incarnation=1), "deferral_mark": mark}
    early = {"deploy_a": StoredWhileDeferred(raw, mark, frozenset({"tok-a"}))}
    ev = evaluate(expected, {"deploy_a": "deferred"}, {}, 1, NOW, NOW + 60, None, early)
    assert ev.verdict is Verdict.WAITING and ev.missing == ("a",)
    counted = {"deploy_a": StoredWhileDeferred({**raw, "deferral_mark": "m"}, "m", frozenset({"tok-a"}))}
    assert evaluate(expected, {"deploy_a": "deferred"}, {}, 1, NOW, NOW + 60, None, counted).verdict is Verdict.ALL_READY


# -- the ready set's refusals ----------------------------------------------------------------------


def test_a_ready_set_that_is_not_one_is_refused_naming_its_type_and_what_to_read():
    with pytest.raises(CorruptState) as error:
        parse_ready_set([1, 2])
    assert str(error.value) == (
        "the ready set is list without 'sources': the completed point must read the ReadyToCloseSensor's return value"
    )
    with pytest.raises(CorruptState, match=r"^the ready set has no valid 'incarnation'$"):
        parse_ready_set({"sources": {"a": report_of("a")}, "incarnation": "x"})
    with pytest.raises(CorruptState, match=r"^the ready set entry of source 'a' is not a report$"):
        parse_ready_set({"sources": {"a": ["x"]}, "incarnation": 1})


def test_a_ready_set_entry_without_a_task_id_is_read_with_an_empty_one():
    incarnation, ready = parse_ready_set({"incarnation": 2, "sources": {"a": report_of("a")}})
    assert incarnation == 2 and ready["a"].task_id == ""
    with pytest.raises(CorruptState, match=r"\(XCom return_value of task ''\) lacks 'token'"):
        parse_ready_set({"incarnation": 2, "sources": {"a": {"source": "a", "incarnation": 2, "output_path": "/o"}}})


def test_the_ready_set_holds_each_report_whole_under_its_source():
    """The sensor's return value, read by the completed point, the deploy tasks and the page."""
    evaluation = Evaluation(Verdict.ALL_READY, {"b": Report("b", "deploy_b", 1, "tok-b", "/out/b", None), **_ready("a")})
    assert evaluation.ready_set(2) == {
        "incarnation": 2,
        "sources": {
            "a": {"source": "a", "task_id": "deploy_a", "incarnation": 0, "token": "tok-a", "output_path": "/out/a", "rows": 3},
            "b": {"source": "b", "task_id": "deploy_b", "incarnation": 1, "token": "tok-b", "output_path": "/out/b", "rows": None},
        },
    }


def test_a_report_whose_attempt_left_no_ledger_says_why_and_what_to_clear():
    report = Report("a", "deploy_a", 0, "tok-a", "/out/a", 3)
    assert attempt_problem(report, None) == (
        "source 'a', attempt tok-a: unknown attempt token (no driver ledger: the attempt never started, or the "
        "run's delayed cleanup already deleted it) — clear the source's deploy task to run it again"
    )


def test_a_wait_for_no_source_is_refused():
    with pytest.raises(ValueError, match=r"^a ready-to-close wait needs at least one expected source$"):
        evaluate({}, {}, {}, 0, NOW, NOW + 60)


@pytest.mark.parametrize("bad", ["p.deploy[1x", "p.deploy[12)", "p.deploy[3"])
def test_a_reference_that_opens_a_map_index_and_does_not_close_it_is_refused(bad):
    with pytest.raises(ValueError, match="is neither a task id nor"):
        split_task_ref(bad)


@pytest.mark.parametrize("rows", [{"rows": None}, {}])
def test_a_report_without_a_row_count_is_read_with_none(rows):
    value = {"source": "a", "incarnation": 1, "token": "tok-a", "output_path": "/out/a", **rows}
    assert parse_report(value, "a", "deploy_a").rows is None


@pytest.mark.parametrize("empty", [{"token": ""}, {"output_path": ""}])
def test_a_report_with_an_empty_token_or_output_path_is_refused(empty):
    value = {"source": "a", "incarnation": 1, "token": "tok-a", "output_path": "/out/a", **empty}
    with pytest.raises(CorruptState, match=r"\(XCom return_value of task 'deploy_a'\) has an empty token or output path$"):
        parse_report(value, "a", "deploy_a")


def test_a_ready_set_without_a_source_is_refused():
    with pytest.raises(CorruptState, match=r"^the ready set holds no source: nothing to publish$"):
        parse_ready_set({"incarnation": 1, "sources": {}})
