"""The ``[zeta]`` settings and the state root, as the operators and triggers read them."""

from __future__ import annotations

from dataclasses import dataclass

from airflow_provider_zeta.get_provider_info import CONFIG_OPTIONS
from airflow_provider_zeta.storage import StateStorage


@dataclass(frozen=True)
class ZetaSettings:
    state_root: str
    cleanup_retention: float
    driver_heartbeat_interval: float
    driver_lost_after: float
    poll_interval: float

    @classmethod
    def load(cls) -> ZetaSettings:
        from airflow.configuration import conf

        def get(name: str) -> str:
            return conf.get("zeta", name, fallback=CONFIG_OPTIONS[name]["default"])

        def number(name: str) -> float:
            raw = get(name)
            try:
                value = float(raw)
            except ValueError:
                raise ValueError(f"[zeta] {name} must be a number of seconds, got {raw!r}") from None
            if value <= 0:
                raise ValueError(f"[zeta] {name} must be positive, got {raw!r}")
            return value

        return cls(
            state_root=get("state_root"),
            cleanup_retention=number("cleanup_retention"),
            driver_heartbeat_interval=number("driver_heartbeat_interval"),
            driver_lost_after=number("driver_lost_after"),
            poll_interval=number("poll_interval"),
        )


def state_root_url(state_root: str) -> str:
    """A URL for ``state_root``: plain paths become ``file://`` URLs."""
    if not state_root:
        raise ValueError("[zeta] state_root is empty: set it to a path or an object storage URL")
    return state_root if "://" in state_root else "file://" + state_root


def open_state_storage(state_root: str) -> StateStorage:
    """The state root as the coordinator sees it, through Airflow's ``ObjectStoragePath``."""
    from airflow.sdk import ObjectStoragePath

    return StateStorage.from_object_storage_path(ObjectStoragePath(state_root_url(state_root)))


def driver_url(storage: StateStorage, relative: str) -> str:
    """The URL a driver opens with plain fsspec: no Airflow connection id in it."""
    protocol = storage.fs.protocol
    protocol = protocol[0] if isinstance(protocol, (tuple, list)) else protocol
    if protocol in ("file", "local"):
        return "file://" + storage.path(relative)
    return f"{protocol}://{storage.path(relative).lstrip('/')}"
