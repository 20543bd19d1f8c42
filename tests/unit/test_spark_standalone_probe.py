"""The readiness probe of the test harness's Spark standalone cluster
(``zeta_harness/spark_standalone.py``): a master whose web UI is up but not yet answering ``/json/``
with JSON counts as not ready, not as a failed start (the UI may serve its HTML page to
``/json/`` a second before the master is elected leader, which once failed the real-Spark test with a
JSONDecodeError)."""

from __future__ import annotations

import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from zeta_harness.spark_standalone import SparkStandaloneCluster


def _serving(bodies: list[bytes]):
    """A local server answering each request with the next body (the last one from then on)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = bodies.pop(0) if len(bodies) > 1 else bodies[0]
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_a_master_ui_that_answers_json_with_its_html_page_is_not_ready_yet():
    server = _serving([b"<!DOCTYPE html><html><body>Spark Master</body></html>", b'{"aliveworkers": 1}'])
    cluster = SparkStandaloneCluster()
    try:
        cluster.ui_port = server.server_address[1]
        assert cluster.alive_workers() == 0  # the HTML page: not up yet
        assert cluster.alive_workers() == 1  # then the JSON status
    finally:
        server.shutdown()
        server.server_close()
        shutil.rmtree(cluster.work_dir, ignore_errors=True)
