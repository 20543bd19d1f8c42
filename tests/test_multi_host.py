"""A real multi-host deployment on one machine: CeleryExecutor across namespace hosts, host kills (G1, G6, G8).

Topology (``zeta_harness/hosts.py``, ``AirflowCluster(executor="CeleryExecutor")``): PostgreSQL metadata
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

A source marked failed while its driver ran on one worker host, its run cleaned up, then the run
cleared while that host is down: the new try, on the other host, cannot check the old driver's
process; it must wait until the deleted attempt has certainly stopped, launch once, and publish.

Then the misconfigured deployment: every host gets its own, unshared state root (in its private
/tmp). The deploy must fail with an error naming ``[zeta] state_root`` and launch nothing more.

A frozen worker host (a paused VM: every process of it stopped, the Celery worker, the driver and
its JVM) for longer than twice ``lost_after``, while the other worker host is replaced by one that
takes the frozen host's hostname (a rebuilt VM, a StatefulSet pod): north is judged lost and
relaunched on that namesake meanwhile, and not before the silence bound (1.25 x ``lost_after``,
from ``pipeline_hosts_long_lease``, whose bound stands clear of Airflow's retry overhead). Oracles,
from the job's own files, the kernel's file times and process table: the new attempt's first file
is written no sooner than the bound after the old driver's last ledger write; the old driver's job
process is dead before its replacement starts (the lease's kernel timer ends it while it is
stopped), it writes nothing once resumed (no progress line, no staged file, no ledger write, no
report), every process of it ends soon after the thaw, and only the replacement's rows are published.

A worker host whose wall clock is off by minutes (libfaketime; its monotonic and boot clocks
true): it launches both drivers 7 minutes behind (or ahead of) the triggerer and the other worker
host, so each heartbeat its drivers stamp looks 7 minutes old (or 7 minutes in the future) to every
observer. A live driver is never taken as lost, and north, killed with its host, is replaced once,
on the other host, only after the silence bound counted on the observers' clocks — not sooner, not
minutes later. Oracles: the jobs' own launch log (with the host's clock
in its ``at``), the ledger's heartbeat stamp, the kernel's process table, the published rows.

The ``soak`` variant (``make chaos``) repeats the host-kill run on more dates.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pytest

from airflow_provider_zeta.core.ledger import STOPPED_AFTER_FACTOR
from airflow_provider_zeta.processes import pids_carrying
from tests.conftest import FAKE_SPARK_DIR, IN_CI, PROJECT_ROOT, _finish, require_postgres
from zeta_harness.chaos import driver_lives, entries, overlapping_drivers, relaunches
from zeta_harness.cluster import CELERY_WORKER_PREFIX, REDIS_BROKER_URL, AirflowCluster
from zeta_harness.hosts import NamespaceHost, process_state, skewed_clock_unavailable, skewed_wall_clock_env, unshare_available
from zeta_harness.leftovers import leftovers_past_due, run_directory
from zeta_harness.published import read_partition
from zeta_harness.spark_standalone import SparkStandaloneCluster

# One module-scoped cluster: these tests run in one test process (xdist group, pytest.ini).
pytestmark = pytest.mark.xdist_group("multi_host_cluster")

DAG_ID = "pipeline_hosts"
#: The same pipeline with a longer ``lost_after`` of its own (tests/dags/pipeline_hosts.py,
#: ``LONG_LEASE_LOST_AFTER_S``), for the frozen-host test's check of the silence bound.
LONG_LEASE_DAG_ID, LONG_LEASE_LOST_AFTER_S = "pipeline_hosts_long_lease", 45
SOURCES = ("north", "south")
RETENTION_S = 5
# Liveness settings of the cluster: a dead driver is judged lost within seconds, not a minute.
LOST_AFTER_S = 15
HEARTBEAT_INTERVAL_S = 2


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
        # A task running on a killed host keeps its CeleryExecutor slot for the scheduler's life
        # (its Celery state never turns final), and this module kills hosts in every test: with
        # the default 8 slots, the last test's tasks waited for "0 open slots" on a loaded machine.
        parallelism=64,
        extra_env={
            "AIRFLOW_CONN_SPARK_DEFAULT": spark.connection_json(),
            "AIRFLOW__ZETA__DRIVER_HEARTBEAT_INTERVAL": str(HEARTBEAT_INTERVAL_S),
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


def job_processes(token: str) -> list[int]:
    """Live processes of the driver of ``token`` that run the job's own code: every process
    carrying the token but its JVM (a killed process its stopped parent has not reaped yet is dead)."""
    def comm(pid: int) -> str:
        try:
            return Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            return ""

    return [pid for pid in pids_carrying(token) if process_state(pid) not in ("Z", "X") and comm(pid) != "java"]


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


def test_a_frozen_worker_host_resumes_with_its_driver_gone(hosts_cluster):
    """North's worker host frozen for over 2 x lost_after while its driver runs, its replacement
    worker host started under the frozen host's hostname (module docstring)."""
    cluster = hosts_cluster
    home, ds, dag_id, lost_after = cluster.home, "2026-03-03", LONG_LEASE_DAG_ID, LONG_LEASE_LOST_AFTER_S
    launch_log, progress_log, release = home / f"launch-{ds}.jsonl", home / f"progress-{ds}.jsonl", home / f"release-{ds}"
    release.mkdir()
    for name in ["triggerer", *workers(cluster)]:  # every host up (an earlier test may have left one down)
        if not cluster.components[name].alive():
            cluster.start_component(name)
    run_id = cluster.trigger_run(dag_id, f"{ds}T00:00:00Z", conf={
        "launch_log": str(launch_log), "release_dir": str(release), "cleanup_delay": RETENTION_S,
        "progress_log": str(progress_log), "token_column": "true",
    })
    run_dir = run_directory(home / "zeta-state", dag_id, run_id)
    cluster.wait_for(lambda: all(starts(launch_log, s) for s in SOURCES), 240, "both drivers started", interval=0.5)
    # South done first (its Spark core free for north's replacement), so that no task of the run
    # is on a worker during the freeze: north's deploy task and the sensor wait in the triggerer.
    (release / "south").touch()
    for task, state in (("hosts.deploy_south", "success"), ("hosts.deploy_north", "deferred"), ("hosts.ready_to_close", "deferred")):
        cluster.wait_for(lambda task=task, state=state: cluster.task_instance(dag_id, run_id, task)["state"] == state, 240,
                         f"{task} {state}", interval=0.5)
    old = starts(launch_log, "north")[0]
    cluster.wait_for(lambda: any(e["token"] == old["token"] for e in entries(progress_log)), 120,
                     "north's job writing its progress lines (its SparkSession up)", interval=0.5)
    frozen_name = component_on_host(cluster, old["host"])
    host = cluster.host(frozen_name)
    assert set(job_processes(old["token"])) & set(host.members()), f"north's job process not found on {host.hostname}"
    # The other worker host goes (nothing of the run is on it: south's driver has ended); its
    # replacement takes the frozen host's hostname, as a rebuilt VM or a pod of a StatefulSet
    # would. It is the only worker left to run north's next try, and a deploy that took a host
    # by its name would find the old driver's PID absent there and relaunch at once.
    namesake_name = next(name for name in workers(cluster) if name != frozen_name)
    cluster.kill_host(namesake_name)
    ledger = next(run_dir.rglob(f"{old['token']}/ledger.json"))
    frozen_at, job_gone_at = time.time(), None
    log(f"{ds}: freezing {host.hostname} ({len(host.freeze())} processes), where north's driver {old['token']} runs")
    # The old driver's last heartbeat, as the kernel stamped it: nothing of it runs from here on.
    last_heartbeat_at = ledger.stat().st_mtime
    namesake = cluster.start_component(namesake_name, hostname=host.hostname).host
    assert namesake is not None and namesake.hostname == host.hostname

    def replaced() -> dict | None:
        nonlocal job_gone_at
        if job_gone_at is None and not job_processes(old["token"]):
            job_gone_at = time.time()
        launches = starts(launch_log, "north")
        return launches[1] if len(launches) > 1 and time.time() - frozen_at >= 2 * lost_after else None

    try:
        new = cluster.wait_for(replaced, 360, "north relaunched while its host is frozen", interval=0.2)
        (release / "north").touch()  # a resumed old job would now go on to stage and report
        stopped = [(pid, process_state(pid)) for pid in pids_carrying(old["token"])]  # its JVM, until the thaw
        new_intent = next(run_dir.rglob(f"{new['token']}/intent.json"))
        # When north's next try decided to launch again: it writes the new attempt's intent first.
        relaunch_decided_at = new_intent.stat().st_mtime
    finally:
        host.thaw()
    thawed_at = time.time()
    waited = relaunch_decided_at - last_heartbeat_at
    log(f"{ds}: thawed after {thawed_at - frozen_at:.0f}s; old job process gone "
        f"{(job_gone_at or thawed_at) - frozen_at:.1f}s in, replacement decided {waited:.1f}s after the old driver's "
        f"last heartbeat (bound {STOPPED_AFTER_FACTOR * lost_after:.2f}s) and started {new['at'] - frozen_at:.1f}s in on "
        f"{new['host']} ({new['pid_namespace']}); processes of the old driver (pid, state) just before the thaw: {stopped}")
    cluster.wait_for(lambda: not pids_carrying(old["token"]), 30, "every process of the old driver gone after the thaw")
    # What the old driver wrote since its replacement started: its own progress lines, and every
    # file of its attempt but spark-submit's output and what the coordinator wrote there.
    late = [e for e in entries(progress_log) if e["token"] == old["token"] and e["at"] >= new["at"]]
    attempts = [d for d in run_dir.rglob(old["token"]) if d.is_dir()]
    written = [f for a in attempts for f in a.rglob("*") if f.is_file() and f.name not in ("driver.log", "cancel", "intent.json")
               and f.stat().st_mtime >= new["at"]]
    log(f"{ds}: the old driver's progress lines after its replacement started: {late}; files: {written}")
    # Relaunched on the namesake: the same hostname, another host (its own PID namespace).
    assert (new["host"], new["pid_namespace"]) == (host.hostname, namesake.namespace), (new, namesake.namespace)
    assert new["pid_namespace"] != old["pid_namespace"], (old, new)
    # Not before the silence bound: neither on the judgement "lost" nor on a process check made
    # on a host that merely carries the old host's name.
    assert waited >= STOPPED_AFTER_FACTOR * lost_after - 0.5, (
        f"north relaunched {waited:.1f}s after its driver's last heartbeat, before the silence bound of "
        f"{STOPPED_AFTER_FACTOR * lost_after:.2f}s")
    assert job_gone_at is not None and job_gone_at < new["at"], (
        f"north's old driver was running the job when its replacement started ({job_gone_at=}, {new['at']=})")
    assert late == [], f"the old driver wrote after its replacement started: {late}"
    assert len(attempts) == 1 and written == [], f"files of the old attempt written after its replacement started: {written}"

    cluster.wait_for_run(dag_id, run_id, timeout=420)
    import pyarrow.parquet as pq

    assert not ended(launch_log, old["token"]) and len(starts(launch_log, "north")) == 2, entries(launch_log)
    for source, token in (("north", new["token"]), ("south", starts(launch_log, "south")[0]["token"])):
        table = pq.read_table(home / "pipeline-output-hosts-long-lease" / f"ds={ds}" / f"source={source}").to_pydict()
        assert sorted(table["n"]) == list(range(expected_row_count(source))) and set(table["token"]) == {token}, (source, table)
    # Two live hosts with one hostname would confuse the later tests' look-ups by hostname.
    restart_worker_hosts(cluster)


#: How far the skewed worker host's wall clock is off: far more than ``lost_after``, as a host
#: without NTP drifts.
SKEW_S = 7 * 60


def clocks_of(host: NamespaceHost) -> dict[str, float]:
    """How far the wall, monotonic and boot clocks a process of ``host`` reads are from this
    process's (read just before and after; each a midpoint, good to the run's duration)."""
    probe = "import json, time; print(json.dumps([time.time(), time.monotonic(), time.clock_gettime(time.CLOCK_BOOTTIME)]))"
    def outside() -> tuple[float, float, float]:
        return time.time(), time.monotonic(), time.clock_gettime(time.CLOCK_BOOTTIME)

    before = outside()
    result = host.run([sys.executable, "-c", probe])
    after = outside()
    assert result.returncode == 0, result.stderr
    inside = json.loads(result.stdout)
    date = host.run(["date", "+%s"])
    return {
        "wall": inside[0] - (before[0] + after[0]) / 2,
        "monotonic": inside[1] - (before[1] + after[1]) / 2,
        "boottime": inside[2] - (before[2] + after[2]) / 2,
        "date": float(date.stdout) - time.time(),
    }


@pytest.mark.parametrize("skew", [-SKEW_S, SKEW_S], ids=["behind", "ahead"])
def test_a_worker_host_minutes_off_neither_loses_a_live_driver_nor_replaces_a_dead_one_late_or_early(hosts_cluster, skew):
    """Liveness is a duration on each observer's own clock (module docstring): worker host A, 7
    minutes behind or ahead, launches both drivers; B, its clock true like the triggerer's, launches
    north's replacement after A is killed. Behind, a wall-clock judge would take the live driver as
    lost; ahead, it would wait minutes to replace the dead one (and a trigger that waited out the
    deferring worker's ``not_before`` in full would hold the finished source deferred)."""
    _require(skewed_clock_unavailable())
    cluster = hosts_cluster
    home, ds = cluster.home, {-SKEW_S: "2026-03-04", SKEW_S: "2026-03-05"}[skew]
    launch_log, release = home / f"launch-{ds}.jsonl", home / f"release-{ds}"
    release.mkdir()
    # The fake spark-submit: the driver is the provider's real bootstrap in Python, with no JVM
    # (a JVM under libfaketime 0.9.10 spun in every timed wait until faketime_monotonic_fix.c sent
    # monotonic condition-variable waits to the C library; a real spark-submit here is not tried
    # yet). The driver's wall clock is its host's.
    no_jvm = {"PATH": f"{FAKE_SPARK_DIR}:{os.environ.get('PATH', '')}"}
    launcher_name, replacer_name = workers(cluster)
    stopped_after = STOPPED_AFTER_FACTOR * LOST_AFTER_S
    try:
        for name in ["triggerer", *workers(cluster)]:
            if cluster.components[name].alive():
                cluster.kill_host(name)
        cluster.start_component("triggerer")
        cluster.start_component(launcher_name, host_env={**no_jvm, **skewed_wall_clock_env(skew, cluster.env())})
        launcher = cluster.host(launcher_name)
        clocks = clocks_of(launcher)
        log(f"{ds}: {launcher.hostname}'s clocks minus the true ones: {clocks}")
        assert abs(clocks["wall"] - skew) < 2 and abs(clocks["date"] - skew) < 2, clocks
        assert abs(clocks["monotonic"]) < 2 and abs(clocks["boottime"]) < 2, clocks

        triggered_at = time.time()
        run_id = cluster.trigger_run(DAG_ID, f"{ds}T00:00:00Z", conf={
            "launch_log": str(launch_log), "release_dir": str(release), "cleanup_delay": RETENTION_S, "spark": "",
        })
        cluster.wait_for(lambda: all(starts(launch_log, s) for s in SOURCES), 240, "both drivers started", interval=0.5)
        seen_at = time.time()
        first = {s: starts(launch_log, s)[0] for s in SOURCES}
        assert {e["host"] for e in first.values()} == {launcher.hostname}, first
        # The jobs stamped their start with their host's clock: 7 minutes off the truth.
        for entry in first.values():
            assert triggered_at - 1 <= entry["at"] - skew <= seen_at + 1, (entry, triggered_at, seen_at)

        cluster.start_component(replacer_name, host_env=no_jvm)
        replacer = cluster.host(replacer_name)

        (release / "south").touch()
        for task, state in (("hosts.deploy_south", "success"), ("hosts.deploy_north", "deferred")):
            cluster.wait_for(lambda task=task, state=state: cluster.task_instance(DAG_ID, run_id, task)["state"] == state,
                             240, f"{task} {state}", interval=0.5)
        # North's driver, 7 minutes off, heartbeats on while observers watch for over 2 x lost_after.
        assert_never_relaunched(launch_log, "north", launches=1, seconds=2 * LOST_AFTER_S)
        old = first["north"]
        assert pids_carrying(old["token"]), "north's first driver is not running"
        ledger = next(run_directory(home / "zeta-state", DAG_ID, run_id).rglob(f"{old['token']}/ledger.json"))
        heartbeat_age = time.time() - json.loads(ledger.read_text())["heartbeat_at"]  # by its host's clock
        assert -skew - 1 < heartbeat_age < -skew + 2 * HEARTBEAT_INTERVAL_S + 1, heartbeat_age

        cluster.kill_host(launcher_name)
        killed_at = launcher.killed_at
        assert killed_at is not None and not pids_carrying(old["token"])
        log(f"{ds}: killed {launcher.hostname} with north's driver {old['token']}")
        replaced_by = stopped_after + 120  # the bound plus the trigger's poll, a worker's pick-up, a launch
        cluster.wait_for(lambda: len(starts(launch_log, "north")) > 1, replaced_by,
                         f"north relaunched within {replaced_by:.0f}s of its host's death", interval=0.5)
        new = starts(launch_log, "north")[1]
        replaced_after = new["at"] - killed_at  # its host's clock is true
        log(f"{ds}: north relaunched on {new['host']} {replaced_after:.1f}s after the kill (bound {stopped_after:.1f}s)")
        assert new["host"] == replacer.hostname, new
        # Not before the observers counted the bound: the last heartbeat came at most an interval
        # before the kill (1 s for the launch log's own stamps).
        assert replaced_after >= stopped_after - HEARTBEAT_INTERVAL_S - 1, replaced_after

        # The replacement heartbeats on: never taken as lost.
        assert_never_relaunched(launch_log, "north", launches=2, seconds=2 * LOST_AFTER_S)
        assert pids_carrying(new["token"]), "north's replacement is not running"

        (release / "north").touch()
        cluster.wait_for_run(DAG_ID, run_id, timeout=300)
        log_entries = entries(launch_log)
        violations, _ = relaunches(log_entries)
        assert violations == [], violations
        assert [e["token"] for e in starts(launch_log, "north")] == [old["token"], new["token"]], log_entries
        assert len(starts(launch_log, "south")) == 1, log_entries
        assert ended(launch_log, new["token"]) and ended(launch_log, first["south"]["token"]), log_entries
        partition = read_partition(home / "pipeline-output-hosts", ds).sources
        for source, token in (("north", new["token"]), ("south", first["south"]["token"])):
            rows = partition[source].rows
            assert sorted(r["n"] for r in rows) == list(range(expected_row_count(source))), (source, rows)
            assert {r["token"] for r in rows} == {token}, (source, rows)
    finally:
        restart_worker_hosts(cluster)


def assert_never_relaunched(launch_log: Path, source: str, *, launches: int, seconds: float) -> None:
    """For ``seconds``, ``source`` keeps exactly ``launches`` launches: its live driver is never taken as lost."""
    held_from = time.monotonic()
    while time.monotonic() - held_from < seconds:
        assert len(starts(launch_log, source)) == launches, f"a live driver taken as lost: {starts(launch_log, source)}"
        time.sleep(1)


def restart_worker_hosts(cluster: AirflowCluster) -> None:
    """Every worker host started again as the cluster starts them (true clock, real spark-submit, a
    hostname of its own), and the triggerer up, for the tests that follow."""
    for name in workers(cluster):
        if cluster.components[name].alive():
            cluster.kill_host(name)
    for name in ["triggerer", *workers(cluster)]:
        if not cluster.components[name].alive():
            cluster.start_component(name)


TIMED_WAIT_PROBE = r"""
#include <pthread.h>
#include <stdio.h>
#include <time.h>
int main(void) {
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_t cond;
    pthread_cond_init(&cond, &attr);
    pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&mutex);
    struct timespec start, end, deadline;
    clock_gettime(CLOCK_MONOTONIC, &start);
    deadline = start;
    deadline.tv_nsec += 300000000;
    if (deadline.tv_nsec >= 1000000000) { deadline.tv_sec++; deadline.tv_nsec -= 1000000000; }
    int rc = pthread_cond_timedwait(&cond, &mutex, &deadline);
    clock_gettime(CLOCK_MONOTONIC, &end);
    printf("%d %.3f %ld\n", rc, (end.tv_sec - start.tv_sec) + (end.tv_nsec - start.tv_nsec) / 1e9, (long)time(NULL));
    return 0;
}
"""


@pytest.mark.parametrize("skew", [-SKEW_S, SKEW_S], ids=["behind", "ahead"])
def test_a_skewed_host_waits_on_monotonic_condition_variables_for_true_durations(tmp_path, skew):
    """The JVM's timed waits (Thread.sleep, Object.wait, parkNanos) are pthread_cond_timedwait on a
    condition variable on CLOCK_MONOTONIC. Under the skewed host's environment a 0.3 s wait lasts
    0.3 s while the wall clock reads the skew (libfaketime alone ends it at once, ahead or behind:
    a JVM there spins in every wait and Spark never finishes a job). No cluster: a small C program."""
    _require(skewed_clock_unavailable())
    source, probe = tmp_path / "timed_wait.c", tmp_path / "timed_wait"
    source.write_text(TIMED_WAIT_PROBE)
    subprocess.run(["gcc", "-O2", "-o", str(probe), str(source), "-lpthread"], check=True, capture_output=True)
    env = {**os.environ, **skewed_wall_clock_env(skew)}
    before = time.time()
    result = subprocess.run([str(probe)], env=env, capture_output=True, text=True, timeout=30, check=True)
    code, waited, wall = result.stdout.split()
    assert int(code) == 110, result.stdout  # ETIMEDOUT
    assert 0.25 <= float(waited) < 2, f"a 0.3 s timed wait on CLOCK_MONOTONIC lasted {waited} s under a {skew:+d} s wall clock"
    assert abs(int(wall) - before - skew) < 5, (wall, before, skew)


def test_a_source_marked_failed_on_a_dead_host_runs_again_on_another_after_its_runs_cleanup(hosts_cluster):
    """A cleared deploy task always re-runs, across hosts. A user marks north failed
    while its driver runs on worker host A: the trigger stops the driver, but no try records that
    it ended. The run fails and its cleanup deletes every attempt. Host A dies; the run is cleared.
    North's new try runs on host B, which cannot check A's processes and finds the attempt gone:
    before, it fenced (the cancel marker re-created the deleted directory) and failed with
    ``state_root_not_shared`` on every clear. Now the root's identity file shows the attempt was
    deleted, not hidden: the try waits, writing nothing, until a driver of it would have stopped
    itself (1.25 x lost_after), then launches once. Oracles: the jobs' own launch log (one launch
    per source and incarnation, the second on host B), the published rows, the files left."""
    cluster = hosts_cluster
    home, ds = cluster.home, "2026-03-02"
    launch_log, release = home / f"launch-{ds}.jsonl", home / f"release-{ds}"
    release.mkdir()
    state_root, output = home / "zeta-state", home / "pipeline-output-hosts"
    for name in workers(cluster):  # both worker hosts up (an earlier test may have left one down)
        if not cluster.components[name].alive():
            cluster.start_component(name)
    run_id = cluster.trigger_run(
        DAG_ID, f"{ds}T00:00:00Z",
        # No SparkSession (the drivers still start through spark-submit on the standalone cluster):
        # the point is where and how often they launch.
        conf={"launch_log": str(launch_log), "release_dir": str(release), "cleanup_delay": RETENTION_S, "spark": ""},
    )
    cluster.wait_for(lambda: all(starts(launch_log, s) for s in SOURCES), 240, "both drivers started", interval=0.5)
    north = starts(launch_log, "north")[0]
    cluster.wait_for(
        lambda: cluster.task_instance(DAG_ID, run_id, "hosts.deploy_north")["state"] == "deferred", 60,
        "north's deploy task deferred", interval=0.5,
    )
    cluster.api("PATCH", f"/dags/{DAG_ID}/dagRuns/{quote(run_id, safe='')}/taskInstances/hosts.deploy_north",
                {"new_state": "failed"})
    (release / "south").touch()
    cluster.wait_for_run(DAG_ID, run_id, states={"failed"}, timeout=300)
    cluster.wait_for(lambda: not run_directory(state_root, DAG_ID, run_id).exists(), 180,
                     "incarnation 0 cleaned up", interval=1)
    assert not pids_carrying(north["token"]), "north's driver outlived the task a user marked failed"

    launching_host = component_on_host(cluster, north["host"])
    assert launching_host is not None, north
    cluster.kill_host(launching_host)
    log(f"{ds}: killed {north['host']}, where north's first driver ran; clearing the run")
    (release / "north").touch()
    cleared_at = time.time()
    cluster.clear_run(DAG_ID, run_id)
    cluster.wait_for_run(DAG_ID, run_id, timeout=420)

    north_launches = starts(launch_log, "north")
    assert len(north_launches) == 2, f"north: one launch per incarnation expected: {north_launches}"
    assert north_launches[1]["incarnation"] == 1 and north_launches[1]["host"] != north["host"], north_launches
    # Not before a driver of the deleted attempt would have stopped itself: the wait is 1.25 x
    # lost_after of the attempt seen deleted, all of it after the clear (the job's own clock).
    waited = north_launches[1]["at"] - cleared_at
    assert waited >= 1.25 * LOST_AFTER_S, f"north relaunched {waited:.1f}s after the clear"
    assert len(starts(launch_log, "south")) == 2, starts(launch_log, "south")
    run_logs = home / "logs" / f"dag_id={DAG_ID}" / f"run_id={run_id}" / "task_id=hosts.deploy_north"
    texts = "\n".join(path.read_text(errors="replace") for path in run_logs.rglob("*") if path.is_file())
    assert "earlier_incarnation_cleanup_wait" in texts and "earlier_incarnation_cleaned_up_elsewhere" in texts, run_logs
    partition = read_partition(output, ds).sources  # every row of every file of the partition
    for source in SOURCES:
        rows = partition[source].rows
        assert sorted(r["n"] for r in rows) == list(range(expected_row_count(source))), (source, rows)
        assert {r["token"] for r in rows} == {starts(launch_log, source)[1]["token"]}, (source, rows)
    # Nothing of either incarnation left after the retention window (no re-created directory).
    cluster.wait_for(lambda: not run_directory(state_root, DAG_ID, run_id).exists(), 180,
                     "incarnation 1 cleaned up", interval=1)
    assert leftovers_past_due(state_root, [output], dag_ids=[DAG_ID]) == []


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
