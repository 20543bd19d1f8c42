"""A driver whose terminal write hangs on a stuck mount ends by its lease; no second driver runs
while the first can still act (G1, G6).

Topology: the multi-host harness (``zeta_harness/hosts.py``; PostgreSQL, CeleryExecutor on Redis,
two worker hosts and a triggerer host in namespaces of their own) with ``[zeta] state_root`` on a
FUSE mount shared by every host (``zeta_harness/hung_mount.py``): a passthrough to a directory,
except that the first terminal ledger write on it blocks in the mount's daemon, as a write to a
hard-mounted NFS share whose server went away does. The deploy task launches its driver (the
provider's real bootstrap under the fake spark-submit, no JVM) on a worker host; the job finishes,
logs its end, and the driver's terminal write hangs.

Oracles, none of them the provider's bookkeeping:

* the mount daemon's own record of every changing operation with the calling process: the hung
  write is the driver's, and that process issues no other operation on the mount afterwards
  (not after the release either: no ledger renamed into place);
* the kernel's view of that process (``/proc/<pid>/status``): within the lease of the hang it has
  ``SIGKILL`` pending (the lease's kernel timer fired; the thread is still in the hung write, as
  any process in a stuck mount's write is, but no instruction of its own runs again) — before the
  next driver of the task starts;
* the job's own launch log: the first job logged its end, exactly one more driver was launched,
  and it started only after the first had been ended; it ran to its end and the run succeeded.

Runs in about two minutes, most of it the cluster's start and the observers' silence bound
(1.25 x ``lost_after``).
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
from pathlib import Path

import pytest

from airflow_provider_zeta.core.ledger import LEASE_FRACTION, STOPPED_AFTER_FACTOR
from tests.conftest import FAKE_SPARK_DIR, IN_CI, LOCAL_SPARK_CONN, PROJECT_ROOT, _finish, artifact_dir, require_postgres
from zeta_harness.chaos import entries
from zeta_harness.cluster import REDIS_BROKER_URL, AirflowCluster
from zeta_harness.hosts import process_state, unshare_available
from zeta_harness.hung_mount import HungMount, fatal_signal_pending, fuse_unavailable

DAG_ID = "deploy_counting"
LOST_AFTER_S = 15
HEARTBEAT_INTERVAL_S = 2
LEASE_S = LEASE_FRACTION * LOST_AFTER_S


def _require(condition_error: str | None) -> None:
    if condition_error is None:
        return
    if IN_CI:
        pytest.fail(f"{condition_error}, and CI=true forbids skipping the hung-mount test")
    pytest.skip(condition_error)


def _redis_unreachable() -> str | None:
    try:
        with socket.create_connection(("127.0.0.1", 6379), timeout=2):
            return None
    except OSError as error:
        return f"Redis is not reachable at 127.0.0.1:6379 ({REDIS_BROKER_URL}): {error}"


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def starts(launch_log: Path) -> list[dict]:
    return [e for e in entries(launch_log) if "end" not in e]


def ended(launch_log: Path, token: str) -> bool:
    return any(e.get("end") and e["token"] == token for e in entries(launch_log))


@pytest.mark.timeout(400)
def test_a_driver_whose_terminal_write_hangs_ends_by_its_lease_before_a_second_driver_starts(request):
    require_postgres()
    _require(unshare_available())
    _require(_redis_unreachable())
    _require(fuse_unavailable())
    base = Path(tempfile.mkdtemp(prefix="zeta-hung-mount-", dir="/var/tmp"))  # hosts have a private /tmp
    mount = HungMount(base, hang_terminal_ledgers=1).start()
    cluster = AirflowCluster(
        PROJECT_ROOT / "tests" / "dags",
        db="postgres",
        executor="CeleryExecutor",
        celery_workers=2,
        extra_env={
            "AIRFLOW__ZETA__STATE_ROOT": str(mount.mountpoint),
            "AIRFLOW__ZETA__DRIVER_HEARTBEAT_INTERVAL": str(HEARTBEAT_INTERVAL_S),
            "AIRFLOW__ZETA__DRIVER_LOST_AFTER": str(LOST_AFTER_S),
            "PATH": f"{FAKE_SPARK_DIR}:{os.environ.get('PATH', '')}",
            "AIRFLOW_CONN_SPARK_DEFAULT": LOCAL_SPARK_CONN,
        },
    )
    failed = True
    try:
        began = time.monotonic()
        cluster.start()
        cluster.wait_for_dag(DAG_ID)
        log(f"cluster up in {time.monotonic() - began:.0f}s; state root on the FUSE mount {mount.mountpoint}")
        launch_log = cluster.home / "launch.jsonl"
        run_id = cluster.trigger_run(DAG_ID, "2026-04-01T00:00:00Z", conf={"launch_log": str(launch_log), "seconds": 2})

        hang = cluster.wait_for(lambda: (mount.hangs() or [None])[0], 180, "the first driver's terminal write to hang", interval=0.2)
        first = starts(launch_log)[0]
        driver = hang["pid"]
        assert first["token"] in Path(f"/proc/{driver}/cmdline").read_bytes().decode(errors="replace"), (hang, first)
        assert ended(launch_log, first["token"]), "the job had not finished when its driver's terminal write hung"
        log(f"driver {first['token']} (pid {driver}) hung in its terminal write {hang['path']}")

        # Watch the hung driver until the next driver of the task starts.
        killed_at = None
        state_when_killed = None

        def second_started() -> dict | None:
            nonlocal killed_at, state_when_killed
            if killed_at is None and fatal_signal_pending(driver) is not False:
                killed_at, state_when_killed = time.time(), process_state(driver)
            launches = starts(launch_log)
            return launches[1] if len(launches) > 1 else None

        bound = STOPPED_AFTER_FACTOR * LOST_AFTER_S + 90  # the silence bound, a trigger's look, a worker's pick-up
        second = cluster.wait_for(second_started, bound, "a second driver of the task", interval=0.1)
        seen_second_at = time.time()
        ended_by_lease = "not ended" if killed_at is None else f"ended {killed_at - hang['at']:.1f}s after the hang (state {state_when_killed})"
        log(f"first driver {ended_by_lease}; second driver {second['token']} started {second['at'] - hang['at']:.1f}s after "
            f"the hang on {second['host']}")
        assert killed_at is not None, (
            f"the first driver (pid {driver}, state {process_state(driver)}) was alive and not ended when the second "
            f"started {seen_second_at - hang['at']:.1f}s after its terminal write hung")
        assert killed_at - hang["at"] <= LEASE_S + 1.5, (killed_at - hang["at"], LEASE_S)
        assert second["at"] > killed_at, (second, killed_at)

        cluster.wait_for_run(DAG_ID, run_id, timeout=180)
        assert ended(launch_log, second["token"]), entries(launch_log)
        assert [e["token"] for e in starts(launch_log)] == [first["token"], second["token"]], entries(launch_log)

        # The mount recovers: the hung write completes, and the dying process goes without another operation.
        mount.release()
        cluster.wait_for(lambda: process_state(driver) in ("X", "Z"), 30, "the first driver's process gone after the release", interval=0.2)
        time.sleep(1)
        after = [op for op in mount.ops() if op["pid"] == driver and op["at"] >= hang["at"] and op["op"] not in ("hang", "released")]
        assert after == [], f"the first driver operated on the state root after its terminal write hung: {after}"
        renamed = [op for op in mount.ops() if op["op"] == "rename" and op.get("to", "").endswith(f"/{first['token']}/ledger.json")
                   and op["at"] >= hang["at"]]
        assert renamed == [], f"a ledger of the first driver was put in place after the hang: {renamed}"
        failed = False
    finally:
        mount.release()  # no process of the cluster may stay in a hung write while it is stopped
        try:
            _finish(cluster, failed, request.node.nodeid)
        finally:
            if failed:
                kept = artifact_dir(request.node.nodeid) / "hung-mount"
                kept.mkdir(parents=True, exist_ok=True)
                for name in ("ops.jsonl", "daemon.log"):
                    if (base / name).exists():
                        (kept / name).write_bytes((base / name).read_bytes())
            mount.stop()
            shutil.rmtree(base, ignore_errors=True)
