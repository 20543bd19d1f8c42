"""A return value a trigger pushed with ``TaskSuccessEvent(xcoms=...)`` reads back as JSON text
(Airflow 3.3.2 encodes such an XCom once more); the provider's readers take it as the document."""

from __future__ import annotations

import json

import pytest

from airflow_provider_zeta.core.ledger import CorruptState
from airflow_provider_zeta.core.ready import parse_report, stored_document

REPORT = {"source": "alpha", "task_id": "p.deploy_alpha", "incarnation": 2, "token": "tok", "output_path": "/out", "rows": 7}


def test_a_report_pushed_by_the_trigger_reads_as_the_report_the_task_returns():
    assert parse_report(stored_document(json.dumps(REPORT)), "alpha", "p.deploy_alpha") == parse_report(REPORT, "alpha", "p.deploy_alpha")


def test_a_document_is_returned_as_it_is():
    assert stored_document(REPORT) is REPORT
    assert stored_document(None) is None


def test_text_that_is_not_json_stays_text_and_is_refused_as_a_report():
    assert stored_document("not json") == "not json"
    with pytest.raises(CorruptState, match="is str, not a report"):
        parse_report(stored_document("not json"), "alpha", "p.deploy_alpha")
