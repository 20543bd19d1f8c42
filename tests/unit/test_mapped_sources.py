"""Rules of sources decided at run time (dynamic task mapping): how the ready-to-close wait names a
mapped deploy task instance, and what the run's mapped source list expects."""

from __future__ import annotations

import pytest

from airflow_provider_zeta.core.incarnation import cleared_without_downstream, sensor_decision
from airflow_provider_zeta.core.paths import attempt_dir
from airflow_provider_zeta.core.ready import (
    Verdict,
    evaluate,
    mapped_entry_kwargs,
    mapped_expected,
    mapped_source_names,
    parse_ready_set,
    ready_set_names,
    ref_states,
    ref_task_ids,
    split_task_ref,
    task_ref,
    task_state_name,
)


def test_an_unmapped_task_is_named_by_its_task_id_alone():
    # What reports, ready sets and decision records held before mapping: unchanged.
    assert task_ref("p.deploy_north") == "p.deploy_north"
    assert task_ref("p.deploy_north", -1) == "p.deploy_north"
    assert task_ref("p.deploy_north", None) == "p.deploy_north"
    assert split_task_ref("p.deploy_north") == ("p.deploy_north", -1)
    assert task_state_name("p.deploy_north") == "p.deploy_north"


def test_a_mapped_instance_is_named_with_its_map_index_and_read_back():
    assert task_ref("p.deploy", 0) == "p.deploy[0]"
    assert split_task_ref("p.deploy[12]") == ("p.deploy", 12)
    # The name Airflow's task-states call uses for a mapped instance.
    assert task_state_name("p.deploy[12]") == "p.deploy_12"


@pytest.mark.parametrize("bad", ["p.deploy[", "p.deploy[x]", "[3]", "p.deploy]", "p[1]x"])
def test_a_malformed_reference_is_refused(bad):
    with pytest.raises(ValueError, match="task reference"):
        split_task_ref(bad)


def test_map_indexes_of_one_task_have_their_own_attempt_directories():
    # Two map indexes never share attempts; the unmapped path is the one existing deployments use.
    zero = attempt_dir("d", "r", *split_task_ref("p.deploy[0]"), "tok")
    one = attempt_dir("d", "r", *split_task_ref("p.deploy[1]"), "tok")
    assert zero != one
    assert zero == "runs/d/r/attempts/p.deploy/0/tok"
    assert attempt_dir("d", "r", *split_task_ref("p.deploy_north"), "tok") == "runs/d/r/attempts/p.deploy_north/-1/tok"


def test_states_are_read_once_per_task_and_mapped_to_each_reference():
    refs = ["p.deploy[0]", "p.deploy[1]", "p.other"]
    assert ref_task_ids(refs) == ["p.deploy", "p.other"]
    api = {"p.deploy_0": "success", "p.deploy_1": "deferred", "p.other": "running", "p.deploy": None}
    assert ref_states(refs, api) == {"p.deploy[0]": "success", "p.deploy[1]": "deferred", "p.other": "running"}


def test_the_mapped_list_expects_one_source_per_map_index_in_order():
    assert mapped_expected("p.deploy", ["north", "south"], "p.ready") == {"north": "p.deploy[0]", "south": "p.deploy[1]"}
    kwargs_list = [{"source": "b", "application": "/j.py"}, {"source": "a"}]
    assert mapped_expected("p.deploy", kwargs_list, "p.ready") == {"b": "p.deploy[0]", "a": "p.deploy[1]"}
    # As the trigger-stored XCom reads back: JSON text.
    assert mapped_source_names('["x", "y"]', "w") == ["x", "y"]
    assert mapped_expected("p.deploy", [], "p.ready") == {}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (None, "missing"),
        ("north", "list of names"),
        ({"source": "north"}, "list of names"),
        (["north", "north"], "twice"),
        (["a/b"], "no valid source"),
        (["ds=1"], "no valid source"),
        ([""], "no valid source"),
        ([{"application": "/j.py"}], "no valid source"),
        ([3], "no valid source"),
    ],
)
def test_a_bad_mapped_list_is_refused_naming_the_entry(value, message):
    with pytest.raises(ValueError, match=message) as error:
        mapped_source_names(value, "p.ready_to_close")
    assert "p.ready_to_close" in str(error.value)


def test_entry_kwargs_take_the_pipeline_defaults_and_the_entry_overrides():
    assert mapped_entry_kwargs("north", "/job.py", {"driver_memory": "1g"}, "p") == {
        "source": "north",
        "application": "/job.py",
        "application_args": [],
        "driver_memory": "1g",
    }
    entry = {"source": "south", "application": "/other.py", "application_args": ["--x", 1], "driver_memory": "2g"}
    assert mapped_entry_kwargs(entry, "/job.py", {"driver_memory": "1g"}, "p") == {
        "source": "south",
        "application": "/other.py",
        "application_args": ["--x", "1"],
        "driver_memory": "2g",
    }


def test_entry_kwargs_refuse_unknown_keys_and_a_missing_application():
    with pytest.raises(ValueError, match=r"holds \['retries'\]"):
        mapped_entry_kwargs({"source": "a", "retries": 3}, "/j.py", {}, "p")
    with pytest.raises(ValueError, match="has no application"):
        mapped_entry_kwargs("a", None, {}, "p")
    with pytest.raises(ValueError, match="no valid source"):
        mapped_entry_kwargs({"source": "a/b"}, "/j.py", {}, "p")


def _report(source, ref, token):
    return {"source": source, "task_id": ref, "incarnation": 0, "token": token, "output_path": f"/o/{token}", "rows": 1}


def test_the_wait_judges_each_map_index_apart_and_the_ready_set_names_it():
    expected = mapped_expected("p.deploy", ["north", "south"], "p.ready")
    states = {"p.deploy[0]": "success", "p.deploy[1]": "running"}
    reports = {"p.deploy[0]": _report("north", "p.deploy[0]", "t0")}
    waiting = evaluate(expected, states, reports, 0, 0.0, 100.0)
    assert waiting.verdict is Verdict.WAITING and waiting.missing == ("south",)
    states["p.deploy[1]"] = "success"
    reports["p.deploy[1]"] = _report("south", "p.deploy[1]", "t1")
    done = evaluate(expected, states, reports, 0, 0.0, 100.0)
    assert done.verdict is Verdict.ALL_READY
    ready_set = done.ready_set(0)
    _, sources = parse_ready_set(ready_set)
    assert {name: split_task_ref(r.task_id) for name, r in sources.items()} == {"north": ("p.deploy", 0), "south": ("p.deploy", 1)}
    # A cleared map index finds its own attempt in the ready set, never its sibling's.
    assert ready_set_names(ready_set, "p.deploy[1]", "t1")
    assert not ready_set_names(ready_set, "p.deploy[0]", "t1")
    assert not ready_set_names(ready_set, "p.deploy", "t1")


def test_a_failed_map_index_fails_the_wait_naming_its_source():
    expected = mapped_expected("p.deploy", ["north", "south"], "p.ready")
    states = {"p.deploy[0]": "success", "p.deploy[1]": "failed"}
    evaluation = evaluate(expected, states, {"p.deploy[0]": _report("north", "p.deploy[0]", "t0")}, 0, 0.0, 100.0)
    assert evaluation.verdict is Verdict.SOURCE_FAILED and evaluation.failed == {"south": "failed"}


def test_a_map_index_cleared_alone_is_refused_by_its_own_decision_record_only():
    expected = mapped_expected("p.deploy", ["north", "south"], "p.ready")
    reports = {ref: _report(name, ref, f"t{i}") for i, (name, ref) in enumerate(expected.items())}
    done = evaluate(expected, dict.fromkeys(expected.values(), "success"), reports, 0, 0.0, 100.0)
    _, parsed = parse_ready_set(done.ready_set(0))
    decision = sensor_decision(parsed)
    assert decision == {"tokens": {"p.deploy[0]": "t0", "p.deploy[1]": "t1"}}
    # The sensor is deferred and its decision names south's previous attempt: south may not re-run ...
    assert cleared_without_downstream("p.deploy[1]", {"p.ready": "deferred"}, False, {"p.ready": decision}, "t1")
    # ... while a reference without the map index would not find it (the decision is per map index).
    assert not cleared_without_downstream("p.deploy", {"p.ready": "deferred"}, False, {"p.ready": decision}, "t1")
