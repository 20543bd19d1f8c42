"""Packaging for airflow-provider-zeta.

The provider registers itself with Airflow through the ``apache_airflow_provider`` entry point
(``get_provider_info``), which is how ``airflow providers list`` and ``airflow config list`` find it.
"""

from setuptools import find_packages, setup

setup(
    name="airflow-provider-zeta",
    version="0.1.0",
    description=(
        "Failover-safe PySpark pipelines for Apache Airflow 3.3+: idempotent deploy, durable "
        "ready-to-close, exactly-once partition publish and delayed cleanup."
    ),
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(include=["airflow_provider_zeta", "airflow_provider_zeta.*"]),
    install_requires=[
        "apache-airflow>=3.3,<4",
        "apache-airflow-providers-apache-spark>=6.3",
        "pyspark>=4.0",
    ],
    extras_require={
        "test": [
            "pytest>=8",
            "pytest-timeout>=2.3",
            # The metadata DB drivers Airflow uses for PostgreSQL (sync and async engines).
            "psycopg2-binary>=2.9",
            "asyncpg>=0.29",
            # Drives the system's Chromium (Debian package `chromium`) in the UI test; no browser download.
            "playwright>=1.50",
        ],
    },
    entry_points={
        "apache_airflow_provider": [
            "provider_info=airflow_provider_zeta.get_provider_info:get_provider_info",
        ],
        # Loads the plugin with Airflow's default lazy provider discovery (plugins/entrypoint.py).
        "airflow.plugins": ["zeta=airflow_provider_zeta.plugins.entrypoint:ZetaMonitorPlugin"],
    },
    classifiers=[
        "Framework :: Apache Airflow",
        "Framework :: Apache Airflow :: Provider",
        "Programming Language :: Python :: 3",
    ],
)
