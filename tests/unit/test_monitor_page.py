"""The page renders what the API returns, escaped, with per-section pagination."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from airflow_provider_zeta.core.monitor import Section
from airflow_provider_zeta.plugins.page import render_page, render_sections


def run(run_id="manual__<script>alert(1)</script>", phase_text="ready 1 of 3"):
    return {
        "dag_id": "sales",
        "run_id": run_id,
        "run_state": "running",
        "pipelines": [
            {
                "pipeline": "p",
                "phase": "ready",
                "phase_text": phase_text,
                "ready": 1,
                "total": 3,
                "outcome": None,
                "sources": [
                    {
                        "source": "emea",
                        "task_id": "p.deploy_emea",
                        "task_state": "deferred",
                        "driver": "running",
                        "token": "abc",
                        "heartbeat_age_text": "2s",
                        "checkpoint_age_text": "1s",
                        "rows": None,
                        "spark_ui_url": None,
                        "error": "<b>boom</b>",
                        "driver_link": "/zeta/driver?dag_id=sales&run_id=x&task_id=p.deploy_emea&map_index=-1",
                    }
                ],
            }
        ],
    }


def sections(total=1, offset=0, runs=None):
    empty = {"total": 0, "limit": 10, "offset": 0, "runs": []}
    return {
        Section.RUNNING: {"total": total, "limit": 10, "offset": offset, "runs": runs if runs is not None else [run()]},
        Section.RETAINED: empty,
        Section.ENDED: empty,
    }


def test_values_are_escaped_and_the_phase_and_ready_count_shown():
    html = render_page(render_sections(sections(), {}, 0.0))
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<b>boom</b>" not in html
    assert "ready 1 of 3" in html and 'href="driver?dag_id=sales' in html
    assert html.count("<script>") == 1  # only the refresher


def test_each_section_paginates_on_its_own():
    html = render_sections(sections(total=25, offset=10), {"dag_id": "sales"}, 0.0)
    assert "11&ndash;20 of 25" in html
    assert 'href="ui?dag_id=sales&amp;running_offset=0"' in html
    assert 'href="ui?dag_id=sales&amp;running_offset=20"' in html
    assert "Retained for cleanup (0)" in html


def test_without_a_driver_link_no_link_is_rendered():
    data = sections()
    for section in data.values():
        for found in section["runs"]:
            found["pipelines"][0]["sources"][0]["driver_link"] = None
    html = render_sections(data, {}, 0.0)
    assert 'href="driver?' not in html and "ready 1 of 3" in html


MARKUP = '<img src=x onerror=alert(1)>"\''
SOURCE_FIELDS = ["source", "task_id", "task_state", "driver", "token", "heartbeat_age_text", "checkpoint_age_text", "rows", "error"]
RUN_FIELDS = ["dag_id", "run_id", "run_state"]
PIPELINE_FIELDS = ["pipeline", "phase", "phase_text"]


@pytest.mark.parametrize("where,field", [("source", f) for f in SOURCE_FIELDS] + [("run", f) for f in RUN_FIELDS] + [("pipeline", f) for f in PIPELINE_FIELDS] + [("run", "error")])
def test_every_rendered_field_is_escaped(where, field):
    data = run()
    target = {"run": data, "pipeline": data["pipelines"][0], "source": data["pipelines"][0]["sources"][0]}[where]
    target[field] = MARKUP
    html = render_page(render_sections(sections(runs=[data]), {}, 0.0))
    assert "<img" not in html, (where, field)
    assert "&lt;img src=x onerror=alert(1)&gt;" in html, (where, field)
    assert html.count("<script>") == 1


def test_a_driver_link_with_markup_is_escaped():
    data = run()
    data["pipelines"][0]["sources"][0]["driver_link"] = '/zeta/driver?x="><img src=x>'
    html = render_sections(sections(runs=[data]), {}, 0.0)
    assert "<img" not in html and "&quot;&gt;&lt;img" in html


# Markup that would open an element, an event-handler attribute (closing the attribute it lands in)
# and close the table cell, were it printed as it is.
HOSTILE = "<script>alert(1)</script>\"onload=alert(2) x='</td>"
PAGE_FIELDS = (
    [("run", f) for f in ("dag_id", "run_id", "run_state", "error")]
    + [("pipeline", f) for f in ("pipeline", "phase", "phase_text", "ready", "total")]
    + [("source", f) for f in ("source", "task_id", "task_state", "driver", "token", "heartbeat_age_text", "checkpoint_age_text", "rows", "error", "driver_link")]
    + [("scope", "dag_id"), ("scope", "run_id"), ("query", "dag_id")]
)


class _Markup(HTMLParser):
    """What a browser builds of the page: its elements (tag and attribute names, in order) and
    every text and attribute value, decoded."""

    def __init__(self, page: str):
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple] = []
        self.values: list[str] = []
        self.feed(page)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.elements.append(("<", tag, tuple(name for name, _ in attrs)))
        self.values += [value or "" for _, value in attrs]

    def handle_endtag(self, tag):
        self.elements.append(("/", tag))

    def handle_data(self, data):
        self.values.append(data)


def _page_with(value: str, fields) -> str:
    data = run(run_id="manual__1")
    data["error"] = "e"
    data["pipelines"][0]["sources"][0]["spark_ui_url"] = "http://spark:4040"
    target = {"run": data, "pipeline": data["pipelines"][0], "source": data["pipelines"][0]["sources"][0]}
    scope, query = {"dag_id": "sales", "run_id": "manual__1"}, {"dag_id": "sales"}
    for where, field in fields:
        shown = f"/zeta/driver?x={value}" if field == "driver_link" else value
        {**target, "scope": scope, "query": query}[where][field] = shown
    # Ends at 20 of 25 from offset 10: both pager links are rendered (with the query in them).
    return render_page(render_sections(sections(total=25, offset=10, runs=[data]), query, 0.0, **scope))


@pytest.mark.parametrize("where,field", PAGE_FIELDS + [("all", "fields")], ids=lambda v: v)
def test_a_hostile_value_in_any_shown_field_is_text_never_markup(where, field):
    """Autoescaping: with the hostile value in the field (or in every field at once), the page has
    exactly the elements and attributes it has with a plain value, and the value is shown whole as
    text or inside an attribute value (URLs: percent-encoded or as given)."""
    fields = PAGE_FIELDS if where == "all" else [(where, field)]
    plain, hostile = _Markup(_page_with("plain", fields)), _Markup(_page_with(HOSTILE, fields))
    assert hostile.elements == plain.elements, (where, field)
    page = _page_with(HOSTILE, fields)
    assert "<script>alert" not in page and '"onload=' not in page and "'</td>" not in page, (where, field)
    if where != "query":  # the query only reaches the pager links, percent-encoded
        assert any(HOSTILE in value for value in hostile.values), (where, field)
