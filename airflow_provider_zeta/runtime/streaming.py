"""Automatic checkpoints from Structured Streaming: a ``StreamingQueryListener`` in every driver.

Every progress event of a streaming query (posted after a micro-batch ran and its offsets and
commit were written to the query's checkpoint location) records a checkpoint in the attempt's
ledger, exactly as ``zeta_context().checkpoint()`` does. Idle events (no new data) are not progress
and record nothing: a query that stops committing ages, whatever the reason.

The driver bootstrap runs the user's file unchanged, so the SparkSession does not exist when the
bootstrap starts. ``SessionWatcher`` waits in a daemon thread until the job has created one (only
looking once ``pyspark.sql`` has been imported by the job: a job without Spark never imports it),
registers the listener once, and ends. Queries started before the registration are covered from
their next progress event on, since listeners receive the events of every query of the session.

Like the rest of ``runtime``, this module imports no Airflow.
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from typing import Any, Callable

#: How often the watcher looks for the job's SparkSession until it finds one.
SESSION_POLL_SECONDS = 0.5


def _make_listener(on_progress: Callable[[Any], None]) -> Any:
    from pyspark.sql.streaming import StreamingQueryListener

    class ZetaCheckpointListener(StreamingQueryListener):
        """Records a checkpoint for every committed micro-batch of any query of the session."""

        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            try:
                on_progress(event.progress)
            except Exception:  # a listener error must never reach the query
                traceback.print_exc()

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            pass

    return ZetaCheckpointListener()


def _active_session() -> Any | None:
    module = sys.modules.get("pyspark.sql.session")
    if module is None:
        return None
    session_class = module.SparkSession
    session = getattr(session_class, "_instantiatedSession", None)
    if session is None:
        try:
            session = session_class.getActiveSession()
        except Exception:
            session = None
    return session


class SessionWatcher:
    """Registers the checkpoint listener on the job's SparkSession once it exists."""

    def __init__(self, checkpoint: Callable[[], None], stopped: threading.Event) -> None:
        self._checkpoint = checkpoint
        self._stopped = stopped
        self.registered = threading.Event()
        self._thread = threading.Thread(target=self._run, name="zeta-streaming-listener", daemon=True)

    def start(self) -> SessionWatcher:
        self._thread.start()
        return self

    def _on_progress(self, progress: Any) -> None:
        self._checkpoint()

    def _run(self) -> None:
        while not self._stopped.is_set():
            session = _active_session()
            if session is not None:
                try:
                    session.streams.addListener(_make_listener(self._on_progress))
                    self.registered.set()
                    print("[zeta] streaming checkpoints: listener registered", file=sys.stderr, flush=True)
                except Exception:
                    traceback.print_exc()
                return
            time.sleep(SESSION_POLL_SECONDS)
