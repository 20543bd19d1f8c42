"""Every duration accepts a timedelta or seconds (numbers, numeric or timedelta text); the rest is
an error naming the parameter."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest

from airflow_provider_zeta.core.durations import (
    InvalidDuration,
    check_duration_unless_template,
    duration_or_default,
    duration_seconds,
)


@pytest.mark.parametrize(
    "value, seconds",
    [
        (timedelta(minutes=10), 600.0),
        (timedelta(milliseconds=250), 0.25),
        (600, 600.0),
        (2.5, 2.5),
        ("600", 600.0),
        (" 2.5 ", 2.5),
        ("1e3", 1000.0),
        (str(timedelta(minutes=10)), 600.0),  # "0:10:00", how a templated timedelta renders
        (str(timedelta(days=1, hours=2)), 93600.0),  # "1 day, 2:00:00"
        (str(timedelta(days=3, seconds=1.5)), 3 * 86400 + 1.5),  # "3 days, 0:00:01.500000"
    ],
)
def test_accepted_durations(value, seconds):
    assert duration_seconds(value, "p") == pytest.approx(seconds)


@pytest.mark.parametrize(
    "value",
    [None, True, False, "", "ten minutes", "10m", "1:99:00", [600], {"seconds": 600}, math.nan, math.inf, "nan", "-inf"],
)
def test_rejected_values_name_the_parameter_and_what_to_pass(value):
    with pytest.raises(InvalidDuration) as error:
        duration_seconds(value, "deploy_emea: 'lost_after'")
    message = str(error.value)
    assert message.startswith("deploy_emea: 'lost_after' must be a duration")
    assert "timedelta" in message and "seconds" in message and repr(value) in message


@pytest.mark.parametrize("value", [-1, "-0.5", timedelta(seconds=-1), str(timedelta(seconds=-1))])
def test_negative_durations_are_rejected(value):
    with pytest.raises(InvalidDuration, match="'retention' must be a >= 0 duration"):
        duration_seconds(value, "'retention'", allow_zero=True)


@pytest.mark.parametrize("value", [0, "0", timedelta(0), "0:00:00"])
def test_zero_is_accepted_only_where_allowed(value):
    assert duration_seconds(value, "r", allow_zero=True) == 0.0
    with pytest.raises(InvalidDuration, match="'poll_interval' must be a positive duration"):
        duration_seconds(value, "'poll_interval'")


def test_invalid_duration_is_a_value_error():
    # Callers and users that catch ValueError (as before this parser existed) still do.
    assert issubclass(InvalidDuration, ValueError)


@pytest.mark.parametrize("unset", [None, "", "  "])
def test_unset_falls_back_to_the_default(unset):
    assert duration_or_default(unset, 5.0, "p") == 5.0


def test_set_value_wins_over_the_default_and_is_checked():
    assert duration_or_default(timedelta(seconds=30), 5.0, "p") == 30.0
    with pytest.raises(InvalidDuration, match="^p must be"):
        duration_or_default("soon", 5.0, "p")


def test_templates_are_checked_once_rendered_values_at_once():
    check_duration_unless_template("{{ var.value.retention }}", "r")
    check_duration_unless_template("{% if true %}1{% endif %}", "r")
    check_duration_unless_template(None, "r")
    check_duration_unless_template(timedelta(minutes=1), "r")
    with pytest.raises(InvalidDuration):
        check_duration_unless_template("soon", "r")
    with pytest.raises(InvalidDuration):
        check_duration_unless_template(-3, "r", allow_zero=True)
