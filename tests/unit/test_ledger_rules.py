"""Small rules of the driver ledger (core/ledger.py): a heartbeat's age, and the driver's lease
as a fixed fraction of ``lost_after``."""

from __future__ import annotations

import pytest

from airflow_provider_zeta.core.ledger import LEASE_FRACTION, Ledger, LedgerStatus, driver_lease


def test_a_heartbeat_age_is_zero_at_the_heartbeat_and_never_negative():
    ledger = Ledger(token="t", status=LedgerStatus.RUNNING, started_at=100.0, heartbeat_at=200.0)
    assert ledger.heartbeat_age(200.0) == 0.0
    assert ledger.heartbeat_age(150.0) == 0.0  # an observer's clock behind the driver's
    assert ledger.heartbeat_age(212.5) == 12.5


@pytest.mark.parametrize("lost_after", [1.0, 60.0, 600.0])
def test_the_lease_is_the_same_fraction_of_lost_after_whatever_its_length(lost_after):
    assert 0 < LEASE_FRACTION < 1
    assert driver_lease(lost_after) == pytest.approx(LEASE_FRACTION * lost_after)
    assert driver_lease(2 * lost_after) == pytest.approx(2 * driver_lease(lost_after))
