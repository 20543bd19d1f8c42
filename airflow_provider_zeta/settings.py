"""The ``[zeta]`` settings and the state root, as the operators and triggers read them."""

from __future__ import annotations

from dataclasses import dataclass

from airflow_provider_zeta.core.durations import duration_seconds
from airflow_provider_zeta.core.ledger import lease_timing_error
from airflow_provider_zeta.get_provider_info import CONFIG_OPTIONS
from airflow_provider_zeta.storage import StateStorage


@dataclass(frozen=True)
class ZetaSettings:
    """The provider's settings, from Airflow's ``[zeta]`` configuration section."""

    state_root: str
    cleanup_retention: float
    driver_heartbeat_interval: float
    driver_lost_after: float
    poll_interval: float
    spark_history_server_url: str = ""
    spark_ui_allowed_hosts: tuple[str, ...] = ()

    @classmethod
    def load(cls) -> ZetaSettings:
        """Read the settings, durations checked; raises ``ValueError`` on a heartbeat interval the lease refuses."""
        from airflow_provider_zeta.airflow_internals import airflow_config

        conf = airflow_config()

        def get(name: str) -> str:
            return conf.get("zeta", name, fallback=CONFIG_OPTIONS[name]["default"])

        def number(name: str) -> float:
            return duration_seconds(get(name), f"[zeta] {name}")

        heartbeat, lost_after = number("driver_heartbeat_interval"), number("driver_lost_after")
        refused = lease_timing_error(heartbeat, lost_after, "[zeta] driver_heartbeat_interval", "[zeta] driver_lost_after")
        if refused:
            raise ValueError(f"[zeta.settings.lease_timing] {refused}")
        return cls(
            state_root=get("state_root"),
            cleanup_retention=number("cleanup_retention"),
            driver_heartbeat_interval=heartbeat,
            driver_lost_after=lost_after,
            poll_interval=number("poll_interval"),
            spark_history_server_url=history_server_url(get("spark_history_server_url")),
            spark_ui_allowed_hosts=tuple(h.strip().lower() for h in get("spark_ui_allowed_hosts").split(",") if h.strip()),
        )


#: The longest ``[zeta] min_deferral`` accepted: a floor that long would delay every deferred task.
MIN_DEFERRAL_LIMIT = 300.0


def min_deferral(default: float) -> float:
    """``[zeta] min_deferral``: seconds a provider trigger keeps its task deferred at least
    (``triggers.not_before``), ``default`` when the option is unset or no Airflow configuration is
    readable. Raises ``ValueError`` naming the option for anything but a duration in (0, 300]."""
    from airflow_provider_zeta.airflow_internals import airflow_config

    raw = airflow_config().get("zeta", "min_deferral", fallback="")
    if raw is None or not str(raw).strip():
        return default
    seconds = duration_seconds(raw, "[zeta] min_deferral")
    if seconds > MIN_DEFERRAL_LIMIT:
        raise ValueError(f"[zeta] min_deferral must be at most {MIN_DEFERRAL_LIMIT:.0f} seconds, got {raw!r}")
    return seconds


def history_server_url(raw: str) -> str:
    """``[zeta] spark_history_server_url``: empty, or a plain http(s) URL."""
    import re

    raw = (raw or "").strip()
    if raw and not re.match(r"(?i)^https?://[^\s\"'<>\\@]+$", raw):
        raise ValueError(
            f"[zeta] spark_history_server_url must be a plain http(s) URL such as http://history:18080, got {raw!r}"
        )
    return raw.rstrip("/")


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
