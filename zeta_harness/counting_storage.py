"""The provider's state-root storage, counting every call that reaches the filesystem: the cost
oracle of the cleanup tests and benchmarks (counts, not timings)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from airflow_provider_zeta.storage import StateStorage


class CountingStorage(StateStorage):
    """``StateStorage`` that counts its calls in ``calls`` (shared by every instance: the code under
    test opens its own)."""

    calls: Counter = Counter()

    def list_dir(self, relative: str) -> Any:
        self.calls["list"] += 1
        return super().list_dir(relative)

    def read_bytes(self, relative: str) -> Any:
        self.calls["read"] += 1
        return super().read_bytes(relative)

    def exists(self, relative: str) -> Any:
        self.calls["read"] += 1
        return super().exists(relative)

    def write_atomic(self, relative: str, data: bytes, make_parents: bool = True) -> None:
        self.calls["write"] += 1
        super().write_atomic(relative, data, make_parents)

    def delete_tree(self, relative: str) -> Any:
        self.calls["delete"] += 1
        return super().delete_tree(relative)

    def move(self, source_relative: str, target_relative: str) -> None:
        self.calls["move"] += 1
        super().move(source_relative, target_relative)
