"""The harness finds its own processes by session id, and not another process that reuses a PID."""

from __future__ import annotations

import subprocess
from pathlib import Path

from zeta_harness.cluster import AirflowCluster, Component, _start_ticks


def test_a_session_whose_leader_pid_was_reused_is_not_the_clusters(tmp_path):
    cluster = AirflowCluster(Path(__file__).parent, home=tmp_path)
    leader = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        ours = Component("scheduler", leader, tmp_path / "log", start_ticks=_start_ticks(leader.pid))
        cluster.component_history = [ours]
        assert leader.pid in {p["pid"] for p in cluster.harness_processes()}

        # The same PID, but a process started at another moment: someone else's session now.
        cluster.component_history = [Component("scheduler", leader, tmp_path / "log", start_ticks=ours.start_ticks - 1)]
        assert leader.pid not in {p["pid"] for p in cluster.harness_processes()}
    finally:
        leader.kill()
        leader.wait()


def test_each_xdist_test_process_takes_ports_of_its_own_residue_class(monkeypatch):
    """Two test processes start clusters at the same time: a port one of them picked (and binds
    only seconds later) is never picked by the other, and one process never hands out a port twice."""
    from zeta_harness import cluster

    for count in (2, 3):
        monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", str(count))
        for index in range(count):
            monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{index}")
            picked = [cluster.free_port() for _ in range(20)]
            assert all(port % count == index for port in picked), (count, index, picked)
            assert len(set(picked)) == 20
