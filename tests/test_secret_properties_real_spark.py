"""Real spark-submit (pyspark's, a real JVM) reads the secret conf from the anonymous properties
file the launch hands it by descriptor, and no process on the machine shows the value on its
command line meanwhile. The oracle: the job prints whether SparkConf holds the literal below, and
``/proc/<pid>/cmdline`` of every process is searched for it while the driver runs."""

from __future__ import annotations

import time

import pytest

from airflow_provider_zeta.hooks.spark_driver import SECRET_FD, SubmitCommand, driver_environment, launch_driver
from airflow_provider_zeta.processes import handle_alive
from tests.unit.test_secret_command_line import Watcher, fragments

pytestmark = pytest.mark.spark

SECRET = "wJalr/K7+real=Spark secret"


def test_real_spark_submit_reads_the_secret_conf_from_the_descriptor_not_the_command_line(tmp_path):
    import shutil
    import sys
    from pathlib import Path

    app = tmp_path / "app.py"
    app.write_text(
        "from pyspark.sql import SparkSession\n"
        "spark = SparkSession.builder.getOrCreate()\n"
        f"held = spark.sparkContext.getConf().get('spark.hadoop.fs.s3a.secret.key') == {SECRET!r}\n"
        "print('SECRET_HELD' if held else 'SECRET_MISSING', flush=True)\n"
        "import time; time.sleep(2)\n"
        "spark.stop()\n"
    )
    spark_submit = shutil.which("spark-submit") or str(Path(sys.executable).with_name("spark-submit"))
    command = SubmitCommand(
        [spark_submit, "--master", "local[1]", "--conf", "spark.ui.enabled=false", "--conf",
         "spark.zeta.attemptToken=realspark", "--properties-file", f"/dev/fd/{SECRET_FD}", str(app)]
    )
    command.secret_properties = f"spark.hadoop.fs.s3a.secret.key={SECRET}\n"
    env = driver_environment()
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    log = tmp_path / "driver.log"
    watcher = Watcher(fragments(SECRET))
    watcher.start()
    try:
        handle = launch_driver(command, env, str(log))
        deadline = time.monotonic() + 240
        while handle_alive(handle) and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        watcher.stop.set()
        watcher.join(5)
    output = log.read_text(errors="replace")
    assert "SECRET_HELD" in output, output[-3000:]
    assert watcher.seen_driver
    assert not watcher.hits, watcher.hits[:3]
