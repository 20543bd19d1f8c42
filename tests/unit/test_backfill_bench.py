"""The pure helpers of benchmarks/backfill_bench.py (hops from pipeline_bench.py): dates and order of the rounds, which rounds
count (a side that re-ran anything is left out), medians and ratio, hops, concurrency."""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import backfill_bench as bench  # noqa: E402


def test_rounds_use_fresh_consecutive_dates_and_alternate_the_order():
    first, second = bench.round_dates(0, 6), bench.round_dates(1, 6)
    assert first[0] == "2026-03-01" and first[-1] == "2026-03-06" and len(set(first)) == 6
    assert second[0] == "2026-03-07" and not set(first) & set(second)
    assert [bench.side_order(r) for r in range(3)] == [
        (bench.PROVIDER, bench.BASELINE),
        (bench.BASELINE, bench.PROVIDER),
        (bench.PROVIDER, bench.BASELINE),
    ]


def _starts(*keys):
    return [{"run_id": run, "source": source, "token": f"{run}-{source}-{i}", "at": 1.0} for i, (run, source) in enumerate(keys)]


def test_reruns_names_second_tries_second_launches_and_missing_launches():
    clean_tis = [{"dag_run_id": "r1", "task_id": "submit_emea", "try_number": 1}, {"dag_run_id": "r1", "task_id": "x", "try_number": 0}]
    launches = _starts(("r1", "emea"), ("r1", "amer"))
    assert bench.reruns(clean_tis, launches, 2) == []
    retried = clean_tis + [{"dag_run_id": "r1", "task_id": "submit_amer", "try_number": 2}]
    assert bench.reruns(retried, launches, 2) == ["r1 submit_amer: try 2"]
    twice = _starts(("r1", "emea"), ("r1", "emea"), ("r1", "amer"))
    assert bench.reruns(clean_tis, twice, 2) == ["r1 emea: launched 2 times"]
    assert bench.reruns(clean_tis, launches[:1], 2) == ["1 launches, expected 2"]


def test_run_entries_takes_end_entries_by_token():
    entries = _starts(("r1", "emea"), ("r2", "emea"))
    entries.append({"source": "emea", "token": entries[0]["token"], "end": 5.0})
    assert bench.run_entries(entries, "r1") == [entries[0], entries[2]]


def test_max_concurrent():
    assert bench.max_concurrent([(0, 10), (5, 15), (10, 20)]) == 2  # the third starts as the first ends
    assert bench.max_concurrent([(0, 10), (1, 9), (2, 8)]) == 3
    assert bench.max_concurrent([]) == 0


def _round(number, provider_s, baseline_s, provider_reruns=(), baseline_reruns=()):
    return {
        "round": number,
        "sides": {
            bench.PROVIDER: {"wall_s": provider_s, "reruns": list(provider_reruns)},
            bench.BASELINE: {"wall_s": baseline_s, "reruns": list(baseline_reruns)},
        },
    }


def test_summarize_leaves_out_rounds_where_either_side_re_ran():
    rounds = [_round(1, 110, 100), _round(2, 500, 100, provider_reruns=["x"]), _round(3, 130, 100), _round(4, 120, 50, baseline_reruns=["y"])]
    summary = bench.summarize(rounds)
    assert summary["counted"] == [1, 3]
    assert summary["median"] == {bench.PROVIDER: 120, bench.BASELINE: 100}
    assert summary["ratio"] == pytest.approx(1.2)
    assert bench.summarize([_round(1, 110, 100, baseline_reruns=["y"])])["ratio"] is None


def _iso(seconds):
    return (dt.datetime(2026, 11, 24, tzinfo=dt.UTC) + dt.timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def test_hops_add_up_to_the_run_and_split_the_providers_tail():
    t0 = dt.datetime(2026, 11, 24, tzinfo=dt.UTC).timestamp()
    run = {"dag_run_id": "r1", "queued_at": _iso(0), "start_date": _iso(30), "end_date": _iso(100)}
    launches = [
        {"run_id": "r1", "source": "emea", "token": "a", "at": t0 + 40},
        {"run_id": "r1", "source": "amer", "token": "b", "at": t0 + 45},
        {"source": "emea", "token": "a", "end": t0 + 70},
        {"source": "amer", "token": "b", "end": t0 + 75},
    ]
    tis = [
        {"task_id": "regional_sales.deploy_emea", "end_date": _iso(78)},
        {"task_id": "regional_sales.deploy_amer", "end_date": _iso(80)},
        {"task_id": "regional_sales.ready_to_close", "end_date": _iso(86)},
        {"task_id": "regional_sales.completed_point", "end_date": _iso(88)},
        {"task_id": bench.CLEANUP_TASK, "end_date": _iso(95)},
    ]
    hops = bench.hops(run, tis, launches, provider=True)
    assert [hops[h] for h in bench.HOPS] == pytest.approx([30, 15, 30, 13, 12])
    assert sum(hops[h] for h in bench.HOPS) == pytest.approx(hops["queued → ended"]) == pytest.approx(100)
    assert hops["started → ended"] == pytest.approx(70)
    assert [hops[h] for h in bench.PROVIDER_STEPS] == pytest.approx([5, 6, 2])
    stock_tis = [{"task_id": "submit_emea", "end_date": _iso(72)}, {"task_id": "submit_amer", "end_date": _iso(77)}]
    stock = bench.hops(run, stock_tis, launches, provider=False)
    assert stock["→ published"] == pytest.approx(2) and not set(bench.PROVIDER_STEPS) & set(stock)


def test_pipeline_bench_counts_only_complete_rounds_in_which_no_side_re_ran():
    import pipeline_bench

    def run(round_, dag, launches=3, retried=()):
        return {"kind": "plain", "round": round_, "dag": dag, "launches": launches, "retried": list(retried)}

    clean = [run(1, bench.PROVIDER), run(1, bench.BASELINE)]
    retried = [run(2, bench.BASELINE, retried=["submit_emea: try 2"]), run(2, bench.PROVIDER)]
    relaunched = [run(3, bench.PROVIDER, launches=4), run(3, bench.BASELINE)]
    half = [run(4, bench.PROVIDER)]
    killed = [{**run(0, bench.PROVIDER, launches=6), "kind": "scheduler"}]
    assert pipeline_bench.counted_rounds(clean + retried + relaunched + half + killed) == [clean]
    assert pipeline_bench.reran(retried[0]) == ["submit_emea: try 2"]
    assert pipeline_bench.reran(relaunched[0]) == ["4 launches for 3 jobs"]
