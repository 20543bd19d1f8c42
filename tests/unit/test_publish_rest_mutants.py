"""Rules of core/publish.py that mutation testing found unpinned in the functions measured last
(partition specs and their checks, commit markers read back, commit ids, the staging check and the
publish decision): each test checks one behaviour, its messages word for word where a user reads
them."""

from __future__ import annotations

import json

import pytest

from airflow_provider_zeta.core.ledger import CorruptState
from airflow_provider_zeta.core.publish import (
    BadPartitionSpec,
    CommitMarker,
    Owner,
    PublishAction,
    check_partition_spec,
    decide_publish,
    enclosing_partitions,
    parse_commit_marker,
    parse_partition,
    partition_dir,
    partition_path,
)

HELP = (
    "A partition is one or more key=value path segments joined by '/', e.g. 'ds=2026-06-01' or "
    "'ds=2026-06-01/hour=13' (the default spec is 'ds={{ ds }}')"
)


def refusal(rendered):
    with pytest.raises(BadPartitionSpec) as raised:
        parse_partition(rendered)
    return str(raised.value)


@pytest.mark.parametrize(
    "rendered,why",
    [
        ("  ", "it is empty"),
        ("2026-06-01", "segment '2026-06-01' is not key=value"),
        ("ds=1/", "segment '' is not key=value"),
        ("_ds=1", "key '_ds' is not an identifier starting with a letter"),
        ("ds=1/source=eu", "'source' is the level below the partition (source=<name>), not a partition key"),
        ("ds=1/hour=2/ds=3", "key 'ds' appears twice"),
        ("ds=1/hour=", "the value of 'hour' is empty"),
        (
            "ds=a..b",
            "the value 'a..b' of 'ds' is not a safe path segment: use letters, digits, '.', '_' and '-', start "
            "with a letter or digit (names starting with '_' or '.' are hidden from readers), no '..', no '/', "
            "':' or '+' (e.g. {{ ts_nodash }} rather than {{ ts }})",
        ),
    ],
)
def test_a_refused_partition_spec_names_the_rendered_value_the_reason_and_the_expected_form(rendered, why):
    assert refusal(rendered) == f"the partition spec rendered to {rendered!r}: {why}. {HELP}"


def test_a_partition_spec_that_rendered_to_no_string_is_refused_naming_the_value():
    with pytest.raises(BadPartitionSpec) as raised:
        parse_partition(None)
    assert str(raised.value) == "the partition spec rendered to None, not a string"


def test_a_partition_spec_is_read_without_surrounding_whitespace():
    assert parse_partition("  ds=1/hour=02\n") == (("ds", "1"), ("hour", "02"))
    assert partition_path(" ds=1/hour=02 ") == "ds=1/hour=02"


def test_each_rule_of_a_segment_is_checked_after_the_ones_before_it():
    """The first broken rule is the one named: a key is judged before its value."""
    assert "key '_k' is not an identifier" in refusal("_k=")
    assert "'source' is the level below" in refusal("source=")
    assert "key 'ds' appears twice" in refusal("ds=1/ds=")
    assert "the value of 'ds' is empty" in refusal("ds=")


@pytest.mark.parametrize("value", ["A", "z9", "0.5", "a_b", "a-b", "20260601T13"])
def test_a_value_of_letters_digits_dots_underscores_and_dashes_starting_with_a_letter_or_digit_is_safe(value):
    assert parse_partition(f"k={value}") == (("k", value),)


@pytest.mark.parametrize("key", ["K", "ds", "a1", "a_1", "Hour"])
def test_a_key_is_an_identifier_starting_with_a_letter(key):
    assert parse_partition(f"{key}=1") == ((key, "1"),)


def test_a_partition_spec_keeps_its_segments_in_order_and_a_later_key_may_be_any_other():
    assert parse_partition("b=1/a=2/c=3") == (("b", "1"), ("a", "2"), ("c", "3"))
    assert partition_path("b=1/a=2/c=3") == "b=1/a=2/c=3"


def test_a_partition_spec_given_to_an_operator_that_is_no_text_is_refused_naming_where_and_what():
    for spec, shown in ((None, "None"), ("  ", "'  '"), (3, "3")):
        with pytest.raises(BadPartitionSpec) as raised:
            check_partition_spec(spec, "task t")
        assert str(raised.value) == (
            f"task t: 'partition' must be a partition spec such as 'ds={{{{ ds }}}}', not {shown}"
        )


@pytest.mark.parametrize("spec", ["{{ ds }}/x=..", "ds=1/{% if x %}a=..{% endif %}"])
def test_a_templated_partition_spec_is_judged_only_once_rendered(spec):
    assert check_partition_spec(spec, "t") == spec


@pytest.mark.parametrize("spec", ["ds=1/ds=2", "ds={ ds }", "ds=%"])
def test_a_partition_spec_without_a_template_is_judged_when_given(spec):
    with pytest.raises(BadPartitionSpec, match="the partition spec rendered to"):
        check_partition_spec(spec, "t")


def test_the_partitions_enclosing_a_deep_one_are_every_proper_prefix_outermost_first():
    assert enclosing_partitions("a=1/b=2/c=3/d=4") == ("a=1", "a=1/b=2", "a=1/b=2/c=3")
    assert enclosing_partitions("a=1") == ()


def test_the_default_partition_of_a_date_is_its_ds_segment_made_safe():
    assert partition_dir("2026-06-01") == "ds=2026-06-01"


# -- commit markers read back ----------------------------------------------------------------------


FULL = {
    "commit_id": "c1",
    "ds": "2026-06-01",
    "incarnation": 2,
    "tokens": {"eu": "tok-eu", "us": "tok-us"},
    "rows": {"eu": 3, "us": None},
    "published_at": 7.5,
    "run_id": "run_1",
    "dag_id": "dag_a",
    "pipeline_id": "pipe",
    "partition": "ds=2026-06-01/hour=13",
    "logical_date": "2026-06-01T13:00:00+00:00",
    "state_root_id": "root-1",
    "manifest": {"source=eu/tok-eu-part-0": 12, "source=us/tok-us-part-0": 0},
}


def test_a_commit_marker_reads_back_every_field_it_names():
    assert parse_commit_marker(json.dumps(FULL).encode(), "m") == CommitMarker(**FULL)


def test_a_commit_marker_written_before_owners_partitions_and_manifests_reads_with_their_defaults():
    old = {k: FULL[k] for k in ("commit_id", "ds", "incarnation", "tokens", "published_at")}
    marker = parse_commit_marker(json.dumps(old).encode(), "m")
    assert marker == CommitMarker("c1", "2026-06-01", 2, {"eu": "tok-eu", "us": "tok-us"}, {}, 7.5)
    assert (marker.run_id, marker.dag_id, marker.pipeline_id, marker.partition) == ("", "", "", "")
    assert (marker.logical_date, marker.state_root_id, marker.manifest) == ("", "", None)
    assert marker.partition_path == "ds=2026-06-01"
    assert parse_commit_marker(json.dumps({**old, "manifest": None}).encode(), "m").manifest is None


def test_a_commit_markers_values_are_read_as_their_types():
    loose = {
        **FULL,
        "commit_id": 5,
        "incarnation": "2",
        "tokens": {"eu": 1},
        "rows": {"eu": "3", "us": None},
        "published_at": "7.5",
        "run_id": 1,
        "dag_id": 2,
        "pipeline_id": 3,
        "partition": 4,
        "logical_date": 5,
        "state_root_id": 6,
        "manifest": {"f": "12"},
    }
    marker = parse_commit_marker(json.dumps(loose).encode(), "m")
    assert (marker.commit_id, marker.incarnation, marker.tokens, marker.rows) == ("5", 2, {"eu": "1"}, {"eu": 3, "us": None})
    assert marker.published_at == 7.5 and isinstance(marker.published_at, float)
    assert (marker.run_id, marker.dag_id, marker.pipeline_id, marker.partition) == ("1", "2", "3", "4")
    assert (marker.logical_date, marker.state_root_id, marker.manifest) == ("5", "6", {"f": 12})


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        json.dumps({**FULL, "incarnation": "two"}).encode(),
        json.dumps({k: v for k, v in FULL.items() if k != "commit_id"}).encode(),
        json.dumps({k: v for k, v in FULL.items() if k != "ds"}).encode(),
        json.dumps({k: v for k, v in FULL.items() if k != "tokens"}).encode(),
        json.dumps({k: v for k, v in FULL.items() if k != "published_at"}).encode(),
        json.dumps({**FULL, "tokens": ["eu"]}).encode(),
        json.dumps({**FULL, "rows": {"eu": "x"}}).encode(),
        json.dumps({**FULL, "manifest": ["f"]}).encode(),
        json.dumps({**FULL, "incarnation": None}).encode(),
    ],
)
def test_an_unreadable_commit_marker_is_corrupt_state_naming_where_it_is_and_that_nothing_changed(raw):
    with pytest.raises(CorruptState) as raised:
        parse_commit_marker(raw, "file:///t/ds=1/_zeta_commit.json")
    message = str(raised.value)
    assert message.startswith("commit marker file:///t/ds=1/_zeta_commit.json is unreadable (")
    assert message.endswith("); the partition's provenance is unknown. Inspect it; nothing was changed.")
    assert raised.value.__cause__ is None and raised.value.__suppress_context__


def test_no_commit_marker_file_reads_as_none():
    assert parse_commit_marker(None, "m") is None


# -- the publish decision --------------------------------------------------------------------------

OURS = Owner("dag_a", "pipe", "run_now")
OTHER = Owner("dag_b", "pipe", "run_other")


def committed(commit, incarnation, owner):
    return CommitMarker(commit, "2026-06-01", incarnation, {"eu": "tok"}, {"eu": 1}, 1.0, owner.run_id, owner.dag_id, owner.pipeline_id)


@pytest.mark.parametrize(
    "existing,rule",
    [
        (committed("c-new", 1, OURS), "already_published"),
        (committed("c-old", 0, OURS), "newer_incarnation"),
        (committed("c-old", 1, OURS), "late_report_ignored"),
    ],
)
def test_a_partition_with_a_marker_is_decided_by_its_marker_whatever_intents_name_it(existing, rule):
    """Intents are looked for only where a partition has no marker; one found beside a marker
    (another owner's publish that gave up, say) does not turn this owner's own commit into a refusal."""
    decision = decide_publish("c-new", 1, True, existing, OURS, publishing=[committed("c-else", 0, OTHER)])
    assert decision.rule == rule and decision.action is not PublishAction.FAIL
