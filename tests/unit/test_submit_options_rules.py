"""Edges of the spark-submit option checks (core/submit_options.py): the smallest count accepted,
and what a refusal says the option must be."""

from __future__ import annotations

import pytest

from airflow_provider_zeta.core.submit_options import (
    SPARK_SUBMIT_OPTIONS,
    TOKEN_CONF_KEY,
    InvalidSubmitOption,
    carries_url_credentials,
    checked_options,
    hook_arguments,
    secret_options_into_conf,
)


@pytest.mark.parametrize("value", [1, "1", " 1 "])
def test_one_is_the_smallest_count_accepted(value):
    assert checked_options({"num_executors": value}, "task x") == {"num_executors": 1}


@pytest.mark.parametrize("value", [0, "0", -1, True, 1.5, "two"])
def test_anything_but_a_positive_whole_number_is_refused_as_a_count(value):
    with pytest.raises(InvalidSubmitOption, match=r"task x: 'executor_cores' must be a positive whole number"):
        checked_options({"executor_cores": value}, "task x")


def test_a_refused_string_option_says_whether_a_list_would_do():
    with pytest.raises(InvalidSubmitOption, match=r"'driver_memory' must be a string, got int 2"):
        checked_options({"driver_memory": 2}, "task x")
    with pytest.raises(InvalidSubmitOption, match=r"'jars' must be a string or a list of strings, got int 2"):
        checked_options({"jars": 2}, "task x")


def test_an_unknown_option_is_refused_naming_it_and_every_option_there_is():
    with pytest.raises(InvalidSubmitOption) as refused:
        checked_options({"retries": 1, "conf": {}, "jars": "a.jar"}, "task x")
    assert (
        str(refused.value)
        == f"task x: unknown spark-submit option(s) ['conf', 'retries']; the options are {list(SPARK_SUBMIT_OPTIONS)}"
    )


def test_a_switch_is_refused_unless_true_or_false_and_kept_as_given():
    assert checked_options({"verbose": False}, "task x") == {"verbose": False}
    assert checked_options({"verbose": True, "name": None}, "task x") == {"verbose": True}
    with pytest.raises(InvalidSubmitOption) as refused:
        checked_options({"verbose": "yes"}, "task x")
    assert str(refused.value) == "task x: 'verbose' must be True or False, got 'yes'"


def test_a_string_option_is_refused_empty_or_of_another_type_word_for_word():
    with pytest.raises(InvalidSubmitOption) as empty:
        checked_options({"name": "  "}, "task x")
    assert str(empty.value) == "task x: 'name' is empty; leave it unset (None) instead"
    with pytest.raises(InvalidSubmitOption) as wrong:
        checked_options({"jars": ["a.jar", 2]}, "task x")
    assert str(wrong.value) == "task x: 'jars' must be a string or a list of strings, got list ['a.jar', 2]"
    with pytest.raises(InvalidSubmitOption) as single:
        checked_options({"name": ["a", "b"]}, "task x")
    assert str(single.value) == "task x: 'name' must be a string, got list ['a', 'b']"


def test_a_list_option_given_as_a_list_or_tuple_is_joined_with_commas():
    assert checked_options({"py_files": ("a.py", "b.zip"), "jars": ["x.jar"]}, "task x") == {
        "py_files": "a.py,b.zip",
        "jars": "x.jar",
    }


def test_a_count_is_refused_word_for_word_naming_what_was_given():
    with pytest.raises(InvalidSubmitOption) as refused:
        checked_options({"num_executors": "2 cores"}, "task x")
    assert str(refused.value) == "task x: 'num_executors' must be a positive whole number (e.g. 2), got '2 cores'"


def test_the_hook_gets_the_token_in_conf_no_progress_bars_unless_asked_and_every_other_argument():
    arguments = hook_arguments(
        token="tok1",
        conf={"spark.ui.showConsoleProgress": "true", "spark.x": "1"},
        application_args=["--a"],
        options={"driver_memory": "2g", "name": None},
        hook_kwargs={"num_executors": "3", "verbose": False, "java_class": "Main"},
        where="task x",
    )
    assert arguments == {
        "java_class": "Main",
        "num_executors": 3,
        "verbose": False,
        "driver_memory": "2g",
        "conf": {"spark.ui.showConsoleProgress": "true", "spark.x": "1", TOKEN_CONF_KEY: "tok1"},
        "name": "zeta-tok1",
        "application_args": ["--a"],
    }
    plain = hook_arguments(token="t", conf=None, application_args=[], options=None, hook_kwargs=None, where="w")
    assert plain == {
        "conf": {TOKEN_CONF_KEY: "t", "spark.ui.showConsoleProgress": "false"},
        "name": "zeta-t",
        "application_args": [],
    }


def test_an_option_given_twice_is_refused_naming_it():
    with pytest.raises(InvalidSubmitOption) as refused:
        hook_arguments(
            token="t",
            conf=None,
            application_args=[],
            options={"jars": "a", "files": "f"},
            hook_kwargs={"files": "g", "jars": "b"},
            where="task x",
        )
    assert str(refused.value) == (
        "task x: ['files', 'jars'] given both as operator arguments and in spark_submit_kwargs; pass each once"
    )


@pytest.mark.parametrize(
    ("value", "carries"),
    [
        ("https://user:pw@repo.example/maven", True),
        ("s3a+x.y-z://u:p@bucket/a.jar,b.jar", True),
        ("https://user@repo.example/maven", False),
        ("https://repo.example/a:b@c", False),
        ("https://:pw@repo.example", False),
        ("https://user:@repo.example", False),
        ("1http://user:pw@host", True),
        ("user:pw@host", False),
        (["https://user:pw@host"], False),
    ],
)
def test_a_url_carries_credentials_only_with_a_user_and_a_password_before_its_host(value, carries):
    assert carries_url_credentials(value) is carries


def test_a_secret_option_moves_to_its_conf_key_and_one_given_in_conf_too_is_refused():
    arguments = {"jars": "https://u:p@h/a.jar", "files": "f.txt", "name": "app", "conf": {"spark.x": "1"}}
    moved = secret_options_into_conf(arguments, carries_url_credentials, "task x")
    assert moved == {"files": "f.txt", "name": "app", "conf": {"spark.x": "1", "spark.jars": "https://u:p@h/a.jar"}}
    assert secret_options_into_conf({"files": "f.txt"}, carries_url_credentials, "w") == {"files": "f.txt"}
    with pytest.raises(InvalidSubmitOption) as refused:
        secret_options_into_conf({**arguments, "conf": {"spark.jars": "b.jar"}}, carries_url_credentials, "task x")
    assert str(refused.value) == (
        "task x: ['spark.jars'] given in conf and as the matching option, whose value holds a secret and so goes "
        "into the private properties file under that conf key; pass it once"
    )
