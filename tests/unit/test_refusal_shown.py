"""A deploy try the provider refused (a source cleared without its sensor after the run's wait
ended) is shown beside the source on the monitoring page, to every reader of the run, only while
that try is the task's current one and failed (``core.incarnation.current_refusal``)."""

from __future__ import annotations

import pytest

from airflow_provider_zeta.core.incarnation import current_refusal, refusal_record
from airflow_provider_zeta.core.monitor import RunFacts, Section, TaskRow, run_status
from airflow_provider_zeta.plugins.api import run_json
from airflow_provider_zeta.plugins.page import render_page, render_sections

REASON = "p.deploy_web was cleared without p.ready_to_close: clear both with downstream"


def test_the_refusal_of_the_current_failed_try_is_shown():
    record = refusal_record(3, "cleared_without_downstream", REASON)
    assert current_refusal(record, "failed", 3) == f"[cleared_without_downstream] {REASON}"


@pytest.mark.parametrize(
    ("value", "state", "try_number"),
    [
        (refusal_record(3, "cleared_without_downstream", REASON), "failed", 4),  # a later try, cleared again
        (refusal_record(3, "cleared_without_downstream", REASON), "success", 3),
        (refusal_record(3, "cleared_without_downstream", REASON), "running", 3),
        (None, "failed", 3),
        ({"try_number": 3}, "failed", 3),  # no reason
        ("[cleared_without_downstream] text", "failed", 3),  # not a record
    ],
)
def test_nothing_is_shown_for_another_try_another_state_or_another_shape(value, state, try_number):
    assert current_refusal(value, state, try_number) is None


def _page_for(log_access: bool, refusal: str | None) -> tuple[dict, str]:
    operator = "ZetaSparkJobOperator"
    tasks = [
        TaskRow("p.deploy_web", operator, "failed", -1, 3, refusal),
        TaskRow("p.ready_to_close", "ReadyToCloseSensor", "success", -1, 1),
    ]
    status = run_status(RunFacts("sales", "manual__1", "failed", tasks), now=0.0, lost_after=60.0)
    row = {"logical_date": None, "run_after": None, "start_date": None, "end_date": None}
    shown = run_json(status, row, 0.0, log_access)
    empty = {"total": 0, "limit": 10, "offset": 0, "runs": []}
    html = render_page(render_sections({Section.RUNNING: {"total": 1, "limit": 10, "offset": 0, "runs": [shown]},
                                        Section.RETAINED: empty, Section.ENDED: empty}, {}, 0.0))
    return shown, html


@pytest.mark.parametrize("log_access", [True, False])
def test_the_page_shows_the_refusal_beside_its_source_to_every_reader(log_access):
    text = current_refusal(refusal_record(3, "cleared_without_downstream", REASON + " <b>x</b>"), "failed", 3)
    shown, html = _page_for(log_access, text)
    (source,) = shown["pipelines"][0]["sources"]
    assert source["refusal"] == text
    assert 'data-refusal="p.deploy_web"' in html and "cleared without p.ready_to_close" in html
    assert "<b>x</b>" not in html and "&lt;b&gt;x&lt;/b&gt;" in html


def test_no_refusal_no_refusal_element():
    _, html = _page_for(True, None)
    assert "data-refusal" not in html
