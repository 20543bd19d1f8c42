"""Writes to Airflow's task state store for records that must live as long as their run.

Airflow 3.3's task state store expires a value after ``[state_store] default_retention_days``
unless the write says otherwise, and ``airflow state-store clean`` deletes expired values. The
provider's records (a deploy's attempt records, a publish's fence and announcement, the
ready-to-close progress, a cleanup's record and run nonce) are its memory across restarts: one that
expired while its run still exists would make a long streaming job launch again, a publish announce
twice, or a cleanup forget what it must delete. They are written without expiry; the run's deletion
still removes them with its task instances.
"""

from __future__ import annotations

import inspect
from typing import Any


def set_kept(store: Any, key: str, value: Any) -> None:
    """``store.set(key, value)`` without expiry (``NEVER_EXPIRE``) where the store takes a retention."""
    # Public (airflow.sdk.__all__), but missing from the names airflow.sdk declares to type checkers.
    from airflow.sdk import NEVER_EXPIRE  # type: ignore[attr-defined]

    try:
        accepts = "retention" in inspect.signature(store.set).parameters
    except (TypeError, ValueError):
        accepts = False
    if accepts:
        store.set(key, value, retention=NEVER_EXPIRE)
    else:  # a store without per-key retention (keys there do not expire)
        store.set(key, value)
