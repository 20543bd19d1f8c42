"""Rules of the monitoring page (core/monitor.py) and of checkpoint freshness (core/freshness.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from airflow_provider_zeta.core.cleanup import CleanupRecord, RecordStatus, RunPhase
from airflow_provider_zeta.core.freshness import (
    Freshness,
    current_attempt,
    current_ledger,
    describe_age,
    judge_freshness,
    next_look,
)
from airflow_provider_zeta.core.ledger import CorruptState, Ledger, LedgerStatus
from airflow_provider_zeta.core.monitor import (
    PipelinePhase,
    RunFacts,
    Section,
    TaskRow,
    history_link,
    known_section,
    link_host,
    page_bounds,
    phase_text,
    progress_phase,
    redact,
    run_status,
    safe_link,
    section_order,
    source_status,
    without_log_details,
)
from airflow_provider_zeta.core.paths import attempt_dir

NOW = 1_000_000.0
DAG, RUN = "sales", "scheduled__2026-01-01T00:00:00+00:00"


def ledger(token="t1", status=LedgerStatus.RUNNING, started=NOW - 100, beat=NOW - 2, ckpt=None, source="emea", **kw):
    return Ledger(
        token=token,
        status=status,
        started_at=started,
        heartbeat_at=beat,
        last_checkpoint_at=ckpt,
        checkpoints=0 if ckpt is None else 5,
        source=source,
        **kw,
    )


# ---------------------------------------------------------------------------- freshness


def test_a_fresh_running_job_is_watched_until_its_checkpoint_would_go_stale():
    judgement = judge_freshness("sales.deploy_emea", "deferred", ledger(ckpt=NOW - 10), NOW, threshold=30)
    assert (judgement.verdict, judgement.rule) == (Freshness.WATCHING, "fresh")
    assert judgement.stale_at == NOW + 20
    assert next_look(judgement, NOW, poll_interval=5) == NOW + 5
    assert next_look(judgement, NOW + 18, poll_interval=5) == NOW + 20.5  # just past the stale moment


def test_a_stale_checkpoint_fails_with_the_job_and_the_age():
    judgement = judge_freshness("sales.deploy_emea", "deferred", ledger(ckpt=NOW - 95), NOW, threshold=60)
    assert (judgement.verdict, judgement.rule) == (Freshness.STALE, "checkpoint_stale")
    assert "sales.deploy_emea" in judgement.message and "1m 35s ago (95.0s)" in judgement.message
    assert "threshold of 60s" in judgement.message and judgement.age == 95


def test_before_the_first_checkpoint_the_age_counts_from_the_start():
    assert judge_freshness("j", "deferred", ledger(started=NOW - 20), NOW, 30).verdict is Freshness.WATCHING
    stale = judge_freshness("j", "deferred", ledger(started=NOW - 40), NOW, 30)
    assert stale.verdict is Freshness.STALE and "no checkpoint yet" in stale.message


def test_the_first_checkpoint_has_its_own_threshold_and_only_the_first():
    slow_start = ledger(started=NOW - 90)
    watching = judge_freshness("j", "deferred", slow_start, NOW, 30, first_checkpoint_threshold=120)
    assert watching.verdict is Freshness.WATCHING and watching.stale_at == NOW - 90 + 120
    assert "first-checkpoint threshold 120s" in watching.message
    stale = judge_freshness("j", "deferred", ledger(started=NOW - 130), NOW, 30, first_checkpoint_threshold=120)
    assert stale.verdict is Freshness.STALE and "more than the first-checkpoint threshold of 120s" in stale.message
    # Once a checkpoint is recorded, the steady threshold counts, however long the start took.
    after_first = ledger(started=NOW - 300, ckpt=NOW - 40)
    assert judge_freshness("j", "deferred", after_first, NOW, 30, first_checkpoint_threshold=600).verdict is Freshness.STALE
    with pytest.raises(ValueError, match="first_checkpoint_threshold"):
        judge_freshness("j", "deferred", slow_start, NOW, 30, first_checkpoint_threshold=0)


def test_a_lost_driver_is_caught_by_the_same_rule_and_named_by_its_heartbeat():
    judgement = judge_freshness("j", "deferred", ledger(ckpt=NOW - 50, beat=NOW - 50), NOW, 30)
    assert judgement.verdict is Freshness.STALE and "heartbeat 50s ago" in judgement.message


@pytest.mark.parametrize("state", ["success", "failed", "upstream_failed", "skipped", "removed"])
def test_the_watch_ends_with_the_job_task_whatever_the_ledger_says(state):
    judgement = judge_freshness("j", state, ledger(ckpt=NOW - 999), NOW, 30)
    assert (judgement.verdict, judgement.rule) == (Freshness.ENDED, "job_ended")


def test_no_attempt_yet_and_between_attempts_keep_watching():
    assert judge_freshness("j", "queued", None, NOW, 30).rule == "not_started"
    failed = ledger(status=LedgerStatus.FAILED, ckpt=NOW - 999)
    assert judge_freshness("j", "up_for_retry", failed, NOW, 30).rule == "between_attempts"


def test_an_unreadable_ledger_fails_the_watch():
    judgement = judge_freshness("j", "deferred", CorruptState("ledger x is not valid JSON"), NOW, 30)
    assert (judgement.verdict, judgement.rule) == (Freshness.STALE, "ledger_unreadable")


def test_threshold_must_be_positive():
    with pytest.raises(ValueError, match="threshold"):
        judge_freshness("j", None, None, NOW, 0)


def test_current_attempt_is_the_newest_by_start_whatever_its_status():
    old_running = ledger("a", started=NOW - 50)
    new_failed = ledger("b", LedgerStatus.FAILED, started=NOW - 10)
    newest_running = ledger("c", started=NOW - 20)
    assert current_attempt([old_running, new_failed, newest_running]).token == "b"
    assert current_attempt([old_running, newest_running]).token == "c"
    assert current_attempt([new_failed, ledger("d", LedgerStatus.CANCELLED, started=NOW - 30)]).token == "b"
    assert current_attempt([]) is None


def test_a_killed_older_attempt_still_saying_running_does_not_hide_a_newer_one():
    # Attempt A was SIGKILLed (its ledger says "running" forever); attempt B ran and succeeded.
    killed = ledger("a", started=NOW - 900, beat=NOW - 800, ckpt=NOW - 800)
    succeeded = ledger("b", LedgerStatus.SUCCEEDED, started=NOW - 300, beat=NOW - 5, ckpt=NOW - 6)
    assert current_attempt([killed, succeeded]).token == "b"
    judgement = judge_freshness("j", "running", current_ledger([killed, succeeded]), NOW, 60)
    assert (judgement.verdict, judgement.rule, judgement.token) == (Freshness.WATCHING, "between_attempts", "b")
    # The page shows B's driver, not A's lost one.
    tasks = pipeline_tasks()
    facts = RunFacts(DAG, RUN, "running", tasks, {(tasks[0].task_id, -1): [killed, succeeded]})
    source = only_pipeline(run_status(facts, NOW, 60)).sources[2]
    assert (source.driver, source.token, source.attempts) == ("succeeded", "b", 2)
    # A newer running attempt after both is followed.
    retry = ledger("c", started=NOW - 30, ckpt=NOW - 10)
    assert judge_freshness("j", "running", current_ledger([killed, succeeded, retry]), NOW, 60).token == "c"


def test_which_ledger_counts_when_some_are_unreadable():
    bad = CorruptState("ledger x is not valid JSON")
    good = ledger("a", started=NOW - 50)
    assert current_ledger([bad, good]) is good
    assert current_ledger([bad]) is bad
    assert current_ledger([]) is None
    assert judge_freshness("j", "running", current_ledger([bad]), NOW, 30).rule == "ledger_unreadable"


def test_describe_age():
    assert [describe_age(v) for v in (None, 0, 7.4, 65, 3725)] == ["-", "0s", "7s", "1m 05s", "1h 02m"]


# ---------------------------------------------------------------------------- listing


def pipeline_tasks(deploys=("success", "running", "running"), ready="deferred", commit=None, group="sales_pipe"):
    names = ("emea", "amer", "apac")
    tasks = [TaskRow(f"{group}.deploy_{n}", "ZetaSparkJobOperator", s) for n, s in zip(names, deploys, strict=True)]
    tasks.append(TaskRow(f"{group}.ready_to_close", "ReadyToCloseSensor", ready))
    tasks.append(TaskRow(f"{group}.completed_point", "CompletedPointOperator", commit))
    return tasks


def ledgers_for(tasks, statuses):
    found, paths = {}, []
    for task, status in zip([t for t in tasks if t.operator == "ZetaSparkJobOperator"], statuses, strict=False):
        if status is None:
            continue
        token = f"tok-{task.task_id.rsplit('_', 1)[-1]}"
        found[(task.task_id, -1)] = [ledger(token, status, ckpt=NOW - 3, source=task.task_id.rsplit("_", 1)[-1], rows=7)]
        paths.append(attempt_dir(DAG, RUN, task.task_id, -1, token))
    return found, paths


def facts(run_state="running", tasks=None, statuses=(LedgerStatus.SUCCEEDED, LedgerStatus.RUNNING, LedgerStatus.RUNNING), records=()):
    tasks = pipeline_tasks() if tasks is None else tasks
    found, paths = ledgers_for(tasks, statuses)
    return RunFacts(DAG, RUN, run_state, tasks, found, records, paths)


def record(due_at, incarnation=0, status=RecordStatus.PENDING):
    return CleanupRecord(DAG, RUN, incarnation, "sales_pipe.cleanup", NOW - 10, due_at, status=status)


def only_pipeline(status):
    assert len(status.pipelines) == 1
    return status.pipelines[0]


def test_a_running_pipeline_shows_ready_k_of_n_and_its_drivers():
    status = run_status(facts(), NOW, lost_after=60)
    assert status.section is Section.RUNNING
    pipeline = only_pipeline(status)
    assert (pipeline.pipeline, pipeline.phase, pipeline.phase_text) == ("sales_pipe", PipelinePhase.READY, "ready 1 of 3")
    amer, _, emea = pipeline.sources  # by task id
    assert (emea.source, emea.driver, emea.ready, emea.rows) == ("emea", "succeeded", True, 7)
    assert (amer.driver, amer.token, amer.heartbeat_age, amer.checkpoint_age) == ("running", "tok-amer", 2, 3)


@pytest.mark.parametrize(
    "deploys, statuses, commit, run_state, phase",
    [
        (("queued", "queued", "queued"), (None, None, None), None, "running", PipelinePhase.DEPLOYING),
        (("deferred",) * 3, (LedgerStatus.RUNNING,) * 3, None, "running", PipelinePhase.RUNNING),
        (("success",) * 3, (LedgerStatus.SUCCEEDED,) * 3, "running", "running", PipelinePhase.READY),
        (("success",) * 3, (LedgerStatus.SUCCEEDED,) * 3, "success", "running", PipelinePhase.COMMITTED),
        (("failed", "deferred", "deferred"), (LedgerStatus.FAILED,) + (LedgerStatus.RUNNING,) * 2, None, "running", PipelinePhase.FAILED),
        (("up_for_retry", "deferred", "deferred"), (LedgerStatus.FAILED,) + (LedgerStatus.RUNNING,) * 2, None, "running", PipelinePhase.RUNNING),
    ],
)
def test_progress_phases(deploys, statuses, commit, run_state, phase):
    tasks = pipeline_tasks(deploys=deploys, commit=commit)
    status = run_status(facts(run_state, tasks, statuses), NOW, 60)
    assert status.section is Section.RUNNING
    assert only_pipeline(status).phase is phase


def test_a_run_whose_cleanup_waits_is_retained_even_while_airflow_shows_it_running():
    tasks = pipeline_tasks(deploys=("success",) * 3, commit="success")
    status = run_status(facts("running", tasks, (LedgerStatus.SUCCEEDED,) * 3, [record(NOW + 3000)]), NOW, 60)
    assert status.section is Section.RETAINED and status.retention is RunPhase.RETAINED
    pipeline = only_pipeline(status)
    assert pipeline.phase is PipelinePhase.CLEANUP_DUE
    assert pipeline.phase_text == "committed · cleanup due in 50m 00s"
    assert status.cleanup_due_at == NOW + 3000


def test_a_run_with_a_running_driver_is_running_even_with_a_pending_record():
    status = run_status(facts(records=[record(NOW + 3000)]), NOW, 60)
    assert status.section is Section.RUNNING


def test_ended_runs_are_retained_until_nothing_is_left():
    tasks = pipeline_tasks(deploys=("success", "failed", "success"), commit="upstream_failed")
    ended = (LedgerStatus.SUCCEEDED, LedgerStatus.FAILED, LedgerStatus.SUCCEEDED)
    waiting = run_status(facts("failed", tasks, ended, [record(NOW + 60)]), NOW, 60)
    assert waiting.section is Section.RETAINED
    assert only_pipeline(waiting).phase_text == "failed · cleanup due in 1m 00s"
    overdue = run_status(facts("failed", tasks, ended, [record(NOW - 5)]), NOW, 60)
    assert only_pipeline(overdue).phase is PipelinePhase.CLEANUP_OVERDUE
    unrecorded = run_status(facts("failed", tasks, ended), NOW, 60)
    assert (unrecorded.section, only_pipeline(unrecorded).phase) == (Section.RETAINED, PipelinePhase.AWAITING_CLEANUP)
    cleaned = run_status(facts("success", pipeline_tasks(("success",) * 3, "success", "success"), (None,) * 3), NOW, 60)
    assert (cleaned.section, only_pipeline(cleaned).phase, only_pipeline(cleaned).outcome) == (
        Section.ENDED,
        PipelinePhase.CLEANED,
        "committed",
    )


def test_pipelines_are_grouped_by_task_group_and_other_tasks_ignored():
    tasks = pipeline_tasks(group="a") + pipeline_tasks(group="b") + [TaskRow("report", "PythonOperator", "success")]
    tasks.append(TaskRow("standalone", "ZetaSparkJobOperator", "running"))
    status = run_status(RunFacts(DAG, RUN, "running", tasks), NOW, 60)
    assert [p.pipeline for p in status.pipelines] == ["", "a", "b"]
    assert status.pipelines[0].sources[0].source == "standalone"


def test_a_corrupt_ledger_is_shown_not_fatal():
    tasks = pipeline_tasks()
    bad = {(tasks[0].task_id, -1): [CorruptState("driver ledger x is not valid JSON (password=hunter2)")]}
    status = run_status(RunFacts(DAG, RUN, "running", tasks, bad), NOW, 60)
    source = only_pipeline(status).sources[2]
    assert source.source == "emea" and source.driver == "corrupt" and "hunter2" not in source.error


@pytest.mark.parametrize(
    "text, secret",
    [
        ("password=hunter2 rows=3", "hunter2"),
        ('{"secret_key": "s3cr3t", "rows": 3}', "s3cr3t"),
        ("--conf spark.hadoop.fs.s3a.secret.key=AKIAXYZ", "AKIAXYZ"),
        ("postgresql://user:pa55word@db:5432/x", "pa55word"),
        ("Authorization: Bearer eyJhbGciOi.abc.def", "eyJhbGciOi"),
        ("api_key: 'k-123'", "k-123"),
        ("spark-submit --password hunter2 --verbose", "hunter2"),
        ("run.sh --db-password 'pa ss' -x", "pa ss"),
        ("Authorization: Basic dXNlcjpodW50ZXIy", "dXNlcjpodW50ZXIy"),
        ('{"Authorization": "Basic dXNlcjpodW50ZXIy"}', "dXNlcjpodW50ZXIy"),
        ("authorization=Token ghp_abc123", "ghp_abc123"),
    ],
)
def test_redact_masks_credentials(text, secret):
    assert secret not in redact(text)


def test_redact_keeps_ordinary_text_and_safe_link_refuses_odd_urls():
    assert redact("rows=3 source=emea") == "rows=3 source=emea"
    assert redact("spark-submit --password hunter2 --verbose") == "spark-submit --password *** --verbose"
    assert redact("Authorization: Basic dXNlcjpodW50ZXIy") == "Authorization: Basic ***"
    assert redact("--password-file --verbose") == "--password-file --verbose"
    assert safe_link("http://host:4040") == "http://host:4040"
    assert safe_link("javascript:alert(1)") is None and safe_link(None) is None
    assert safe_link('http://x/"><script>') is None


def test_page_bounds():
    assert page_bounds(10, 500, -3) == (100, 0)
    assert page_bounds(10, 0, 5) == (1, 5)


def test_without_task_log_access_the_driver_error_and_spark_ui_are_left_out():
    tasks = pipeline_tasks(deploys=("running", "running", "running"))
    running = ledger("t", ckpt=NOW - 3, spark_ui_url="http://driver:4040", error="KeyError: boom at stage 3")
    facts = RunFacts(DAG, RUN, "running", tasks, {(tasks[0].task_id, -1): [running]})
    source = only_pipeline(run_status(facts, NOW, 60)).sources[2]
    assert (source.spark_ui_url, source.error) == ("http://driver:4040", "KeyError (the message is in the task log)")
    hidden = without_log_details(source)
    assert (hidden.spark_ui_url, hidden.error) == (None, None)
    assert (hidden.driver, hidden.token, hidden.checkpoint_age) == (source.driver, source.token, source.checkpoint_age)


@pytest.mark.parametrize(
    "run_state, has_dir, section",
    [
        ("success", False, Section.ENDED),
        ("failed", False, Section.ENDED),
        (None, False, Section.ENDED),
        ("success", True, None),  # data left: run_status decides (retained or ended)
        ("running", False, None),  # still deploying: run_status decides
        ("queued", True, None),
    ],
)
def test_a_finished_run_with_no_directory_left_is_ended_without_reading_the_state_root(run_state, has_dir, section):
    assert known_section(run_state, has_dir) is section
    if section is Section.ENDED:  # the same verdict run_status gives with nothing on the state root
        assert run_status(RunFacts(DAG, RUN, run_state, pipeline_tasks()), NOW, 60).section is Section.ENDED


def test_retained_runs_are_ordered_by_the_soonest_cleanup():
    done = (LedgerStatus.SUCCEEDED,) * 3
    tasks = pipeline_tasks(deploys=("success",) * 3, commit="success")
    statuses = [
        run_status(facts("success", tasks, done, records=() if due is None else (record(due),)), NOW, 60)
        for due in (NOW + 500, None, NOW + 100)
    ]
    assert all(status.section is Section.RETAINED for status in statuses)
    ordered = sorted(statuses, key=lambda status: section_order(Section.RETAINED, status))
    assert [status.cleanup_due_at for status in ordered] == [NOW + 100, NOW + 500, None]
    assert section_order(Section.RUNNING, statuses[0]) == ()


@pytest.mark.parametrize(
    "error, shown, rule",
    [
        (None, None, "no_error"),
        (12345, None, "no_error"),
        ("cancelled by the coordinator (cancel marker)", "cancelled by the coordinator (cancel marker)", "provider_text"),
        ("terminated by signal 15", "terminated by signal 15", "provider_text"),
        ("the job exited with status 3", "the job exited with status 3", "provider_text"),
        ("the job exited with status 'hunter2'", "the driver reported an error (the message is in the task log)", "withheld"),
        ("ValueError: password=hunter2", "ValueError (the message is in the task log)", "exception_class"),
        ("Py4JJavaError: An error occurred", "Py4JJavaError (the message is in the task log)", "exception_class"),
        ("KeyboardInterrupt", "KeyboardInterrupt (the message is in the task log)", "exception_class"),
        (
            "could not list the staged output: PermissionError: [Errno 13] /x/hunter2",
            "could not list the staged output: PermissionError (the message is in the task log)",
            "exception_class",
        ),
        ("hunter2: not a class", "the driver reported an error (the message is in the task log)", "withheld"),
        ("password=hunter2", "the driver reported an error (the message is in the task log)", "withheld"),
        ("x" * 10_000_000, "the driver reported an error (the message is in the task log)", "withheld"),
    ],
)
def test_the_page_shows_of_a_driver_error_only_structured_facts(error, shown, rule):
    from airflow_provider_zeta.core.monitor import error_summary

    assert error_summary(error) == (shown, rule)


# ---------------------------------------------------------------------------- what each row shows


def test_a_history_link_takes_application_ids_in_either_case_and_strips_only_slashes_from_the_base():
    assert history_link("http://history:18080", "App-Spark_1.x") == "http://history:18080/history/App-Spark_1.x/"
    assert history_link("http://proxy/SPARKX//", "app-1") == "http://proxy/SPARKX/history/app-1/"
    assert history_link("javascript:alert(1)", "app-1") is None


def test_a_link_without_a_host_is_not_safe():
    assert link_host("http://:4040/jobs") == ""
    assert safe_link("http://:4040/jobs") is None
    assert link_host("http://Worker-1:4040") == "worker-1"


@pytest.mark.parametrize(
    "phase, outcome, due_in, text",
    [
        (PipelinePhase.DEPLOYING, None, None, "deploying"),
        (PipelinePhase.RUNNING, None, None, "running"),
        (PipelinePhase.FAILED, "failed", None, "failed"),
        (PipelinePhase.COMMITTED, "committed", None, "committed"),
        (PipelinePhase.CLEANED, "committed", None, "committed · cleaned"),
        (PipelinePhase.CLEANUP_DUE, "committed", 90, "committed · cleanup due in 1m 30s"),
        (PipelinePhase.CLEANUP_DUE, None, 90, "cleanup due in 1m 30s"),
        (PipelinePhase.CLEANUP_DUE, "failed", None, "failed · cleanup blocked (unreadable record)"),
        (PipelinePhase.CLEANUP_OVERDUE, "failed", None, "failed · cleanup overdue (the sweep carries it out)"),
        (PipelinePhase.AWAITING_CLEANUP, "failed", None, "failed · ended, cleanup not recorded yet"),
    ],
)
def test_the_phase_text_prefixes_a_known_outcome_only_where_the_phase_does_not_already_say_it(phase, outcome, due_in, text):
    assert phase_text(phase, 1, 3, outcome, due_in) == text


def test_the_ready_phase_text_counts_ready_sources_of_all():
    assert phase_text(PipelinePhase.READY, 2, 5, "committed", None) == "ready 2 of 5"


def test_a_source_without_a_ledger_is_missing_and_named_after_its_task():
    task = TaskRow("grp.sub.deploy_emea", "ZetaSparkJobOperator", "queued", map_index=3)
    source = source_status(task, [], NOW, 60)
    assert (source.source, source.task_id, source.map_index, source.task_state) == ("emea", task.task_id, 3, "queued")
    assert (source.driver, source.token, source.attempts, source.checkpoints, source.error) == ("missing", None, 0, 0, None)
    assert (source.heartbeat_age, source.checkpoint_age, source.rows, source.spark_ui_url) == (None, None, None, None)
    standalone = source_status(TaskRow("deploy_apac", "ZetaSparkJobOperator", None), [], NOW, 60)
    assert standalone.source == "apac"


def test_a_source_whose_ledgers_are_all_unreadable_is_corrupt_with_the_masked_reason():
    task = TaskRow("grp.deploy_emea", "ZetaSparkJobOperator", "running")
    bad = [CorruptState("driver ledger x is not valid JSON"), CorruptState("second")]
    source = source_status(task, bad, NOW, 60)
    assert (source.source, source.task_id, source.task_state) == ("emea", task.task_id, "running")
    assert (source.driver, source.attempts, source.checkpoints, source.token) == ("corrupt", 2, 0, None)
    assert source.error == "driver ledger x is not valid JSON"  # the first unreadable one
    secret = source_status(task, [CorruptState("ledger x: password=hunter2 is not valid")], NOW, 60)
    assert secret.error.startswith("ledger x: password=***") and "hunter2" not in secret.error


def test_a_source_whose_ledger_has_values_of_the_wrong_type_names_the_exception_class_only():
    task = TaskRow("grp.deploy_emea", "ZetaSparkJobOperator", "running")
    odd = ledger("t", ckpt=NOW - 3, rows="hunter2")  # int("hunter2") fails with the value in its text
    source = source_status(task, [odd], NOW, 60)
    assert (source.source, source.task_id, source.driver, source.attempts) == ("emea", task.task_id, "corrupt", 1)
    assert source.error == "the driver ledger cannot be shown (ValueError)"


def test_a_running_source_shows_its_ledger_source_ages_counts_and_link():
    task = TaskRow("grp.deploy_x", "ZetaSparkJobOperator", "running")
    running = ledger("t", ckpt=NOW - 3, source="emea-2", spark_ui_url="http://driver:4040", rows=7)
    source = source_status(task, [running], NOW, 60)
    assert (source.source, source.driver, source.token, source.attempts) == ("emea-2", "running", "t", 1)
    assert (source.heartbeat_age, source.checkpoint_age, source.checkpoints, source.rows) == (2.0, 3.0, 5, 7)
    assert source.spark_ui_url == "http://driver:4040"
    unnamed = source_status(task, [ledger("t", ckpt=NOW - 3, source="")], NOW, 60)
    assert unnamed.source == "x"


def test_an_ended_source_shows_no_ages_and_no_spark_ui():
    task = TaskRow("grp.deploy_emea", "ZetaSparkJobOperator", "success")
    ended = ledger("t", LedgerStatus.SUCCEEDED, ckpt=NOW - 3, spark_ui_url="http://driver:4040", rows=7)
    source = source_status(task, [ended], NOW, 60)
    assert (source.driver, source.heartbeat_age, source.checkpoint_age, source.spark_ui_url) == ("succeeded", None, None, None)
    assert (source.checkpoints, source.rows) == (5, 7)


def test_a_run_lists_its_identity_and_counts_of_each_pipeline():
    status = run_status(facts(), NOW, 60)
    assert (status.dag_id, status.run_id, status.run_state) == (DAG, RUN, "running")
    pipeline = only_pipeline(status)
    assert (pipeline.ready, pipeline.total, pipeline.outcome) == (1, 3, None)


def test_a_successful_run_is_committed_only_if_the_pipeline_has_a_completed_point():
    done = (LedgerStatus.SUCCEEDED,) * 3
    with_commit = pipeline_tasks(deploys=("success",) * 3, commit="success")
    assert only_pipeline(run_status(facts("success", with_commit, done), NOW, 60)).outcome == "committed"
    without_commit = with_commit[:-1]
    no_commit = only_pipeline(run_status(facts("success", without_commit, done, [record(NOW + 60)]), NOW, 60))
    assert (no_commit.outcome, no_commit.phase_text) == ("success", "success · cleanup due in 1m 00s")
    failed = pipeline_tasks(deploys=("success",) * 3, commit="upstream_failed")
    assert only_pipeline(run_status(facts("failed", failed, done, [record(NOW + 60)]), NOW, 60)).outcome == "failed"


def test_a_cleanup_due_exactly_now_is_overdue_and_one_due_later_counts_down():
    done = (LedgerStatus.SUCCEEDED,) * 3
    tasks = pipeline_tasks(deploys=("success",) * 3, commit="success")
    due_now = only_pipeline(run_status(facts("success", tasks, done, [record(NOW)]), NOW, 60))
    assert due_now.phase is PipelinePhase.CLEANUP_OVERDUE
    soon = only_pipeline(run_status(facts("success", tasks, done, [record(NOW + 0.4)]), NOW, 60))
    assert (soon.phase, soon.phase_text) == (PipelinePhase.CLEANUP_DUE, "committed · cleanup due in 0s")


def test_retained_runs_sort_by_due_time_even_at_the_start_of_the_epoch():
    tasks = pipeline_tasks(deploys=("success",) * 3, commit="success")
    base = run_status(facts("success", tasks, (LedgerStatus.SUCCEEDED,) * 3, [record(NOW + 10)]), NOW, 60)
    at_epoch, later = replace(base, cleanup_due_at=0.0), replace(base, cleanup_due_at=0.5)
    assert section_order(Section.RETAINED, at_epoch) < section_order(Section.RETAINED, later)


def test_a_link_of_exactly_the_cap_is_kept_and_one_longer_dropped():
    from airflow_provider_zeta.core.monitor import MAX_LINK_CHARS

    head = "http://driver:4040/"
    at_cap = head + "a" * (MAX_LINK_CHARS - len(head))
    assert safe_link(at_cap) == at_cap
    assert safe_link(at_cap + "a") is None


# ---------------------------------------------------------------------------- ledgers the page reads


def _document(**fields):
    base = {"token": "tok", "status": "running", "started_at": NOW - 10, "heartbeat_at": NOW - 1}
    return {**base, **fields}


def test_a_ledger_as_the_driver_writes_it_is_shown_with_every_optional_field_absent_or_null():
    from airflow_provider_zeta.core.monitor import ledger_document_problem

    assert ledger_document_problem(_document(), "tok") is None
    nulls = {name: None for name in ("ended_at", "rows", "checkpoints", "error", "spark_ui_url", "metrics", "files")}
    assert ledger_document_problem(_document(**nulls), "tok") is None
    full = _document(
        status="succeeded", ended_at=NOW, last_checkpoint_at=NOW - 2, rows=7, checkpoints=3, pid=12, error="x",
        host="h", source="emea", metrics={"a": 1}, files={"part-0.parquet": 1024, "_SUCCESS": 0},
    )
    assert ledger_document_problem(full, "tok") is None


@pytest.mark.parametrize(
    "document, problem",
    [
        (["not", "a", "dict"], "holds list, not an object"),
        (_document(token="other"), "its token is not its attempt directory's name"),
        (_document(status="exploded"), "field 'status' is not a known status"),
        (_document(started_at=None), "field 'started_at' is not a finite epoch time"),
        (_document(heartbeat_at=float("nan")), "field 'heartbeat_at' is not a finite epoch time"),
        (_document(ended_at=True), "field 'ended_at' is not a finite epoch time"),
        (_document(last_checkpoint_at=2e11), "field 'last_checkpoint_at' is not a finite epoch time"),
        (_document(rows=1.5), "field 'rows' is not an integer"),
        (_document(pid=2**64), "field 'pid' is not an integer"),
        (_document(error=12345), "field 'error' is not text"),
        (_document(spark_ui_url=["http://x"]), "field 'spark_ui_url' is not text"),
        (_document(metrics=[1, 2]), "field 'metrics' is not an object"),
        (_document(files={"part-0": "1024"}), "field 'files' is not an object of sizes"),
        (_document(files=[1024]), "field 'files' is not an object of sizes"),
    ],
)
def test_a_ledger_field_of_the_wrong_type_is_named_never_its_value(document, problem):
    from airflow_provider_zeta.core.monitor import ledger_document_problem

    assert ledger_document_problem(document, "tok") == problem


@pytest.mark.parametrize(
    "value, number",
    [(3, 3.0), (2.5, 2.5), (-1, -1.0), (None, None), (True, None), ("3", None), (float("inf"), None), (float("nan"), None), (10**400, None)],
)
def test_only_finite_numbers_reach_a_json_answer(value, number):
    from airflow_provider_zeta.core.monitor import finite_or_none

    assert finite_or_none(value) == number


def test_a_provider_message_is_cut_to_the_limit_after_masking_and_read_only_up_to_four_times_it():
    from airflow_provider_zeta.core.monitor import capped_text

    assert capped_text(None) is None and capped_text("") is None
    assert capped_text("x" * 600) == "x" * 500
    assert capped_text("x" * 600, limit=10) == "x" * 10
    # A long secret value at the start is masked whole; nothing after four times the limit is read.
    secret_then_more = "password=" + "s" * (4 * 500 - len("password=")) + "\nlater line"
    assert capped_text(secret_then_more) == "password=***"
    assert capped_text("password=hunter2\nrows=3") == "password=***\nrows=3"


# ---------------------------------------------------------------------------- phases of a pipeline


@pytest.mark.parametrize("failed_task", ["ready", "commit"])
def test_a_failed_ready_to_close_or_completed_point_fails_the_pipeline(failed_task):
    tasks = pipeline_tasks(deploys=("success", "running", "running"), ready="failed" if failed_task == "ready" else "deferred")
    if failed_task == "commit":
        tasks[-1] = replace(tasks[-1], state="upstream_failed")
    pipeline = only_pipeline(run_status(facts("running", tasks), NOW, 60))
    assert (pipeline.phase, pipeline.outcome, pipeline.phase_text) == (PipelinePhase.FAILED, "failed", "failed")


def test_a_failed_cleanup_or_freshness_task_does_not_fail_the_pipeline():
    tasks = pipeline_tasks(deploys=("running",) * 3) + [
        TaskRow("sales_pipe.cleanup", "DelayedCleanupOperator", "failed"),
        TaskRow("sales_pipe.freshness", "CheckpointFreshnessSensor", "failed"),
    ]
    pipeline = only_pipeline(run_status(facts("running", tasks, (LedgerStatus.RUNNING,) * 3), NOW, 60))
    assert pipeline.phase is PipelinePhase.RUNNING


def test_a_failed_run_fails_its_pipelines_whatever_their_tasks_say():
    tasks = pipeline_tasks(deploys=("running",) * 3)
    assert progress_phase("failed", tasks, ()) == (PipelinePhase.FAILED, "failed")


def test_a_pipeline_is_committed_only_when_every_completed_point_succeeded():
    tasks = pipeline_tasks(deploys=("success",) * 3, commit="success")
    assert progress_phase("running", tasks, ()) == (PipelinePhase.COMMITTED, "committed")
    second = tasks + [TaskRow("sales_pipe.completed_point_2", "CompletedPointOperator", "running")]
    assert progress_phase("running", second, ())[0] is not PipelinePhase.COMMITTED


def test_a_pipeline_whose_only_driver_is_lost_is_still_running_not_deploying():
    tasks = pipeline_tasks(deploys=("running",) * 3)
    lost = ledger("t", beat=NOW - 600, ckpt=NOW - 600)
    status = run_status(RunFacts(DAG, RUN, "running", tasks, {(tasks[0].task_id, -1): [lost]}), NOW, 60)
    pipeline = only_pipeline(status)
    assert pipeline.sources[2].driver == "lost" and pipeline.phase is PipelinePhase.RUNNING


def test_a_task_row_knows_its_pipeline_and_role():
    assert TaskRow("a.b.deploy_x", "ZetaSparkJobOperator", None).pipeline == "a.b"
    assert TaskRow("deploy_x", "ZetaSparkJobOperator", None).pipeline == ""
    assert TaskRow("a.ready", "ReadyToCloseSensor", None).role == "ready"
    assert TaskRow("a.x", "PythonOperator", None).role is None and TaskRow("a.x", None, None).role is None


def test_page_bounds_clamp_to_one_and_the_maximum():
    assert page_bounds(10, 100, 0) == (100, 0)
    assert page_bounds(10, 101, 0) == (100, 0)
    assert page_bounds(10, 1, 0) == (1, 0)
    assert page_bounds(10, 30, 0, max_limit=20) == (20, 0)
    assert page_bounds(10, "7", "3") == (7, 3)


def test_the_ranges_a_ledger_field_may_hold_include_their_ends():
    from airflow_provider_zeta.core.monitor import ledger_document_problem

    largest = 2**63 - 1  # a signed 64-bit integer, as the JVM side writes counts
    for count in (largest, -largest):
        assert ledger_document_problem(_document(rows=count), "tok") is None
    assert ledger_document_problem(_document(rows=largest + 1), "tok") == "field 'rows' is not an integer"
    for moment in (1e11, -1e11):  # epoch seconds up to the year 5138
        assert ledger_document_problem(_document(ended_at=moment), "tok") is None
    assert ledger_document_problem(_document(ended_at=1e11 + 1), "tok") == "field 'ended_at' is not a finite epoch time"


def test_an_optional_field_is_valid_when_absent_or_valid_by_its_own_check():
    # The field table is built at import; this checks the rule it is built from.
    from airflow_provider_zeta.core.monitor import _optional

    is_one = _optional(lambda value: value == 1)
    assert is_one(None) is True and is_one(1) is True and is_one(2) is False
    assert _optional(lambda value: value is not None)(None) is True


def test_a_ledger_source_that_is_not_text_is_replaced_by_the_task_name():
    task = TaskRow("grp.deploy_x", "ZetaSparkJobOperator", "running")
    for odd in (42, ["emea"], None):
        assert source_status(task, [ledger("t", ckpt=NOW - 3, source=odd)], NOW, 60).source == "x"


def test_a_run_whose_only_live_driver_belongs_to_a_finished_task_is_retained_not_running():
    # The driver's task ended (its driver was orphaned, the sweep stops it); the run's cleanup waits.
    tasks = pipeline_tasks(deploys=("success",) * 3, commit="success")
    orphan = ledger("t", ckpt=NOW - 3)
    records = [record(NOW + 600)]
    retained = run_status(RunFacts(DAG, RUN, "running", tasks, {(tasks[0].task_id, -1): [orphan]}, records), NOW, 60)
    assert retained.section is Section.RETAINED
    working = pipeline_tasks(deploys=("running", "success", "success"), commit=None)
    still = run_status(RunFacts(DAG, RUN, "running", working, {(working[0].task_id, -1): [orphan]}, records), NOW, 60)
    assert still.section is Section.RUNNING


def test_the_due_time_shown_is_the_soonest_pending_record_and_an_unreadable_record_is_no_due_time():
    tasks = pipeline_tasks(deploys=("success",) * 3, commit="success")
    done = (LedgerStatus.SUCCEEDED,) * 3
    records = [record(NOW - 500, incarnation=0, status=RecordStatus.CLEANED), record(NOW + 900, incarnation=1)]
    status = run_status(facts("success", tasks, done, records), NOW, 60)
    assert status.cleanup_due_at == NOW + 900
    assert only_pipeline(status).phase_text == "committed · cleanup due in 15m 00s"
    unreadable = run_status(facts("success", tasks, done, [CorruptState("record x is not valid JSON")]), NOW, 60)
    assert (unreadable.section, unreadable.cleanup_due_at) == (Section.RETAINED, None)
    assert only_pipeline(unreadable).phase_text == "committed · cleanup blocked (unreadable record)"


def test_a_successful_run_whose_completed_point_was_skipped_is_not_shown_committed():
    tasks = pipeline_tasks(deploys=("success",) * 3, commit="skipped")
    pipeline = only_pipeline(run_status(facts("success", tasks, (LedgerStatus.SUCCEEDED,) * 3, [record(NOW + 60)]), NOW, 60))
    assert pipeline.outcome == "success"
    assert pipeline.phase_text == "success · cleanup due in 1m 00s"


def test_a_pending_record_past_its_due_time_shows_the_cleanup_overdue_while_a_newer_one_waits():
    # The older incarnation's record is past due; the sweep adopts it into the newer one's, which
    # still waits: the soonest due time has come, so the page says overdue, not "due in 0s".
    tasks = pipeline_tasks(deploys=("success",) * 3, commit="success")
    records = [record(NOW - 5, incarnation=0), record(NOW + 600, incarnation=1)]
    status = run_status(facts("success", tasks, (LedgerStatus.SUCCEEDED,) * 3, records), NOW, 60)
    assert (status.retention, status.cleanup_due_at) == (RunPhase.RETAINED, NOW - 5)
    assert only_pipeline(status).phase is PipelinePhase.CLEANUP_OVERDUE


def test_a_successful_run_is_committed_when_one_of_its_completed_points_published():
    tasks = pipeline_tasks(deploys=("success",) * 3, commit="success")
    tasks.append(TaskRow("sales_pipe.completed_point_late", "CompletedPointOperator", "skipped"))
    pipeline = only_pipeline(run_status(facts("success", tasks, (LedgerStatus.SUCCEEDED,) * 3, [record(NOW + 60)]), NOW, 60))
    assert (pipeline.outcome, pipeline.phase_text) == ("committed", "committed · cleanup due in 1m 00s")


def test_a_source_with_a_ledger_keeps_its_task_id_and_shows_its_tasks_refusal():
    refused = TaskRow("grp.deploy_emea", "ZetaSparkJobOperator", "failed", refusal="clear grp.deploy_emea to run it again")
    source = source_status(refused, [ledger("t", LedgerStatus.FAILED, ckpt=NOW - 3)], NOW, 60)
    assert (source.task_id, source.refusal) == ("grp.deploy_emea", "clear grp.deploy_emea to run it again")
    assert source_status(replace(refused, refusal=None), [ledger("t", LedgerStatus.FAILED)], NOW, 60).refusal is None


@pytest.mark.parametrize("task_id", ["outer.inner.deploy_x", "deploy_x", "grp.x"])
def test_a_ledger_without_a_source_is_named_after_the_last_part_of_its_task_id(task_id):
    task = TaskRow(task_id, "ZetaSparkJobOperator", "running")
    source = source_status(task, [ledger("t", ckpt=NOW - 3, source=None)], NOW, 60)
    assert (source.source, source.driver) == ("x", "running")


def test_a_group_without_deploy_tasks_is_skipped_and_the_groups_after_it_still_listed():
    tasks = [TaskRow("a_first.cleanup", "DelayedCleanupOperator", "deferred")] + pipeline_tasks(group="b_second")
    status = run_status(RunFacts(DAG, RUN, "running", tasks), NOW, 60)
    assert [pipeline.pipeline for pipeline in status.pipelines] == ["b_second"]
