"""Test support shipped with the provider: a real Airflow cluster on this machine (``cluster``)."""
