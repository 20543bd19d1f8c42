"""Each audit of core/audits.py word for word: every result it gives (audit, source, verdict,
numbers, message) for sources in every state the audit job can report, what each audit describes
itself as, and what a user audit asks the audit job for. The boundaries are covered in
test_audits.py."""

from __future__ import annotations

import json

import pytest

from airflow_provider_zeta.core.audits import (
    AUDIT_JOB_FORMAT,
    Audit,
    AuditResult,
    SourceFacts,
    SparkRequest,
    UserAudit,
    audit_job_request,
    check_audit_submit_kwargs,
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
        "f": schema_fact("f", (("v", "int"), ("id", "string"))),
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
        AuditResult("same_schema", "f", False, {**same, "type_differs": {"id": ["bigint", "string"], "v": ["double", "int"]}},
                    "source 'f': schema differs from 'c''s: types differ id: bigint vs string, v: double vs int"),
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


# -- building the audits ---------------------------------------------------------------------------


def test_not_null_and_unique_key_ask_for_the_schema_with_their_counts():
    assert not_null(["id", "v"]).spark_request() == SparkRequest(schema=True, not_null=("id", "v"))
    assert unique_key(["id", "ts"]).spark_request() == SparkRequest(schema=True, unique_keys=(("id", "ts"),))
    assert same_schema().spark_request() == SparkRequest(schema=True)
    assert rows_within(1).spark_request() == SparkRequest() and not rows_within(1).spark_request()


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: unique_key(""), "unique_key: 'columns' must name at least one column, each a non-empty string (got ('',))"),
        (lambda: unique_key(["a", "a"]), "unique_key: 'columns' names a column twice (['a', 'a'])"),
        (lambda: not_null(3), "not_null: 'columns' must be a column name or a list of names, not 3"),
        (lambda: not_null([]), "not_null: 'columns' must name at least one column, each a non-empty string (got [])"),
        (lambda: not_null(["id", None]), "not_null: 'columns' must name at least one column, each a non-empty string (got ['id', None])"),
        (lambda: rows_within(), "rows_within: give 'min', 'max' or both"),
        (lambda: rows_within(min=-1), "rows_within: 'min' must be a whole number of rows, 0 or more, or None (got -1)"),
        (lambda: rows_within(max=True), "rows_within: 'max' must be a whole number of rows, 0 or more, or None (got True)"),
        (lambda: rows_within(min=1.5), "rows_within: 'min' must be a whole number of rows, 0 or more, or None (got 1.5)"),
        (lambda: rows_within(min=3, max=2), "rows_within: 'min' (3) is above 'max' (2)"),
        (lambda: rows_within(min=1, sources="a"), "rows_within: 'sources' must be a list of source names, not 'a'"),
        (lambda: rows_within(min=1, sources=["a", ""]), "rows_within: 'sources' must be a list of source names, not ('a', '')"),
        (lambda: rows_within(min=1, sources=["a", 3]), "rows_within: 'sources' must be a list of source names, not ('a', 3)"),
    ],
)
def test_a_badly_built_audit_is_refused_naming_the_audit_and_the_argument(build, message):
    with pytest.raises(ValueError) as error:
        build()
    assert str(error.value) == message


def test_an_audits_default_name_shows_its_specification():
    assert rows_within(min=0, max=0).name == "rows_within(min=0, max=0)"
    assert rows_within(max=3).name == "rows_within(min=None, max=3)"
    assert rows_within(1, name="enough").name == "enough"
    assert rows_within(1, sources=["a", "b"]).sources == ("a", "b")
    assert rows_within(1, sources=iter(["a"])).sources == ("a",)
    assert not_null("id").columns == ("id",) and not_null("id").name == "not_null(id)"
    assert not_null(["id", "v"], name="full").name == "full"
    assert unique_key(["id", "ts"]).name == "unique_key(id, ts)" and unique_key("id", name="k").name == "k"
    assert same_schema().name == "same_schema" and same_schema(name="shape").name == "shape"


# -- the audit job's documents ---------------------------------------------------------------------

WHERE = "/tmp/r.json"


def job_result(**sources) -> str:
    return json.dumps({"format": AUDIT_JOB_FORMAT, "sources": sources})


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (None, "the audit job wrote no result at /tmp/r.json; see its output in the task log"),
        ("{", "the audit job's result at /tmp/r.json is not JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1))"),
        (json.dumps([1]), "the audit job's result at /tmp/r.json is not a format-1 result document"),
        (json.dumps({"format": 2, "sources": {}}), "the audit job's result at /tmp/r.json is not a format-1 result document"),
        (json.dumps({"format": 1, "sources": []}), "the audit job's result at /tmp/r.json is not a format-1 result document"),
        (job_result(b={}), "the audit job's result at /tmp/r.json has nothing for source 'a'"),
        (job_result(a=[]), "the audit job's result at /tmp/r.json has nothing for source 'a'"),
        (job_result(a={"rows": -1}), "the audit job's result at /tmp/r.json has an invalid entry for 'a': -1 is not a count"),
        (job_result(a={"nulls": {"id": 1.5}}), "the audit job's result at /tmp/r.json has an invalid entry for 'a': 1.5 is not a count"),
        (job_result(a={"duplicates": [[["id"], True]]}), "the audit job's result at /tmp/r.json has an invalid entry for 'a': True is not a count"),
        (job_result(a={"rows": "3"}), "the audit job's result at /tmp/r.json has an invalid entry for 'a': '3' is not a count"),
        ('{"format": 1, "sources": {"a": {"rows": Infinity}}}', "the audit job's result at /tmp/r.json has an invalid entry for 'a': inf is not a count"),
        ('{"format": 1, "sources": {"a": {"rows": NaN}}}', "the audit job's result at /tmp/r.json has an invalid entry for 'a': nan is not a count"),
        (job_result(a={"schema": [["id"]]}),
         "the audit job's result at /tmp/r.json has an invalid entry for 'a': not enough values to unpack (expected 2, got 1)"),
    ],
)
def test_an_audit_job_result_that_is_not_one_is_refused_saying_where_and_why(raw, message):
    with pytest.raises(CorruptState) as error:
        parse_audit_job_result(raw, ["a"], WHERE)
    assert str(error.value) == message


def test_an_audit_job_result_gives_what_it_read_of_each_source_and_none_for_what_it_did_not():
    raw = job_result(
        a={},
        b={"rows": 2.0, "nulls": {"x": 0, "y": 3}, "schema": [["x", "int"], [1, "string"]], "duplicates": [[["x", "y"], 0], [["x"], 4]]},
        c={"rows": 0},
    )
    assert parse_audit_job_result(raw.encode(), ["a", "b"], WHERE) == {
        "a": {"schema": None, "nulls": None, "duplicates": None, "read_rows": None},
        "b": {"schema": (("x", "int"), ("1", "string")), "nulls": {"x": 0, "y": 3}, "duplicates": {("x", "y"): 0, ("x",): 4}, "read_rows": 2},
    }


def test_the_audit_jobs_request_names_each_staging_in_order_and_what_to_read():
    assert audit_job_request(SparkRequest(), {"b": "file:///b", "a": "file:///a"}, WHERE) == {
        "format": 1,
        "sources": {"a": "file:///a", "b": "file:///b"},
        "schema": False,
        "not_null": [],
        "unique_keys": [],
        "result": WHERE,
    }


def test_the_audits_together_ask_the_audit_job_for_each_thing_once_in_order():
    merged = spark_request([rows_within(1), unique_key(["id", "ts"]), not_null(["v", "id"]), not_null("id", name="again"), unique_key(["id", "ts"], name="k")])
    assert merged == SparkRequest(schema=True, not_null=("v", "id"), unique_keys=(("id", "ts"),))
    assert spark_request([user_audit(lambda facts: True, needs_schema=True)]) == SparkRequest(schema=True)
    assert spark_request([]) == SparkRequest()


# -- the audit job's further arguments, the fence, the stored outcome ------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ([1], "p.cp: 'audit_spark_submit_kwargs' must be a mapping of SparkSubmitHook arguments, got [1]"),
        ({"conn_id": "x", "application": "y", "driver_memory": "1g"},
         "p.cp: 'audit_spark_submit_kwargs' may not set 'application', 'conn_id': the completed point sets it for its audit job "
         "(the connection is 'audit_conn_id')"),
        ({"application_args": []},
         "p.cp: 'audit_spark_submit_kwargs' may not set 'application_args': the completed point sets it for its audit job "
         "(the connection is 'audit_conn_id')"),
    ],
)
def test_the_audit_jobs_further_arguments_are_refused_naming_the_task_and_the_keys(kwargs, message):
    with pytest.raises(ValueError) as error:
        check_audit_submit_kwargs(kwargs, "p.cp")
    assert str(error.value) == message


def test_the_audit_jobs_further_arguments_are_kept_as_given():
    given = {"driver_memory": "1g", "conf": {"spark.x": "1"}}
    kept = check_audit_submit_kwargs(given, "p.cp")
    assert kept == given and kept is not given
    assert check_audit_submit_kwargs(None, "p.cp") == {} and check_audit_submit_kwargs({}, "p.cp") == {}


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ({"results": []}, {"results": []}),
        ('{"results": [], "passed": true}', {"results": [], "passed": True}),
        (b'{"results": []}', {"results": []}),
        (b"\xff", None),
        ("{", None),
        ({"results": 3}, None),
        ({"passed": True}, None),
        ([1], None),
        (None, None),
    ],
)
def test_a_stored_audit_outcome_is_read_back_or_none(value, parsed):
    assert parse_outcome(value) == parsed


# -- rows per source over runs ---------------------------------------------------------------------


def test_rows_history_keeps_each_pipelines_points_in_run_order_with_the_publish_winning():
    from airflow_provider_zeta.core.audits import RowsPoint, rows_history

    audited = {"passed": True, "pipeline_id": "p", "rows": {"a": 5}, "results": []}
    refused = {"passed": False, "failed_sources": ["b", "a"], "pipeline_id": "q", "rows": {"a": 1, "b": 0}, "results": []}
    no_rows = {"passed": True, "pipeline_id": "p", "results": []}
    anonymous = {"passed": True, "failed_sources": None, "rows": {"a": 2}, "results": []}
    published = {"commit_id": "c1", "pipeline_id": "p", "rows": {"a": 6, "b": 2.5, "c": False}}
    history = rows_history([
        ("r1", [], [audited, json.dumps(refused)]),
        ("r2", [b"\xff", "{", {"pipeline_id": "p", "rows": {"a": 1}}, {"commit_id": "c", "rows": 3}, json.dumps(published).encode()],
         [no_rows, "{", 7, json.dumps(audited)]),
        ("r3", [], [no_rows, anonymous]),
    ])
    assert history == {
        "p": [RowsPoint("r1", {"a": 5}, "audited"), RowsPoint("r2", {"a": 6, "b": None, "c": None}, "published")],
        "q": [RowsPoint("r1", {"a": 1, "b": 0}, "audit_failed", ("b", "a"))],
        "": [RowsPoint("r3", {"a": 2}, "audited")],
    }
    assert rows_history([]) == {} and rows_history([("r", [], [])]) == {}


def test_an_audit_shows_as_its_name_and_asks_for_nothing_unless_it_says_so():
    assert repr(rows_within(1)) == "rows_within(min=1, max=None)" and repr(same_schema(name="shape")) == "shape"
    assert Audit().spark_request() == SparkRequest()
    with pytest.raises(NotImplementedError):
        Audit().evaluate({})


@pytest.mark.parametrize(
    ("request_", "needed"),
    [
        (SparkRequest(), False),
        (SparkRequest(schema=True), True),
        (SparkRequest(not_null=("a",)), True),
        (SparkRequest(unique_keys=(("a",),)), True),
    ],
)
def test_an_audit_job_is_needed_when_anything_is_to_be_read(request_, needed):
    assert bool(request_) is needed


def test_a_single_callable_is_refused_as_an_audits_list():
    from airflow_provider_zeta.core.audits import RowsWithin, check_audits

    with pytest.raises(ValueError, match=r"^p\.cp: 'audits' must be a list of audits"):
        check_audits(lambda facts: True, "p.cp")
    assert RowsWithin(1, sources=["a"]).sources == ("a",)


def test_the_summary_shows_numbers_that_are_not_json_as_text():
    from airflow_provider_zeta.core.audits import AuditOutcome

    outcome = AuditOutcome((AuditResult("x", "a", False, {"seen": {3}}, "odd"),))
    assert outcome.summary() == '1 of 1 audit result(s) failed: x on a: odd {"seen": "{3}"}'
