"""What a PySpark job launched by ``ZetaSparkJobOperator`` sees of the provider.

Inside the job::

    from airflow_provider_zeta.runtime import zeta_context

    ctx = zeta_context()
    df = build_rows(spark, ctx.ds)
    df.write.parquet(ctx.output_path)      # this attempt's own staging directory
    ctx.report(rows=df.count())            # recorded in the ledger, returned as the task's XCom
    ctx.checkpoint()                       # "I made progress now" (shown as last checkpoint age)

The job never commits, publishes or deletes anything (G8): it writes under ``output_path`` and
reports. The driver bootstrap (``airflow_provider_zeta.runtime.driver``) installs the context
before it runs the job and records what the job reports in the ledger.

This package never imports Airflow: a driver launched from a task inherits an environment in
which ``import airflow`` fails.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ZetaContext", "zeta_context", "NotInZetaDriver"]


class NotInZetaDriver(RuntimeError):
    """``zeta_context()`` was called outside a driver launched by ``ZetaSparkJobOperator``."""


@dataclass
class ZetaContext:
    """The job's view of its attempt. Identity fields are read-only by convention."""

    output_path: str  # URL of this attempt's staging directory; write the job's output here
    source: str  # the source name (pipeline) or task id
    dag_id: str
    run_id: str
    task_id: str
    map_index: int
    incarnation: int
    token: str  # this attempt's token; stamped on the ledger, staging path and spark-submit conf (and the default app name)
    logical_date: str | None  # ISO-8601, None for a run without a logical date
    ds: str | None  # YYYY-MM-DD of the logical date
    params: dict[str, Any] = field(default_factory=dict)
    # The run's rendered partition (zeta_pipeline's ``partition``), e.g. "ds=2026-06-01/hour=13";
    # None for a deploy task given no partition spec.
    partition: str | None = None
    _on_change: Callable[[], None] | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    rows: int | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    checkpoints: int = 0
    last_checkpoint_at: float | None = None
    files: dict[str, int] | None = None  # set by the driver at finish: what the job staged

    def _record_staged_files(self) -> None:
        """List what the job left under ``output_path`` (relative name -> size in bytes).

        Called by the driver once the job returned, before it writes ``succeeded``: the ledger then
        says exactly which output this attempt reported, and the completed point publishes the
        staging only if it still matches (a deleted or altered staging directory is never published
        as an empty or different source).
        """
        from airflow_provider_zeta.storage import StateStorage

        self.files = StateStorage.from_url(self.output_path).file_sizes("")

    def report(self, rows: int | None = None, **metrics: Any) -> None:
        """Record the row count and any JSON-able metrics of this attempt's output."""
        with self._lock:
            if rows is not None:
                self.rows = int(rows)
            self.metrics.update(metrics)
        self._changed()

    def checkpoint(self, at: float | None = None) -> None:
        """Record that the job made durable progress now (or at epoch seconds ``at``)."""
        with self._lock:
            self.checkpoints += 1
            self.last_checkpoint_at = time.time() if at is None else float(at)
        self._changed()

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change()


_current: ZetaContext | None = None


def zeta_context() -> ZetaContext:
    """The context of the running attempt; raises ``NotInZetaDriver`` outside one."""
    if _current is None:
        raise NotInZetaDriver(
            "zeta_context() is only available inside a job launched by ZetaSparkJobOperator "
            "(the driver bootstrap installs it). To run the job by hand, build a ZetaContext "
            "yourself and pass it to your code."
        )
    return _current


def _install(context: ZetaContext | None) -> None:
    global _current
    _current = context
