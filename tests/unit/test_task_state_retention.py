"""Every provider record in Airflow's task state store is written without expiry.

Airflow 3.3 expires task state after ``[state_store] default_retention_days`` unless a write says
otherwise: a deploy's attempt record, a publish's fence and announcement, the ready-to-close
progress and a cleanup's record must live as long as their run (``task_state.set_kept``).
"""

from __future__ import annotations

import ast
from datetime import timedelta
from pathlib import Path

from airflow_provider_zeta.task_state import set_kept

PACKAGE = Path(__file__).resolve().parents[2] / "airflow_provider_zeta"


class RetentionStore:
    """Airflow 3.3's task state store signature: ``set(key, value, retention=None)``."""

    def __init__(self):
        self.writes = []

    def set(self, key, value, retention=None):
        self.writes.append((key, value, retention))


class PlainStore:
    def __init__(self):
        self.writes = []

    def set(self, key, value):
        self.writes.append((key, value))


def test_set_kept_asks_for_no_expiry_where_the_store_takes_a_retention():
    from airflow.sdk.execution_time.context import NEVER_EXPIRE

    store, plain = RetentionStore(), PlainStore()
    set_kept(store, "k", {"v": 1})
    set_kept(plain, "k", 2)
    assert store.writes == [("k", {"v": 1}, NEVER_EXPIRE)] and NEVER_EXPIRE == timedelta.max
    assert plain.writes == [("k", 2)]


def test_no_module_writes_task_state_without_set_kept():
    """A direct ``<something store>.set(...)`` call anywhere but ``task_state.py`` would expire."""
    direct = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "task_state.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "set"):
                continue
            target = ast.unparse(node.func.value)
            if "store" in target.lower():
                direct.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {ast.unparse(node)}")
    assert direct == []
