"""A real Spark standalone cluster (one master, ``workers`` workers) on 127.0.0.1, from the pyspark package.

Uses pyspark's own ``bin/spark-class`` launcher with the Master and Worker classes, so the cluster
is exactly the Spark version the drivers use. Drivers connect in client mode through an Airflow
Spark connection ``spark://127.0.0.1:<port>``: the driver runs where it was launched (a Celery
worker's host in the multi-host test), its executors on the Spark workers. Each worker has its own
work directory and UI port. Processes are tracked by PID and killed on ``stop``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from zeta_harness.cluster import free_port


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


class SparkStandaloneCluster:
    def __init__(self, cores: int = 1, memory: str = "1g", workers: int = 1) -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        self.cores = cores
        self.memory = memory
        self.workers = workers
        self.port = free_port()
        self.ui_port = free_port()
        self.worker_ui_ports = [free_port() for _ in range(workers)]
        self.work_dir = Path(tempfile.mkdtemp(prefix="zeta-spark-"))
        self.processes: list[subprocess.Popen] = []

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def connection_json(self) -> str:
        """An Airflow Spark connection (JSON form) for client mode on this cluster."""
        return json.dumps({"conn_type": "spark", "host": "spark://127.0.0.1", "port": self.port})

    def _spawn(self, name: str, *args: str) -> subprocess.Popen:
        env = dict(
            os.environ,
            SPARK_HOME=str(spark_home()),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_WORKER_DIR=str(self.work_dir / f"work-{name}"),
        )
        log = open(self.work_dir / f"{name}.log", "ab")
        process = subprocess.Popen(
            [str(spark_home() / "bin" / "spark-class"), *args],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log.close()
        self.processes.append(process)
        return process

    def start(self, timeout: float = 120) -> SparkStandaloneCluster:
        self._spawn(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(self.ui_port),
        )
        for number, ui_port in enumerate(self.worker_ui_ports, start=1):
            self._spawn(
                f"worker-{number}",
                "org.apache.spark.deploy.worker.Worker",
                self.master_url,
                "--host", "127.0.0.1", "--cores", str(self.cores), "--memory", self.memory,
                "--webui-port", str(ui_port),
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.alive_workers() >= self.workers:
                return self
            for process in self.processes:
                if process.poll() is not None:
                    raise RuntimeError(f"Spark standalone process exited: {self.logs()}")
            time.sleep(1)
        raise RuntimeError(f"fewer than {self.workers} Spark worker(s) registered within {timeout}s: {self.logs()}")

    def status(self) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as response:
            return json.loads(response.read())

    def alive_workers(self) -> int:
        """Registered workers; 0 while the master's UI does not answer yet, or answers ``/json/``
        with its HTML page (it does for a moment while it starts, before the master is leader)."""
        try:
            return int(self.status().get("aliveworkers", 0))
        except (OSError, ValueError):  # json.JSONDecodeError is a ValueError
            return 0

    def logs(self) -> str:
        return "\n".join(
            f"== {path.name}\n{path.read_text(errors='replace')[-3000:]}" for path in sorted(self.work_dir.glob("*.log"))
        )

    def stop(self) -> None:
        for process in self.processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=5)

    def __enter__(self) -> SparkStandaloneCluster:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()
