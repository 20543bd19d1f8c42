"""Shared fixtures: real Airflow clusters on SQLite and PostgreSQL.

``airflow_cluster`` is a factory: ``airflow_cluster(dags_folder, db_kind)`` starts a cluster that
is stopped (every process by PID, database dropped) when the test ends. When the test fails, the
tails of every component log and task log are printed into the report and the cluster's home is
kept under ``test-artifacts/`` for a closer look.

PostgreSQL-backed tests skip when no server answers at 127.0.0.1:5432 — except under ``CI=true``,
where they fail instead: CI must never pass by skipping them.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

import pytest

from airflow_provider_zeta.testing.cluster import SCHEMA_TEMPLATES, AirflowCluster, postgres_available

# Many clusters per session: migrate each metadata schema once and copy it (testing/cluster.py).
SCHEMA_TEMPLATES.enabled = True

PROJECT_ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = PROJECT_ROOT / "test-artifacts"
IN_CI = os.environ.get("CI", "").lower() == "true"
DB_KINDS = ("sqlite", "postgres")


def require_postgres() -> None:
    if postgres_available():
        return
    if IN_CI:
        pytest.fail("PostgreSQL is not reachable at 127.0.0.1:5432, and CI=true forbids skipping its tests")
    pytest.skip("PostgreSQL is not reachable at 127.0.0.1:5432")


@pytest.fixture(params=DB_KINDS)
def db_kind(request) -> str:
    """Parametrizes a test over both metadata databases."""
    if request.param == "postgres":
        require_postgres()
    return request.param


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Drop the PostgreSQL variant of tests marked ``sqlite_only`` (deselected, so not a skip), and
    move the tests on the session's fake-driver clusters to the end, SQLite first: pytest has
    already grouped them by DB kind (this runs after its reordering), and at the end the last
    cluster stops with the session instead of idling beside the other tests."""
    keep, dropped = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        on_postgres = callspec is not None and "postgres" in callspec.params.values()
        (dropped if on_postgres and item.get_closest_marker("sqlite_only") else keep).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)

    def shared_cluster_kind(item) -> int:
        if "fake_driver_cluster" not in getattr(item, "fixturenames", ()):
            return 0
        return 1 if item.callspec.params["fake_driver_cluster"] == "sqlite" else 2

    items[:] = sorted(keep, key=shared_cluster_kind)  # stable: each group keeps pytest's order


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    setattr(item, f"zeta_report_{report.when}", report)
    return report


def _test_failed(item) -> bool:
    return any(
        getattr(item, f"zeta_report_{when}", None) is not None and getattr(item, f"zeta_report_{when}").failed
        for when in ("setup", "call")
    )


FAKE_SPARK_DIR = PROJECT_ROOT / "tests" / "fake_spark"
LOCAL_SPARK_CONN = '{"conn_type": "spark", "host": "local[1]"}'


def spark_env(fake: bool) -> dict[str, str]:
    """Environment for a cluster whose deploy tasks launch drivers: the Spark connection, and for
    fast tests the fake spark-submit first on PATH (a real process running the real bootstrap)."""
    path = os.environ.get("PATH", "")
    if fake:
        path = f"{FAKE_SPARK_DIR}:{path}"
    return {"PATH": path, "AIRFLOW_CONN_SPARK_DEFAULT": LOCAL_SPARK_CONN}


def _finish(cluster: AirflowCluster, failed: bool, nodeid: str) -> None:
    if failed:
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid)
        print(f"\n----- Airflow logs for failed test {nodeid} -----")
        cluster.print_logs(tail_lines=60, file=None)
        kept = ARTIFACTS / name / cluster.home.name
        kept.parent.mkdir(parents=True, exist_ok=True)
        try:
            cluster.stop_processes()
        finally:
            shutil.copytree(cluster.home, kept, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.db"))
            print(f"cluster home kept at {kept}")
    cluster.stop()


def _start(dags_folder, db_kind: str, components=None, **kwargs) -> AirflowCluster:
    if db_kind == "postgres":
        require_postgres()
    cluster = AirflowCluster(dags_folder, db=db_kind, **kwargs)
    try:
        cluster.start() if components is None else cluster.start(components)
    except BaseException:
        _finish(cluster, True, f"startup of a cluster on {db_kind}")
        raise
    return cluster


@pytest.fixture
def airflow_cluster(request):
    clusters: list[AirflowCluster] = []

    def start(dags_folder=PROJECT_ROOT / "dags", db_kind: str = "sqlite", components=None, **kwargs):
        cluster = _start(dags_folder, db_kind, components, **kwargs)
        clusters.append(cluster)
        return cluster

    yield start
    for cluster in clusters:
        _finish(cluster, _test_failed(request.node), request.node.nodeid)


@pytest.fixture(scope="session", params=DB_KINDS)
def fake_driver_cluster(request):
    """One cluster per DB kind for the whole session, on tests/dags, launching drivers through the
    fake spark-submit. The tests using it run last, grouped by DB kind (``pytest_collection_modifyitems``
    below), so one such cluster runs at a time and none idles beside the other tests. Each test uses
    its own run dates and launch log; after a kill a test restarts the component before it ends."""
    db_kind = request.param
    failures_before = request.session.testsfailed
    cluster = _start(PROJECT_ROOT / "tests" / "dags", db_kind, extra_env=spark_env(fake=True))
    yield cluster
    _finish(cluster, request.session.testsfailed > failures_before, f"fake_driver_cluster[{db_kind}]")


# The pipelines of tests/dags (each with its cleanup). The cluster also runs bare deploy tasks
# (deploy_counting), whose attempt directories nothing cleans but a sweep: not checked here.
PIPELINE_DAGS = ("pipeline_counting", "pipeline_counting_daily")


@pytest.fixture(autouse=True)
def shared_cluster_left_whole(request):
    """After a test on the session's fake-driver cluster, every component is running again: a test
    that failed between a kill and its restart must not fail every later test with it."""
    yield
    if "fake_driver_cluster" not in request.fixturenames:
        return
    cluster = request.getfixturevalue("fake_driver_cluster")
    dead = [name for name, component in cluster.components.items() if not component.alive()]
    for name in dead:
        cluster.start_component(name)
    if dead:
        cluster.wait_healthy()


def check_nothing_past_due(request, cluster_fixture: str, timeout: float = 90) -> None:
    """G4 after a test: within ``timeout`` (runs finish their cleanup), no staging, tombstone,
    pending directory or cleanup record in the cluster's state root and pipeline output is past due
    or without a pending record. Skipped after a failed test (its own failure says more)."""
    if _test_failed(request.node):
        return
    from airflow_provider_zeta.testing.leftovers import leftovers_past_due

    cluster = request.getfixturevalue(cluster_fixture)
    state_root, output = cluster.home / "zeta-state", cluster.home / "pipeline-output"
    deadline = time.monotonic() + timeout
    while (problems := leftovers_past_due(state_root, [output], dag_ids=PIPELINE_DAGS)) and time.monotonic() < deadline:
        time.sleep(2)
    assert problems == [], problems
