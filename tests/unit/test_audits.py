"""The audit rules (core.audits): every built-in at its boundaries, the user callable's answers, the
outcome, the audit job's documents."""

from __future__ import annotations

import json

import pytest

from airflow_provider_zeta.core.audits import (
    AUDIT_JOB_FORMAT,
    SourceFacts,
    SparkRequest,
    UserAudit,
    audit_job_request,
    check_audits,
    decide_audits,
    not_null,
    parse_audit_job_result,
    parse_outcome,
    rows_within,
    same_schema,
    spark_request,
    unique_key,
    user_audit,
)
from airflow_provider_zeta.core.ledger import CorruptState


def facts(**rows: int | None) -> dict[str, SourceFacts]:
    return {name: SourceFacts(name, f"tok-{name}", count, f"file:///s/{name}") for name, count in rows.items()}


def verdicts(results) -> dict[str, bool]:
    return {r.source: r.passed for r in results}


# -- rows_within ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rows", "passed"),
    [(9, False), (10, True), (11, True), (19, True), (20, True), (21, False), (0, False)],
)
def test_rows_within_includes_both_bounds(rows, passed):
    (result,) = rows_within(min=10, max=20).evaluate(facts(eu=rows))
    assert result.passed is passed
    assert result.numbers == {"min": 10, "max": 20, "rows": rows}
    assert result.audit == "rows_within(min=10, max=20)"
    if not passed:
        assert str(rows) in result.message and ("below the minimum 10" in result.message or "above the maximum 20" in result.message)


def test_rows_within_open_bounds_and_zero():
    assert verdicts(rows_within(min=0).evaluate(facts(a=0, b=10**12))) == {"a": True, "b": True}
    assert verdicts(rows_within(max=0).evaluate(facts(a=0, b=1))) == {"a": True, "b": False}
    assert verdicts(rows_within(min=1).evaluate(facts(a=0, b=1))) == {"a": False, "b": True}
    assert verdicts(rows_within(min=5, max=5).evaluate(facts(a=4, b=5, c=6))) == {"a": False, "b": True, "c": False}


def test_rows_within_a_source_without_a_count_fails():
    (result,) = rows_within(min=0).evaluate(facts(eu=None))
    assert not result.passed and result.numbers["rows"] is None and "no row count" in result.message


def test_rows_within_only_the_named_sources_each_of_which_must_report():
    audit = rows_within(min=10, sources=["eu"])
    assert verdicts(audit.evaluate(facts(eu=10, us=1))) == {"eu": True}
    (missing,) = rows_within(min=1, sources=["apac"]).evaluate(facts(eu=10))
    assert not missing.passed and missing.source == "apac" and "not among" in missing.message


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"min": -1}, {"max": -1}, {"min": 3, "max": 2}, {"min": 1.5}, {"min": True}, {"min": 1, "sources": "eu"}],
)
def test_rows_within_refuses_bad_bounds(kwargs):
    with pytest.raises(ValueError, match="rows_within"):
        rows_within(**kwargs)


# -- same_schema -------------------------------------------------------------------------------------------


def schema_facts(**schemas) -> dict[str, SourceFacts]:
    return {
        name: SourceFacts(name, f"tok-{name}", 1, schema=None if schema is None else tuple(schema.items()))
        for name, schema in schemas.items()
    }


def test_same_schema_passes_equal_schemas_in_any_column_order():
    results = same_schema().evaluate(schema_facts(a={"n": "bigint", "s": "string"}, b={"s": "string", "n": "bigint"}))
    assert verdicts(results) == {"a": True, "b": True}


def test_same_schema_fails_the_odd_source_out_naming_the_columns():
    good = {"n": "bigint", "s": "string"}
    results = same_schema().evaluate(
        schema_facts(a=good, b=good, c={"n": "int", "s": "string", "x": "double"}, d={"n": "bigint"})
    )
    assert verdicts(results) == {"a": True, "b": True, "c": False, "d": False}
    by_source = {r.source: r for r in results}
    assert by_source["c"].numbers["type_differs"] == {"n": ["bigint", "int"]}
    assert by_source["c"].numbers["extra"] == ["x"] and by_source["c"].numbers["reference_source"] == "a"
    assert by_source["d"].numbers["missing"] == ["s"] and "lacks ['s']" in by_source["d"].message


def test_same_schema_on_a_tie_takes_the_first_source_and_one_source_passes():
    results = same_schema().evaluate(schema_facts(a={"n": "int"}, b={"n": "bigint"}))
    assert verdicts(results) == {"a": True, "b": False}
    assert verdicts(same_schema().evaluate(schema_facts(only={"n": "int"}))) == {"only": True}


def test_same_schema_without_a_read_schema_fails_that_source():
    results = same_schema().evaluate(schema_facts(a={"n": "int"}, b=None))
    assert verdicts(results) == {"a": True, "b": False}


# -- not_null -----------------------------------------------------------------------------------------


def null_facts(nulls, schema=("id", "v")) -> dict[str, SourceFacts]:
    return {"a": SourceFacts("a", "t", 3, schema=tuple((c, "int") for c in schema), nulls=nulls)}


def test_not_null_zero_passes_one_fails():
    (ok,) = not_null(["id"]).evaluate(null_facts({"id": 0}))
    assert ok.passed and ok.numbers == {"nulls": {"id": 0}, "missing": []}
    (bad,) = not_null(["id", "v"]).evaluate(null_facts({"id": 0, "v": 1}))
    assert not bad.passed and bad.numbers["nulls"] == {"id": 0, "v": 1} and "1 null(s) in 'v'" in bad.message
    assert bad.audit == "not_null(id, v)"


def test_not_null_a_missing_column_fails():
    (bad,) = not_null("zz").evaluate(null_facts({"id": 0}))
    assert not bad.passed and bad.numbers["missing"] == ["zz"]


def test_not_null_unread_fails():
    (bad,) = not_null("id").evaluate(facts(a=1))
    assert not bad.passed and "not read" in bad.message


@pytest.mark.parametrize("columns", [[], [""], ["a", "a"], 3])
def test_not_null_and_unique_key_refuse_bad_columns(columns):
    with pytest.raises(ValueError):
        not_null(columns)
    with pytest.raises(ValueError):
        unique_key(columns)


# -- unique_key ---------------------------------------------------------------------------------------


def key_facts(duplicates, schema=("id", "ts")) -> dict[str, SourceFacts]:
    return {
        "a": SourceFacts("a", "t", 5, schema=tuple((c, "int") for c in schema), duplicates=duplicates, read_rows=5)
    }


def test_unique_key_zero_duplicates_passes_one_fails():
    (ok,) = unique_key(["id", "ts"]).evaluate(key_facts({("id", "ts"): 0}))
    assert ok.passed and ok.numbers == {"duplicates": 0, "rows": 5}
    (bad,) = unique_key(["id", "ts"]).evaluate(key_facts({("id", "ts"): 1}))
    assert not bad.passed and bad.numbers["duplicates"] == 1 and "1 row(s) repeat" in bad.message


def test_unique_key_missing_column_or_unread_fails():
    (bad,) = unique_key("nope").evaluate(key_facts({}))
    assert not bad.passed and bad.numbers["missing"] == ["nope"]
    (unread,) = unique_key("id").evaluate(facts(a=1))
    assert not unread.passed


# -- user callables -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "passed", "message"),
    [
        (True, True, "passed"),
        (None, True, "passed"),
        (False, False, "failed"),
        ("too few rows", False, "too few rows"),
        ((True, "fine"), True, "fine"),
        ((False, "bad"), False, "bad"),
        (42, False, "returned int"),
    ],
)
def test_a_user_callable_answers(answer, passed, message):
    def my_check(fact):
        return answer

    (result,) = check_audits([my_check], "t")[0].evaluate(facts(eu=3))
    assert result.audit == "my_check" and result.passed is passed and message in result.message
    assert result.numbers["rows"] == 3


def test_a_user_callable_that_raises_fails_its_own_result_only():
    def boom(fact):
        raise ZeroDivisionError("no")

    outcome = decide_audits(check_audits([boom, rows_within(min=1)], "t"), facts(eu=3))
    assert [(r.audit, r.passed) for r in outcome.results] == [("boom", False), ("rows_within(min=1, max=None)", True)]
    assert "ZeroDivisionError: no" in outcome.results[0].message


def test_a_user_callable_gets_each_sources_facts():
    seen = []
    user_audit(lambda fact: seen.append(fact.source), name="collect").evaluate(facts(b=1, a=2))
    assert seen == ["a", "b"]


def test_user_audit_asks_the_audit_job_for_what_it_needs():
    audit = user_audit(lambda f: True, name="x", null_counts=["id"], unique_keys=[["id"]])
    assert audit.spark_request() == SparkRequest(schema=True, not_null=("id",), unique_keys=(("id",),))
    assert not UserAudit(lambda f: True).spark_request()


# -- lists, outcome, request ----------------------------------------------------------------------------


def test_check_audits_refuses_non_lists_unknown_items_and_twice_the_same_name():
    with pytest.raises(ValueError, match="must be a list"):
        check_audits(rows_within(min=1), "p.completed_point")
    with pytest.raises(ValueError, match="neither an audit"):
        check_audits(["rows"], "p.completed_point")
    with pytest.raises(ValueError, match="appear twice"):
        check_audits([rows_within(min=1), rows_within(min=1)], "p.completed_point")
    assert len(check_audits([rows_within(min=1), rows_within(min=1, name="again")], "p")) == 2
    assert check_audits(None, "p") == ()


def test_the_outcome_fails_on_any_failed_result_and_names_audit_source_and_numbers():
    outcome = decide_audits([rows_within(min=5, max=100)], facts(alpha=3, beta=50))
    assert not outcome.passed and outcome.failed_sources == ("alpha",)
    summary = outcome.summary()
    assert "rows_within(min=5, max=100) on alpha" in summary and '"rows": 3' in summary and '"min": 5' in summary
    value = outcome.to_value()
    assert value["passed"] is False and value["failed_sources"] == ["alpha"]
    assert value["audits"] == [{"name": "rows_within(min=5, max=100)", "kind": "rows_within", "min": 5, "max": 100, "sources": None}]
    assert {r["source"]: r["numbers"]["rows"] for r in value["results"]} == {"alpha": 3, "beta": 50}
    assert json.loads(json.dumps(value)) == value
    assert parse_outcome(json.dumps(value)) == value and parse_outcome("x") is None and parse_outcome({}) is None


def test_no_audits_pass():
    outcome = decide_audits([], facts(a=1))
    assert outcome.passed and outcome.results == () and "all passed" in outcome.summary()


def test_spark_request_merges_what_the_audits_need():
    assert not spark_request([rows_within(min=1), UserAudit(lambda f: True)])
    merged = spark_request([not_null(["id", "v"]), not_null("id", name="again"), unique_key("id"), same_schema()])
    assert merged == SparkRequest(schema=True, not_null=("id", "v"), unique_keys=(("id",),))


def test_audit_job_documents_round_trip():
    request = audit_job_request(SparkRequest(True, ("id",), (("id", "ts"),)), {"b": "file:///b", "a": "file:///a"}, "/tmp/r.json")
    assert request == {
        "format": AUDIT_JOB_FORMAT,
        "sources": {"a": "file:///a", "b": "file:///b"},
        "schema": True,
        "not_null": ["id"],
        "unique_keys": [["id", "ts"]],
        "result": "/tmp/r.json",
    }
    raw = json.dumps(
        {
            "format": AUDIT_JOB_FORMAT,
            "sources": {
                "a": {"rows": 3, "schema": [["id", "bigint"]], "nulls": {"id": 0}, "duplicates": [[["id", "ts"], 1]]},
                "b": {"rows": 0, "schema": [], "nulls": {}, "duplicates": []},
            },
        }
    )
    parsed = parse_audit_job_result(raw, ["a", "b"], "/tmp/r.json")
    assert parsed["a"] == {"schema": (("id", "bigint"),), "nulls": {"id": 0}, "duplicates": {("id", "ts"): 1}, "read_rows": 3}


@pytest.mark.parametrize(
    "raw",
    [
        None,
        "not json",
        json.dumps({"format": 99, "sources": {}}),
        json.dumps({"format": AUDIT_JOB_FORMAT, "sources": {}}),
        json.dumps({"format": AUDIT_JOB_FORMAT, "sources": {"a": {"rows": -1}}}),
        json.dumps({"format": AUDIT_JOB_FORMAT, "sources": {"a": {"nulls": {"id": 1.5}}}}),
    ],
)
def test_a_bad_audit_job_result_is_corrupt_state_naming_where(raw):
    with pytest.raises(CorruptState, match="/tmp/r.json"):
        parse_audit_job_result(raw, ["a"], "/tmp/r.json")


def test_rows_history_prefers_the_publish_and_keeps_a_refused_runs_rows():
    from airflow_provider_zeta.core.audits import rows_history

    refused = {"passed": False, "failed_sources": ["b"], "pipeline_id": "p", "rows": {"a": 5, "b": 1}, "results": []}
    audited = {"passed": True, "failed_sources": [], "pipeline_id": "p", "rows": {"a": 5, "b": 6}, "results": []}
    published = {"commit_id": "c1", "pipeline_id": "p", "rows": {"a": 5, "b": 6}, "tokens": {}}
    deploy_report = {"rows": 5, "token": "t"}  # not a completed point's value: skipped
    history = rows_history(
        [("r1", [json.dumps(published)], [audited]), ("r2", [], [json.dumps(refused)]), ("r3", [deploy_report], [])]
    )
    assert [(p.run_id, p.status, dict(p.rows), p.failed_sources) for p in history["p"]] == [
        ("r1", "published", {"a": 5, "b": 6}, ()),
        ("r2", "audit_failed", {"a": 5, "b": 1}, ("b",)),
    ]
    assert rows_history([("r", [{"commit_id": "c", "rows": {"a": -1, "b": True, "c": None}}], [])])[""][0].rows == {
        "a": None, "b": None, "c": None
    }


def test_a_commit_is_audited_unless_the_publish_fence_of_an_earlier_try_names_it():
    from airflow_provider_zeta.core.audits import audited_before

    assert audited_before({"commit_id": "c1", "at": 1.0}, "c1")
    assert not audited_before({"commit_id": "c0", "at": 1.0}, "c1")  # another commit's publish
    assert not audited_before(None, "c1") and not audited_before("c1", "c1") and not audited_before({}, "c1")
