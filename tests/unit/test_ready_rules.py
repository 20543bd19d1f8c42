"""What the ready-to-close evaluation says (core/ready.py): the one-line message of each verdict,
the progress line the trigger logs on a change, the cap on names per message, and the deadline's
edge. The decisions themselves are covered in test_ready_and_publish.py and test_ready_decision.py."""

from __future__ import annotations

import pytest

from airflow_provider_zeta.core.ready import (
    MAX_NAMES_IN_MESSAGE,
    Evaluation,
    Report,
    Verdict,
    evaluate,
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
