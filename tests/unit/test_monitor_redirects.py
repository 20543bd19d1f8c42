"""Where the "Spark driver" link may redirect: core.monitor.redirect_target / history_link."""

from __future__ import annotations

import pytest

from airflow_provider_zeta.core.monitor import history_link, redirect_target, safe_link

LAUNCHER = ["worker-1", "10.0.0.5"]
ALLOWED = ["spark-ui.internal"]


@pytest.mark.parametrize(
    "url,target,rule",
    [
        ("http://worker-1:4040", "http://worker-1:4040", "launcher_host"),
        ("http://WORKER-1:4040/jobs/", "http://WORKER-1:4040/jobs/", "launcher_host"),
        ("http://10.0.0.5:4040", "http://10.0.0.5:4040", "launcher_host"),
        ("https://spark-ui.internal/proxy/app-1", "https://spark-ui.internal/proxy/app-1", "allow_listed"),
        ("http://evil.example:4040", None, "host_not_allowed"),
        ("http://worker-1.evil.example:4040", None, "host_not_allowed"),
        ("http://evil.example@worker-1:4040", None, "not_plain_http"),  # userinfo trick
        ("http://worker-1\\@evil.example", None, "not_plain_http"),
        ("javascript:alert(1)", None, "not_plain_http"),
        ("//evil.example", None, "not_plain_http"),
        (["http://worker-1:4040"], None, "not_plain_http"),  # malformed ledger
        (4040, None, "not_plain_http"),
        (None, None, "no_url"),
    ],
)
def test_redirects_go_only_to_the_launcher_host_or_the_allow_list(url, target, rule):
    assert redirect_target(url, LAUNCHER, ALLOWED) == (target, rule)


def test_nothing_is_allowed_without_a_recorded_host_or_an_allow_list():
    assert redirect_target("http://worker-1:4040", [], []) == (None, "host_not_allowed")


def test_the_history_server_link_takes_only_a_plain_application_id():
    assert history_link("http://history:18080/", "app-20260101000000-0001") == "http://history:18080/history/app-20260101000000-0001/"
    assert history_link("http://history:18080", "local-1700000000000") == "http://history:18080/history/local-1700000000000/"
    assert history_link("", "app-1") is None and history_link(None, "app-1") is None
    for bad in ("..", "../../admin", "app-1/../../x", "app?x=1", "", None, 42, ["app-1"]):
        assert history_link("http://history:18080", bad) is None, bad


def test_safe_link_drops_credentials_and_odd_characters():
    assert safe_link("http://host:4040") == "http://host:4040"
    for bad in ("http://u:p@host", 'http://x/"><script>', "http://a b", "ftp://x", None, 1):
        assert safe_link(bad) is None, bad


def test_history_server_setting_must_be_a_plain_url():
    from airflow_provider_zeta.settings import history_server_url

    assert history_server_url(" http://history:18080/ ") == "http://history:18080"
    assert history_server_url("") == ""
    with pytest.raises(ValueError, match="spark_history_server_url"):
        history_server_url("javascript:alert(1)")
