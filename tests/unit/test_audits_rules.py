"""Each audit of core/audits.py word for word: every result it gives (audit, source, verdict,
numbers, message) for sources in every state the audit job can report, what each audit describes
itself as, and what a user audit asks the audit job for. The boundaries are covered in
test_audits.py."""

from __future__ import annotations

import pytest

from airflow_provider_zeta.core.audits import (
    Audit,
    AuditResult,
    SourceFacts,
    SparkRequest,
    UserAudit,
    decide_audits,
    not_null,
    rows_within,
    same_schema,
    unique_key,
    user_audit,
)

SCHEMA = (("id", "bigint"), ("ts", "timestamp"), ("v", "double"))


def key_fact(source: str, duplicates, schema=SCHEMA, read_rows=7) -> SourceFacts:
    return SourceFacts(source, f"tok-{source}", 7, f"file:///s/{source}", schema=schema, duplicates=duplicates, read_rows=read_rows)


def test_unique_key_judges_every_source_whatever_the_one_before_it_was():
    audit = unique_key(["id", "ts"])
    facts = {
        "a": key_fact("a", None),  # the key counts were not read
        "b": key_fact("b", {("id", "ts"): 0}, schema=None),  # the schema was not read
        "c": key_fact("c", {("id",): 0}, schema=(("id", "bigint"),)),  # no column ts
        "d": key_fact("d", {("id",): 0}),  # both columns, but this key was not counted
        "e": key_fact("e", {("id", "ts"): 2}),
        "f": key_fact("f", {("id", "ts"): 0}, read_rows=None),
    }
    name = "unique_key(id, ts)"
    assert audit.evaluate(facts) == [
        AuditResult(name, "a", False, {}, "source 'a': its key counts were not read"),
        AuditResult(name, "b", False, {}, "source 'b': its key counts were not read"),
        AuditResult(name, "c", False, {"missing": ["ts"]}, "source 'c': no column ['ts']"),
        AuditResult(name, "d", False, {"missing": []}, "source 'd': no column ['id', 'ts']"),
        AuditResult(name, "e", False, {"duplicates": 2, "rows": 7}, "source 'e': 2 row(s) repeat a key value of ['id', 'ts']"),
        AuditResult(name, "f", True, {"duplicates": 0, "rows": None}, "source 'f': ['id', 'ts'] is unique"),
    ]


def test_each_audit_describes_itself_by_name_kind_and_specification():
    audits = [
        rows_within(min=1, sources=["a"]),
        same_schema(),
        not_null(["id", "v"]),
        unique_key("id", name="ids"),
        user_audit(lambda facts: True, name="mine"),
    ]
    assert decide_audits(audits, {}).audits == (
        {"name": "rows_within(min=1, max=None)", "kind": "rows_within", "min": 1, "max": None, "sources": ["a"]},
        {"name": "same_schema", "kind": "same_schema"},
        {"name": "not_null(id, v)", "kind": "not_null", "columns": ["id", "v"]},
        {"name": "ids", "kind": "unique_key", "columns": ["id"]},
        {"name": "mine", "kind": "callable"},
    )


def test_an_audit_that_describes_nothing_more_is_described_by_its_name():
    class Bare(Audit):
        name = "bare"

        def evaluate(self, facts):
            return []

    assert Bare().describe() == {"name": "bare"}


def test_a_user_audit_is_named_after_its_function_unless_named_and_asks_for_nothing_by_default():
    def rows_are_even(facts):
        return facts.rows % 2 == 0

    audit = user_audit(rows_are_even)
    assert isinstance(audit, UserAudit) and audit.name == "rows_are_even" and audit.check is rows_are_even
    assert audit.spark_request() == SparkRequest() and not audit.spark_request()
    assert user_audit(rows_are_even, name="even").name == "even"


@pytest.mark.parametrize(
    ("kwargs", "request_"),
    [
        ({"needs_schema": True}, SparkRequest(schema=True)),
        ({"null_counts": ["id"]}, SparkRequest(schema=True, not_null=("id",))),
        ({"null_counts": "id"}, SparkRequest(schema=True, not_null=("id",))),
        ({"unique_keys": [["id", "ts"]]}, SparkRequest(schema=True, unique_keys=(("id", "ts"),))),
        ({"unique_keys": ["id"]}, SparkRequest(schema=True, unique_keys=(("id",),))),
    ],
)
def test_a_user_audit_that_needs_counts_or_keys_also_asks_for_the_schema(kwargs, request_):
    assert user_audit(lambda facts: True, **kwargs).spark_request() == request_


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"null_counts": [""]}, r"^user_audit null_counts: 'columns' must name at least one column"),
        ({"unique_keys": [["id", "id"]]}, r"^user_audit unique_keys: 'columns' names a column twice"),
    ],
)
def test_a_user_audit_with_bad_columns_is_refused_naming_the_argument(kwargs, message):
    with pytest.raises(ValueError, match=message):
        user_audit(lambda facts: True, **kwargs)


def null_fact(source: str, nulls, schema=SCHEMA) -> SourceFacts:
    return SourceFacts(source, f"tok-{source}", 7, f"file:///s/{source}", schema=schema, nulls=nulls)


def test_not_null_judges_every_source_by_its_schema_and_its_null_counts():
    facts = {
        "a": null_fact("a", None),  # the null counts were not read
        "b": null_fact("b", {"id": 0, "v": 3}, schema=None),  # no schema read: the counted columns are the columns
        "c": null_fact("c", {"id": 0}),  # v in the schema, not counted
        "d": null_fact("d", {"id": 0, "v": 0}, schema=(("id", "bigint"),)),  # v counted, not in the schema
        "e": null_fact("e", {"id": 1, "v": 2, "ts": 5}),
        "f": null_fact("f", {"id": 2}, schema=(("id", "bigint"),)),
        "g": null_fact("g", {"id": 0, "v": 0}),
    }
    name = "not_null(id, v)"
    assert not_null(["id", "v"]).evaluate(facts) == [
        AuditResult(name, "a", False, {}, "source 'a': its null counts were not read"),
        AuditResult(name, "b", False, {"nulls": {"id": 0, "v": 3}, "missing": []}, "source 'b': 3 null(s) in 'v'"),
        AuditResult(name, "c", False, {"nulls": {"id": 0}, "missing": ["v"]}, "source 'c': no column ['v']"),
        AuditResult(name, "d", False, {"nulls": {"id": 0}, "missing": ["v"]}, "source 'd': no column ['v']"),
        AuditResult(name, "e", False, {"nulls": {"id": 1, "v": 2}, "missing": []}, "source 'e': 1 null(s) in 'id', 2 null(s) in 'v'"),
        AuditResult(name, "f", False, {"nulls": {"id": 2}, "missing": ["v"]}, "source 'f': no column ['v'], 2 null(s) in 'id'"),
        AuditResult(name, "g", True, {"nulls": {"id": 0, "v": 0}, "missing": []}, "source 'g': no nulls in ['id', 'v']"),
    ]


def rows_fact(source: str, rows) -> SourceFacts:
    return SourceFacts(source, f"tok-{source}", rows, f"file:///s/{source}")


def test_rows_within_judges_every_source_and_says_where_its_count_lies():
    facts = {"a": rows_fact("a", None), "b": rows_fact("b", 4), "c": rows_fact("c", 21), "d": rows_fact("d", 10), "e": rows_fact("e", 20)}
    name, bounds = "rows_within(min=5, max=20)", {"min": 5, "max": 20}
    assert rows_within(5, 20).evaluate(facts) == [
        AuditResult(name, "a", False, {**bounds, "rows": None},
                    "source 'a': its driver reported no row count (report it with zeta_context().report(rows=...))"),
        AuditResult(name, "b", False, {**bounds, "rows": 4}, "source 'b': 4 rows, below the minimum 5"),
        AuditResult(name, "c", False, {**bounds, "rows": 21}, "source 'c': 21 rows, above the maximum 20"),
        AuditResult(name, "d", True, {**bounds, "rows": 10}, "source 'd': 10 rows, within [5, 20]"),
        AuditResult(name, "e", True, {**bounds, "rows": 20}, "source 'e': 20 rows, within [5, 20]"),
    ]
    assert rows_within(max=20, sources=["zz", "b"]).evaluate(facts) == [
        AuditResult("rows_within(min=None, max=20)", "zz", False, {"min": None, "max": 20, "rows": None},
                    "source 'zz' is not among this run's reporting sources ['a', 'b', 'c', 'd', 'e']"),
        AuditResult("rows_within(min=None, max=20)", "b", True, {"min": None, "max": 20, "rows": 4}, "source 'b': 4 rows, within [-, 20]"),
    ]
    assert rows_within(5).evaluate({"c": rows_fact("c", 99)}) == [
        AuditResult("rows_within(min=5, max=None)", "c", True, {"min": 5, "max": None, "rows": 99}, "source 'c': 99 rows, within [5, -]"),
    ]


def schema_fact(source: str, schema) -> SourceFacts:
    return SourceFacts(source, f"tok-{source}", 1, f"file:///s/{source}", schema=schema)


def test_same_schema_judges_every_source_against_the_most_common_schema_naming_each_difference():
    two = (("id", "bigint"), ("v", "double"))
    facts = {
        "a": schema_fact("a", None),
        "b": schema_fact("b", (("id", "string"), ("x", "int"))),
        "c": schema_fact("c", two),
        "d": schema_fact("d", tuple(reversed(two))),
        "e": schema_fact("e", (("id", "bigint"),)),
    }
    same = {"reference_source": "c", "columns": 2, "missing": [], "extra": [], "type_differs": {}}
    assert same_schema().evaluate(facts) == [
        AuditResult("same_schema", "a", False, {}, "source 'a': its schema was not read"),
        AuditResult("same_schema", "b", False,
                    {"reference_source": "c", "columns": 2, "missing": ["v"], "extra": ["x"], "type_differs": {"id": ["bigint", "string"]}},
                    "source 'b': schema differs from 'c''s: lacks ['v']; has extra ['x']; types differ id: bigint vs string"),
        AuditResult("same_schema", "c", True, same, "source 'c': same schema as 'c' (2 columns)"),
        AuditResult("same_schema", "d", True, same, "source 'd': same schema as 'c' (2 columns)"),
        AuditResult("same_schema", "e", False, {**same, "columns": 1, "missing": ["v"]}, "source 'e': schema differs from 'c''s: lacks ['v']"),
    ]
    assert same_schema(name="shape").evaluate({"a": schema_fact("a", None)}) == [
        AuditResult("shape", "a", False, {}, "source 'a': its schema was not read"),
    ]


# -- a user callable's answers, word for word -----------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "passed", "message"),
    [
        (True, True, "source 'eu': passed"),
        (None, True, "source 'eu': passed"),
        (False, False, "source 'eu': failed"),
        ("too few rows", False, "source 'eu': too few rows"),
        ("", False, "source 'eu': "),
        ((True, "fine"), True, "source 'eu': fine"),
        ((False, "bad"), False, "source 'eu': bad"),
        ((1, "one"), False, "source 'eu': the audit returned tuple; return True/None, False, a message or (passed, message)"),
        ((True, "a", "b"), False, "source 'eu': the audit returned tuple; return True/None, False, a message or (passed, message)"),
        (0, False, "source 'eu': the audit returned int; return True/None, False, a message or (passed, message)"),
        (1, False, "source 'eu': the audit returned int; return True/None, False, a message or (passed, message)"),
    ],
)
def test_a_user_callables_answer_is_its_result(answer, passed, message):
    audit = user_audit(lambda facts: answer, name="mine")
    assert audit.evaluate({"eu": rows_fact("eu", 3)}) == [AuditResult("mine", "eu", passed, {"rows": 3}, message)]


def test_a_user_callable_that_raises_fails_its_result_and_the_next_source_is_still_judged():
    def picky(facts):
        if facts.source == "a":
            raise KeyError("x")
        return True

    assert user_audit(picky).evaluate({"b": rows_fact("b", 2), "a": rows_fact("a", 1)}) == [
        AuditResult("picky", "a", False, {"error": "KeyError"}, "source 'a': the audit raised KeyError: 'x'"),
        AuditResult("picky", "b", True, {"rows": 2}, "source 'b': passed"),
    ]


def test_a_callable_without_a_name_is_named_after_its_type():
    class Check:
        def __call__(self, facts):
            return True

    assert UserAudit(Check()).name == "Check"
    with pytest.raises(ValueError, match=r"^an audit must be an audit spec \(rows_within, \.\.\.\) or a callable, not 3$"):
        UserAudit(3)


# -- the outcome -----------------------------------------------------------------------------------


def test_the_outcome_names_each_failed_result_with_its_numbers_and_every_failed_source_once():
    outcome = decide_audits([rows_within(5, 20), rows_within(max=5, name="few")], {
        "b": rows_fact("b", 4), "a": rows_fact("a", 10), "c": rows_fact("c", None),
    })
    assert not outcome.passed and outcome.failed_sources == ("a", "b", "c")
    assert [r.source for r in outcome.failed] == ["b", "c", "a", "c"]
    assert outcome.summary() == (
        "4 of 6 audit result(s) failed: "
        "rows_within(min=5, max=20) on b: source 'b': 4 rows, below the minimum 5 {\"max\": 20, \"min\": 5, \"rows\": 4}; "
        "rows_within(min=5, max=20) on c: source 'c': its driver reported no row count (report it with "
        "zeta_context().report(rows=...)) {\"max\": 20, \"min\": 5, \"rows\": null}; "
        "few on a: source 'a': 10 rows, above the maximum 5 {\"max\": 5, \"min\": null, \"rows\": 10}; "
        "few on c: source 'c': its driver reported no row count (report it with zeta_context().report(rows=...)) "
        "{\"max\": 5, \"min\": null, \"rows\": null}"
    )
    value = outcome.to_value()
    assert (value["passed"], value["failed_sources"]) == (False, ["a", "b", "c"])
    assert value["results"][1] == {
        "audit": "rows_within(min=5, max=20)", "source": "b", "passed": False,
        "numbers": {"min": 5, "max": 20, "rows": 4}, "message": "source 'b': 4 rows, below the minimum 5",
    }


def test_a_result_on_the_whole_run_fails_the_outcome_without_naming_a_source():
    from airflow_provider_zeta.core.audits import AuditOutcome

    outcome = AuditOutcome((AuditResult("x", None, False, {"n": 1}, "whole run bad"), AuditResult("y", "a", True, {}, "ok")))
    assert not outcome.passed and outcome.failed_sources == ()
    assert outcome.summary() == '1 of 2 audit result(s) failed: x on the run: whole run bad {"n": 1}'
    passed = decide_audits([rows_within(1)], {"a": rows_fact("a", 3), "b": rows_fact("b", 1)})
    assert passed.passed and passed.failed == () and passed.summary() == "2 audit result(s), all passed"
    assert passed.to_value()["passed"] is True and passed.to_value()["failed_sources"] == []


# -- the audits list -------------------------------------------------------------------------------


def test_an_audits_list_is_refused_naming_the_task_and_what_is_wrong():
    from airflow_provider_zeta.core.audits import check_audits

    with pytest.raises(ValueError) as error:
        check_audits("abc", "p.cp")
    assert str(error.value) == "p.cp: 'audits' must be a list of audits, e.g. [rows_within(min=1)], not 'abc'"
    with pytest.raises(ValueError) as error:
        check_audits([rows_within(1), 3], "p.cp")
    assert str(error.value) == (
        "p.cp: 3 in 'audits' is neither an audit (rows_within, same_schema, not_null, unique_key, user_audit) nor a callable"
    )
    with pytest.raises(ValueError) as error:
        check_audits([same_schema(), rows_within(1), rows_within(1), same_schema(), not_null("id")], "p.cp")
    assert str(error.value) == (
        "p.cp: audit names ['rows_within(min=1, max=None)', 'same_schema'] appear twice in 'audits'; give one of them name=..."
    )


def test_an_audits_list_keeps_its_order_and_makes_a_callable_a_user_audit():
    from airflow_provider_zeta.core.audits import check_audits

    def mine(facts):
        return True

    first = rows_within(1)
    checked = check_audits([first, mine], "p.cp")
    assert checked[0] is first and isinstance(checked[1], UserAudit) and checked[1].check is mine and checked[1].name == "mine"
    assert check_audits([], "p.cp") == ()
