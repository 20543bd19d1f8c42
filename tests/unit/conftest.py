"""Fixtures shared by the unit tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def fernet_key(monkeypatch):
    """A fresh Fernet key as ``[core] fernet_key`` (returned), with Airflow's cached Fernet reset."""
    from airflow.sdk.crypto import get_fernet
    from cryptography.fernet import Fernet

    key = Fernet.generate_key().decode()
    monkeypatch.setenv("AIRFLOW__CORE__FERNET_KEY", key)
    get_fernet.cache_clear()
    yield key
    get_fernet.cache_clear()
