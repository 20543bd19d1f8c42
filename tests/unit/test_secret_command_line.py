"""Secret Spark conf reaches the driver without appearing on any process's command line, and a
failing driver's text stays out of the exception.

A real deploy: ``ZetaSparkJobOperator`` (non-deferrable, fake task context) launches the real
driver bootstrap through tests/fake_spark (a real spark-submit stand-in that reads
``--properties-file`` as spark-submit does and logs the conf it was given). While it runs, a
watcher reads ``/proc/<pid>/cmdline`` of every process on the machine; the oracle is the secret
literal of this file, searched whole and as every 10-character fragment.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from airflow_provider_zeta.hooks.spark_driver import SECRET_FD, shipped_command, spark_submit_command
from airflow_provider_zeta.operators.spark_job import ZetaSparkJobOperator
from tests.unit.test_deploy_operator import _context

ROOT = Path(__file__).resolve().parents[2]
FAKE_SPARK_DIR = ROOT / "tests" / "fake_spark"
S3_SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYcmdLINE"
PASSWORD_CONF = "conf-Pa55word with space\\and=sign"


def fragments(secret: str, size: int = 10) -> list[str]:
    return [secret[i : i + size] for i in range(len(secret) - size + 1)]


def command_lines() -> dict[int, bytes]:
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                    found[int(entry)] = cmdline.read()
            except OSError:  # gone meanwhile, or not ours to read
                pass
    return found


class Watcher(threading.Thread):
    """Reads every process's command line every 20 ms until stopped; keeps what carried a secret."""

    def __init__(self, needles: list[str]) -> None:
        super().__init__(daemon=True)
        self.needles = [needle.encode() for needle in needles]
        self.stop = threading.Event()
        self.hits: list[tuple[int, bytes]] = []
        self.seen_driver = False
        self.rounds = 0

    def run(self) -> None:
        while not self.stop.is_set():
            for pid, line in command_lines().items():
                if b"spark.zeta.attemptToken=" in line:
                    self.seen_driver = True
                if any(needle in line for needle in self.needles):
                    self.hits.append((pid, line))
            self.rounds += 1
            time.sleep(0.02)


@pytest.fixture
def spark_on_path(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{FAKE_SPARK_DIR}:{os.environ['PATH']}")
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", '{"conn_type": "spark", "host": "local[1]"}')
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    submit_log = tmp_path / "submits.jsonl"
    monkeypatch.setenv("ZETA_FAKE_SPARK_SUBMIT_LOG", str(submit_log))
    monkeypatch.setenv("AIRFLOW__ZETA__STATE_ROOT", str(tmp_path / "state"))
    monkeypatch.setenv("AIRFLOW__ZETA__DRIVER_HEARTBEAT_INTERVAL", "1")
    monkeypatch.setenv("AIRFLOW__ZETA__POLL_INTERVAL", "1")
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "no-conf"))
    return submit_log


@pytest.fixture
def cli_connection(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CLI", '{"conn_type": "spark", "host": "local[1]"}')


def test_the_command_carries_no_secret_conf_only_a_descriptor_path(cli_connection):
    conf = {"spark.hadoop.fs.s3a.secret.key": S3_SECRET, "spark.app.region": "eu", "spark.db.password": PASSWORD_CONF}
    command = spark_submit_command(conn_id="spark_cli", token="tok1", bootstrap_args=[], conf=conf, hook_kwargs=None)
    text = "\0".join(command)
    for secret in (S3_SECRET, PASSWORD_CONF):
        assert not [f for f in fragments(secret) if f in text], command
    assert "spark.zeta.attemptToken=tok1" in text and "spark.app.region=eu" in text
    assert command[command.index("--properties-file") + 1] == f"/dev/fd/{SECRET_FD}"
    assert S3_SECRET in (command.secret_properties or "")
    shipped = shipped_command(command, "s3://b/a", "/tmp/x.log")
    assert not [f for f in fragments(S3_SECRET) if f in "\0".join(shipped)]
    assert shipped.secret_properties == command.secret_properties


def test_a_conf_value_holding_a_masked_secret_stays_off_the_command_line_whatever_its_name(cli_connection):
    # What rendering ``{{ conn.db.password }}`` in a task does: the password goes to the masker.
    from airflow.sdk.log import mask_secret

    password = "Tr0ub4dor&3+x/y=z!Qq7-cmdVALUE"
    mask_secret(password)
    conf = {"spark.myapp.jdbcUrl": f"jdbc:postgresql://db/sales?user=scott&password={password}", "spark.myapp.dbPw": password}
    command = spark_submit_command(conn_id="spark_cli", token="tok1", bootstrap_args=[], conf=conf, hook_kwargs=None)
    assert not [f for f in fragments(password) if f in "\0".join(command)], command
    assert "spark.myapp.jdbcUrl=jdbc:postgresql://db/sales?user=scott&password=" in (command.secret_properties or "")
    assert command[command.index("--properties-file") + 1] == f"/dev/fd/{SECRET_FD}"


REPO_PASSWORD = "rep0-Pa55word-for-nexus"
# Written into the DAG itself: no masker knows it, the URL's user info is what tells it.
LITERAL_PASSWORD = "l1teral-Pa55-in-the-dag"


@pytest.mark.parametrize(
    ("option", "conf_key", "value"),
    [
        ("repositories", "spark.jars.repositories", f"https://ci:{LITERAL_PASSWORD}@nexus.example.com/repository/maven"),
        ("jars", "spark.jars", f"https://ci:{LITERAL_PASSWORD}@files.example.com/lib/udfs.jar"),
        ("py_files", "spark.submit.pyFiles", f"s3a://bucket/deps.zip,https://ci:{LITERAL_PASSWORD}@files.example.com/x.zip"),
        ("packages", "spark.jars.packages", f"org.example:lib-{REPO_PASSWORD}:1.0"),  # a secret the masker knows
    ],
)
def test_an_option_url_holding_credentials_goes_to_the_properties_file_not_the_command_line(
    cli_connection, option, conf_key, value
):
    """``--repositories https://user:password@host/...`` (and a jar or file URL with credentials)
    would put the password on spark-submit's command line, readable by any local user: the option
    goes into the secret properties file as its Spark conf key, which spark-submit reads the same way."""
    from airflow.sdk.log import mask_secret

    mask_secret(REPO_PASSWORD)
    secret = REPO_PASSWORD if REPO_PASSWORD in value else LITERAL_PASSWORD
    command = spark_submit_command(
        conn_id="spark_cli", token="tok1", bootstrap_args=[], conf={}, hook_kwargs=None, options={option: value}
    )
    assert not [f for f in fragments(secret) if f in "\0".join(command)], command
    assert f"--{option.replace('_', '-')}" not in command
    assert conf_key in (command.secret_properties or "") and secret in (command.secret_properties or "")
    assert command[command.index("--properties-file") + 1] == f"/dev/fd/{SECRET_FD}"


def test_an_option_without_credentials_stays_on_the_command_line(cli_connection):
    command = spark_submit_command(
        conn_id="spark_cli", token="tok1", bootstrap_args=[], conf={}, hook_kwargs=None,
        options={"repositories": "https://nexus.example.com/repository/maven", "packages": "org.example:lib:1.0"},
    )
    assert command[command.index("--repositories") + 1] == "https://nexus.example.com/repository/maven"
    assert "--properties-file" not in command


def test_an_option_with_credentials_and_its_conf_key_both_given_is_refused(cli_connection):
    with pytest.raises(ValueError, match="spark.jars.repositories"):
        spark_submit_command(
            conn_id="spark_cli", token="tok1", bootstrap_args=[], hook_kwargs=None,
            conf={"spark.jars.repositories": "https://other.example.com/maven"},
            options={"repositories": f"https://ci:{REPO_PASSWORD}@nexus.example.com/maven"},
        )


def test_a_user_properties_file_is_merged_not_replaced(tmp_path, cli_connection):
    user = tmp_path / "user.properties"
    user.write_text("spark.executor.memory=3g\n")
    command = spark_submit_command(
        conn_id="spark_cli", token="tok1", bootstrap_args=[], conf={"spark.hadoop.fs.s3a.secret.key": S3_SECRET},
        hook_kwargs=None, options={"properties_file": str(user)},
    )
    assert "spark.executor.memory=3g" in (command.secret_properties or "")
    assert str(user) not in command  # the merged copy is what spark-submit reads
    with pytest.raises(ValueError, match="properties_file"):
        spark_submit_command(
            conn_id="spark_cli", token="tok1", bootstrap_args=[], conf={"spark.hadoop.fs.s3a.secret.key": S3_SECRET},
            hook_kwargs=None, options={"properties_file": str(tmp_path / "missing.properties")},
        )


def test_no_process_shows_a_secret_conf_on_its_command_line_while_the_driver_runs(tmp_path, spark_on_path):
    job = tmp_path / "job.py"
    job.write_text(
        "import time\nfrom airflow_provider_zeta.runtime import zeta_context\n"
        "time.sleep(3)\nzeta_context().report(rows=1)\n"
    )
    operator = ZetaSparkJobOperator(
        task_id="job",
        application=str(job),
        deferrable=False,
        conf={"spark.hadoop.fs.s3a.secret.key": S3_SECRET, "spark.db.password": PASSWORD_CONF, "spark.zeta.fakeStartupDelay": "1"},
    )
    watcher = Watcher([*fragments(S3_SECRET), *fragments(PASSWORD_CONF)])
    watcher.start()
    try:
        result = operator.execute(_context())
    finally:
        watcher.stop.set()
        watcher.join(5)
    assert result["rows"] == 1
    assert watcher.seen_driver and watcher.rounds > 20, "the watcher never saw the driver's processes"
    assert not watcher.hits, watcher.hits[:3]
    # The driver got the values (spark-submit read them from the properties file)...
    (submitted,) = [json.loads(line) for line in spark_on_path.read_text().splitlines()]
    assert submitted["conf"]["spark.hadoop.fs.s3a.secret.key"] == S3_SECRET
    assert submitted["conf"]["spark.db.password"] == PASSWORD_CONF
    # ...and no named copy of them is left anywhere under the state root or the temporary directory.
    # os.walk, not Path.rglob: other tests' processes create and remove their own directories in
    # /tmp meanwhile, and rglob raises on a directory that goes while it lists it.
    for directory in (tmp_path / "state", Path(os.environ.get("TMPDIR", "/tmp"))):
        for folder, _, names in os.walk(directory):
            for path in (Path(folder) / name for name in names if name.endswith(".properties")):
                try:
                    assert S3_SECRET not in path.read_text(errors="replace"), path
                except OSError:  # gone meanwhile, or not ours to read
                    pass


def test_a_failing_drivers_text_stays_out_of_the_exception_and_goes_to_the_task_log(tmp_path, spark_on_path, capsys):
    """The exception reaches failure e-mails, callbacks and listeners unmasked: it names the rule,
    the attempt and the task log; the driver's error and tail are in the task's log, masked."""
    job = tmp_path / "job.py"
    job.write_text(
        f"print('connecting with password={S3_SECRET}', flush=True)\nprint('marker {S3_SECRET[::-1]}', flush=True)\n"
        f"raise SystemExit('bad: ' + {S3_SECRET!r})\n"
    )
    operator = ZetaSparkJobOperator(
        task_id="job", application=str(job), deferrable=False, conf={"spark.hadoop.fs.s3a.secret.key": S3_SECRET}
    )
    with pytest.raises(Exception) as failure:
        operator.execute(_context())
    text = str(failure.value)
    assert "zeta.deploy.driver_failed" in text and "task log" in text, text
    assert not [f for f in fragments(S3_SECRET) if f in text], text
    reversed_secret = S3_SECRET[::-1]
    assert reversed_secret not in text  # no driver text at all, even unknown to any masker
    logged = capsys.readouterr().out  # the task's logger writes here outside a task runner
    assert reversed_secret in logged  # the tail is in the task's log...
    assert not [f for f in fragments(S3_SECRET) if f in logged], logged[-2000:]  # ...masked


def test_behind_the_log_shipper_spark_submit_still_reads_the_secret_conf(tmp_path, spark_on_path):
    """On an object-store state root spark-submit runs as the log shipper's child, which inherits
    no descriptor: its shell re-opens the shipper's (``/proc/<shipper>/fd/<n>``)."""
    from airflow_provider_zeta.hooks.spark_driver import driver_environment, launch_driver

    command = spark_submit_command(
        conn_id="spark_default", token="tokship", bootstrap_args=["--zeta-spec", "{}"],
        conf={"spark.hadoop.fs.s3a.secret.key": S3_SECRET, "spark.zeta.fakeStartupDelay": "1"}, hook_kwargs=None,
    )
    shipped = shipped_command(command, f"file://{tmp_path}/attempt", str(tmp_path / "local.log"))
    watcher = Watcher(fragments(S3_SECRET))
    watcher.start()
    try:
        launch_driver(shipped, driver_environment(), str(tmp_path / "driver.log"))
        deadline = time.monotonic() + 30
        while not spark_on_path.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        watcher.stop.set()
        watcher.join(5)
    (submitted,) = [json.loads(line) for line in spark_on_path.read_text().splitlines()]
    assert submitted["conf"]["spark.hadoop.fs.s3a.secret.key"] == S3_SECRET
    assert watcher.seen_driver and not watcher.hits, watcher.hits[:3]
