"""G7 and the UI on real Airflow components: the monitoring plugin and CheckpointFreshnessSensor.

One SQLite cluster for the module (the DB plays no part in what is tested here) on
``tests/dags_monitor``, with the fake spark-submit first on PATH (a real driver process running the
real bootstrap, no JVM) and an auth manager that is Airflow's SimpleAuthManager plus per-DAG
allow-lists (``zeta_harness.auth``): ``alice`` may read ``monitor_other`` only,
``carol`` is an unrestricted viewer.

* The pipeline run, seen through the JSON API, the page, the DAG-run view and the "Spark driver"
  extra link, by the admin, an unrestricted viewer, a DAG-scoped user and an anonymous client;
  then in real headless Chromium through the Airflow UI's login and navigation (screenshots under
  ``test-artifacts/``). No secret appears anywhere.
* A job that prints credentials in every form that was found leaking and a connection's bare
  password: its output reaches the deploy task's log while the task is deferred (streamed by the
  trigger), masked by Airflow's masker and the provider's patterns; a user who may read runs but
  not task logs, expired and forged ``_token`` cookies, a job-written ledger with markup, secrets
  and foreign Spark UI hosts: every endpoint and page escapes, masks, refuses or redirects only to
  the launcher's host, an allow-listed host or the history server.
* A real Structured Streaming query (real PySpark): healthy for longer than threshold + one poll
  without being caught, then stalled and caught within threshold + one poll.
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from airflow_provider_zeta.core.paths import LEDGER_FILE, task_attempts_dir
from tests.conftest import ARTIFACTS, PROJECT_ROOT, _finish, spark_env
from zeta_harness.cluster import AirflowCluster

# One module-scoped cluster: these tests run in one test process (xdist group, pytest.ini).
pytestmark = pytest.mark.xdist_group("monitoring_cluster")

DAGS = PROJECT_ROOT / "tests" / "dags_monitor"
PIPELINE, OTHER, STREAMING, SECRETS = "monitor_pipeline", "monitor_other", "monitor_streaming", "monitor_secrets"
SECRET = "hunter2-zeta-secret"
PASSWORDS = {"alice": "alice-pw-1", "carol": "carol-pw-1", "dave": "dave-pw-1"}
HISTORY_SERVER = "http://history.example:18080"
ALLOWED_UI_HOST = "allowed.example"
CHROMIUM = os.environ.get("ZETA_CHROMIUM", "/usr/bin/chromium")


@pytest.fixture(scope="module")
def cluster(request):
    env = {
        **spark_env(fake=True),
        "AIRFLOW__CORE__AUTH_MANAGER": "zeta_harness.auth.DagScopedSimpleAuthManager",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin,alice:viewer,carol:viewer,dave:viewer",
        "ZETA_TEST_DAG_SCOPES": json.dumps({"alice": [OTHER]}),
        # dave may read DAGs and their runs, but no task logs (granted separately, as FAB does).
        "ZETA_TEST_DAG_ENTITIES": json.dumps({"dave": ["RUN"]}),
        "AIRFLOW__ZETA__SPARK_HISTORY_SERVER_URL": HISTORY_SERVER,
        "AIRFLOW__ZETA__SPARK_UI_ALLOWED_HOSTS": ALLOWED_UI_HOST,
        # A connection with a password. The pipeline's jobs print it into their driver logs
        # (tests/jobs/counting_job.py, leak_connection_env): it must never show up in a page, an
        # endpoint or a ledger.
        "AIRFLOW_CONN_ZETA_SECRET": json.dumps({"conn_type": "generic", "login": "u", "password": SECRET}),
    }
    failures_before = request.session.testsfailed
    cluster = AirflowCluster(DAGS, db="sqlite", extra_env=env)
    try:
        cluster.prepare()
        passwords = json.loads((cluster.home / "passwords.json").read_text())
        (cluster.home / "passwords.json").write_text(json.dumps({**passwords, **PASSWORDS}))
        cluster.start()
    except BaseException:
        _finish(cluster, True, "startup of the monitoring cluster")
        raise
    yield cluster
    _finish(cluster, request.session.testsfailed > failures_before, f"{request.module.__name__}[sqlite]")


# ---------------------------------------------------------------------------- HTTP helpers


def login(cluster: AirflowCluster, user: str) -> str:
    password = PASSWORDS[user]
    request = urllib.request.Request(
        cluster.api_url + "/auth/token",
        data=json.dumps({"username": user, "password": password}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())["access_token"]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def get(cluster: AirflowCluster, path: str, token: str | None = None, **params) -> tuple[int, str, dict]:
    """GET ``path`` (with ``params``); returns status, body and headers. Redirects are not followed."""
    url = cluster.api_url + path + ("?" + urllib.parse.urlencode(params) if params else "")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(urllib.request.Request(url, headers=headers), timeout=60) as response:
            return response.status, response.read().decode(errors="replace"), dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace"), dict(error.headers)


def get_json(cluster, path, token, **params):
    status, body, _ = get(cluster, path, token, **params)
    assert status == 200, f"GET {path} {params} -> {status}: {body[:1000]}"
    return json.loads(body)


def all_runs(cluster, token, **params) -> dict[str, list[dict]]:
    return {
        section: get_json(cluster, "/zeta/api/runs", token, section=section, limit=100, **params)["runs"]
        for section in ("running", "retained", "ended")
    }


def find_run(sections: dict[str, list[dict]], dag_id: str, run_id: str) -> tuple[str, dict] | None:
    for section, runs in sections.items():
        for run in runs:
            if (run["dag_id"], run["run_id"]) == (dag_id, run_id):
                return section, run
    return None


def section_html(page: str, section: str) -> str:
    """The part of the page under one section's heading (``running``, ``retained``, ``ended``)."""
    start = page.index(f'<h2 id="section-{section}">')
    end = page.find('<h2 id="section-', start + 1)
    return page[start : end if end >= 0 else len(page)]


def ledgers(cluster: AirflowCluster, dag_id: str, run_id: str, task_id: str) -> list[dict]:
    base = cluster.home / "zeta-state" / task_attempts_dir(dag_id, run_id, task_id, -1)
    return [json.loads(p.read_text()) for p in sorted(base.glob(f"*/{LEDGER_FILE}"))]


def task_log_text(cluster: AirflowCluster, dag_id: str, run_id: str, task_id: str) -> str:
    folder = cluster.home / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}" / f"task_id={task_id}"
    return "\n".join(p.read_text(errors="replace") for p in sorted(folder.glob("attempt=*")) if p.is_file())


def task_log_api(cluster: AirflowCluster, token: str, dag_id: str, run_id: str, task_id: str) -> str:
    """The task's log of every try as Airflow's REST API serves it (what the Logs tab shows): the
    lines' text, then the raw JSON (so a secret in any field of a structured line is seen too)."""
    tries = int(cluster.task_instance(dag_id, run_id, task_id)["try_number"] or 1)
    texts = []
    for try_number in range(1, tries + 1):
        path = f"/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id, safe='')}/taskInstances/{task_id}/logs/{try_number}"
        data = get_json(cluster, path, token, full_content="true")
        content = data.get("content") or []
        texts.append("\n".join(str(e.get("event", "")) if isinstance(e, dict) else str(e) for e in content))
        texts.append(json.dumps(content, ensure_ascii=False))
    return "\n".join(texts)


def cookie_get(cluster: AirflowCluster, path: str, cookie: str, **params) -> tuple[int, str, dict]:
    """GET with the UI's session cookie ``_token`` instead of a bearer token."""
    url = cluster.api_url + path + ("?" + urllib.parse.urlencode(params) if params else "")
    opener = urllib.request.build_opener(_NoRedirect)
    request = urllib.request.Request(url, headers={"Cookie": f"_token={cookie}"})
    try:
        with opener.open(request, timeout=60) as response:
            return response.status, response.read().decode(errors="replace"), dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace"), dict(error.headers)


# ---------------------------------------------------------------------------- the pipeline run


def test_plugin_shows_pipeline_runs_to_authorized_users_only(cluster, tmp_path):
    cluster.wait_for_dag(PIPELINE)
    cluster.wait_for_dag(OTHER)
    release = tmp_path / "release"
    release.mkdir()
    run_id = cluster.trigger_run(
        PIPELINE, "2026-03-01T00:00:00Z", conf={"launch_log": str(tmp_path / "launches.jsonl"), "release_dir": str(release)}
    )
    other_run = cluster.trigger_run(OTHER, "2026-03-01T00:00:00Z", conf={"launch_log": str(tmp_path / "other.jsonl")})
    admin = cluster.token()

    def pipeline_view():
        found = find_run(all_runs(cluster, admin, dag_id=PIPELINE), PIPELINE, run_id)
        return found and found[1]["pipelines"][0]

    def drivers_running():
        pipeline = pipeline_view()
        return pipeline if pipeline and all(s["driver"] == "running" for s in pipeline["sources"]) else None

    running = cluster.wait_for(drivers_running, 180, "three fake drivers running")
    assert running["phase"] == "running" and running["ready"] == 0 and running["total"] == 3
    (release / "alpha").touch()
    pipeline = cluster.wait_for(lambda: (p := pipeline_view()) and p["ready"] == 1 and p, 120, "ready 1 of 3")
    assert (pipeline["phase"], pipeline["phase_text"]) == ("ready", "ready 1 of 3")
    by_source = {s["source"]: s for s in pipeline["sources"]}
    assert set(by_source) == {"alpha", "beta", "gamma"}
    assert by_source["alpha"]["ready"] and by_source["alpha"]["driver"] == "succeeded"
    beta = by_source["beta"]
    assert beta["driver"] == "running" and re.fullmatch(r"[0-9a-f]{16}", beta["token"])
    assert beta["heartbeat_age"] < 30 and beta["checkpoint_age"] < 10 and beta["checkpoints"] > 0
    assert beta["driver_link"].startswith("/zeta/driver?")
    detail = get_json(cluster, "/zeta/api/run", admin, dag_id=PIPELINE, run_id=run_id)
    assert detail["section"] == "running" and detail["pipelines"][0]["ready"] == 1

    # Anonymous: refused everywhere, including the page and the driver link.
    driver_params = {"dag_id": PIPELINE, "run_id": run_id, "task_id": "sales.deploy_beta"}
    for path, params in [
        ("/zeta/api/runs", {}),
        ("/zeta/api/run", {"dag_id": PIPELINE, "run_id": run_id}),
        ("/zeta/ui", {}),
        ("/zeta/driver", driver_params),
    ]:
        status, body, _ = get(cluster, path, None, **params)
        assert status in (401, 403), (path, status, body[:300])
        assert run_id not in body
        status, _, _ = get(cluster, path, "not-a-valid-jwt", **params)
        assert status in (401, 403), (path, status)
    # No OpenAPI schema or docs under /zeta (FastAPI would serve them without authentication).
    for path in ("/zeta/openapi.json", "/zeta/docs", "/zeta/redoc"):
        for token in (None, admin):
            status, body, _ = get(cluster, path, token)
            assert status in (401, 403, 404) and "/api/runs" not in body, (path, status, body[:300])

    # alice may read monitor_other only: she sees its run and nothing of the pipeline's.
    alice = login(cluster, "alice")
    cluster.wait_for(lambda: find_run(all_runs(cluster, alice), OTHER, other_run), 120, "alice sees monitor_other")
    for params in ({}, {"dag_id": PIPELINE}):
        seen = all_runs(cluster, alice, **params)
        assert not any(run["dag_id"] == PIPELINE for runs in seen.values() for run in runs), seen
    for path, params in [("/zeta/api/run", {"dag_id": PIPELINE, "run_id": run_id}), ("/zeta/driver", driver_params)]:
        status, body, _ = get(cluster, path, alice, **params)
        assert status == 403 and run_id not in body, (path, status, body[:300])
    for params in ({}, {"dag_id": PIPELINE, "run_id": run_id}):
        status, page, _ = get(cluster, "/zeta/ui", alice, **params)
        assert status == 200 and PIPELINE not in page.split("Showing", 1)[1].split("</p>", 1)[1]
    # carol is an unrestricted viewer.
    carol = login(cluster, "carol")
    assert find_run(all_runs(cluster, carol, dag_id=PIPELINE), PIPELINE, run_id)

    # The page and the DAG-run view, server-rendered.
    status, page, _ = get(cluster, "/zeta/ui", admin)
    assert status == 200
    running_html = section_html(page, "running")
    assert run_id in running_html and "ready 1 of 3" in running_html, running_html[:3000]
    assert run_id not in section_html(page, "retained") and run_id not in section_html(page, "ended")
    status, run_page, _ = get(cluster, "/zeta/ui", admin, dag_id=PIPELINE, run_id=run_id)
    assert status == 200 and "ready 1 of 3" in run_page and other_run not in run_page

    # The deploy task's extra link goes to the driver endpoint, which shows the (fake) driver's log.
    links = cluster.api("GET", f"/dags/{PIPELINE}/dagRuns/{urllib.parse.quote(run_id, safe='')}/taskInstances/sales.deploy_alpha/links")
    link = links["extra_links"]["Spark driver"]
    assert link.startswith(cluster.api_url + "/zeta/driver?"), links
    status, text, headers = get(cluster, link.removeprefix(cluster.api_url), admin)
    # No Spark UI, no application id (fake driver): the task's log, where its output was streamed.
    assert status == 307, (status, text[:500])
    assert headers["location"] == f"/dags/{PIPELINE}/runs/{urllib.parse.quote(run_id, safe='')}/tasks/sales.deploy_alpha"

    # Browser: the page inside the Airflow UI, logged in through Airflow's own login page.
    browse(cluster, run_id)

    # The run completes: the freshness sensor ends with its job, and the run leaves "running".
    (release / "beta").touch()
    (release / "gamma").touch()
    cluster.wait_for_task(PIPELINE, run_id, "sales.completed_point", {"success"}, timeout=240)
    cluster.wait_for_task(PIPELINE, run_id, "freshness_alpha", {"success"}, timeout=120)
    section, run = cluster.wait_for(
        lambda: (f := find_run(all_runs(cluster, admin, dag_id=PIPELINE), PIPELINE, run_id)) and f[0] == "retained" and f,
        180,
        "the committed run listed as retained for its cleanup",
    )
    assert run["pipelines"][0]["outcome"] == "committed" and run["pipelines"][0]["ready"] == 3
    # The pipeline's cleanup waits out its retention (Airflow still shows the run running).
    assert run["pipelines"][0]["phase"] == "cleanup_due" and run["cleanup_due_in"] > 60, run
    assert run["pipelines"][0]["phase_text"].startswith("committed · cleanup due in ")
    # On the page, the run's row is now under "Retained for cleanup", and only there.
    status, retained_page, _ = get(cluster, "/zeta/ui", admin, dag_id=PIPELINE)
    retained_html = section_html(retained_page, "retained")
    assert status == 200 and "Retained for cleanup" in retained_html
    assert run_id in retained_html and "cleanup due in" in retained_html, retained_html[:3000]
    assert run_id not in section_html(retained_page, "running") and run_id not in section_html(retained_page, "ended")

    # No secret anywhere: endpoints, pages, driver logs as served, ledgers on storage. The check
    # can fail: the jobs printed the connection's password into their driver logs, in several forms.
    driver_logs = {
        path: path.read_text(errors="replace")
        for path in (cluster.home / "zeta-state").rglob("driver.log")
        if f"/{PIPELINE}/" in str(path)
    }
    assert driver_logs and all(SECRET in log for log in driver_logs.values()), sorted(map(str, driver_logs))
    served_logs = [
        task_log_api(cluster, admin, PIPELINE, run_id, f"sales.deploy_{source}") for source in ("alpha", "beta", "gamma")
    ]
    assert all("[driver] [job] connecting with --password ***" in served for served in served_logs), served_logs[0][-3000:]
    shown = [json.dumps(all_runs(cluster, admin)), page, run_page, retained_page, text, get(cluster, "/zeta/ui", admin)[1]]
    shown += served_logs
    shown += [json.dumps(get_json(cluster, "/zeta/api/run", admin, dag_id=PIPELINE, run_id=run_id))]
    shown += [p.read_text(errors="replace") for p in (cluster.home / "zeta-state").rglob(LEDGER_FILE)]
    for secret in (SECRET, cluster._password, *PASSWORDS.values(), admin):
        assert not any(secret in item for item in shown), secret


def browse(cluster: AirflowCluster, run_id: str) -> None:
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
            # The navigation entry leads to the plugin page, embedded in the Airflow UI.
            page.goto(cluster.api_url + "/plugin/zeta-pipelines", wait_until="domcontentloaded")
            frame_element = page.wait_for_selector("iframe", timeout=60_000)
            frame = frame_element.content_frame()
            frame.wait_for_selector(f"text={run_id}", timeout=60_000)
            frame.wait_for_selector("text=ready 1 of 3", timeout=60_000)
            assert "monitor_pipeline" in frame.inner_text("body")
            page.screenshot(path=str(ARTIFACTS / "monitor-ui.png"), full_page=True)
            # It refreshes itself: the "updated" time changes without a reload.
            before = frame.inner_text("#zeta-updated")
            frame.wait_for_function(f"document.getElementById('zeta-updated').textContent !== {before!r}", timeout=30_000)
            # The DAG run's own view.
            quoted = urllib.parse.quote(run_id, safe="")
            page.goto(f"{cluster.api_url}/dags/{PIPELINE}/runs/{quoted}/plugin/zeta-run", wait_until="domcontentloaded")
            frame = page.wait_for_selector("iframe", timeout=60_000).content_frame()
            frame.wait_for_selector("text=ready 1 of 3", timeout=60_000)
            page.screenshot(path=str(ARTIFACTS / "monitor-ui-dag-run.png"), full_page=True)
        finally:
            browser.close()


# ---------------------------------------------------------------------------- freshness, real Spark


@pytest.mark.spark
def test_freshness_sensor_catches_a_stalled_real_streaming_query(cluster, tmp_path):
    THRESHOLD, POLL = 20, 5  # as in tests/dags_monitor/monitor_streaming.py (not imported: no Airflow here)
    cluster.wait_for_dag(STREAMING)
    stall, stop = tmp_path / "stall", tmp_path / "stop"
    run_id = cluster.trigger_run(STREAMING, "2026-03-02T00:00:00Z", conf={"stall_file": str(stall), "stop_file": str(stop)})
    try:
        # Checkpoints come from the StreamingQueryListener alone (the job never calls checkpoint()).
        def streaming_checkpoints():
            found = [entry for entry in ledgers(cluster, STREAMING, run_id, "stream") if entry["status"] == "running"]
            return found and found[-1]["checkpoints"] >= 3 and found[-1]
        ledger = cluster.wait_for(streaming_checkpoints, 240, "streaming progress recorded as checkpoints")
        cluster.wait_for_task(STREAMING, run_id, "freshness", {"deferred"}, timeout=120)

        # The driver link prefers the Spark History Server ([zeta] spark_history_server_url is set).
        status, _, headers = get(cluster, "/zeta/driver", cluster.token(), dag_id=STREAMING, run_id=run_id, task_id="stream")
        assert status == 307 and headers["location"] == f"{HISTORY_SERVER}/history/{ledger['spark_app_id']}/", headers

        # Healthy for longer than threshold + one poll: not caught.
        healthy_until = time.time() + THRESHOLD + POLL + 5
        while time.time() < healthy_until:
            assert cluster.task_instance(STREAMING, run_id, "freshness")["state"] == "deferred"
            time.sleep(2)
        healthy = ledgers(cluster, STREAMING, run_id, "stream")[-1]
        assert healthy["checkpoints"] > ledger["checkpoints"] + THRESHOLD // 2

        # Stalled: caught within threshold + one poll of the last committed micro-batch.
        stall.touch()
        failed = cluster.wait_for_task(STREAMING, run_id, "freshness", {"failed", "success"}, timeout=THRESHOLD + 120)
        assert failed["state"] == "failed"
        last = ledgers(cluster, STREAMING, run_id, "stream")[-1]
        assert last["status"] == "running" and time.time() - last["heartbeat_at"] < 15  # alive, not committing
        log = task_log_text(cluster, STREAMING, run_id, "freshness")
        caught = re.findall(
            r"woken by the trigger: (job monitor_streaming\.stream .*? \((\d+\.\d)s\), more than the threshold of 20s)", log
        )
        assert caught, log[-3000:]
        # The message gives the age to one decimal (rounded): stale means age > threshold, so the
        # printed age is >= the threshold (20.04 s prints as 20.0).
        detected_age = float(caught[-1][1])
        print(f"stall caught by the trigger at checkpoint age {detected_age:.1f}s (threshold {THRESHOLD}s, poll {POLL}s)")
        assert THRESHOLD <= detected_age <= THRESHOLD + POLL, caught[-1][0]
        assert "[zeta.freshness.checkpoint_stale] job monitor_streaming.stream" in log
    finally:
        stop.touch()
    cluster.wait_for_task(STREAMING, run_id, "stream", {"success"}, timeout=180)


# ---------------------------------------------------------------------------- driver output, masking, hardening


def test_driver_output_reaches_the_task_log_masked_and_the_plugin_leaks_nothing(cluster, tmp_path):
    import socket

    import jwt

    from airflow_provider_zeta.core.paths import attempt_dir
    from tests.unit.test_redaction import FORMS

    cluster.wait_for_dag(SECRETS)
    lines_file, release = tmp_path / "lines.json", tmp_path / "release"
    lines_file.write_text(json.dumps([text for _, text, _, _ in FORMS]))
    # Printed bare; only the worker knows them (the deploy task hands them over sealed).
    worker_only = {"worker_only_token": "worker-only-Token-6d2f91", "worker_only_password": "worker-only-Conn-pw-0c7e44"}
    conf = {"lines_file": str(lines_file), "release_file": str(release), **worker_only}
    run_id = cluster.trigger_run(SECRETS, "2026-03-05T00:00:00Z", conf=conf)
    admin = cluster.token()
    form_secrets = [secret for _, _, secrets, _ in FORMS for secret in secrets] + list(worker_only.values())

    # While the task waits deferred, the trigger streams the driver's output into the task's log.
    def streamed_log():
        found = [t for t in cluster.task_instances(SECRETS, run_id) if t["task_id"] == "leaky"]
        if not found or found[0]["state"] != "deferred":
            return None  # not created or not deferred yet (its log may not exist)
        log = task_log_api(cluster, admin, SECRETS, run_id, "leaky")
        return "leaky job: printed everything" in log and log

    streamed = cluster.wait_for(streamed_log, 180, "the driver's output in the deferred task's log")
    assert cluster.task_instance(SECRETS, run_id, "leaky")["state"] == "deferred"
    release.touch()
    cluster.wait_for_task(SECRETS, run_id, "leaky", {"success"}, timeout=180)
    served = task_log_api(cluster, admin, SECRETS, run_id, "leaky")
    stored = task_log_text(cluster, SECRETS, run_id, "leaky")  # the log files Airflow wrote
    (driver_log,) = [p.read_text() for p in (cluster.home / "zeta-state").rglob("driver.log") if f"/{SECRETS}/" in str(p)]
    # The oracle: the job did print every secret, the bare password included, into its raw output.
    assert SECRET in driver_log and all(secret in driver_log for secret in form_secrets)
    assert "[driver] leaky job: done" in served and "[driver] leaky job: done" in stored  # drained at the end
    # Past what the trigger drains at the end: the resumed try logged the rest, masked, once.
    assert stored.count("[driver] leaky job: chatty line 31999 ") == 1
    assert "[driver] leaky job: the last chatty line; the token once more:" in served
    for text in (streamed, served, stored):
        assert "[driver] leaky job: start" in text
        assert "[driver] mysql -u root -p *** -h db" in text  # a form line, masked, its context kept
        # The bare password: no pattern can know it; Airflow's masker replaced it by value.
        assert "leaky job: the next line is a bare connection password" in text and "[driver] ***" in text
        assert "leaky job: the next lines are secrets only the worker knows" in text
        for secret in (SECRET, *form_secrets):
            assert secret not in text, secret

    # A job-written ledger (the job can write its attempt directory): markup, every leaking form in
    # its error, a foreign Spark UI host. Nothing of it may reach a page unescaped, and nothing of
    # its error text at all.
    state = cluster.home / "zeta-state"
    (real_ledger,) = [json.loads(p.read_text()) for p in state.rglob(LEDGER_FILE) if f"/{SECRETS}/" in str(p)]
    now = time.time()
    forged_token = 'tok<b>"x'
    forged_dir = state / attempt_dir(SECRETS, run_id, "leaky", -1, "placeholder")
    forged_dir = forged_dir.parent / forged_token
    forged_dir.mkdir(parents=True)
    forged = {
        **real_ledger,
        "token": forged_token,
        "status": "running",
        "started_at": now,
        "heartbeat_at": now,
        "ended_at": None,
        "source": "<img src=x onerror=alert(1)>",
        "error": "<script>alert(1)</script>\n" + "\n".join(text for _, text, _, _ in FORMS),
        "spark_ui_url": "http://evil.example:4040/",
        "spark_app_id": None,
    }
    (forged_dir / LEDGER_FILE).write_text(json.dumps(forged))
    detail = get(cluster, "/zeta/api/run", admin, dag_id=SECRETS, run_id=run_id)[1]
    listing = json.dumps(all_runs(cluster, admin, dag_id=SECRETS))
    status, run_page, _ = get(cluster, "/zeta/ui", admin, dag_id=SECRETS, run_id=run_id)
    assert status == 200 and "cannot be shown" not in run_page
    assert "<img src=x" not in run_page and "<script>alert(1)" not in run_page and "tok<b>" not in run_page
    assert "&lt;img src=x onerror=alert(1)&gt;" in run_page and "alert(1)&lt;/script&gt;" not in run_page
    # The driver's free text is never shown (the API server cannot mask by value): only a pointer.
    assert "the driver reported an error (the message is in the task log)" in run_page
    assert "tok&lt;b&gt;&quot;x" in run_page
    assert run_page.count("<script>") == 1  # only the page's own refresher
    for shown in (detail, listing, run_page):
        for secret in form_secrets:
            assert secret not in shown, secret

    # Redirects: a foreign host -> the task's log; an allow-listed host -> there; an application id
    # with the history server configured -> the history server.
    task_log_location = f"/dags/{SECRETS}/runs/{urllib.parse.quote(run_id, safe='')}/tasks/leaky"
    params = {"dag_id": SECRETS, "run_id": run_id, "task_id": "leaky"}

    def driver_redirect(**changes) -> str:
        (forged_dir / LEDGER_FILE).write_text(json.dumps({**forged, **changes}))
        status, body, headers = get(cluster, "/zeta/driver", admin, **params)
        assert status == 307, (status, body[:500])
        return headers["location"]

    assert driver_redirect() == task_log_location
    assert driver_redirect(spark_ui_url="http://evil.example@allowed.example:4040/") == task_log_location
    assert driver_redirect(spark_ui_url=f"http://{ALLOWED_UI_HOST}:4040/") == f"http://{ALLOWED_UI_HOST}:4040/"
    assert driver_redirect(spark_app_id="app-20260305-0001") == f"{HISTORY_SERVER}/history/app-20260305-0001/"
    # The launcher's host (recorded in the task's state store) is accepted only for its own attempt.
    launcher = f"http://{socket.gethostname()}:4040/"
    assert driver_redirect(spark_ui_url=launcher) == task_log_location  # forged token: no record
    import shutil

    shutil.rmtree(forged_dir)
    (real_dir,) = [p.parent for p in state.rglob(LEDGER_FILE) if f"/{SECRETS}/" in str(p)]
    (real_dir / LEDGER_FILE).write_text(
        json.dumps({**real_ledger, "status": "running", "ended_at": None, "heartbeat_at": now, "spark_ui_url": launcher, "spark_app_id": None})
    )
    status, _, headers = get(cluster, "/zeta/driver", admin, **params)
    assert (status, headers.get("location")) == (307, launcher)
    (real_dir / LEDGER_FILE).write_text(json.dumps(real_ledger))

    # dave may read runs but not task logs: the run without driver details, no driver link, no log.
    dave = login(cluster, "dave")
    seen = find_run(all_runs(cluster, dave, dag_id=SECRETS), SECRETS, run_id)
    assert seen, "dave may read the DAG's runs"
    (source,) = seen[1]["pipelines"][0]["sources"]
    assert source["driver_link"] is None and source["error"] is None and source["spark_ui_url"] is None
    assert get(cluster, "/zeta/api/run", dave, dag_id=SECRETS, run_id=run_id)[0] == 200
    assert get(cluster, "/zeta/driver", dave, **params)[0] == 403
    log_path = f"/api/v2/dags/{SECRETS}/dagRuns/{urllib.parse.quote(run_id, safe='')}/taskInstances/leaky/logs/1"
    assert get(cluster, log_path, dave)[0] == 403
    status, dave_page, _ = get(cluster, "/zeta/ui", dave, dag_id=SECRETS, run_id=run_id)
    assert status == 200 and run_id in dave_page and 'href="driver?' not in dave_page

    # Cookies: the UI's ``_token`` works when valid, and an expired or forged one is refused.
    assert cookie_get(cluster, "/zeta/api/runs", admin)[0] == 200
    claims = jwt.decode(admin, options={"verify_signature": False})
    algorithm = jwt.get_unverified_header(admin)["alg"]
    secret_key = cluster.env()["AIRFLOW__API_AUTH__JWT_SECRET"]
    expired = jwt.encode({**claims, "iat": int(now) - 7200, "nbf": int(now) - 7200, "exp": int(now) - 3600}, secret_key, algorithm=algorithm)
    wrong_key = jwt.encode({**claims, "exp": int(now) + 3600}, "not-the-" + secret_key, algorithm=algorithm)
    unsigned = jwt.encode({**claims, "exp": int(now) + 3600}, None, algorithm="none")
    for name, cookie in (("expired", expired), ("wrong key", wrong_key), ("alg none", unsigned)):
        for path, query in (("/zeta/api/runs", {}), ("/zeta/ui", {}), ("/zeta/api/run", {"dag_id": SECRETS, "run_id": run_id}), ("/zeta/driver", params)):
            status, body, _ = cookie_get(cluster, path, cookie, **query)
            assert status in (401, 403) and run_id not in body, (name, path, status, body[:300])
