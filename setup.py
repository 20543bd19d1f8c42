"""Packaging for airflow-provider-zeta.

The provider registers itself with Airflow through the ``apache_airflow_provider`` entry point
(``get_provider_info``), which is how ``airflow providers list`` and ``airflow config list`` find it.
"""

import re
from pathlib import Path

from setuptools import find_packages, setup

# The one version source is ``airflow_provider_zeta.__version__`` (get_provider_info reads it too);
# read as text, since importing the package here would need its dependencies installed.
VERSION = re.search(
    r'^__version__ = "([^"]+)"$', Path(__file__).with_name("airflow_provider_zeta").joinpath("__init__.py").read_text(), re.M
).group(1)

setup(
    name="airflow-provider-zeta",
    version=VERSION,
    description=(
        "Failover-safe PySpark pipelines for Apache Airflow 3.3: idempotent deploy, durable "
        "ready-to-close, exactly-once partition publish and delayed cleanup."
    ),
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    license_files=["LICENSE"],
    # apache-airflow-providers-apache-spark 6.3 requires Python >= 3.11 (Airflow 3.3 itself: >= 3.10, != 3.15).
    python_requires=">=3.11,!=3.15.*",
    # The provider only: the test and demo harness (zeta_harness/), tests, DAGs, scripts and
    # benchmarks stay in the repository (tests/unit/test_packaging.py checks the built wheel).
    packages=find_packages(include=["airflow_provider_zeta", "airflow_provider_zeta.*"]),
    # PEP 561: the package ships its type hints.
    package_data={"airflow_provider_zeta": ["py.typed"]},
    install_requires=[
        # Capped to the minor release that is tested (constraints.txt pins it; this package pins its
        # task SDK and core exactly): the provider reaches a few non-public Airflow members, each behind
        # one function of airflow_provider_zeta/airflow_internals.py whose test
        # (tests/unit/test_airflow_internals.py) fails when the installed Airflow changes it. A new
        # Airflow minor release is admitted once the suite passes on it.
        "apache-airflow>=3.3.2,<3.4",
        # The deploy drives SparkSubmitHook partly through non-public members (hooks/spark_driver.py):
        # capped below the next major version, the one tested is in constraints.txt.
        "apache-airflow-providers-apache-spark>=6.3,<7",
        # The plugin's pages are Jinja2 templates with autoescape (plugins/page.py); Airflow installs it too.
        "jinja2>=3.1",
        # Lists, waits for and signals the drivers' processes (processes.py); Airflow installs it too.
        "psutil>=5.8",
        "pyspark>=4.0,<5",
    ],
    extras_require={
        # OpenLineage (optional): the deploy injects the parent job / transport into the Spark conf,
        # the completed point reports its output table and partition (lineage.py). Without it,
        # nothing changes.
        "openlineage": ["apache-airflow-providers-openlineage>=2.1"],
        "test": [
            # Below 9.2: pytest 9.2 ignores the group suffix pytest-xdist 3.8 gives a grouped test, so
            # `--dist loadgroup` split every shared cluster's tests over both test processes
            # (tests/unit/test_xdist_groups.py fails there).
            "pytest>=8,<9.2",
            "pytest-timeout>=2.3",
            # Two test processes (pytest.ini): the real tests mostly wait on Airflow and Spark.
            "pytest-xdist>=3.6",
            # The metadata DB drivers Airflow uses for PostgreSQL (sync and async engines).
            "psycopg2-binary>=2.9",
            "asyncpg>=0.29",
            # Drives the system's Chromium (Debian package `chromium`) in the UI test; no browser download.
            "playwright>=1.50",
            # `make lint` (run first by `make test`); configured in pyproject.toml.
            "ruff>=0.17",
            "mypy>=2.4",
            "types-psutil",
            # The import layers (pyproject.toml [tool.importlinter]), run by `make lint`.
            "import-linter>=2.1",
            # The multi-host test runs CeleryExecutor workers on the Redis broker (tests/test_multi_host.py).
            "apache-airflow-providers-celery>=3.26",
            "celery[redis]>=5.5,<5.7",
            # A state root in an object store (tests/test_object_store.py): Airflow's S3 filesystem
            # for the coordinator, s3fs for the driver, and a real S3 server to run them against.
            "apache-airflow-providers-amazon>=9.0",
            "s3fs>=2024.6",
            "moto[s3]>=5.0",
            "flask>=3.0",  # moto_server (the S3 server process); moto[server] would pull every service's dependencies
            "flask-cors>=4.0",
            # EmptyOperator and DateTimeSensorAsync in test DAGs (the provider itself uses neither).
            "apache-airflow-providers-standard>=1.9",
            # A real SMTP server for the failure e-mail test (tests/test_secret_failure_channels.py).
            "aiosmtpd>=1.4",
            # The hung-mount test serves the state root through FUSE (tests/test_hung_mount.py):
            # ctypes bindings to libfuse 3 (Debian's fuse3, which make install installs).
            "mfusepy>=3.1",
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
        "Development Status :: 3 - Alpha",
        "Environment :: Web Environment",
        "Framework :: Apache Airflow",
        "Framework :: Apache Airflow :: Provider",
        "Intended Audience :: Developers",
        "Intended Audience :: System Administrators",
        # Liveness reads /proc and the kernel's boot id; the multi-host tests use Linux namespaces.
        "Operating System :: POSIX :: Linux",
        "Programming Language :: Python :: 3",
        # The one Python version the test suite runs on (python_requires admits newer ones).
        "Programming Language :: Python :: 3.11",
        "Topic :: System :: Distributed Computing",
        "Topic :: System :: Monitoring",
        "Typing :: Typed",
    ],
)
