"""The harness sends a REST request again when SQLite answered "database is locked" (its
transaction rolled back: nothing was written), and only then (such 500s of POST /backfills and POST /dagRuns
happen right after a scheduler restart)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from zeta_harness.cluster import AirflowCluster, ClusterError

LOCKED = {"detail": {"reason": "Unknown error", "orig_error": "database is locked", "message": "..."}}
OTHER = {"detail": {"reason": "Unknown error", "orig_error": "no such table: dag_run", "message": "..."}}


def serve(answers: list[tuple[int, dict]], delay_s: float = 0.0, get: Callable[[str], tuple[int, dict]] | None = None):
    """A local server answering POSTs with ``answers`` in order, the first after ``delay_s``, and
    GETs with ``get(path)``; returns (server, received bodies)."""
    received: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's naming)
            received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            if len(received) == 1:
                time.sleep(delay_s)
            self._answer(*answers.pop(0))

        def do_GET(self):  # noqa: N802
            assert get is not None
            self._answer(*get(self.path))

        def _answer(self, status: int, body: dict) -> None:
            payload = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, received


@pytest.fixture
def cluster(tmp_path):
    cluster = AirflowCluster(Path(__file__).parent, home=tmp_path)
    cluster._token = "test-token"
    return cluster


def test_a_request_refused_with_database_is_locked_is_sent_again(cluster):
    server, received = serve([(500, LOCKED), (500, LOCKED), (200, {"dag_run_id": "r1"})])
    try:
        cluster.api_url = f"http://127.0.0.1:{server.server_address[1]}"
        assert cluster.api("POST", "/dags/d/dagRuns", {"conf": {}})["dag_run_id"] == "r1"
        assert received == [{"conf": {}}] * 3
    finally:
        server.shutdown()


def test_another_server_error_is_raised_at_once(cluster):
    server, received = serve([(500, OTHER), (200, {"dag_run_id": "r1"})])
    try:
        cluster.api_url = f"http://127.0.0.1:{server.server_address[1]}"
        with pytest.raises(ClusterError, match="HTTP 500"):
            cluster.api("POST", "/dags/d/dagRuns", {"conf": {}})
        assert len(received) == 1
    finally:
        server.shutdown()


def test_a_request_that_waited_out_the_busy_timeout_is_still_sent_again(cluster, monkeypatch):
    """make demo's first POST /dagRuns once waited the whole busy timeout on the API server (whose audit-log
    commit blocks its event loop while SQLite waits) and then answered "database is locked"; the
    retry budget had been spent by that one wait, so the demo failed instead of sending it again."""
    import zeta_harness.cluster as cluster_module

    monkeypatch.setattr(cluster_module, "SQLITE_BUSY_TIMEOUT_S", 1)
    server, received = serve([(500, LOCKED), (200, {"dag_run_id": "r1"})], delay_s=1.3)
    try:
        cluster.api_url = f"http://127.0.0.1:{server.server_address[1]}"
        assert cluster.api("POST", "/dags/d/dagRuns", {"conf": {}})["dag_run_id"] == "r1"
        assert len(received) == 2
    finally:
        server.shutdown()


def test_waiting_for_a_dag_waits_through_its_404_until_it_is_parsed(cluster):
    """The dag-processor parses one file at a time, so right after a cluster start one DAG may
    answer 200 while zeta_cleanup still answers 404; the harness once took that 404 body for the DAG
    and failed two cleanup tests instead of waiting."""
    asked: list[str] = []

    def answer(path: str) -> tuple[int, dict]:
        asked.append(path)
        if path.startswith("/api/v2/importErrors"):
            return 200, {"import_errors": [], "total_entries": 0}
        if asked.count("/api/v2/dags/zeta_cleanup") < 3:
            return 404, {"detail": "The Dag with dag_id: `zeta_cleanup` was not found"}
        return 200, {"dag_id": "zeta_cleanup", "is_paused": False}

    server, _ = serve([], get=answer)
    try:
        cluster.api_url = f"http://127.0.0.1:{server.server_address[1]}"
        assert cluster.wait_for_dag("zeta_cleanup", timeout=30)["dag_id"] == "zeta_cleanup"
        assert asked.count("/api/v2/dags/zeta_cleanup") == 3
    finally:
        server.shutdown()


def test_a_dag_that_never_appears_times_out_naming_the_apis_last_answer(cluster):
    def answer(path: str) -> tuple[int, dict]:
        if path.startswith("/api/v2/importErrors"):
            return 200, {"import_errors": [], "total_entries": 0}
        return 404, {"detail": "The Dag with dag_id: `no_such_dag` was not found"}

    server, _ = serve([], get=answer)
    try:
        cluster.api_url = f"http://127.0.0.1:{server.server_address[1]}"
        with pytest.raises(ClusterError, match="last answer.*no_such_dag` was not found"):
            cluster.wait_for_dag("no_such_dag", timeout=2)
    finally:
        server.shutdown()
