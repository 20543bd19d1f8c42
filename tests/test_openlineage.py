"""OpenLineage under real Airflow components: the events the provider's listener emits.

One run of the three-source counting pipeline (fake drivers: the real bootstrap, no JVM) on a
cluster whose every component has the OpenLineage provider enabled with its file transport and
``[openlineage] spark_inject_parent_job_info`` on. The events come from the provider's own
listener in the task processes, written by its file transport; the test reads that file:

* the completed point's COMPLETE event carries the output table (``file`` + its absolute path)
  with the published partition as its subset, the commit as its version, and the ``zeta_commit``
  run facet naming the partition's commit;
* each deploy's spark-submit (what a real Spark would see, logged by the fake spark-submit) got
  the parent job properties, and its ``parentRunId`` is the run id of that deploy task's own
  OpenLineage events: the Spark job's events would nest under the task that launched it.

SQLite only: the DB plays no part in what is checked.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import IN_CI, PROJECT_ROOT, spark_env

try:
    import airflow.providers.openlineage.utils.spark  # noqa: F401
except ImportError:
    if IN_CI:  # `make test` installs the openlineage extra: CI runs this test, never skips it
        raise
    pytest.skip("apache-airflow-providers-openlineage is not installed (pip install -e '.[openlineage]')", allow_module_level=True)

DAG_ID = "pipeline_counting"
SOURCES = ("alpha", "beta", "gamma")
DS = "2026-06-01"


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def test_the_listener_reports_the_published_partition_and_the_deploys_parent_job(airflow_cluster, tmp_path):
    events, submits = tmp_path / "openlineage.jsonl", tmp_path / "spark-submits.jsonl"
    cluster = airflow_cluster(
        PROJECT_ROOT / "tests" / "dags",
        "sqlite",
        extra_env={
            **spark_env(fake=True),
            "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps({"type": "file", "log_file_path": str(events), "append": True}),
            "AIRFLOW__OPENLINEAGE__NAMESPACE": "zeta-test",
            "AIRFLOW__OPENLINEAGE__SPARK_INJECT_PARENT_JOB_INFO": "true",
            "ZETA_FAKE_SPARK_SUBMIT_LOG": str(submits),
        },
    )
    cluster.wait_for_dag(DAG_ID)
    run_id = cluster.trigger_run(DAG_ID, f"{DS}T00:00:00Z", conf={"launch_log": str(tmp_path / "launches.jsonl")})
    cluster.wait_for_run(DAG_ID, run_id, timeout=300)
    output = cluster.home / "pipeline-output"

    def completed_point_event():
        return next(
            (
                e for e in _lines(events)
                if e.get("eventType") == "COMPLETE" and e["job"]["name"] == f"{DAG_ID}.counting.completed_point"
            ),
            None,
        )

    # The listener emits from a forked child of the task process: it may land just after the run ends.
    event = cluster.wait_for(completed_point_event, 60, "the completed point's COMPLETE event in the file transport")
    marker = json.loads((output / f"ds={DS}" / "_zeta_commit.json").read_text())
    [table] = event["outputs"]
    assert (table["namespace"], table["name"]) == ("file", str(output.resolve()))
    [partition] = table["outputFacets"]["subset"]["outputCondition"]["partitions"]
    assert partition["dimensions"] == {"ds": DS} and partition["identifier"].endswith(f"/ds={DS}")
    assert table["facets"]["version"]["datasetVersion"] == marker["commit_id"]
    commit = event["run"]["facets"]["zeta_commit"]
    assert commit["commitId"] == marker["commit_id"] and commit["runId"] == run_id and commit["newCommit"] is True
    assert {name: source["attempt"] for name, source in commit["sources"].items()} == marker["tokens"]

    parents = {entry["conf"]["spark.openlineage.parentJobName"]: entry["conf"] for entry in _lines(submits)}
    assert sorted(parents) == [f"{DAG_ID}.counting.deploy_{name}" for name in SOURCES]
    for job_name, conf in parents.items():
        assert conf["spark.openlineage.parentJobNamespace"] == "zeta-test"
        assert conf["spark.openlineage.rootParentJobName"] == DAG_ID
        task_runs = {e["run"]["runId"] for e in _lines(events) if e["job"]["name"] == job_name}
        assert conf["spark.openlineage.parentRunId"] in task_runs, (job_name, task_runs)
