"""A real multi-host deployment on one machine: CeleryExecutor across namespace hosts, host kills (G1, G6, G8).

Topology (``testing/hosts.py``, ``AirflowCluster(executor="CeleryExecutor")``): PostgreSQL metadata
DB; Redis broker; api-server, scheduler and dag-processor on the main host; two Celery workers and
the triggerer each on a host of its own (PID + mount + UTS namespace, own hostname, private /tmp);
a Spark standalone cluster (master + 2 workers) running each job in client mode, so the driver
lives on the Celery worker host that launched it. Only the home (state root, output table, logs)
is shared, as NFS would be.

The pipeline ``pipeline_hosts`` (two sources, real PySpark) runs while the test kills a whole
worker host (every process of its namespace: the Celery worker and the drivers it launched) and the
triggerer host while tasks are deferred, then starts replacement hosts. Oracles, none of them the
provider's bookkeeping:

* the published partition holds exactly the expected rows of every source (Parquet on disk);
* a job that logged its end is never launched again (the jobs' own launch log);
* a job that died with its host is redeployed at most once, and on another host;
* no two drivers of one task key alive at the same moment: lives from the jobs' start/end entries,
  a killed driver's life ending when the test saw its host's last process die;
* nothing of the run left in the state root or the table after the retention window, and no
  driver process alive.

Then the misconfigured deployment: every host gets its own, unshared state root (in its private
/tmp). The deploy must fail with an error naming ``[zeta] state_root`` and launch nothing more.

The ``soak`` variant (``make chaos``) repeats the host-kill run on more dates.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import pytest

from airflow_provider_zeta.processes import pids_carrying
from airflow_provider_zeta.testing.chaos import driver_lives, entries, overlapping_drivers, relaunches
from airflow_provider_zeta.testing.cluster import CELERY_WORKER_PREFIX, REDIS_BROKER_URL, AirflowCluster
from airflow_provider_zeta.testing.hosts import unshare_available
from airflow_provider_zeta.testing.leftovers import leftovers_past_due
from airflow_provider_zeta.testing.spark_standalone import SparkStandaloneCluster
from tests.conftest import FAKE_SPARK_DIR, IN_CI, PROJECT_ROOT, _finish, require_postgres

DAG_ID = "pipeline_hosts"
SOURCES = ("north", "south")
RETENTION_S = 5
# Liveness settings of the cluster: a dead driver is judged lost within seconds, not a minute.
LOST_AFTER_S = 15


def expected_row_count(source: str) -> int:  # tests/jobs/counting_job.py's rule
    return 3 + sum(map(ord, source)) % 10


def _require(condition_error: str | None) -> None:
    if condition_error is None:
        return
    if IN_CI:
        pytest.fail(f"{condition_error}, and CI=true forbids skipping the multi-host test")
    pytest.skip(condition_error)


def _redis_unreachable() -> str | None:
    try:
        with socket.create_connection(("127.0.0.1", 6379), timeout=2):
            return None
    except OSError as error:
        return f"Redis is not reachable at 127.0.0.1:6379 ({REDIS_BROKER_URL}): {error}"


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


@pytest.fixture(scope="module")
def hosts_cluster(request):
    require_postgres()
    _require(unshare_available())
    _require(_redis_unreachable())
    failures_before = request.session.testsfailed
    spark = SparkStandaloneCluster(cores=1, memory="1g", workers=2).start()
    cluster = AirflowCluster(
        PROJECT_ROOT / "tests" / "dags",
        db="postgres",
        executor="CeleryExecutor",
        celery_workers=2,
        extra_env={
            "AIRFLOW_CONN_SPARK_DEFAULT": spark.connection_json(),
            "AIRFLOW__ZETA__DRIVER_HEARTBEAT_INTERVAL": "2",
            "AIRFLOW__ZETA__DRIVER_LOST_AFTER": str(LOST_AFTER_S),
        },
    )
    try:
        cluster.start()
        cluster.wait_for_dag(DAG_ID)
    except BaseException:
        _finish(cluster, True, "startup of the multi-host cluster")
        spark.stop()
        raise
    cluster.spark = spark
    yield cluster
    try:
        _finish(cluster, request.session.testsfailed > failures_before, "hosts_cluster")
    finally:
        spark.stop()


def workers(cluster: AirflowCluster) -> list[str]:
    return sorted(name for name in cluster.components if name.startswith(CELERY_WORKER_PREFIX))


def component_on_host(cluster: AirflowCluster, hostname: str) -> str | None:
    """The component whose live host is ``hostname`` (unique per host: ``<component>.<n>``)."""
    for name, component in cluster.components.items():
        if component.host is not None and component.host.hostname == hostname and component.alive():
            return name
    return None


def starts(launch_log: Path, source: str) -> list[dict]:
    return [e for e in entries(launch_log) if "end" not in e and e["source"] == source]


def ended(launch_log: Path, token: str) -> bool:
    return any(e.get("end") and e["token"] == token for e in entries(launch_log))


def rows_of(folder: Path) -> list[int]:
    import pyarrow.parquet as pq

    return sorted(pq.read_table(folder).column("n").to_pylist())


def run_with_host_kills(cluster: AirflowCluster, ds: str) -> dict:
    """One pipeline run on ``ds`` with a worker host and the triggerer host killed; asserts the
    oracles of the module docstring and returns the figures (for docs/chaos.md)."""
    home = cluster.home
    launch_log, release = home / f"launch-{ds}.jsonl", home / f"release-{ds}"
    release.mkdir()
    output = home / "pipeline-output-hosts"
    run_id = cluster.trigger_run(
        DAG_ID, f"{ds}T00:00:00Z", conf={"launch_log": str(launch_log), "release_dir": str(release), "cleanup_delay": RETENTION_S}
    )
    started = time.monotonic()
    cluster.wait_for(lambda: all(starts(launch_log, s) for s in SOURCES), 240, "both drivers started", interval=0.5)
    log(f"{ds}: drivers up on {[(e['source'], e['host']) for e in entries(launch_log)]}")

    # south runs to its end first: a completed job whose host may die after it.
    (release / "south").touch()
    south = starts(launch_log, "south")[0]
    cluster.wait_for(lambda: ended(launch_log, south["token"]), 180, "south's driver to end", interval=0.5)

    # Kill the whole host of north's running driver.
    north = starts(launch_log, "north")[0]
    victim = component_on_host(cluster, north["host"])
    assert victim is not None, f"north's driver ran on no known host: {north}"
    killed_pids = cluster.kill_host(victim)
    host_kills = {north["host"]: cluster.host(victim).killed_at}
    log(f"{ds}: killed host {cluster.host(victim).hostname} ({len(killed_pids)} processes)")
    assert not pids_carrying(north["token"]), "north's driver survived the kill of its host"

    # While north's deploy task is deferred on its dead driver: kill the triggerer host, then
    # replace both hosts as a supervisor would.
    cluster.wait_for(
        lambda: cluster.task_instance(DAG_ID, run_id, "hosts.deploy_north")["state"] == "deferred", 60,
        "north's deploy task deferred", interval=0.5,
    )
    triggerer = cluster.host("triggerer")
    cluster.kill_host("triggerer")
    host_kills[triggerer.hostname] = triggerer.killed_at
    log(f"{ds}: killed the triggerer host {triggerer.hostname} while north is deferred")
    time.sleep(3)
    cluster.start_component("triggerer")
    cluster.start_component(victim)
    (release / "north").touch()

    cluster.wait_for_run(DAG_ID, run_id, timeout=420)
    run_s = time.monotonic() - started
    log(f"{ds}: run succeeded after {run_s:.0f}s")
    log_entries = entries(launch_log)
    now = time.time()

    # Exact rows in the published partition.
    for source in SOURCES:
        folder = output / f"ds={ds}" / f"source={source}"
        assert rows_of(folder) == list(range(expected_row_count(source))), f"{source}: wrong rows in {folder}"

    # A completed job is never launched again; a job that died with its host at most once more,
    # on another host.
    violations, redeploys = relaunches(log_entries)
    assert violations == [], violations
    lives = driver_lives(log_entries, host_kills, now)
    killed = [life for life in lives if life.ended_by == "host_killed"]
    assert [life.token for life in killed] == [north["token"]], f"drivers killed with a host: {killed}"
    north_launches = starts(launch_log, "north")
    assert len(north_launches) == 2, f"north should be redeployed exactly once after its host died: {north_launches}"
    assert north_launches[1]["host"] != north["host"], "the redeploy ran on the dead host"
    assert len(starts(launch_log, "south")) == 1, starts(launch_log, "south")
    assert all(life.ended_by == "end" for life in lives if life not in killed), lives

    # No two drivers of one task key alive at the same moment.
    overlaps = overlapping_drivers(lives)
    overlap_s = sum(seconds for _, _, seconds in overlaps)
    assert overlaps == [], [(a.token, b.token, f"{s:.1f}s") for a, b, s in overlaps]
    gap = north_launches[1]["at"] - host_kills[north["host"]]

    # After the retention window: nothing left of the run; no driver alive.
    deadline = time.monotonic() + 90
    while (left := leftovers_past_due(home / "zeta-state", [output], dag_ids=[DAG_ID])) and time.monotonic() < deadline:
        time.sleep(2)
    assert left == [], left
    alive = {e["token"]: pids_carrying(e["token"]) for e in log_entries if "end" not in e}
    assert not any(alive.values()), f"driver processes alive after the run: {alive}"
    return {
        "ds": ds,
        "run_s": round(run_s),
        "launches": len([e for e in log_entries if "end" not in e]),
        "redeploys": sum(redeploys.values()),
        "overlap_s": overlap_s,
        "kill_to_redeploy_start_s": round(gap, 1),
        "host_kills": 2,
    }


def test_worker_and_triggerer_host_kills_keep_one_driver_at_a_time(hosts_cluster):
    figures = run_with_host_kills(hosts_cluster, "2026-02-01")
    log(f"figures: {json.dumps(figures)}")


@pytest.mark.soak
def test_host_kills_soak(hosts_cluster):
    figures = [run_with_host_kills(hosts_cluster, f"2026-02-{day:02d}") for day in range(2, 6)]
    log(f"soak figures: {json.dumps(figures)}")


def test_unshared_state_root_is_refused_not_duplicated(hosts_cluster):
    """Every worker host and the triggerer with its own state root: the deploy's observer cannot
    see what the launching host wrote. It must fail naming ``[zeta] state_root`` and never read that
    as "the driver never started" (which would launch a second driver every grace period)."""
    cluster = hosts_cluster
    private = {
        # Inside each host's private /tmp: the same path, a different directory on every host.
        "AIRFLOW__ZETA__STATE_ROOT": "/tmp/zeta-state-unshared",
        # No JVM: the fake spark-submit runs the real driver bootstrap; the point here is the launches.
        "PATH": f"{FAKE_SPARK_DIR}:{os.environ.get('PATH', '')}",
    }
    for name in ["triggerer", *workers(cluster)]:
        if cluster.components[name].alive():
            cluster.kill_host(name)
        cluster.start_component(name, host_env=private)
    launch_log, release = cluster.home / "launch-unshared.jsonl", cluster.home / "release-unshared"
    release.mkdir()  # never released: the first drivers keep running
    run_id = cluster.trigger_run(
        DAG_ID, "2026-03-01T00:00:00Z", conf={"launch_log": str(launch_log), "release_dir": str(release), "spark": ""}
    )
    deploys = [f"hosts.deploy_{source}" for source in SOURCES]

    def settled():
        launches = [e for e in entries(launch_log) if "end" not in e]
        if any(len([e for e in launches if e["source"] == s]) > 1 for s in SOURCES):
            return "second launch"
        states = {cluster.task_instance(DAG_ID, run_id, task)["state"] for task in deploys}
        return "deploys ended" if states <= {"failed", "success", "upstream_failed"} else None

    outcome = cluster.wait_for(settled, 240, "a second launch or the deploy tasks to end", interval=1)
    launches = [e for e in entries(launch_log) if "end" not in e]
    per_source = {s: len([e for e in launches if e["source"] == s]) for s in SOURCES}
    log(f"unshared state root: {outcome}; launches per source {per_source}")
    assert per_source == {s: 1 for s in SOURCES}, f"second launches with an unshared state root: {launches}"
    states = {task: cluster.task_instance(DAG_ID, run_id, task)["state"] for task in deploys}
    assert set(states.values()) == {"failed"}, states
    run_logs = cluster.home / "logs" / f"dag_id={DAG_ID}" / f"run_id={run_id}"
    texts = "\n".join(path.read_text(errors="replace") for path in run_logs.rglob("*") if path.is_file())
    assert "[zeta] state_root" in texts, f"no error naming [zeta] state_root in the task logs under {run_logs}"
