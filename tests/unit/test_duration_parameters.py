"""Each duration parameter of the operators, of ``zeta_pipeline`` and each ``[zeta]`` duration
option goes through the one parser: a timedelta works where seconds do, junk fails at parse time
with the parameter's name. DAGs are built in memory (no metadata DB, no component)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_provider_zeta.core.durations import InvalidDuration

START = datetime(2026, 1, 1, tzinfo=UTC)


def _dag(dag_id: str):
    from airflow.sdk import DAG

    return DAG(dag_id, schedule=None, start_date=START)


def test_zeta_pipeline_accepts_timedeltas():
    from airflow_provider_zeta import zeta_pipeline

    with _dag("durations_pipeline") as dag:
        zeta_pipeline(
            "sales",
            sources={"emea": "/jobs/a.py"},
            output="/tables/sales",
            cleanup_delay=timedelta(minutes=10),
            ready_timeout=timedelta(hours=2),
        )
    assert dag.get_task("sales.ready_to_close").timeout == 7200.0


def test_zeta_pipeline_rejects_a_junk_cleanup_delay_at_parse_time():
    from airflow_provider_zeta import zeta_pipeline

    with _dag("durations_pipeline_bad"), pytest.raises(InvalidDuration, match="'retention' must be a duration"):
        zeta_pipeline("sales", sources={"emea": "/jobs/a.py"}, output="/t", cleanup_delay="ten minutes")


def test_sensors_and_sweep_accept_timedeltas_and_numeric_text():
    from airflow_provider_zeta import CheckpointFreshnessSensor, ReadyToCloseSensor
    from airflow_provider_zeta.operators.sweep import ZetaSweepOperator

    with _dag("durations_sensors"):
        ready = ReadyToCloseSensor(task_id="ready", sources={"a": "deploy_a"}, timeout=timedelta(minutes=5), poll_interval="2")
        fresh = CheckpointFreshnessSensor(
            task_id="fresh",
            job_task_id="deploy_a",
            threshold=timedelta(minutes=3),
            first_checkpoint_threshold="600",
            poll_interval=timedelta(seconds=7),
        )
        sweep = ZetaSweepOperator(task_id="sweep", retention=timedelta(hours=1))
    assert ready.timeout == 300.0
    assert fresh.threshold == 180.0 and fresh.first_checkpoint_threshold == 600.0
    with pytest.raises(InvalidDuration, match="^sweep2: 'retention' must be"):
        ZetaSweepOperator(task_id="sweep2", retention="an hour")
    assert sweep.retention == timedelta(hours=1)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"timeout": "forever"}, "'timeout'"),
        ({"timeout": 0}, "'timeout'"),
        ({"poll_interval": timedelta(0)}, "'poll_interval'"),
    ],
)
def test_ready_to_close_rejects_bad_durations_naming_them(kwargs, name):
    from airflow_provider_zeta import ReadyToCloseSensor

    with pytest.raises(InvalidDuration, match=f"^ready: {name} must be a"):
        ReadyToCloseSensor(task_id="ready", sources={"a": "deploy_a"}, **kwargs)


def test_spark_job_operator_checks_its_durations_at_parse_time():
    from airflow_provider_zeta import ZetaSparkJobOperator

    with _dag("durations_deploy"):
        ZetaSparkJobOperator(
            task_id="deploy_ok",
            application="/jobs/a.py",
            lost_after=timedelta(minutes=2),
            heartbeat_interval=timedelta(seconds=5),
            poll_interval="5",
            launch_grace=timedelta(minutes=1),
        )
        with pytest.raises(InvalidDuration, match="^deploy_bad: 'lost_after' must be a duration"):
            ZetaSparkJobOperator(task_id="deploy_bad", application="/jobs/a.py", lost_after="a while")


def test_zeta_settings_accept_timedelta_text_and_name_the_option(monkeypatch):
    from airflow_provider_zeta.settings import ZetaSettings

    monkeypatch.setenv("AIRFLOW__ZETA__CLEANUP_RETENTION", "1:00:00")
    monkeypatch.setenv("AIRFLOW__ZETA__POLL_INTERVAL", " 2.5 ")
    settings = ZetaSettings.load()
    assert settings.cleanup_retention == 3600.0
    assert settings.poll_interval == 2.5
    monkeypatch.setenv("AIRFLOW__ZETA__DRIVER_LOST_AFTER", "one minute")
    with pytest.raises(InvalidDuration, match=r"^\[zeta\] driver_lost_after must be a duration"):
        ZetaSettings.load()


def test_ready_to_close_sensor_has_retries_by_default_and_keeps_a_users_setting():
    """A worker killed while the sensor evaluates must not fail the run: the sensor has retries by
    default (its verdicts fail without retry, AirflowFailException), and a user's ``retries`` wins."""
    import datetime as dt

    from airflow_provider_zeta.sensors.ready_to_close import ReadyToCloseSensor

    sensor = ReadyToCloseSensor(task_id="ready", sources={"a": "deploy_a"})
    assert sensor.retries == 3 and sensor.retry_delay == dt.timedelta(seconds=5)
    assert ReadyToCloseSensor(task_id="ready0", sources={"a": "deploy_a"}, retries=0).retries == 0
