"""The minimum deferral on the triggerer's own clock (``core.pacing.min_deferral_wait``).

A trigger may not fire before ``not_before``, a moment on the deferring worker's wall clock; the
triggerer may run on another host whose wall clock differs by minutes. The rule, without I/O or a
clock: wait until ``not_before`` by the trigger's clock, never longer than the minimum deferral.
"""

from __future__ import annotations

import pytest

from airflow_provider_zeta.core.pacing import min_deferral_wait

MIN_DEFERRAL = 12.0
NOW = 1_800_000_000.0  # the triggerer's wall clock


def _not_before(worker_ahead_s: float) -> float:
    """``not_before`` as a worker whose clock is ``worker_ahead_s`` ahead of the triggerer's sets it
    when it defers at ``NOW``."""
    return NOW + worker_ahead_s + MIN_DEFERRAL


@pytest.mark.parametrize("worker_ahead_s", [420.0, 3600.0, 13.0])
def test_a_deferring_worker_minutes_ahead_never_holds_the_event_longer_than_the_minimum_deferral(worker_ahead_s):
    assert min_deferral_wait(_not_before(worker_ahead_s), NOW, MIN_DEFERRAL) == MIN_DEFERRAL


@pytest.mark.parametrize("worker_ahead_s", [-420.0, -MIN_DEFERRAL, -13.0])
def test_a_deferring_worker_behind_by_more_than_the_minimum_deferral_asks_for_no_wait(worker_ahead_s):
    assert min_deferral_wait(_not_before(worker_ahead_s), NOW, MIN_DEFERRAL) == 0.0


@pytest.mark.parametrize(("worker_ahead_s", "waited_already_s", "wait_s"), [(0.0, 0.0, 12.0), (0.0, 5.0, 7.0), (-4.0, 0.0, 8.0), (3.0, 5.0, 10.0)])
def test_with_clocks_about_equal_the_trigger_waits_until_not_before(worker_ahead_s, waited_already_s, wait_s):
    """Clocks a few seconds apart, or the trigger already a few seconds into its wait (a restarted
    triggerer): the wait ends at ``not_before`` by the trigger's clock, capped."""
    assert min_deferral_wait(_not_before(worker_ahead_s), NOW + waited_already_s, MIN_DEFERRAL) == pytest.approx(wait_s)
