"""The chaos scenario's supervisor (zeta_harness/chaos.py, ``restart_dead_components``) on real
processes: a component that died without being killed by the scenario is restarted and reported
with its exit code and the tail of its log; a live one is left alone."""

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from zeta_harness.chaos import restart_dead_components


@dataclass
class _Component:
    process: subprocess.Popen
    log_path: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None


class _Cluster:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.components: dict[str, _Component] = {}
        self.started: list[str] = []

    def run(self, name: str, code: str) -> _Component:
        log_path = self.tmp_path / f"{name}.log"
        with open(log_path, "ab") as log:
            process = subprocess.Popen([sys.executable, "-c", code], stdout=log, stderr=subprocess.STDOUT)
        self.components[name] = component = _Component(process, log_path)
        return component

    def start_component(self, name: str) -> _Component:
        self.started.append(name)
        return self.run(name, "import time; time.sleep(30)")


def test_a_component_dead_by_itself_is_restarted_and_reported(tmp_path):
    cluster = _Cluster(tmp_path)
    dead = cluster.run("scheduler", "import sys; print('queue corrupted by a killed worker'); sys.exit(1)")
    alive = cluster.run("triggerer", "import time; time.sleep(30)")
    dead.process.wait(timeout=20)
    lines: list[str] = []
    try:
        deaths = restart_dead_components(cluster, 12.5, lines.append)  # type: ignore[arg-type]
        assert cluster.started == ["scheduler"]
        assert len(deaths) == 1 and deaths[0].startswith("12.5s scheduler exit 1:"), deaths
        assert "queue corrupted by a killed worker" in deaths[0]
        assert cluster.components["scheduler"].alive() and cluster.components["triggerer"] is alive
        assert lines and "died by itself (exit 1); restarting it" in lines[0]
        assert restart_dead_components(cluster, 13.0, lines.append) == []  # type: ignore[arg-type]
    finally:
        for component in cluster.components.values():
            component.process.kill()
            component.process.wait(timeout=10)
        alive.process.kill()
        alive.process.wait(timeout=10)
