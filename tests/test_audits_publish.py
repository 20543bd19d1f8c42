"""Write-audit-publish on real Airflow components (fake drivers, SQLite): a failed audit leaves the
published partition exactly as it was, and a clear of the fixed source publishes.

``tests/dags/pipeline_audited.py`` runs the counting job for alpha, beta and gamma under
``rows_within(min=3, max=100)``; each source's row count comes from a file the test writes. A run
publishes; beta is given one row and cleared with the ready-to-close sensor and downstream: its new
attempt reports 1 row, the completed point must fail naming the audit, the source and the numbers
(task log and XCom ``zeta_audit_results``), every file under the output table must be byte for byte
what it was, and beta's new staging must still be on the state root. Then beta's input is fixed
(7 rows) and it is cleared again the same way: the run publishes beta's third attempt beside alpha's
and gamma's first ones. Oracles: the files on disk, the rows and tokens in them (the job writes its
token into each row), the job's own launch log.
"""

from __future__ import annotations

import json
import os
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from airflow_provider_zeta.core.audits import AUDIT_RESULTS_XCOM
from tests.conftest import ARTIFACTS
from tests.test_deploy_windows import launches
from zeta_harness.leftovers import run_directory
from zeta_harness.published import read_partition

CHROMIUM = os.environ.get("ZETA_CHROMIUM", "/usr/bin/chromium")

DAG_ID = "pipeline_audited"
SOURCES = ("alpha", "beta", "gamma")
OUTPUT = "pipeline-audited-output"
AUDIT = "rows_within(min=3, max=100)"


def _task(source: str) -> str:
    return f"audited.deploy_{source}"


def _launched(log: Path) -> dict[str, list[str]]:
    per_source: dict[str, list[str]] = {s: [] for s in SOURCES}
    for entry in launches(log):
        per_source[entry["task"].removeprefix("audited.deploy_")].append(entry["token"])
    return per_source


def _files(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (published partitions, pending directories, tombstones) and its bytes."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _task_log(cluster, run_id: str, task_id: str) -> str:
    """The events of the task's log lines (JSON lines; a failure's exception text included), one a line."""
    folder = cluster.home / "logs" / f"dag_id={DAG_ID}" / f"run_id={run_id}" / f"task_id={task_id}"
    events = []
    for path in sorted(folder.glob("attempt=*.log")):
        for line in path.read_text(errors="replace").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                events.append(line)
                continue
            events.append(str(entry.get("event", "")))
            events += [str(detail.get("exc_value", "")) for detail in entry.get("error_detail") or []]
    return "\n".join(events)


def _page(cluster, path: str) -> str:
    """An HTML page of the API server (the plugin's), as the authenticated admin."""
    request = urllib.request.Request(
        cluster.api_url + path, headers={"Authorization": f"Bearer {cluster.token()}", "Accept": "text/html"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return response.read().decode()


def _browse_audits(cluster, run_id: str) -> None:
    """In headless Chromium, logged into the Airflow UI: the run's "Zeta" tab says which audit
    failed for beta, and the DAG's page charts beta's refused rows."""
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    assert Path(CHROMIUM).exists(), f"Chromium not found at {CHROMIUM}: `make install` installs Debian's chromium"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(cluster.api_url + "/", wait_until="domcontentloaded")
            page.wait_for_selector("input[name=username]", timeout=60_000)
            page.fill("input[name=username]", "admin")
            page.fill("input[name=password]", cluster._password)
            page.keyboard.press("Enter")
            page.wait_for_url(lambda url: "/auth/login" not in url, timeout=60_000)
            quoted = urllib.parse.quote(run_id, safe="")
            page.goto(f"{cluster.api_url}/dags/{DAG_ID}/runs/{quoted}/plugin/zeta-run", wait_until="domcontentloaded")
            frame = page.wait_for_selector("iframe", timeout=60_000).content_frame()
            verdict = frame.wait_for_selector('[data-audits="audited"]', timeout=60_000)
            assert verdict.inner_text() == "audit failed: beta"
            cell = frame.inner_text('[data-source-audits="beta"]')
            assert AUDIT in cell and "rows=1" in cell and "below the minimum 3" in cell, cell
            assert "below the minimum" not in frame.inner_text('[data-source-audits="alpha"]')
            page.screenshot(path=str(ARTIFACTS / "audits-run-view.png"), full_page=True)
            page.goto(f"{cluster.api_url}/zeta/ui?dag_id={DAG_ID}", wait_until="domcontentloaded")
            page.wait_for_selector('svg circle[data-source="beta"][data-status="audit_failed"]', timeout=60_000)
            page.screenshot(path=str(ARTIFACTS / "audits-rows-chart.png"), full_page=True)
        finally:
            browser.close()


def _clear_with_sensor(cluster, run_id: str, source: str) -> None:
    cluster.api(
        "POST",
        f"/dags/{DAG_ID}/clearTaskInstances",
        {
            "dry_run": False,
            "dag_run_id": run_id,
            "task_ids": [_task(source), "audited.ready_to_close"],
            "include_downstream": True,
            "include_upstream": False,
            "only_failed": False,
            "reset_dag_runs": True,
        },
    )


@pytest.mark.sqlite_only
def test_a_failed_audit_leaves_the_published_partition_untouched_and_a_clear_of_the_fixed_source_publishes(
    fake_driver_cluster, tmp_path
):
    cluster = fake_driver_cluster
    cluster.wait_for_dag(DAG_ID)
    ds = "2026-06-21"
    log, release, rows_dir = tmp_path / "launches.jsonl", tmp_path / "release", tmp_path / "rows"
    release.mkdir()
    rows_dir.mkdir()
    for source in SOURCES:
        (release / source).write_text("go")
    conf = {"launch_log": str(log), "release_dir": str(release), "rows_dir": str(rows_dir), "cleanup_delay": 120}
    run_id = cluster.trigger_run(DAG_ID, f"{ds}T00:00:00Z", conf=conf)
    cluster.wait_for_run(DAG_ID, run_id, timeout=240)
    table = cluster.home / OUTPUT
    first = {s: tokens[0] for s, tokens in _launched(log).items()}
    assert read_partition(table, ds).tokens() == {s: {t} for s, t in first.items()}
    passed = cluster.xcom(DAG_ID, run_id, "audited.completed_point", key=AUDIT_RESULTS_XCOM)
    assert passed["passed"] is True and len(passed["results"]) == 3, passed

    # beta's input shrinks to one row; it is reprocessed.
    (rows_dir / "beta").write_text("1")
    before = _files(table)
    _clear_with_sensor(cluster, run_id, "beta")
    cluster.wait_for(lambda: len(_launched(log)["beta"]) == 2, 120, "beta launched again")
    cluster.wait_for_run(DAG_ID, run_id, states={"failed"}, timeout=240)
    cluster.wait_for_task(DAG_ID, run_id, "audited.completed_point", {"failed"}, timeout=60)
    bad_token = _launched(log)["beta"][1]

    results = cluster.xcom(DAG_ID, run_id, "audited.completed_point", key=AUDIT_RESULTS_XCOM)
    assert results["passed"] is False and results["failed_sources"] == ["beta"], results
    failed = [r for r in results["results"] if not r["passed"]]
    assert failed == [
        {"audit": AUDIT, "source": "beta", "passed": False, "numbers": {"min": 3, "max": 100, "rows": 1},
         "message": "source 'beta': 1 rows, below the minimum 3"}
    ], results
    assert results["tokens"]["beta"] == bad_token and results["tokens"]["alpha"] == first["alpha"]
    text = _task_log(cluster, run_id, "audited.completed_point")
    assert f"zeta.audit.failed: {AUDIT} on beta" in text and '"rows": 1' in text and "[zeta.audit.failed]" in text, text[-3000:]
    # An audit failure is not retried: the first publish's try, then one failed try.
    tries = cluster.task_tries(DAG_ID, run_id, "audited.completed_point")
    assert [t["state"] for t in tries] == ["success", "failed"], tries

    # The published partition, and everything else under the table, byte for byte as before.
    assert _files(table) == before
    assert read_partition(table, ds).tokens() == {s: {t} for s, t in first.items()}
    # beta's audited attempt is still staged (the delayed cleanup deletes it after its window).
    staged = [p for p in run_directory(cluster.home / "zeta-state", DAG_ID, run_id).rglob("*")
              if p.is_file() and bad_token in p.as_posix() and "/output/" in p.as_posix()]
    assert staged, f"beta's attempt {bad_token} lost its staging"

    # The plugin: the run view (API and page, and in the Airflow UI) names the failed audit beside
    # beta; the DAG's page charts beta's refused row count.
    query = urllib.parse.urlencode({"dag_id": DAG_ID, "run_id": run_id})
    shown = cluster._http("GET", f"/zeta/api/run?{query}")
    (pipeline,) = shown["pipelines"]
    assert pipeline["audits"]["passed"] is False and pipeline["audits"]["failed_sources"] == ["beta"], pipeline
    audits = {s["source"]: s["audits"] for s in pipeline["sources"]}
    assert [a["passed"] for a in audits["beta"]] == [False] and audits["beta"][0]["numbers"]["rows"] == 1, audits
    assert [a["passed"] for a in audits["alpha"]] == [True], audits
    rows = cluster._http("GET", f"/zeta/api/rows?dag_id={DAG_ID}")["pipelines"]["audited"]
    assert rows[-1]["status"] == "audit_failed" and rows[-1]["rows"]["beta"] == 1, rows
    assert 'data-source="beta"' in _page(cluster, f"/zeta/ui?dag_id={DAG_ID}")
    _browse_audits(cluster, run_id)

    # beta's input is fixed; the same clear publishes its new attempt beside the others' first ones.
    (rows_dir / "beta").write_text("7")
    _clear_with_sensor(cluster, run_id, "beta")
    cluster.wait_for(lambda: len(_launched(log)["beta"]) == 3, 120, "beta launched a third time")
    cluster.wait_for_run(DAG_ID, run_id, states={"success"}, timeout=240)
    launched = _launched(log)
    assert {s: len(t) for s, t in launched.items()} == {"alpha": 1, "beta": 3, "gamma": 1}
    expected = {"alpha": first["alpha"], "beta": launched["beta"][2], "gamma": first["gamma"]}
    partition = read_partition(table, ds)
    assert partition.tokens() == {s: {t} for s, t in expected.items()}
    assert len(partition.sources["beta"].rows) == 7
    assert partition.marker["tokens"] == expected and partition.marker["rows"]["beta"] == 7
    final = cluster.xcom(DAG_ID, run_id, "audited.completed_point", key=AUDIT_RESULTS_XCOM)
    assert final["passed"] is True and final["tokens"] == expected, final
