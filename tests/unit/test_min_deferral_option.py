"""``[zeta] min_deferral``: the least time a provider trigger keeps its task deferred.

Unset, it is ``MIN_DEFERRAL_SECONDS`` (12 s). A deployment whose scheduler loop is quick may set it
lower (the test harness does); the value is a duration in (0, 300] and anything else is refused
naming the option. Both ends read it: the deferring worker (``not_before``) and the trigger's cap
on its own clock (``wait_out_min_deferral``).
"""

from __future__ import annotations

import asyncio
import time

import pytest

import airflow_provider_zeta.triggers as triggers
from airflow_provider_zeta.get_provider_info import CONFIG_OPTIONS

OPTION = "AIRFLOW__ZETA__MIN_DEFERRAL"


def test_unset_the_minimum_deferral_is_the_documented_default(monkeypatch):
    monkeypatch.delenv(OPTION, raising=False)
    assert triggers.min_deferral_seconds() == triggers.MIN_DEFERRAL_SECONDS == 12.0
    assert float(CONFIG_OPTIONS["min_deferral"]["default"]) == triggers.MIN_DEFERRAL_SECONDS
    before = time.time()
    assert before + 12.0 <= triggers.not_before() <= time.time() + 12.0


@pytest.mark.parametrize(("value", "seconds"), [("4", 4.0), (" 2.5 ", 2.5), ("0:00:30", 30.0), ("300", 300.0)])
def test_a_set_minimum_deferral_moves_not_before(monkeypatch, value, seconds):
    monkeypatch.setenv(OPTION, value)
    assert triggers.min_deferral_seconds() == seconds
    before = time.time()
    assert before + seconds <= triggers.not_before() <= time.time() + seconds


@pytest.mark.parametrize("value", ["0", "-1", "twelve", "nan", "301", "1 day, 0:00:00"])
def test_a_minimum_deferral_that_is_not_a_duration_in_0_to_300_seconds_is_refused_naming_the_option(monkeypatch, value):
    monkeypatch.setenv(OPTION, value)
    with pytest.raises(ValueError, match=r"\[zeta\] min_deferral"):
        triggers.min_deferral_seconds()
    with pytest.raises(ValueError, match=r"\[zeta\] min_deferral"):
        triggers.not_before()


def test_the_trigger_caps_its_wait_at_the_configured_minimum_deferral(monkeypatch):
    """A worker minutes ahead asks for a ``not_before`` far off: the trigger waits the configured
    minimum deferral by its own clock, not the 12 s default and not the minutes."""
    monkeypatch.setenv(OPTION, "0.4")
    started = time.monotonic()
    asyncio.run(triggers.wait_out_min_deferral(time.time() + 420.0))
    waited = time.monotonic() - started
    assert 0.35 <= waited < 3.0, waited
