"""Provider records outlive Airflow's task state retention, and a missing record is never taken
for "nothing was launched" while a driver of the task has left its ledger on the state root."""

from __future__ import annotations

import json
from datetime import timedelta

from airflow_provider_zeta.core.deploy import Action, decide
from airflow_provider_zeta.core.ledger import Ledger, LedgerStatus, attempt_record_key
from airflow_provider_zeta.core.paths import LEDGER_FILE
from airflow_provider_zeta.operators import spark_job
from airflow_provider_zeta.operators.spark_job import ZetaSparkJobOperator

from .test_deploy_operator import Store, _attempt, _context, state_root  # noqa: F401
from .test_deploy_table import observe


class RetentionStore(Store):
    """Keeps what Airflow's task state store would: the retention each key was written with."""

    def __init__(self):
        super().__init__()
        self.retention: dict[str, object] = {}

    def set(self, key, value, *, retention=None):
        self.retention[key] = retention
        super().set(key, value)


def test_the_attempt_record_and_the_heartbeat_observation_never_expire(state_root, tmp_path, monkeypatch):  # noqa: F811
    from airflow.sdk.execution_time.context import NEVER_EXPIRE

    from .test_deploy_operator import _launched_record

    store = RetentionStore()
    store.set(attempt_record_key(1), _launched_record().to_value(), retention=NEVER_EXPIRE)
    ledger = Ledger(token="tok", status=LedgerStatus.RUNNING, started_at=1.0, heartbeat_at=2.0)
    _attempt(state_root, "tok").mkdir(parents=True)
    (_attempt(state_root, "tok") / LEDGER_FILE).write_bytes(ledger.to_json())
    monkeypatch.setattr(spark_job, "stop_token_processes", lambda *a, **k: [])
    operator = ZetaSparkJobOperator(task_id="job", application="/x.py", deferrable=True)
    monkeypatch.setattr(operator, "defer", lambda **kw: None)
    operator.execute(_context(try_number=2, store=store))
    written = {key: store.retention[key] for key in store.retention if key != attempt_record_key(1)}
    assert spark_job.HEARTBEAT_SEEN_KEY in written, written
    assert all(value is NEVER_EXPIRE for value in written.values()), written
    assert NEVER_EXPIRE == timedelta.max


def test_a_missing_record_with_a_claimed_attempt_on_disk_is_not_a_fresh_submit():
    decision = decide(observe(claimed_without_record=("tok-old",)))
    assert decision.action is not Action.FRESH_LAUNCH, decision
    assert decision.action is Action.FAIL and "tok-old" in decision.reason


def test_the_operator_sees_the_claimed_attempt_when_its_record_is_gone(state_root, monkeypatch):  # noqa: F811
    # The record expired (or was deleted) while the driver, launched days ago, still runs.
    ledger = Ledger(token="tok-old", status=LedgerStatus.RUNNING, started_at=1.0, heartbeat_at=2.0)
    _attempt(state_root, "tok-old").mkdir(parents=True)
    (_attempt(state_root, "tok-old") / LEDGER_FILE).write_bytes(ledger.to_json())
    launched = []
    operator = ZetaSparkJobOperator(task_id="job", application="/x.py")
    monkeypatch.setattr(operator, "_launch", lambda *a, **k: launched.append(a))
    try:
        operator.execute(_context(try_number=3, store=Store()))
    except Exception as error:
        assert "tok-old" in str(error)
    assert launched == []
    assert json.loads((_attempt(state_root, "tok-old") / LEDGER_FILE).read_text())["status"] == "running"
