"""The lease is pinned to the launch: observers judge a driver by the lost_after and heartbeat it
was launched with, and settings whose heartbeat cannot renew the lease are refused at parse time."""

from __future__ import annotations

import pytest

from airflow_provider_zeta.core.deploy import Action, Timing, decide
from airflow_provider_zeta.core.ledger import Phase, parse_attempt_record

from .test_deploy_table import ledger, observe, record

LAUNCH = Timing(lost_after=60, launch_grace=90)
LOWERED = Timing(lost_after=10, launch_grace=90)  # an operator lowered [zeta] driver_lost_after since


def test_a_driver_launched_with_a_longer_lost_after_is_waited_out_by_that_value():
    # The driver's lease is 0.7 x 60 s = 42 s: silent for 20 s it may be alive and writing. Today's
    # settings say 1.25 x 10 s = 12.5 s; the recorded launch value must decide.
    launched = record(Phase.LAUNCHED, failure_reported_try=1, lost_after=60.0, heartbeat_interval=5.0)
    decision = decide(observe(rec=launched, led=ledger(), unchanged_for=20.0, try_number=2, timing=LOWERED))
    assert decision.action is Action.REATTACH, decision  # within its own lost_after: running
    later = decide(observe(rec=launched, led=ledger(), unchanged_for=1.25 * 60, try_number=2, timing=LOWERED))
    assert later.action is Action.FRESH_LAUNCH, later


def test_a_driver_seen_silent_past_its_own_lost_after_is_lost_even_if_the_settings_rose_since():
    launched = record(Phase.LAUNCHED, lost_after=10.0, heartbeat_interval=2.0)
    decision = decide(observe(rec=launched, led=ledger(), unchanged_for=11.0, try_number=1, timing=LAUNCH))
    assert decision.action is Action.REPORT_FAILURE and "lost" in decision.reason, decision


def test_the_record_keeps_the_launch_timing_through_its_stored_value():
    launched = record(Phase.LAUNCHED, lost_after=60.0, heartbeat_interval=5.0)
    parsed = parse_attempt_record(launched.to_value(), "t")
    assert parsed is not None and (parsed.lost_after, parsed.heartbeat_interval) == (60.0, 5.0)
    # A record written before the fields existed has none: today's settings judge it.
    old = {k: v for k, v in launched.to_value().items() if k not in ("lost_after", "heartbeat_interval")}
    parsed_old = parse_attempt_record(old, "t")
    assert parsed_old is not None and parsed_old.lost_after is None


@pytest.mark.parametrize(("heartbeat", "lost_after"), [("30", "40"), ("60", "60"), ("7", "10")])
def test_settings_whose_heartbeat_cannot_renew_the_lease_fail_at_parse_time(monkeypatch, heartbeat, lost_after):
    from airflow_provider_zeta.settings import ZetaSettings

    monkeypatch.setenv("AIRFLOW__ZETA__DRIVER_HEARTBEAT_INTERVAL", heartbeat)
    monkeypatch.setenv("AIRFLOW__ZETA__DRIVER_LOST_AFTER", lost_after)
    with pytest.raises(ValueError) as refused:
        ZetaSettings.load()
    assert "[zeta] driver_heartbeat_interval" in str(refused.value)
    assert "[zeta] driver_lost_after" in str(refused.value)


def test_settings_with_room_for_the_heartbeat_load(monkeypatch):
    from airflow_provider_zeta.settings import ZetaSettings

    monkeypatch.setenv("AIRFLOW__ZETA__DRIVER_HEARTBEAT_INTERVAL", "5")
    monkeypatch.setenv("AIRFLOW__ZETA__DRIVER_LOST_AFTER", "60")
    loaded = ZetaSettings.load()
    assert (loaded.driver_heartbeat_interval, loaded.driver_lost_after) == (5.0, 60.0)
