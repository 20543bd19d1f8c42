"""A triggerer that froze right after a driver trigger proved itself the one its deploy task waits on,
and before it handed over the report that ends the task (a paused VM, a stopped process). Meanwhile
the task is cleared and runs again on another triggerer. When the frozen triggerer goes on, the old
trigger's report must not land: the task's return value stays the new try's report, and the
partition publishes the new launch.

The freeze is an armed crash point (``driver.report_proven``) that sends SIGSTOP to the whole
triggerer; the test starts a second triggerer beside it and continues the first with SIGCONT.
Oracles: the job's own launch log (which launch is new), the task's return value as the REST API
returns it, the published files.

PostgreSQL only: on SQLite the metadata database can give a deleted trigger's id to a new trigger,
and a report handed over under that id would land on the new deferral (docs/deployment.md).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

import psutil
import pytest

from airflow_provider_zeta.crash_points import DRIVER_REPORT_PROVEN
from tests.test_deploy_windows import launches
from tests.test_pipeline_publish import DAG_ID, published_tokens

DEPLOY = "counting.deploy_alpha"


def _alpha_launches(log) -> list[str]:
    return [entry["token"] for entry in launches(log) if entry["task"] == DEPLOY]


def _stopped(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_STOPPED
    except psutil.NoSuchProcess:
        return False


@pytest.mark.postgres_only
def test_a_report_proven_before_a_triggerer_froze_does_not_land_after_the_task_ran_again(fake_driver_cluster, tmp_path):
    cluster = fake_driver_cluster
    cluster.wait_for_dag(DAG_ID)
    log, release = tmp_path / "launches.jsonl", tmp_path / "release"
    release.mkdir()
    ds = "2026-04-21"  # a date of its own on the shared cluster
    run_id = cluster.trigger_run(DAG_ID, f"{ds}T00:00:00Z", conf={"launch_log": str(log), "release_dir": str(release)})
    cluster.wait_for(lambda: len(launches(log)) == 3, 180, "three drivers launched")
    (old_token,) = _alpha_launches(log)

    armed = cluster.arm_freeze_point(DRIVER_REPORT_PROVEN, run_id)
    (release / "alpha").write_text("go")
    triggerer = cluster.components["triggerer"]
    frozen = None
    try:
        cluster.wait_for(lambda: not armed.exists(), 180, "alpha's trigger to prove itself and freeze", interval=0.5)
        cluster.wait_for(lambda: _stopped(triggerer.pid), 30, "the triggerer to be stopped", interval=0.2)
        frozen = cluster.set_aside("triggerer")
        assert cluster.task_instance(DAG_ID, run_id, DEPLOY)["state"] == "deferred"
        cluster.start_component("triggerer")

        cluster.api(
            "POST",
            f"/dags/{DAG_ID}/clearTaskInstances",
            {"dry_run": False, "dag_run_id": run_id, "task_ids": [DEPLOY], "include_downstream": False, "only_failed": False, "reset_dag_runs": True},
        )
        cluster.wait_for(lambda: len(_alpha_launches(log)) == 2, 180, "alpha launched again by its new try")
        new_token = _alpha_launches(log)[-1]
        cluster.wait_for_task(DAG_ID, run_id, DEPLOY, {"success"}, timeout=180)
        assert cluster.xcom(DAG_ID, run_id, DEPLOY)["token"] == new_token

        cluster.thaw(frozen)
        old_trigger_logs = cluster.home / "logs" / f"dag_id={DAG_ID}" / f"run_id={run_id}" / f"task_id={DEPLOY}"

        def old_trigger_went_on() -> bool:
            text = "".join(p.read_text(errors="replace") for p in old_trigger_logs.glob("attempt=1.log.trigger.*"))
            # Logged once the trigger has its report in hand, after the point it froze at.
            return f"zeta driver {old_token}: succeeded;" in text

        cluster.wait_for(old_trigger_went_on, 60, "the old trigger to go on after the thaw")
        time.sleep(10)  # its hand-over reaches the database within the runner's next batches
        report = cluster.xcom(DAG_ID, run_id, DEPLOY)
        assert report["token"] == new_token, f"the frozen trigger's report of {old_token} replaced the new try's"
    finally:
        armed.unlink(missing_ok=True)
        if frozen is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(frozen.pid, signal.SIGKILL)
                os.killpg(frozen.pid, signal.SIGCONT)
        for source in ("beta", "gamma"):
            (release / source).write_text("go")
        if "triggerer" not in cluster.components or not cluster.components["triggerer"].alive():
            cluster.start_component("triggerer")

    cluster.wait_for_run(DAG_ID, run_id, timeout=300)
    assert published_tokens(cluster, ds)["alpha"] == {new_token}
