"""The small rules of core/incarnation.py one at a time: the starting clear epoch, the clear epoch
record, the publish incarnation's sum, a decision record naming an attempt, and the refusal of a
deploy task cleared without downstream, word for word. The clear paths themselves are covered in
test_incarnation.py."""

from __future__ import annotations

import pytest

from airflow_provider_zeta.core.incarnation import (
    clear_epoch,
    cleared_without_downstream,
    current_refusal,
    decision_names,
    publish_incarnation,
    refusal_record,
    task_clear_epoch,
)


@pytest.mark.parametrize(
    ("max_tries", "retries", "epoch"),
    [
        (None, 3, 0),  # unknown
        (-1, 0, 0),  # unknown
        (0, 0, 0),  # never cleared, no retries
        (2, 0, 2),  # cleared after try 2, no retries
        (2, None, 2),  # retries unknown: none
        (5, 3, 2),
        (3, 5, 0),  # retries raised by a DAG edit since: never below 0
        (4, -2, 4),  # a negative retries counts as none
    ],
)
def test_the_starting_clear_epoch_is_max_tries_less_retries_never_below_zero(max_tries, retries, epoch):
    assert task_clear_epoch(max_tries, retries) == epoch


def test_the_clear_epoch_record_keeps_the_max_tries_it_saw_zero_included():
    assert clear_epoch(None, 0, 0) == ({"epoch": 0, "max_tries": 0}, True)
    assert clear_epoch(None, None, 0) == ({"epoch": 0, "max_tries": None}, True)
    assert clear_epoch({"epoch": 1, "max_tries": 3}, 0, 0) == ({"epoch": 2, "max_tries": 0}, True)


@pytest.mark.parametrize("stored", [{"epoch": 2, "max_tries": None}, {"epoch": 2}])
def test_a_clear_epoch_record_that_saw_no_max_tries_is_read_and_counts_the_first_one_seen(stored):
    assert clear_epoch(stored, 5, 3) == ({"epoch": 3, "max_tries": 5}, True)
    assert clear_epoch(stored, None, 3) == ({"epoch": 2, "max_tries": None}, False)


@pytest.mark.parametrize(
    ("clear_number", "epoch", "incarnation"),
    [(2, 1, 3), (None, 2, 2), (0, 0, 0), (-1, 1, 1), (3, -2, 3)],
)
def test_the_publish_incarnation_is_the_clear_number_plus_the_epoch_each_at_least_zero(clear_number, epoch, incarnation):
    assert publish_incarnation(clear_number, epoch) == incarnation


@pytest.mark.parametrize(
    ("value", "token", "names"),
    [
        ({"tokens": {"p.deploy": "tok-1"}}, "tok-1", True),
        ('{"tokens": {"p.deploy": "tok-1"}}', "tok-1", True),
        ({"tokens": {"p.deploy": "tok-1"}}, "tok-2", False),
        ({"tokens": {}}, None, False),  # no previous attempt: nothing to name
        ({"tokens": {"p.deploy": None}}, None, False),
        ({"tokens": {"p.deploy": ""}}, "", False),
        ('["tokens"]', "tok-1", False),  # a record of another shape
        (["tokens"], "tok-1", False),
        (3, "tok-1", False),
        ("{", "tok-1", False),
        (None, "tok-1", False),
    ],
)
def test_a_decision_record_names_an_attempt_only_when_it_holds_that_token_for_that_task(value, token, names):
    assert decision_names(value, "p.deploy", token) is names


def test_a_deploy_cleared_without_its_published_sensor_is_refused_naming_every_sensor_and_what_to_clear():
    states = {"p.ready_b": "success", "p.ready_a": "success", "p.other": "running"}
    assert cleared_without_downstream("p.deploy", states, published=True) == (
        "p.deploy was cleared, but p.ready_a, p.ready_b already took its earlier attempt into its ready set (it "
        "succeeded, or is ending with it) and was not cleared with it: the run published from its earlier attempt, "
        "and a new attempt would never be published. Nothing was launched; the earlier attempt stays the published "
        "one. To reprocess this source, clear p.deploy together with p.ready_a, p.ready_b and its downstream tasks "
        "(UI: select both, Clear -> 'Downstream'; REST clearTaskInstances: task_ids=['p.deploy', 'p.ready_a', "
        "'p.ready_b'] with include_downstream=true), which re-runs the ready-to-close wait and the completed point "
        "and republishes the partition."
    )


def test_a_deploy_cleared_without_its_sensor_before_the_publish_says_the_ready_set_holds_its_attempt():
    refusal = cleared_without_downstream("p.deploy", {"p.ready": "success"}, published=False)
    assert refusal is not None
    assert ": the run holds its earlier attempt in its ready set, and a new attempt would never be published." in refusal
    assert "published from" not in refusal


@pytest.mark.parametrize(
    ("value", "state", "try_number", "shown"),
    [
        (refusal_record(2, "cleared_without_downstream", "why"), "failed", 2, "[cleared_without_downstream] why"),
        ({"try_number": 2, "reason": "why"}, "failed", 2, "[refused] why"),  # no rule: a generic one
        ({"try_number": 2, "rule": 7, "reason": "why"}, "failed", 2, "[refused] why"),
        (refusal_record(2, "r", "why"), "failed", 3, None),  # a later try
        (refusal_record(2, "r", "why"), "running", 2, None),  # the try is not failed
        (refusal_record(2, "r", "why"), None, 2, None),
        ({"try_number": 2, "rule": "r", "reason": 5}, "failed", 2, None),
        ({"try_number": 2, "rule": "r"}, "failed", 2, None),
        ('{"try_number": 2, "rule": "r", "reason": "why"}', "failed", 2, None),  # not a record
        (None, "failed", 2, None),
    ],
)
def test_a_refusal_is_shown_only_for_the_current_failed_try_with_its_rule(value, state, try_number, shown):
    assert current_refusal(value, state, try_number) == shown


def test_a_refusal_record_keeps_the_try_the_rule_and_the_reason():
    assert refusal_record("3", "cleared_without_downstream", "why") == {
        "try_number": 3,
        "rule": "cleared_without_downstream",
        "reason": "why",
    }
