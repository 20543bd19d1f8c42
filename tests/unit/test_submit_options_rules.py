"""Edges of the spark-submit option checks (core/submit_options.py): the smallest count accepted,
and what a refusal says the option must be."""

from __future__ import annotations

import pytest

from airflow_provider_zeta.core.submit_options import InvalidSubmitOption, checked_options


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
