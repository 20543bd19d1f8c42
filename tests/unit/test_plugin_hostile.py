"""A job that writes a hostile attempt tree cannot break the monitoring plugin for anyone.

The plugin's real FastAPI app (``plugins.api.build_app``) is served by Starlette's test client over
Airflow's own models on a SQLite file; only authentication is replaced (every DAG readable). The
job's attempt tree is made here on disk: a ledger with non-finite numbers, wrong types, deep
nesting, a huge error string, a malformed Spark UI URL, a symlink, a hard link, a FIFO. Oracles:
the HTTP status of every route, what the rendered page and JSON contain (the job's secret text must
not appear), the other run still listed, and wall-clock bounds.
"""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from airflow_provider_zeta.core.monitor import Section
from airflow_provider_zeta.core.paths import attempt_dir
from airflow_provider_zeta.storage import StateStorage
from tests.unit.test_monitor_listing_cost import DAG, TASK, engine, make_runs  # noqa: F401 (fixture)

SECRET = "Tr0ub4dor-zeta-SECRET-9f3a"


class Everything:
    """An auth manager that lets the test user read every DAG, its runs and its task logs."""

    def get_authorized_dag_ids(self, user, method="GET", **kwargs):
        return {DAG}

    def batch_is_authorized_dag(self, requests, user=None, **kwargs):
        return True

    def is_authorized_dag(self, **kwargs):
        return True


def plugin_test_client(engine, tmp_path, monkeypatch):  # noqa: F811
    """The plugin's real FastAPI app over Airflow's models on a SQLite file and a state root with
    three live runs (``make_runs``), authentication replaced by one that allows everything. The
    client carries ``root`` (the state root's path), ``state`` (its storage) and ``live`` (run ids)."""
    import airflow.api_fastapi.app as airflow_app
    from airflow.api_fastapi.common.db import common
    from airflow.api_fastapi.core_api import security
    from fastapi.testclient import TestClient
    from sqlalchemy.orm import Session

    root = tmp_path / "state"
    state = StateStorage.from_url(str(root))
    live = make_runs(engine, state, 3)
    monkeypatch.setenv("AIRFLOW__ZETA__STATE_ROOT", str(root))
    monkeypatch.setattr(airflow_app, "get_auth_manager", lambda: Everything())
    monkeypatch.setattr(security, "requires_access_dag", lambda *args, **kwargs: (lambda: None))
    from airflow_provider_zeta.plugins.api import build_app

    app = build_app()

    def session():
        with Session(engine) as opened:
            yield opened

    app.dependency_overrides[security.get_user] = lambda: object()
    app.dependency_overrides[common._get_session] = session
    with TestClient(app, raise_server_exceptions=False) as test_client:
        test_client.root, test_client.state, test_client.live = root, state, live
        yield test_client


@pytest.fixture
def client(engine, tmp_path, monkeypatch):  # noqa: F811
    yield from plugin_test_client(engine, tmp_path, monkeypatch)


def ledger_path(client, kind: str = "running"):
    return client.root / attempt_dir(DAG, client.live[kind], TASK, -1, f"tok{kind}") / "ledger.json"


def good_ledger(client, kind: str = "running") -> dict:
    return json.loads(ledger_path(client, kind).read_bytes())


def write_raw(client, text: str, kind: str = "running") -> None:
    path = ledger_path(client, kind)
    path.unlink()
    path.write_text(text)


def with_field(client, field: str, raw_value: str) -> str:
    """The running attempt's ledger with ``field`` replaced by ``raw_value`` (JSON source text)."""
    data = good_ledger(client)
    data[field] = "__PLACEHOLDER__"
    return json.dumps(data).replace('"__PLACEHOLDER__"', raw_value)


def routes(client):
    run = client.live["running"]
    query = {"dag_id": DAG, "run_id": run, "task_id": TASK, "map_index": -1}
    return {
        "ui": client.get("/ui"),
        "ui_run": client.get("/ui", params={"dag_id": DAG, "run_id": run}),
        "runs": client.get("/api/runs", params={"section": "running"}),
        "run": client.get("/api/run", params={"dag_id": DAG, "run_id": run}),
        "driver": client.get("/driver", params=query, follow_redirects=False),
    }


def assert_error_on_its_own_row(client, answers, expect_error: bool = True) -> dict:
    for name, answer in answers.items():
        assert answer.status_code in (200, 307), (name, answer.status_code, answer.text[:500])
        assert SECRET not in answer.text, name
    (running,) = answers["runs"].json()["runs"]
    assert running["run_id"] == client.live["running"]
    shown = running["pipelines"][0]["sources"][0] if running["pipelines"] else None
    if expect_error:
        assert running["error"] or (shown and shown["driver"] == "corrupt"), running
    # The rest of the page is fine: the retained run is listed with its pipeline.
    retained = client.get("/api/runs", params={"section": "retained"}).json()["runs"]
    assert [r["run_id"] for r in retained] == [client.live["retained"]] and retained[0]["pipelines"]
    assert client.live["retained"] in answers["ui"].text
    return running


HOSTILE_FIELDS = [
    ("heartbeat_at", "-Infinity"),
    ("heartbeat_at", "Infinity"),
    ("heartbeat_at", "NaN"),
    ("heartbeat_at", "1" + "0" * 400),
    ("heartbeat_at", '"-inf"'),
    ("heartbeat_at", "[1, 2]"),
    ("heartbeat_at", "null"),
    ("started_at", '"soon"'),
    ("started_at", "NaN"),
    ("rows", "1e400"),
    ("rows", "9" * 5000),
    ("checkpoints", '"many"'),
    ("last_checkpoint_at", "-Infinity"),
    ("beat", "{}"),
    ("token", "[]"),
    ("status", "42"),
    ("metrics", "[" * 100_000 + "]" * 100_000),
    ("error", "[" * 100_000 + "]" * 100_000),
    ("spark_ui_url", '"http://[worker-1]"'),
    ("spark_ui_url", '"http://[worker-1]:4040/' + SECRET + '"'),
    ("heartbeat_at", f'"{SECRET}"'),
    ("token", f'"{SECRET}"'),
]


@pytest.mark.parametrize("field,raw", HOSTILE_FIELDS, ids=[f"{f}={r[:20]}" for f, r in HOSTILE_FIELDS])
def test_a_hostile_ledger_value_is_an_error_on_its_own_row(client, field, raw):
    write_raw(client, with_field(client, field, raw))
    malformed_url = field == "spark_ui_url"
    running = assert_error_on_its_own_row(client, routes(client), expect_error=not malformed_url)
    source = running["pipelines"][0]["sources"][0]
    if malformed_url:  # the link is dropped, the rest of the ledger is shown
        assert source["driver"] == "running" and source["spark_ui_url"] is None, source
    else:
        assert source["driver"] == "corrupt", running


def test_a_deeply_nested_document_is_an_error_on_its_own_row(client):
    write_raw(client, "[" * 200_000 + "]" * 200_000)
    assert_error_on_its_own_row(client, routes(client))


def test_the_driver_error_text_is_never_shown_only_its_exception_class(client):
    data = good_ledger(client)
    data["status"] = "failed"
    data["error"] = f"ValueError: could not connect with password={SECRET} to db"
    write_raw(client, json.dumps(data))
    answers = routes(client)
    for name, answer in answers.items():
        assert answer.status_code in (200, 307), name
        assert SECRET not in answer.text and "could not connect" not in answer.text, name
    source = answers["run"].json()["pipelines"][0]["sources"][0]
    assert source["driver"] == "failed" and "ValueError" in source["error"] and "task log" in source["error"], source
    assert "ValueError" in answers["ui"].text


def test_a_huge_error_string_costs_no_time(client):
    """An error just under the ledger cap (3.5 MiB) is cut before anything looks at it: the five
    requests cost about what they cost with a short error (masking it first took seconds)."""

    def timed(error: str) -> float:
        data = good_ledger(client)
        data["status"], data["error"] = "failed", error
        write_raw(client, json.dumps(data))
        started = time.monotonic()
        answers = routes(client)
        elapsed = time.monotonic() - started
        for name, answer in answers.items():
            assert answer.status_code in (200, 307), name
            assert SECRET not in answer.text, name
        return elapsed

    timed("RuntimeError: short")  # warm up
    baseline = timed("RuntimeError: short")
    huge = timed("RuntimeError: " + ("password=" + SECRET + " ") * (int(3.5 * 1024 * 1024) // 37))
    assert huge < 2 * baseline + 1.0, f"five requests took {huge:.2f} s with a huge error, {baseline:.2f} s without"


def test_a_ledger_over_the_cap_is_not_read(client):
    from airflow_provider_zeta.core.monitor import MAX_LEDGER_BYTES

    data = good_ledger(client)
    data["metrics"] = {"padding": "x" * MAX_LEDGER_BYTES}
    write_raw(client, json.dumps(data))
    running = assert_error_on_its_own_row(client, routes(client))
    source = running["pipelines"][0]["sources"][0]
    assert source["driver"] == "corrupt" and "larger than" in source["error"], source


def outside_ledger(client, tmp_path) -> str:
    """A valid ledger of the running attempt outside the state root, with the secret as its error."""
    data = good_ledger(client)
    data["status"], data["error"] = "failed", f"{SECRET}Error: leaked"
    outside = tmp_path / "outside"
    outside.mkdir(exist_ok=True)
    target = outside / "ledger.json"
    target.write_text(json.dumps(data))
    return str(target)


def test_a_symlinked_ledger_is_not_read(client, tmp_path):
    target = outside_ledger(client, tmp_path)
    path = ledger_path(client)
    path.unlink()
    os.symlink(target, path)
    running = assert_error_on_its_own_row(client, routes(client))
    assert running["pipelines"][0]["sources"][0]["driver"] == "corrupt"


def test_a_symlinked_attempt_directory_is_not_read(client, tmp_path):
    target = outside_ledger(client, tmp_path)
    attempt = ledger_path(client).parent
    for name in os.listdir(attempt):
        os.unlink(attempt / name)
    attempt.rmdir()
    os.symlink(os.path.dirname(target), attempt)
    running = assert_error_on_its_own_row(client, routes(client))
    assert running["pipelines"][0]["sources"][0]["driver"] == "corrupt"


def test_a_hard_linked_ledger_is_not_read(client, tmp_path):
    target = outside_ledger(client, tmp_path)
    path = ledger_path(client)
    path.unlink()
    os.link(target, path)
    running = assert_error_on_its_own_row(client, routes(client))
    assert running["pipelines"][0]["sources"][0]["driver"] == "corrupt"


def unblock(fifo, worker: threading.Thread) -> None:
    """Let readers blocked on ``fifo`` go (a writer opens and closes it), so the test can end."""
    for _ in range(50):
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass  # no reader waiting right now
        worker.join(timeout=0.5)
        if not worker.is_alive():
            return


def test_a_fifo_ledger_never_blocks_a_request(client):
    path = ledger_path(client)
    path.unlink()
    os.mkfifo(path)
    answers: dict = {}
    worker = threading.Thread(target=lambda: answers.update(routes(client)), daemon=True)
    worker.start()
    worker.join(timeout=20)
    if worker.is_alive():
        unblock(path, worker)
        pytest.fail("a request blocked on a FIFO ledger")
    assert_error_on_its_own_row(client, answers)


def test_a_fifo_cleanup_record_never_blocks_a_request(client):
    records = client.root / "runs" / DAG
    found = [p for p in records.rglob("cleanup/*.json")]
    assert found
    found[0].unlink()
    os.mkfifo(found[0])
    answers: dict = {}
    worker = threading.Thread(target=lambda: answers.update(routes(client)), daemon=True)
    worker.start()
    worker.join(timeout=20)
    if worker.is_alive():
        unblock(found[0], worker)
        pytest.fail("a request blocked on a FIFO cleanup record")
    for name, answer in answers.items():
        assert answer.status_code in (200, 307), name


def test_every_section_of_the_page_answers_with_a_hostile_ledger(client):
    write_raw(client, with_field(client, "heartbeat_at", "-Infinity"))
    for section in Section:
        answer = client.get("/api/runs", params={"section": section.value})
        assert answer.status_code == 200, (section, answer.text[:300])
