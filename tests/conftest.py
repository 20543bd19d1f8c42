"""Shared fixtures: real Airflow clusters on SQLite and PostgreSQL.

``airflow_cluster`` is a factory: ``airflow_cluster(dags_folder, db_kind)`` starts a cluster that
is stopped (every process by PID, database dropped) when the test ends. When the test fails, the
tails of every component log and task log are printed into the report and the cluster's home is
kept under ``test-artifacts/`` for a closer look; a failing test on the session's shared
fake-driver cluster gets a copy of that cluster's home (logs so far) at once, under its own name.
A seeded test takes its seed from the ``chaos_seed`` fixture: a failure report names the seed (a
"seed" section, ``test-artifacts/<test>/SEED``, a ``seed`` property in ``test-artifacts/junit.xml``).

PostgreSQL-backed tests skip when no server answers at 127.0.0.1:5432 — except under ``CI=true``,
where they fail instead: CI must never pass by skipping them.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from zeta_harness.cluster import SCHEMA_TEMPLATES, AirflowCluster, postgres_available

# Many clusters per session: migrate each metadata schema once and copy it (zeta_harness/cluster.py).
SCHEMA_TEMPLATES.enabled = True
# [zeta] min_deferral of the test clusters (the provider's default is 12 s). A trigger keeps its task
# deferred at least this long, so that the scheduler has processed the deferring worker's exit
# before the wake-up (else Airflow retries the task spuriously); the harness's scheduler got there
# within 6 s on a busy 2-core host. A fake driver's job is done in a second or two, so most of its
# deploy task's and its sensor's deferral is this floor, once per pipeline run and again per clear.
# Tests that count tries or worker starts would fail on a spurious retry: a floor too short shows there.
# ZETA_TEST_MIN_DEFERRAL overrides it for one session (e.g. 12, the provider's default).
AirflowCluster.default_min_deferral_s = float(os.environ.get("ZETA_TEST_MIN_DEFERRAL", "8"))

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


def pytest_configure(config):
    """A pytest-xdist worker starts the clusters, but a time limit's SIGTERM (or a kill) reaches
    only the controller: the worker tears its clusters down once the controller is gone."""
    if hasattr(config, "workerinput"):
        from zeta_harness import teardown

        teardown.watch_parent(os.getppid())


#: The shared fake-driver cluster of a DB kind is split into shards by test module, each its own
#: cluster and xdist group: the SQLite cluster's tests add up to about 34 minutes, and one group
#: runs in one test process, so each shard must stay well under the suite's length (with four
#: processes, shard 0 alone was 23 minutes, the whole suite's length). A shard costs one cluster
#: start (under a minute). A module not named here runs on shard 0. Moving a module moves its
#: tests to another cluster, nothing else.
FAKE_CLUSTER_SHARDS: dict[str, dict[str, int]] = {
    "sqlite": {
        "tests.test_cleanup": 1,
        "tests.test_cleanup_windows": 1,
        "tests.test_hourly_partitions": 1,
        "tests.test_reprocess": 2,
        "tests.test_deploy_windows": 2,
        "tests.test_deploy_faults": 2,
        "tests.test_audits_publish": 2,
    },
}


def shared_cluster_of(item) -> tuple[str, int] | None:
    """The session's fake-driver cluster that ``item`` runs on, if any: (DB kind, shard)."""
    if "fake_driver_cluster" not in getattr(item, "fixturenames", ()):
        return None
    kind = item.callspec.params["fake_driver_cluster"]
    return kind, FAKE_CLUSTER_SHARDS.get(kind, {}).get(item.module.__name__, 0)


def shared_cluster_name(key: tuple[str, int]) -> str:
    kind, shard = key
    return f"fake_driver_cluster_{kind}" + (f"_{shard}" if shard else "")


def pytest_itemcollected(item):
    """Tests on one shared cluster form one xdist group (``--dist loadgroup`` in pytest.ini): they
    run in one test process, one after the other, so that process starts the cluster once. xdist
    hands out the largest groups first; a module-scoped cluster is grouped by its module's
    ``pytestmark``."""
    key = shared_cluster_of(item)
    if key is not None:
        if item.get_closest_marker("xdist_group") is not None:
            # Two group names would be joined into a third group, splitting the shared cluster's tests.
            raise pytest.UsageError(f"{item.nodeid}: a test on fake_driver_cluster cannot carry its own xdist_group")
        item.add_marker(pytest.mark.xdist_group(shared_cluster_name(key)))


def replayable_id(item) -> str:
    """The node id to run one test again: without the ``@<group>`` xdist appends under loadgroup."""
    group = item.get_closest_marker("xdist_group")
    nodeid = item.nodeid
    if group is not None and group.args and nodeid.endswith(f"@{group.args[0]}"):
        nodeid = nodeid[: -len(f"@{group.args[0]}")]
    return nodeid


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Drop the PostgreSQL variant of tests marked ``sqlite_only`` and the SQLite variant of those
    marked ``postgres_only`` (deselected, so not a skip), and
    move the tests on the session's fake-driver clusters to the end, SQLite first: pytest has
    already grouped them by DB kind (this runs after its reordering). Under xdist this order only
    keeps each group contiguous (xdist hands out the largest groups first); in one process
    (``-n 0``) it keeps one such cluster running at a time."""
    keep, dropped = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        on_postgres = callspec is not None and "postgres" in callspec.params.values()
        on_sqlite = callspec is not None and "sqlite" in callspec.params.values()
        drop = (on_postgres and item.get_closest_marker("sqlite_only")) or (on_sqlite and item.get_closest_marker("postgres_only"))
        (dropped if drop else keep).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)

    def shared_cluster_order(item) -> tuple[int, int]:
        key = shared_cluster_of(item)
        return (0, 0) if key is None else ({"sqlite": 1}.get(key[0], 2), key[1])

    items[:] = sorted(keep, key=shared_cluster_order)  # stable: each group keeps pytest's order


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    setattr(item, f"zeta_report_{report.when}", report)
    seed = getattr(item, "zeta_seed", None)
    if report.failed and seed is not None:
        replay = f"seed {seed}: replay with ZETA_CHAOS_SEED={seed} pytest -n 0 '{replayable_id(item)}'"
        report.sections.append(("seed", replay))
        kept = artifact_dir(item.nodeid)
        kept.mkdir(parents=True, exist_ok=True)
        (kept / "SEED").write_text(replay + "\n")
    return report


def artifact_dir(nodeid: str) -> Path:
    """Where a failed test's kept files go: ``test-artifacts/<node id as a file name>``."""
    return ARTIFACTS / re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid)


@pytest.fixture
def chaos_seed(request, record_property) -> int:
    """The seed of a randomized test: ``$ZETA_CHAOS_SEED`` (a replay) or a fresh one. Printed, kept
    in the JUnit report, and named in the failure report (``pytest_runtest_makereport``)."""
    seed = int(os.environ.get("ZETA_CHAOS_SEED") or random.SystemRandom().randrange(1, 10**6))
    request.node.zeta_seed = seed
    record_property("seed", seed)
    print(f"\nchaos seed {seed} (replay: ZETA_CHAOS_SEED={seed})")
    return seed


def _failure_summary(item) -> str:
    """The failed phase's assertion or error, to print beside the cluster logs: CI shows only a
    window of a failed test's output, which is mostly those logs."""
    for when in ("setup", "call"):
        report = getattr(item, f"zeta_report_{when}", None)
        if report is not None and report.failed:
            crash = getattr(report.longrepr, "reprcrash", None)
            text = crash.message if crash is not None else str(report.longrepr)
            return f"{item.nodeid} failed in {when}: {text[-4000:]}"
    return f"{item.nodeid}: no failure recorded"


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


def _print_failed_task_logs(cluster: AirflowCluster, most: int = 8, tail_lines: int = 40) -> None:
    """The tail of every task attempt log that holds an error line (the newest ``most`` of them):
    why a run failed is in its tasks' logs, which the components' own logs do not hold."""
    logs = cluster.home / "logs"
    found = []
    for path in logs.rglob("attempt=*.log") if logs.is_dir() else ():
        text = path.read_text(errors="replace")
        if '"level": "error"' in text or '"level":"error"' in text or "[error" in text or " ERROR " in text:
            found.append((path.stat().st_mtime, path, text))
    for _, path, text in sorted(found)[-most:]:
        print(f"===== task log {path.relative_to(logs)} (last {tail_lines} lines) =====")
        print("\n".join(text.splitlines()[-tail_lines:]))


def _finish(cluster: AirflowCluster, failed: bool, nodeid: str, summary: str = "") -> None:
    if failed:
        print(f"\n----- {summary or nodeid}\n----- Airflow logs for failed test {nodeid} -----")
        cluster.print_logs(tail_lines=60, file=None)
        _print_failed_task_logs(cluster)
        print(f"----- end of the logs; the failure again: {summary or nodeid}")
        kept = artifact_dir(nodeid) / cluster.home.name
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
        _finish(cluster, _test_failed(request.node), request.node.nodeid, _failure_summary(request.node))


@pytest.fixture(params=DB_KINDS)
def fake_driver_cluster(request):
    """A cluster per DB kind and shard (``FAKE_CLUSTER_SHARDS``) for the session, on tests/dags,
    launching drivers through the fake spark-submit. Its tests are one xdist group
    (``pytest_itemcollected``), run one after the other in one test process, which starts the
    cluster for the first of them and stops it right after the last (``pytest_runtest_teardown``).
    Each test uses its own run dates and launch log; after a kill a test restarts the component
    before it ends."""
    key = shared_cluster_of(request.node)
    assert key is not None
    if key in SHARED_CLUSTER_ERRORS:  # its start failed once: every test of its shard fails at once
        pytest.fail(f"{shared_cluster_name(key)} did not start: {SHARED_CLUSTER_ERRORS[key]}")
    if key not in SHARED_CLUSTERS:
        if key in SHARED_CLUSTER_STOPS:  # started once and stopped: its group ran split
            pytest.fail(f"{shared_cluster_name(key)} was stopped after its last test: run with --dist loadgroup or -n 0")
        try:
            cluster = _start(PROJECT_ROOT / "tests" / "dags", key[0], extra_env=spark_env(fake=True))
        except Exception as error:
            SHARED_CLUSTER_ERRORS[key] = f"{type(error).__name__}: {str(error)[:500]}"
            raise
        failures_before = request.session.testsfailed

        def stop(failed_now: bool = False, cluster: AirflowCluster = cluster) -> None:
            if SHARED_CLUSTERS.pop(key, None) is not None:
                failed = failed_now or request.session.testsfailed > failures_before
                _finish(cluster, failed, shared_cluster_name(key))

        SHARED_CLUSTERS[key] = cluster
        SHARED_CLUSTER_STOPS[key] = stop
    return SHARED_CLUSTERS[key]


#: The running shared fake-driver clusters of this test process, by (DB kind, shard), and how to
#: stop each (once; a stopped one stays in SHARED_CLUSTER_STOPS).
SHARED_CLUSTERS: dict[tuple[str, int], AirflowCluster] = {}
SHARED_CLUSTER_STOPS: dict[tuple[str, int], Callable[..., None]] = {}
#: Why a shared cluster did not start, by (DB kind, shard).
SHARED_CLUSTER_ERRORS: dict[tuple[str, int], str] = {}


@pytest.fixture(scope="session", autouse=True)
def _stop_shared_clusters_at_the_end():
    """A session that ends early (``-x``, an interrupt) stops the shared clusters still running."""
    yield
    for key in list(SHARED_CLUSTERS):
        SHARED_CLUSTER_STOPS[key]()


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_teardown(item, nextitem):
    """Stop a shared cluster as soon as its last test is done: under xdist its group may run first
    in its test process, and a cluster left running until that process ends would take CPU from
    every later test there. (Its tests run one after the other, so none comes back to it.)"""
    failed_in_teardown = False
    try:
        return (yield)
    except BaseException:
        # Not counted as a failure yet (its report comes after this hook): a shared cluster
        # stopped now must still keep its home for this failure.
        failed_in_teardown = True
        raise
    finally:
        key = shared_cluster_of(item)
        if key is not None and (nextitem is None or shared_cluster_of(nextitem) != key):
            stop = SHARED_CLUSTER_STOPS.get(key)
            if stop is not None:
                stop(failed_in_teardown or _test_failed(item))


# The pipelines of tests/dags (each with its cleanup). The cluster also runs bare deploy tasks
# (deploy_counting), whose attempt directories nothing cleans but a sweep: not checked here.
PIPELINE_DAGS = ("pipeline_counting", "pipeline_counting_daily")


@pytest.fixture(autouse=True)
def shared_cluster_left_whole(request):
    """After a test on the session's fake-driver cluster, every component is running again: a test
    that failed between a kill and its restart must not fail every later test with it. Before it,
    the cluster must not have been stopped early (its group ran split: not under ``--dist loadgroup``)."""
    if shared_cluster_of(request.node) is not None:
        request.getfixturevalue("fake_driver_cluster")  # fails when its cluster was stopped early
    yield
    if "fake_driver_cluster" not in request.fixturenames:
        return
    cluster = request.getfixturevalue("fake_driver_cluster")
    if _test_failed(request.node):
        # The shared cluster lives on (and is only kept at session end, if the session ends
        # normally): keep its logs as of this failure, under this test's name, now.
        summary = _failure_summary(request.node)
        print(f"\n----- {summary}\n----- Airflow logs of the shared cluster for that failed test -----")
        cluster.print_logs(tail_lines=60, file=None)
        print(f"----- end of the logs of the shared cluster; the failure again: {summary}")
        kept = artifact_dir(request.node.nodeid) / cluster.home.name
        with contextlib.suppress(OSError, shutil.Error):  # files may change or vanish while copied
            shutil.copytree(cluster.home, kept, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.db", "*.db-*"))
        print(f"shared cluster home (as of this failure) kept at {kept}")
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
    from zeta_harness.leftovers import leftovers_past_due

    cluster = request.getfixturevalue(cluster_fixture)
    state_root, output = cluster.home / "zeta-state", cluster.home / "pipeline-output"
    deadline = time.monotonic() + timeout
    while (problems := leftovers_past_due(state_root, [output], dag_ids=PIPELINE_DAGS)) and time.monotonic() < deadline:
        time.sleep(2)
    assert problems == [], problems


@pytest.fixture
def mailbox():
    """A real SMTP server on 127.0.0.1 (aiosmtpd) keeping every message it receives."""
    from tests.secret_forms import Mailbox

    box = Mailbox()
    box.start()
    yield box
    box.stop()
