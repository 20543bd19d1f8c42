"""Automatic checkpoints from Structured Streaming: a ``StreamingQueryListener`` in every driver.

Every progress event of a streaming query (posted after a micro-batch ran and its offsets and
commit were written to the query's checkpoint location) records a checkpoint in the attempt's
ledger, exactly as ``zeta_context().checkpoint()`` does. Idle events count too, as a sign of life:
Spark posts one when the query polled its sources, found no new data and had nothing to commit
(at most every ``spark.sql.streaming.noDataProgressEventInterval``, 10 s by default), so a query
that is healthy but has no data stays fresh. A query that stops committing *and* stops polling —
a hung micro-batch, a stuck source — posts neither, and ages.

The driver bootstrap runs the user's file unchanged, so the SparkSession does not exist when the
bootstrap starts. ``SessionWatcher`` waits in a daemon thread until the job has created one (only
looking once ``pyspark.sql`` has been imported by the job: a job without Spark never imports it),
registers the listener once, and ends. Queries started before the registration are covered from
their next progress event on, since listeners receive the events of every query of the session.

Spark Connect (a remote session, ``SparkSession.builder.remote(...)`` or ``SPARK_REMOTE``) is not
supported: the watcher prints one line and registers nothing; such a job records checkpoints only
through ``zeta_context().checkpoint()``.

Like the rest of ``runtime``, this module imports no Airflow.
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

#: How often the watcher looks for the job's SparkSession until it finds one.
SESSION_POLL_SECONDS = 0.5


def _make_listener(on_progress: Callable[[Any], None]) -> Any:
    from pyspark.sql.streaming import StreamingQueryListener

    class ZetaCheckpointListener(StreamingQueryListener):
        """Records a checkpoint for every committed micro-batch, and every idle poll (no new data),
        of any query of the session."""

        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            try:
                on_progress(event.progress)
            except Exception:  # a listener error must never reach the query
                traceback.print_exc()

        def onQueryIdle(self, event: Any) -> None:
            try:
                on_progress(event)  # alive, polling, nothing to commit: a sign of life
            except Exception:
                traceback.print_exc()

        def onQueryTerminated(self, event: Any) -> None:
            pass

    return ZetaCheckpointListener()


def is_remote_session(session: Any) -> bool:
    """A Spark Connect session (its class lives in ``pyspark.sql.connect``), or Connect mode."""
    if type(session).__module__.startswith("pyspark.sql.connect"):
        return True
    try:
        from pyspark.sql.utils import is_remote
    except ImportError:  # older PySpark: no Connect-only mode to ask about
        return False
    try:
        return bool(is_remote())
    except Exception:
        return False


def register_listener(session: Any, on_progress: Callable[[Any], None]) -> bool:
    """Add the checkpoint listener to ``session``; ``False`` (after one line on stderr) for a remote
    (Spark Connect) session, where it is not supported."""
    if is_remote_session(session):
        print(
            "[zeta] streaming checkpoints: Spark Connect session, listener not supported; "
            "call zeta_context().checkpoint() to record progress",
            file=sys.stderr,
            flush=True,
        )
        return False
    session.streams.addListener(_make_listener(on_progress))
    print("[zeta] streaming checkpoints: listener registered", file=sys.stderr, flush=True)
    return True


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
        """Start the watching thread; returns the watcher itself."""
        self._thread.start()
        return self

    def _on_progress(self, progress: Any) -> None:
        self._checkpoint()

    def _run(self) -> None:
        while not self._stopped.is_set():
            session = _active_session()
            if session is not None:
                try:
                    if register_listener(session, self._on_progress):
                        self.registered.set()
                except Exception:
                    traceback.print_exc()
                return
            time.sleep(SESSION_POLL_SECONDS)
