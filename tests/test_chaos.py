"""The short chaos run of the default suite (``make chaos`` is the long soak): SQLite and PostgreSQL.

The counting pipeline (fake drivers: real separate processes running the real bootstrap) for
three dates, a backfill that reprocesses the first one, and at least 6 ``kill -9`` of the
scheduler, the triggerer and the task workers at seeded random moments (the seed is printed; set
``ZETA_CHAOS_SEED`` to replay one). Every check of ``airflow_provider_zeta.testing.chaos`` must
hold: expected rows per source, one launch per (run, source, incarnation), never a half-visible
partition, nothing left after the retention window, every run ended within the bound.
"""

from __future__ import annotations

import json
import os
import random

from airflow_provider_zeta.testing.chaos import run_scenario
from tests.test_pipeline_publish import SOURCES, expected_row_count

DAG_ID = "pipeline_counting_daily"
DATES = ["2026-02-01", "2026-02-02", "2026-02-03"]


def read_rows(folder):
    rows = []
    for path in sorted(folder.glob("*.json")):
        rows += [{"n": r["n"], "source": r["source"]} for r in json.loads(path.read_text())]
    return rows


def expected(source: str, ds: str):
    return [{"n": n, "source": source} for n in range(expected_row_count(source))]


def test_pipeline_survives_random_kills_with_a_reprocessing_backfill(fake_driver_cluster):
    cluster = fake_driver_cluster
    cluster.wait_for_dag(DAG_ID)
    seed = int(os.environ.get("ZETA_CHAOS_SEED") or random.SystemRandom().randrange(1, 10**6))
    print(f"\nchaos seed {seed} (replay: ZETA_CHAOS_SEED={seed})")
    report = run_scenario(
        cluster,
        dag_id=DAG_ID,
        dates=DATES,
        output=cluster.home / "pipeline-output-daily",
        sources=SOURCES,
        expected_rows=expected,
        read_rows=read_rows,
        kills=6,
        seed=seed,
        conf={"seconds": 6, "cleanup_delay": 10},
        retention_s=10,
        bound_s=600,
        kill_window_s=50,
    )
    print(json.dumps(report.summary(), indent=1, default=str))
    assert len(report.kills) >= 6 and report.runs == len(DATES)
    assert report.launches >= 3 * (len(DATES) + 1), "every date ran, the reprocessed one twice"
    assert report.violations == [], report.violations
