"""A real Airflow deployment on this machine, for tests, demos and benchmarks.

Theory of operation
-------------------
``AirflowCluster`` builds a throw-away ``AIRFLOW_HOME`` in a temporary directory, points it at a
fresh metadata database (a new SQLite file, or a new database it creates on a PostgreSQL server),
migrates it, and starts the four Airflow 3 components — ``api-server``, ``scheduler``,
``dag-processor`` and ``triggerer`` — each as its own process group, tracked by PID, with its
output in ``<home>/component-logs/<name>.<n>.log``. By default the scheduler uses the
LocalExecutor, so task workers are children of the scheduler process.

With ``executor="CeleryExecutor"`` (PostgreSQL) the cluster spans several simulated hosts
(``zeta_harness/hosts.py``): the api-server, scheduler and dag-processor run here, the triggerer and
each Celery worker (``worker-1``, ``worker-2``, …) in a PID + mount + UTS namespace of its own with
its own hostname and a private ``/tmp``. Tasks reach the workers through Redis on a queue and key
prefix of this cluster only. ``kill_host(name)`` kills every process of a host (the worker and the
drivers it launched), and ``start_component(name)`` starts a replacement host with a new hostname.

Everything is configured through ``AIRFLOW__*`` environment variables that the harness passes to
the components; the test process itself never imports Airflow's settings, so it cannot pollute or
be polluted by them. The test process talks to the cluster through the public REST API (JWT from
the simple auth manager) and, for a few read-only checks the API does not offer, with a plain
SQLAlchemy connection to the metadata database.

Failure detection is shortened so that a component killed with ``SIGKILL`` is noticed in seconds:
orphaned tasks are checked every few seconds and a scheduler or triggerer counts as dead after
``health_threshold`` seconds without a heartbeat. The thresholds keep a margin on purpose: on a
2-core machine with Spark JVMs starting, a 10 s scheduler threshold made the scheduler reset its own
running tasks as orphans.

Each component is started as the leader of a new session, and its children (LocalExecutor workers,
task supervisors and task processes) stay in that session even when they change process group.
Every process also carries ``ZETA_HARNESS_ID=<id>`` in its environment, which finds descendants that
left the session (a detached Spark driver calls ``setsid``); the session check is needed as well
because processes that call ``setproctitle`` overwrite what ``/proc/<pid>/environ`` shows. Teardown
kills exactly the processes found either way — by PID, never by name — so two clusters on one
machine never touch each other's processes, and orphans of a killed component (re-parented away
from the harness) are still found.

Migrating a fresh metadata database costs seconds of CPU per cluster. A process that starts
many clusters (the test suite: ``SCHEMA_TEMPLATES.enabled = True``) migrates a SQLite database
once per set of ``AIRFLOW__*`` settings and copies the result through SQLite's backup API
(``SchemaTemplates``); the copies live in a temporary directory removed when the process exits.

The module imports neither Airflow nor pytest, so scripts (the demo, benchmarks) can use it.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from zeta_harness import teardown
from zeta_harness.hosts import REPOSITORY_ROOT, NamespaceHost

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
#: CeleryExecutor mode: what runs on the main host; the triggerer and each ``worker-N`` (a Celery
#: worker) run on hosts of their own (``zeta_harness/hosts.py``).
MAIN_HOST_COMPONENTS = ("api-server", "scheduler", "dag-processor")
CELERY_WORKER_PREFIX = "worker-"
REDIS_BROKER_URL = os.environ.get("ZETA_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
TERMINAL_RUN_STATES = frozenset({"success", "failed"})
TERMINAL_TI_STATES = frozenset({"success", "failed", "skipped", "upstream_failed", "removed"})

POSTGRES_SERVER_URL = os.environ.get("ZETA_TEST_POSTGRES_URL", "postgresql+psycopg2://postgres@127.0.0.1:5432")
HARNESS_ENV_MARKER = "ZETA_HARNESS_ID"


class ClusterError(RuntimeError):
    """The cluster did not reach the state a caller waited for; the message says what it saw."""


_HANDED_OUT: set[int] = set()
#: Where ``free_port`` picks: below Linux's ephemeral range (32768-60999), so an outgoing connection
#: cannot take a picked port before the component binds it.
PORT_RANGE = (20000, 32768)


def free_port() -> int:
    """A port free now, never one this process handed out before. Components bind it only seconds
    later, so under pytest-xdist each test process takes only ports of its own residue class
    (port % workers == worker index): two processes starting clusters at once never pick the same
    port. (Not ``bind(0)``: Linux hands those out with a parity of its own.)"""
    import random

    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = (int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0) % workers
    low, high = PORT_RANGE
    for _ in range(1000):
        port = random.randrange(low + (index - low) % workers, high, workers)  # port % workers == index
        if port in _HANDED_OUT:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _HANDED_OUT.add(port)
        return port
    raise ClusterError(f"no free port in {low}-{high} of residue {index} mod {workers}")


def postgres_available(server_url: str = POSTGRES_SERVER_URL) -> bool:
    """True when a PostgreSQL server answers at ``server_url`` (used to decide skips outside CI)."""
    try:
        import psycopg2  # noqa: F401 - the driver Airflow will use
    except ImportError:
        return False
    parsed = urllib.parse.urlsplit(server_url.replace("+psycopg2", ""))
    try:
        with socket.create_connection((parsed.hostname or "127.0.0.1", parsed.port or 5432), timeout=2):
            return True
    except OSError:
        return False


#: How long a component waits for the SQLite database lock before "database is locked".
SQLITE_BUSY_TIMEOUT_S = 60


@dataclass
class MetadataDatabase:
    """A metadata database that belongs to one cluster: created fresh, dropped on ``drop()``."""

    url: str
    kind: str  # "sqlite" | "postgres"
    _drop: Callable[[], None] | None = None

    @classmethod
    def fresh_sqlite(cls, directory: Path, busy_timeout_s: int = SQLITE_BUSY_TIMEOUT_S) -> MetadataDatabase:
        # A long busy timeout: several components write at once under Spark load, and the default
        # made components crash with "database is locked".
        path = directory / "airflow.db"
        return cls(url=f"sqlite:///{path}?timeout={busy_timeout_s}", kind="sqlite")

    @classmethod
    def fresh_postgres(cls, server_url: str = POSTGRES_SERVER_URL, name: str | None = None) -> MetadataDatabase:
        import psycopg2

        name = name or f"zeta_test_{secrets.token_hex(4)}"
        admin_dsn = _psycopg2_dsn(server_url, "postgres")
        conn = psycopg2.connect(admin_dsn)
        conn.autocommit = True
        try:
            with conn.cursor() as cur:
                cur.execute(f'CREATE DATABASE "{name}"')
                # A scheduler killed with SIGKILL in the middle of a transaction leaves its
                # LocalExecutor workers alive, and they inherited its database sockets: the server
                # never sees the connection close, and the dead scheduler's row locks would block
                # its successor for good. Production deployments want the same setting.
                cur.execute(f"ALTER DATABASE \"{name}\" SET idle_in_transaction_session_timeout = '20s'")
        finally:
            conn.close()

        def drop() -> None:
            _drop_postgres_database(server_url, name)

        return cls(url=f"{server_url.rstrip('/')}/{name}", kind="postgres", _drop=drop)

    def drop(self) -> None:
        if self._drop is not None:
            self._drop()
            self._drop = None


class SchemaTemplates:
    """Migrated SQLite metadata databases of this process, to copy instead of migrating again.

    Keyed by every ``AIRFLOW__*`` setting the cluster adds (some change what ``airflow db migrate``
    writes: the auth manager's tables, the default pool's size, log templates); a cluster with
    other such settings migrates its own. Off unless ``enabled``. PostgreSQL databases are always
    migrated: a suite starts only a few of them.
    """

    def __init__(self) -> None:
        self.enabled = False
        self._sqlite: dict[str, Path] = {}
        self._directory: Path | None = None

    @staticmethod
    def key(extra_env: dict[str, str]) -> str:
        relevant = sorted((k, v) for k, v in extra_env.items() if k.startswith("AIRFLOW__"))
        return hashlib.sha1(json.dumps(relevant).encode()).hexdigest()[:10]

    def fresh(self, kind: str, home: Path, key: str) -> tuple[MetadataDatabase, bool]:
        """A new database of ``kind`` and whether it is migrated already (copied from a template)."""
        if kind != "sqlite":
            return MetadataDatabase.fresh_postgres(), False
        db = MetadataDatabase.fresh_sqlite(home)
        template = self._sqlite.get(key) if self.enabled else None
        if template is not None and template.exists():
            _copy_sqlite(template, home / "airflow.db")
            return db, True
        return db, False

    def remember(self, db: MetadataDatabase, home: Path, key: str) -> None:
        """Keep a just-migrated SQLite database (no process connected to it) as the template for ``key``."""
        if not self.enabled or db.kind != "sqlite" or key in self._sqlite:
            return
        if self._directory is None:
            import atexit

            self._directory = Path(tempfile.mkdtemp(prefix="zeta-schema-"))
            atexit.register(shutil.rmtree, self._directory, True)
        copy = self._directory / f"{key}.db"
        _copy_sqlite(home / "airflow.db", copy)
        self._sqlite[key] = copy


SCHEMA_TEMPLATES = SchemaTemplates()


def _copy_sqlite(source: Path, target: Path) -> None:
    """Copy through SQLite's backup API: Airflow's database runs in WAL mode, so the main file alone
    may miss committed pages."""
    import sqlite3

    src, dst = sqlite3.connect(source), sqlite3.connect(target)
    try:
        src.backup(dst)
    finally:
        dst.close()
        src.close()


def _drop_postgres_database(server_url: str, name: str) -> None:
    import psycopg2

    conn = psycopg2.connect(_psycopg2_dsn(server_url, "postgres"))
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            )
            cur.execute(f'DROP DATABASE IF EXISTS "{name}"')
    finally:
        conn.close()


def _psycopg2_dsn(server_url: str, database: str) -> str:
    parsed = urllib.parse.urlsplit(server_url.replace("postgresql+psycopg2", "postgresql"))
    return urllib.parse.urlunsplit((parsed.scheme, parsed.netloc, f"/{database}", parsed.query, ""))


@dataclass
class Component:
    name: str
    process: subprocess.Popen
    log_path: Path
    started_at: float = field(default_factory=time.monotonic)
    # Kernel start time of the process: tells it from a later process that reuses its PID.
    start_ticks: int | None = None
    # CeleryExecutor mode: the namespace host the component runs on (``process`` is its unshare).
    host: NamespaceHost | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None


class AirflowCluster:
    """Airflow api-server, scheduler, dag-processor and triggerer on one metadata DB.

    Use as a context manager, or call ``start()`` and ``stop()``. ``db`` is ``"sqlite"``,
    ``"postgres"`` or a ``MetadataDatabase``. ``extra_env`` adds or overrides ``AIRFLOW__*``
    settings (and anything else the components should see).

    ``executor="CeleryExecutor"`` (PostgreSQL only) deploys across namespace hosts: the api-server,
    scheduler and dag-processor on this (the main) host; the triggerer on a host of its own and
    ``celery_workers`` Celery workers (components ``worker-1``, ``worker-2``, …) each on its own
    host. The broker is Redis (``ZETA_TEST_REDIS_URL``, default 127.0.0.1:6379/0) with a key prefix
    and a queue of this cluster's own, so parallel clusters never take each other's tasks; the
    result backend is the cluster's metadata database. The home defaults to ``/var/tmp`` because
    every host has a private ``/tmp``; ``start_component(name, host_env=...)`` starts a host with
    settings of its own (e.g. a host-private state root).
    """

    def __init__(
        self,
        dags_folder: str | os.PathLike,
        db: str | MetadataDatabase = "sqlite",
        *,
        home: str | os.PathLike | None = None,
        extra_env: dict[str, str] | None = None,
        health_threshold_s: int = 20,
        task_heartbeat_timeout_s: int = 30,
        parallelism: int = 8,
        keep_home: bool | None = None,
        executor: str = "LocalExecutor",
        celery_workers: int = 2,
        celery_concurrency: int = 3,
        min_deferral_s: float | None = None,
    ) -> None:
        self.dags_folder = Path(dags_folder).resolve()
        if not self.dags_folder.is_dir():
            raise ValueError(f"dags_folder {self.dags_folder} is not a directory")
        if executor not in ("LocalExecutor", "CeleryExecutor"):
            raise ValueError(f"executor must be 'LocalExecutor' or 'CeleryExecutor', got {executor!r}")
        if executor == "CeleryExecutor" and db == "sqlite":
            raise ValueError("executor='CeleryExecutor' needs db='postgres': Airflow refuses Celery on SQLite")
        self.executor = executor
        self.celery_workers = celery_workers
        self.celery_concurrency = celery_concurrency
        # Hosts have a private /tmp: a home there would be invisible to all but the main host.
        home_parent = "/var/tmp" if executor == "CeleryExecutor" else None
        self.home = Path(home) if home else Path(tempfile.mkdtemp(prefix="zeta-airflow-", dir=home_parent))
        self.home.mkdir(parents=True, exist_ok=True)
        self.crash_points = self.home / "crash-points"  # arm_crash_point()
        self.crash_points.mkdir(exist_ok=True)
        # A home the caller chose is kept unless the caller says otherwise; a temporary one is not.
        self.keep_home = (home is not None) if keep_home is None else keep_home
        self.cluster_id = secrets.token_hex(6)
        self._db_spec = db
        self.db: MetadataDatabase | None = db if isinstance(db, MetadataDatabase) else None
        self.api_port = free_port()
        self.api_url = f"http://127.0.0.1:{self.api_port}"
        self.components: dict[str, Component] = {}
        self.component_history: list[Component] = []
        self._starts: dict[str, int] = {}
        self._token: str | None = None
        self._password = secrets.token_urlsafe(12)
        self._extra_env = dict(extra_env or {})
        self.health_threshold_s = health_threshold_s
        self.task_heartbeat_timeout_s = task_heartbeat_timeout_s
        self.parallelism = parallelism
        self.min_deferral_s = self.default_min_deferral_s if min_deferral_s is None else min_deferral_s
        self._sqlalchemy_engine: Engine | None = None

    #: ``[zeta] min_deferral`` of every cluster that does not pass ``min_deferral_s``; ``None``
    #: leaves the provider's default (12 s), as the demo, the chaos soak and the benchmarks run it.
    #: The test session sets a shorter one (tests/conftest.py): the harness's scheduler loop is
    #: quick, and most of a fake driver's deferred task is that floor.
    default_min_deferral_s: float | None = None

    # ------------------------------------------------------------------ setup / teardown

    @property
    def db_kind(self) -> str:
        assert self.db is not None
        return self.db.kind

    def env(self) -> dict[str, str]:
        """The environment every component (and the CLI) runs with."""
        assert self.db is not None, "call prepare() first"
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW__")}
        env.update(
            {
                HARNESS_ENV_MARKER: self.cluster_id,
                "AIRFLOW_HOME": str(self.home),
                "PYTHONUNBUFFERED": "1",
                # The harness is not installed with the provider: a component that loads one of its
                # classes (the tests' auth manager, zeta_harness.auth) finds it at the repository root.
                "PYTHONPATH": os.pathsep.join(p for p in (str(REPOSITORY_ROOT), os.environ.get("PYTHONPATH", "")) if p),
                # A test arms a crash point by creating a file of its name here (crash_points.py).
                "ZETA_CRASH_POINTS": str(self.crash_points),
                "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags_folder),
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
                "AIRFLOW__CORE__PARALLELISM": str(self.parallelism),
                "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
                "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.api_url}/execution/",
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(self.home / "passwords.json"),
                "AIRFLOW__CORE__FERNET_KEY": base64.urlsafe_b64encode(
                    self.cluster_id.encode().ljust(32, b"0")
                ).decode(),
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": self.db.url,
                "AIRFLOW__API__BASE_URL": self.api_url,
                "AIRFLOW__API__HOST": "127.0.0.1",
                "AIRFLOW__API__PORT": str(self.api_port),
                "AIRFLOW__API__WORKERS": "1",
                # A database error's original message in the 500 response, so that the harness can
                # tell SQLite's "database is locked" (a rolled-back request, safe to send again)
                # from a real failure (_http).
                "AIRFLOW__API__EXPOSE_STACKTRACE": "True",
                "AIRFLOW__API__SECRET_KEY": f"zeta-{self.cluster_id}",
                "AIRFLOW__API_AUTH__JWT_SECRET": f"zeta-jwt-{self.cluster_id}-{self.cluster_id}",
                "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(self.home / "logs"),
                "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
                "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
                # Notice a dead component in seconds, with margin against spurious resets.
                "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
                "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_THRESHOLD": str(self.health_threshold_s),
                "AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL": "5",
                "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": str(self.task_heartbeat_timeout_s),
                "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "5",
                "AIRFLOW__SCHEDULER__PARSING_CLEANUP_INTERVAL": "30",
                "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "2",
                "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": str(self.health_threshold_s),
                "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
                # No periodic re-parse of unchanged DAG files: the dag-processor parses a file
                # again as soon as its modification time is past its last parse (sort mode
                # "modified_time", the default), so a test that writes a DAG file loses nothing,
                # while re-parsing tests/dags every 30 s took 5 of an idle cluster's 7 CPU seconds
                # a minute (2 with this), and the suite keeps four clusters up on 2 cores.
                "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "600",
                "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
                "AIRFLOW__DAG_PROCESSOR__STALE_DAG_THRESHOLD": "120",
                "AIRFLOW__ZETA__STATE_ROOT": str(self.home / "zeta-state"),
            }
        )
        if self.min_deferral_s is not None:
            env["AIRFLOW__ZETA__MIN_DEFERRAL"] = str(self.min_deferral_s)
        if self.executor == "CeleryExecutor":
            env.update(self._celery_env())
        env.update(self._extra_env)
        return env

    @property
    def celery_queue(self) -> str:
        return f"zeta-{self.cluster_id}"

    def _celery_env(self) -> dict[str, str]:
        assert self.db is not None
        return {
            "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
            "AIRFLOW__CELERY__BROKER_URL": REDIS_BROKER_URL,
            "AIRFLOW__CELERY__RESULT_BACKEND": "db+" + self.db.url,
            # Isolation from other clusters on the same Redis: every key under this cluster's prefix,
            # and every task on this cluster's own queue.
            "AIRFLOW__CELERY_BROKER_TRANSPORT_OPTIONS__GLOBAL_KEYPREFIX": f"{self.celery_queue}:",
            "AIRFLOW__CELERY_BROKER_TRANSPORT_OPTIONS__VISIBILITY_TIMEOUT": "21600",
            "AIRFLOW__OPERATORS__DEFAULT_QUEUE": self.celery_queue,
            "AIRFLOW__CELERY__WORKER_CONCURRENCY": str(self.celery_concurrency),
            # Client-mode Spark drivers on a host whose hostname resolves nowhere: bind to loopback.
            "SPARK_LOCAL_IP": "127.0.0.1",
        }

    def _drop_broker_keys(self) -> None:
        """Delete this cluster's keys (queue, bindings, unacked) from the shared Redis."""
        import redis

        client = redis.Redis.from_url(REDIS_BROKER_URL)
        try:
            keys = list(client.scan_iter(f"{self.celery_queue}:*", count=500))
            if keys:
                client.delete(*keys)
        finally:
            client.close()

    def component_names(self) -> tuple[str, ...]:
        """The components ``start()`` starts by default in this cluster's executor mode."""
        if self.executor != "CeleryExecutor":
            return COMPONENTS
        workers = tuple(f"{CELERY_WORKER_PREFIX}{n}" for n in range(1, self.celery_workers + 1))
        return (*MAIN_HOST_COMPONENTS, "triggerer", *workers)

    def _hosted(self, name: str) -> bool:
        return self.executor == "CeleryExecutor" and (name == "triggerer" or name.startswith(CELERY_WORKER_PREFIX))

    def prepare(self) -> None:
        """Create the metadata DB (unless given), write the users file, migrate (or copy a migrated one)."""
        template_key = migrated = None
        if self.db is None:
            if self._db_spec not in ("sqlite", "postgres"):
                raise ValueError(f"db must be 'sqlite', 'postgres' or a MetadataDatabase, got {self._db_spec!r}")
            template_key = SchemaTemplates.key(self._extra_env)
            self.db, migrated = SCHEMA_TEMPLATES.fresh(self._db_spec, self.home, template_key)
        (self.home / "component-logs").mkdir(exist_ok=True)
        (self.home / "passwords.json").write_text(json.dumps({"admin": self._password}))
        if not migrated:
            self.cli("db", "migrate", timeout=600)
            if template_key is not None:
                try:
                    SCHEMA_TEMPLATES.remember(self.db, self.home, template_key)
                except Exception as error:  # only an optimisation: the next cluster migrates itself
                    print(f"zeta harness: no schema template kept: {error}", file=sys.stderr)
        else:
            # The migrate CLI would have written airflow.cfg before any component starts; without it
            # the four components would each write it while the others read it.
            (self.home / "airflow.cfg").touch()

    def start(self, components: Iterable[str] | None = None, wait_healthy: bool = True) -> AirflowCluster:
        if self.db is None:
            self.prepare()
        for name in self.component_names() if components is None else components:
            self.start_component(name)
        if wait_healthy:
            self.wait_healthy()
        return self

    def stop(self) -> None:
        """Stop every process of this cluster (by PID), dispose DB connections, drop the DB."""
        self.stop_processes()
        if self._sqlalchemy_engine is not None:
            self._sqlalchemy_engine.dispose()
            self._sqlalchemy_engine = None
        if self.db is not None:
            with contextlib.suppress(Exception):
                self.db.drop()
        if self.executor == "CeleryExecutor":
            with contextlib.suppress(Exception):  # cleanup only: a broker gone already is fine
                self._drop_broker_keys()
        if not self.keep_home:
            shutil.rmtree(self.home, ignore_errors=True)
        teardown.unregister(self)  # zeta_harness/teardown.py: SIGTERM/SIGINT/atexit teardown

    def stop_processes(self) -> None:
        """SIGTERM the components, then SIGKILL whatever of the cluster is still alive."""
        for component in list(self.components.values()):
            with contextlib.suppress(ProcessLookupError):
                if component.host is not None:
                    component.host.terminate()
                else:
                    component.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        for component in list(self.components.values()):
            with contextlib.suppress(subprocess.TimeoutExpired):
                component.process.wait(timeout=max(0.1, deadline - time.monotonic()))
        for component in self.component_history:
            if component.host is not None and component.host.members():
                with contextlib.suppress(Exception):
                    component.host.kill()
        self.kill_leftover_processes()

    def __enter__(self) -> AirflowCluster:
        try:
            return self.start()
        except BaseException:
            self.print_logs()
            self.stop()
            raise

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()

    # ------------------------------------------------------------------ processes

    def cli(self, *args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
        """Run ``airflow <args>`` against this cluster's home and database."""
        result = subprocess.run(
            [_airflow_executable(), *args],
            env=self.env(),
            cwd=self.home,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and result.returncode != 0:
            raise ClusterError(
                f"`airflow {' '.join(args)}` exited {result.returncode}\n"
                f"stdout:\n{result.stdout[-4000:]}\nstderr:\n{result.stderr[-4000:]}"
            )
        return result

    def start_component(self, name: str, *, host_env: dict[str, str] | None = None, hostname: str | None = None) -> Component:
        """Start ``name``; in CeleryExecutor mode the triggerer and ``worker-N`` each start on a new
        namespace host (hostname ``<name>.<n>``, n counting this name's starts, unless ``hostname``
        names it — e.g. the name of another host, live or dead: a host is its namespaces, not its
        name) with ``host_env`` added to its environment."""
        if name not in COMPONENTS and not self._hosted(name):
            raise ValueError(f"unknown component {name!r}; expected one of {self.component_names()}")
        if (host_env or hostname) and not self._hosted(name):
            raise ValueError(f"host_env and hostname are for components on a namespace host; {name!r} runs on the main host")
        current = self.components.get(name)
        if current is not None and current.alive():
            raise ClusterError(f"{name} is already running as pid {current.pid}")
        self._starts[name] = self._starts.get(name, 0) + 1
        log_path = self.home / "component-logs" / f"{name}.{self._starts[name]}.log"
        teardown.register(self)  # zeta_harness/teardown.py: torn down on SIGTERM/SIGINT/exit too
        if self._hosted(name):
            return self._start_on_host(name, log_path, host_env or {}, hostname or f"{name}.{self._starts[name]}")
        log_file = open(log_path, "ab")
        args = [_airflow_executable(), name]
        if name == "api-server":
            args += ["--port", str(self.api_port), "--host", "127.0.0.1"]
        process = subprocess.Popen(
            args,
            env=self.env(),
            cwd=self.home,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log_file.close()
        component = Component(name=name, process=process, log_path=log_path, start_ticks=_start_ticks(process.pid))
        self.components[name] = component
        self.component_history.append(component)
        return component

    def _start_on_host(self, name: str, log_path: Path, host_env: dict[str, str], hostname: str) -> Component:
        if name == "triggerer":
            command = [_airflow_executable(), "triggerer"]
        else:
            # No log server: all workers share the network, so one port cannot serve each; task logs
            # are files in the shared home anyway.
            command = [_airflow_executable(), "celery", "worker", "--queues", self.celery_queue, "--skip-serve-logs"]
        host = NamespaceHost(
            hostname,
            command,
            env={**self.env(), **host_env},
            cwd=self.home,
            log_path=log_path,
        ).start()
        assert host.process is not None  # start() returned: the host's unshare process runs
        component = Component(
            name=name, process=host.process, log_path=log_path, start_ticks=_start_ticks(host.pid), host=host
        )
        self.components[name] = component
        self.component_history.append(component)
        return component

    def host(self, name: str) -> NamespaceHost:
        """The namespace host that runs component ``name`` now (CeleryExecutor mode)."""
        component = self.components.get(name)
        if component is None or component.host is None:
            raise ClusterError(f"{name} does not run on a namespace host")
        return component.host

    def kill_host(self, name: str) -> list[int]:
        """Kill every process of the host that runs ``name`` (its Celery worker and the detached
        drivers it launched, or the triggerer); returns their PIDs. ``host(name).killed_at`` tells when."""
        return self.host(name).kill()

    def arm_crash_point(self, name: str, run_id: str, hold: float = 0.0) -> Path:
        """Arm the named crash point (``airflow_provider_zeta.crash_points``) once, for the triggers
        of ``run_id``; the returned file disappears when one reaches the point and kills its
        component — at once, or after holding there for ``hold`` seconds while the rest runs on."""
        armed = self.crash_points / name
        (self.crash_points / f"{name}.release").unlink(missing_ok=True)
        armed.write_text(f"{run_id} hold={hold:g}\n" if hold else f"{run_id}\n")
        return armed

    def arm_freeze_point(self, name: str, run_id: str) -> Path:
        """Arm the named crash point once to freeze its caller's component (SIGSTOP of its process
        group) instead of killing it; ``set_aside`` and ``thaw`` take it from there."""
        armed = self.crash_points / name
        armed.write_text(f"{run_id} freeze\n")
        return armed

    def set_aside(self, name: str) -> Component:
        """Take the (frozen) component ``name`` out of the running set without stopping it, so that
        a new ``name`` can start beside it; it stays in the history and is torn down with the rest."""
        return self.components.pop(name)

    def thaw(self, component: Component) -> None:
        """Continue every process of a component frozen by a freeze point."""
        os.killpg(component.pid, signal.SIGCONT)

    def release_crash_point(self, name: str) -> None:
        """End the hold of a crash point armed with one (``arm_crash_point``): its caller kills its
        component now."""
        (self.crash_points / f"{name}.release").write_text("go\n")

    def kill(self, name: str, sig: int = signal.SIGKILL) -> int:
        """Send ``sig`` (default ``SIGKILL``) to the component's own PID, like a crash of that process.

        Only that PID is signalled: children (LocalExecutor workers and their tasks) survive a
        killed scheduler, as they do in production. A component on a namespace host loses its
        whole host instead (``kill_host``).
        """
        component = self.components.get(name)
        if component is None or not component.alive():
            raise ClusterError(f"{name} is not running")
        if component.host is not None:
            component.host.kill()
            return component.pid
        os.kill(component.pid, sig)
        component.process.wait(timeout=30)
        return component.pid

    def restart(self, name: str) -> Component:
        component = self.components.get(name)
        if component is not None and component.alive():
            self.kill(name)
        return self.start_component(name)

    def harness_processes(self) -> list[dict[str, Any]]:
        """Every live process started by this cluster or by its children (pid, ppid, cmdline)."""
        # A component's session id is its PID. Linux does not hand out a PID while a session of
        # that id still has members, but once a dead component's session is empty its PID may go
        # to a process of someone else (another cluster's component, a session leader too): a
        # live process on that PID with another start time means the session is no longer ours.
        sessions = {
            component.pid
            for component in self.component_history
            if _start_ticks(component.pid) in (None, component.start_ticks)
        }
        found = []
        for pid in _all_pids():
            if pid == os.getpid():
                continue
            stat = _stat(pid)
            if stat is None:
                continue
            ppid, session = stat
            if session in sessions or _environ_marker(pid) == self.cluster_id:
                found.append({"pid": pid, "ppid": ppid, "cmdline": _cmdline(pid)})
        return found

    def kill_leftover_processes(self) -> list[int]:
        killed = []
        for _ in range(3):  # a dying parent may spawn or reap children meanwhile
            procs = self.harness_processes()
            if not procs:
                break
            for proc in procs:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(proc["pid"], signal.SIGKILL)
                    killed.append(proc["pid"])
            for component in self.component_history:
                with contextlib.suppress(Exception):
                    component.process.wait(timeout=1)
            time.sleep(0.3)
        return killed

    # ------------------------------------------------------------------ REST API

    def token(self) -> str:
        if self._token is None:
            response = self._http(
                "POST", "/auth/token", body={"username": "admin", "password": self._password}, auth=False
            )
            self._token = response["access_token"]
        return self._token

    def api(self, method: str, path: str, body: Any = None, *, expect: Iterable[int] = (200, 201)) -> Any:
        """Call the public REST API (``path`` relative to ``/api/v2``)."""
        return self._http(method, f"/api/v2{path}", body=body, expect=expect)

    def asset_events(self, limit: int = 100, timeout: float = 60, **filters: str) -> list[dict]:
        """``GET /assets/events`` (``filters`` such as ``source_dag_id``, ``source_run_id`` are
        passed as query parameters), asked again while it answers 500: Airflow 3.3.2 fails the
        whole listing while an event's asset-triggered run is still queued (its ``start_date`` is
        None; apache/airflow#71360, fixed upstream by #71379). The run starts within seconds."""
        query = urllib.parse.urlencode({**filters, "limit": limit})
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.api("GET", f"/assets/events?{query}")["asset_events"]
            except ClusterError as error:
                if "HTTP 500" not in str(error) or time.monotonic() > deadline:
                    raise
            time.sleep(1)

    def _http(
        self, method: str, path: str, body: Any = None, *, auth: bool = True, expect: Iterable[int] = (200, 201)
    ) -> Any:
        expect = set(expect)
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if auth:
            headers["Authorization"] = f"Bearer {self.token()}"
        # Room for several sends: one send may itself wait the whole busy timeout before it is
        # refused (the API server's audit-log commit runs on its event loop, so while SQLite waits
        # the whole server stalls; make demo's first POST /dagRuns met it).
        locked_deadline = time.monotonic() + 4 * SQLITE_BUSY_TIMEOUT_S
        while True:
            request = urllib.request.Request(self.api_url + path, data=data, method=method, headers=headers)
            try:
                # Longer than SQLite's busy timeout (MetadataDatabase.fresh_sqlite): a request that
                # waits for the database lock gets its answer instead of a client-side timeout
                # (make demo's first POST timed out at 30 s on a loaded machine).
                with urllib.request.urlopen(request, timeout=SQLITE_BUSY_TIMEOUT_S + 30) as response:
                    status, payload = response.status, response.read()
            except urllib.error.HTTPError as error:
                status, payload = error.code, error.read()
                if status == 401 and auth and self._token is not None:
                    self._token = None  # expired: log in again once
                    return self._http(method, path, body, auth=auth, expect=expect)
            # On SQLite a request that meets another writer past the busy timeout fails with
            # "database is locked" (seen on the audit-log INSERT of POST /backfills right after a
            # scheduler restart): its transaction was rolled back, nothing was written, so the
            # same request is sent again, as a client of a busy SQLite deployment would.
            if status == 500 and b"database is locked" in payload and time.monotonic() < locked_deadline:
                time.sleep(1)
                continue
            break
        if status not in expect:  # before parsing: an error page need not be JSON
            raise ClusterError(f"{method} {path} -> HTTP {status}: {payload[:2000]!r}")
        return json.loads(payload) if payload else None

    def wait_healthy(self, timeout: float = 180) -> None:
        """Wait until the API answers and reports a healthy metadatabase, scheduler and triggerer."""

        def healthy():
            self._assert_components_alive()
            try:
                health = self._http("GET", "/api/v2/monitor/health", auth=False)
            except (OSError, ClusterError):
                return None
            statuses = {
                part: (health.get(part) or {}).get("status")
                for part in ("metadatabase", "scheduler", "triggerer", "dag_processor")
            }
            wanted = {"metadatabase"} | {
                part.replace("-", "_") for part in self.components if part in ("scheduler", "triggerer", "dag-processor")
            }
            return health if all(statuses.get(part) == "healthy" for part in wanted) else None

        self.wait_for(healthy, timeout, "all components healthy")

    def _assert_components_alive(self) -> None:
        for component in self.components.values():
            if not component.alive():
                raise ClusterError(
                    f"{component.name} (pid {component.pid}) exited with {component.process.returncode}; "
                    f"log tail:\n{_tail(component.log_path, 60)}"
                )

    def wait_for_dag(self, dag_id: str, timeout: float = 180) -> dict:
        """Wait until the dag-processor has parsed ``dag_id``; fail fast on its import error."""

        last_answer: list[Any] = [None]

        def parsed():
            errors = self.import_errors()
            if errors:
                raise ClusterError(f"import errors while waiting for {dag_id}: {json.dumps(errors, indent=1)}")
            # 404 (a JSON body with "detail") until the dag-processor has parsed the DAG's file: it
            # parses one file at a time, so on a fresh database one DAG can be there seconds
            # before another.
            dag = last_answer[0] = self.api("GET", f"/dags/{dag_id}", expect=(200, 404))
            return dag if dag and dag.get("dag_id") == dag_id else None

        try:
            return self.wait_for(parsed, timeout, f"DAG {dag_id} parsed")
        except ClusterError as error:
            raise ClusterError(f"{error}; the API's last answer: {last_answer[0]}") from None

    def import_errors(self) -> list[dict]:
        return self.api("GET", "/importErrors?limit=100")["import_errors"]

    def trigger_run(
        self,
        dag_id: str,
        logical_date: str | None = None,
        *,
        run_id: str | None = None,
        conf: dict | None = None,
        no_logical_date: bool = False,
    ) -> str:
        """Trigger a DAG run; returns its run_id. ``logical_date`` is ISO-8601 (UTC if naive)."""
        body: dict[str, Any] = {"conf": conf or {}}
        if no_logical_date:
            body["logical_date"] = None
        else:
            body["logical_date"] = _iso_utc(logical_date) if logical_date else _iso_utc(None)
        if run_id:
            body["dag_run_id"] = run_id
        return self.api("POST", f"/dags/{dag_id}/dagRuns", body)["dag_run_id"]

    def dag_run(self, dag_id: str, run_id: str) -> dict:
        return self.api("GET", f"/dags/{dag_id}/dagRuns/{_q(run_id)}")

    def delete_run(self, dag_id: str, run_id: str) -> None:
        """Delete a DAG run, as the UI's "Delete" does (its task instances and XComs go with it)."""
        self.api("DELETE", f"/dags/{dag_id}/dagRuns/{_q(run_id)}", expect=(204,))

    def wait_for_run(
        self, dag_id: str, run_id: str, states: Iterable[str] = ("success",), timeout: float = 300
    ) -> dict:
        """Wait until the run is in one of ``states``; a different terminal state fails at once."""
        states = set(states)

        def reached():
            run = self.dag_run(dag_id, run_id)
            if run["state"] in states:
                return run
            if run["state"] in TERMINAL_RUN_STATES:
                raise ClusterError(
                    f"run {dag_id}/{run_id} ended {run['state']}, expected {sorted(states)}; "
                    f"tasks: {self.ti_summary(dag_id, run_id)}"
                )
            return None

        return self.wait_for(reached, timeout, f"run {dag_id}/{run_id} in {sorted(states)}")

    def task_instances(self, dag_id: str, run_id: str) -> list[dict]:
        return self.api("GET", f"/dags/{dag_id}/dagRuns/{_q(run_id)}/taskInstances?limit=1000")["task_instances"]

    def task_instance(
        self, dag_id: str, run_id: str, task_id: str, map_index: int = -1, expect: Iterable[int] = (200,)
    ) -> dict:
        suffix = f"/{map_index}" if map_index >= 0 else ""
        return self.api("GET", f"/dags/{dag_id}/dagRuns/{_q(run_id)}/taskInstances/{task_id}{suffix}", expect=expect)

    def task_tries(self, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> list[dict]:
        suffix = f"/{map_index}" if map_index >= 0 else ""
        path = f"/dags/{dag_id}/dagRuns/{_q(run_id)}/taskInstances/{task_id}{suffix}/tries"
        return self.api("GET", path)["task_instances"]

    def wait_for_task(
        self,
        dag_id: str,
        run_id: str,
        task_id: str,
        states: Iterable[str],
        timeout: float = 300,
        map_index: int = -1,
    ) -> dict:
        states = set(states)

        def reached():
            # 404 until the scheduler has created the run's task instances (a run just triggered
            # on a shared cluster right after a scheduler restart can take over a second).
            ti = self.task_instance(dag_id, run_id, task_id, map_index, expect=(200, 404))
            return ti if ti and ti.get("state") in states else None

        return self.wait_for(
            reached,
            timeout,
            f"task {dag_id}/{run_id}/{task_id} in {sorted(states)}",
            describe=lambda: self.ti_summary(dag_id, run_id),
        )

    def xcom(self, dag_id: str, run_id: str, task_id: str, key: str = "return_value", map_index: int = -1) -> Any:
        """The XCom value, or ``None`` when the task has not pushed it."""
        path = f"/dags/{dag_id}/dagRuns/{_q(run_id)}/taskInstances/{task_id}/xcomEntries/{_q(key)}"
        path += f"?map_index={map_index}&deserialize=true"
        entry = self.api("GET", path, expect=(200, 404))
        if entry is None or "value" not in entry:
            return None
        return entry["value"]

    def task_state(self, dag_id: str, run_id: str, task_id: str, key: str | None = None, map_index: int = -1) -> Any:
        """A task state store value (``key``), all of the task's keys as a dict (no key), or None."""
        base = f"/dags/{dag_id}/dagRuns/{_q(run_id)}/taskInstances/{task_id}/state-store"
        if key is None:
            response = self.api("GET", f"{base}?map_index={map_index}&limit=1000", expect=(200, 404))
            if not response or "task_state_store" not in response:
                return {}
            return {entry["key"]: entry["value"] for entry in response["task_state_store"]}
        entry = self.api("GET", f"{base}/{_q(key)}?map_index={map_index}", expect=(200, 404))
        return None if entry is None or "value" not in entry else entry["value"]

    def clear_run(self, dag_id: str, run_id: str) -> dict:
        return self.api("POST", f"/dags/{dag_id}/dagRuns/{_q(run_id)}/clear", {"dry_run": False})

    def set_run_state(self, dag_id: str, run_id: str, state: str) -> dict:
        return self.api("PATCH", f"/dags/{dag_id}/dagRuns/{_q(run_id)}", {"state": state})

    # ------------------------------------------------------------------ direct DB (read-only checks)

    def db_query(self, sql: str, **params: Any) -> list[dict]:
        """Run a read-only SQL query against the metadata DB from the test process."""
        import sqlalchemy

        if self._sqlalchemy_engine is None:
            assert self.db is not None
            self._sqlalchemy_engine = sqlalchemy.create_engine(self.db.url)
        with self._sqlalchemy_engine.connect() as conn:
            return [dict(row._mapping) for row in conn.execute(sqlalchemy.text(sql), params)]

    # ------------------------------------------------------------------ waiting and diagnostics

    def wait_for(
        self,
        probe: Callable[[], Any],
        timeout: float,
        what: str,
        interval: float = 1.0,
        describe: Callable[[], str] | None = None,
    ) -> Any:
        """Poll ``probe`` until it returns something truthy; raise ``ClusterError`` on timeout,
        with what ``describe`` says of the state that was reached instead."""
        deadline = time.monotonic() + timeout
        last_error: Exception | None = None
        while True:
            try:
                result = probe()
                if result:
                    return result
            except ClusterError:
                raise
            except (OSError, ValueError) as error:  # API restarting, connection refused, ...
                last_error = error
            if time.monotonic() > deadline:
                reached = f"; reached: {describe()}" if describe is not None else ""
                raise ClusterError(
                    f"timed out after {timeout:.0f}s waiting for {what} (last error: {last_error}){reached}; "
                    f"components: {self.component_summary()}"
                )
            time.sleep(interval)

    def component_summary(self) -> str:
        """Each current component, alive or with its exit code: a component that died explains a
        wait in which nothing moved."""
        return ", ".join(
            f"{name}={'alive' if component.alive() else f'exited {component.process.returncode}'}"
            for name, component in self.components.items()
        )

    def ti_summary(self, dag_id: str, run_id: str) -> str:
        try:
            return ", ".join(
                f"{ti['task_id']}{_map_suffix(ti['map_index'])}={ti['state']}(try {ti['try_number']})"
                for ti in self.task_instances(dag_id, run_id)
            )
        except Exception as error:  # diagnostics must not hide the original failure
            return f"<unavailable: {error}>"

    def logs(self, tail_lines: int = 80) -> str:
        """Tails of every component log and of every task log, for a failed test's report."""
        parts = []
        for component in self.component_history:
            parts.append(f"===== {component.log_path.name} (pid {component.pid}) =====\n{_tail(component.log_path, tail_lines)}")
        task_logs = sorted((self.home / "logs").rglob("*.log")) if (self.home / "logs").exists() else []
        for path in task_logs[-20:]:
            parts.append(f"===== {path.relative_to(self.home)} =====\n{_tail(path, tail_lines)}")
        return "\n".join(parts)

    def print_logs(self, tail_lines: int = 80, file=None) -> None:
        print(self.logs(tail_lines), file=file or sys.stderr)


# ---------------------------------------------------------------------- helpers


def _airflow_executable() -> str:
    candidate = Path(sys.executable).with_name("airflow")
    return str(candidate) if candidate.exists() else "airflow"


def _iso_utc(value: str | None) -> str:
    from datetime import datetime

    if value is None:
        return datetime.now(UTC).isoformat()
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.isoformat()


def _q(value: str) -> str:
    return urllib.parse.quote(value, safe="")


def _tail(path: Path, lines: int) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 200 * lines))
            return "\n".join(handle.read().decode(errors="replace").splitlines()[-lines:])
    except OSError as error:
        return f"<cannot read {path}: {error}>"


def _all_pids() -> list[int]:
    return psutil.pids()


def _environ_marker(pid: int) -> str | None:
    try:
        return psutil.Process(pid).environ().get(HARNESS_ENV_MARKER)
    except (psutil.Error, OSError):
        return None


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, session id) of a live process, or None. Zombies count as gone."""
    try:
        process = psutil.Process(pid)
        with process.oneshot():
            if process.status() == psutil.STATUS_ZOMBIE:
                return None
            return process.ppid(), os.getsid(pid)
    except (psutil.Error, OSError):
        return None


def _start_ticks(pid: int) -> int | None:
    """Start time (clock ticks since boot) of a live process, or None.

    Read from ``/proc`` because psutil's ``create_time()`` is seconds since the epoch (boot time by
    the wall clock plus these ticks): a clock step between two readings would make one process two."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _cmdline(pid: int) -> str:
    try:
        return " ".join(psutil.Process(pid).cmdline()).strip()
    except (psutil.Error, OSError):
        return ""


def _map_suffix(map_index: int) -> str:
    """``[<map index>]`` for a mapped task instance, nothing for an unmapped one."""
    return "" if map_index < 0 else f"[{map_index:d}]"
