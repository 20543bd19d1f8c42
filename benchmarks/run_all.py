"""`make bench`: run the benchmarks under benchmarks/ and write their sections of docs/benchmarks.md.

Each benchmark prints its own Markdown (``--markdown``); this script adds the date, the command and
how to read each table, and replaces that benchmark's section (by its ``## `` title) in
docs/benchmarks.md. Sections it does not run stay as they are: those of an earlier run, and those
measured another way (the monitoring page's cost, by a test), each saying when and how.

``--only KEY[,KEY...]`` runs only those sections (keys: ``overhead``, ``backfill``, ``ready``,
``ready-wait``, ``footprint``, ``cleanup``, ``cleanup-look``), e.g. ``make bench BENCH_ARGS="--only overhead,footprint"``;
``--quick`` runs smaller versions (a smoke check, marked as such).
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SECTIONS = [
    (
        "overhead",
        "Overhead, re-done work and resume time: this provider vs the stock operators",
        ["pipeline_bench.py", "--markdown"],
        ["pipeline_bench.py", "--markdown", "--rounds", "1", "--warmup", "0", "--extra-rounds", "0", "--work-seconds", "5"],
        """How to read it:

- Both pipelines run the same PySpark job (`dags/jobs/regional_sales_job.py`, 20 s of work) for
  three regions on one embedded Airflow (SQLite, LocalExecutor, local Spark), one run at a time,
  interleaved, the order alternating per round. Wall time runs from the run's queued moment to its
  data published: the provider's completed point ended, the stock run's last task ended. Both
  moments are Airflow's own dates (API), not this script's polling.
- **Fair baselines.** The clean rounds run on Airflow's default health thresholds (scheduler and
  triggerer 30 s, task heartbeat timeout 300 s): on 2 loaded cores a 10 s scheduler threshold made
  the scheduler reset its own running tasks and re-run the stock jobs. Tries and launches are
  counted per task: a round in which either side re-ran anything (a second try, a job launched
  twice) is named and left out of the medians, and `--extra-rounds` more rounds replace it.
- **Where the provider's tail goes** (second table, "of which" rows): when the last job ends, its
  deploy task's trigger notices the ledger turn `succeeded` (a stat of the ledger file every
  0.5 s), stores the source's report as the task's return value and ends the task from the
  triggerer, without a worker; the ready-to-close trigger, which lists the ledgers every 0.5 s and
  then asks Airflow every 0.25 s, counts that stored report while the deploy task is still
  deferred (`docs/operators/ready_to_close.md`, "A beat sooner") and ends its sensor from the
  triggerer in the same beat — Airflow 3.3's trigger runner hands events to the triggerer process
  once a second, and before this change the sensor waited for the deploy task's `success` and
  went out a beat later (1.00 s in every run of 2026-11-27 10:35; 0.01–0.05 s since, and about
  1 s in the odd run where the two triggers' events fall on either side of a beat). The completed
  point, an ordinary worker task,
  then publishes after a scheduler loop and a worker start. The stock run's last task ends with
  its spark-submit.
- **The same work on both sides.** Both jobs start a SparkSession, work 20 s, and write their rows;
  the provider's job also reports them. Until 2026-11-27 14:20 the provider's job checkpointed
  every second while it worked (each checkpoint rewrites the ledger and wakes the driver trigger
  for a look) and counted its rows with `df.count()`, one more Spark job; on a saturated 2-core
  day that cost its runs 11.7 Spark and 4.3 triggerer CPU-seconds more than the stock runs, and
  the ratio then was 1.073; with the same work both sides spend the same CPU (next section). The
  demo still checkpoints every second (`checkpoint_seconds`, a job parameter; the benchmark sets it
  to 0). Rounds on this 2-core machine vary by several per cent: read the ratio with the per-round
  figures and the hop table, which shows what the provider adds (its tail and its launch).
- Re-done work counts Spark driver-seconds beyond one clean run per source, from the jobs' own
  launch log. The stock operator re-runs a job whose task was reset (scheduler kill) or killed
  (worker kill); the provider re-attaches to the running driver.
- The kills run on a second cluster with the embedded cluster's short thresholds (health 20 s,
  task heartbeat timeout 30 s), so a dead component is noticed in seconds. Resume time runs from
  the restart of the killed component (for a worker kill, which nothing restarts, from the kill)
  to the pipeline's next task state change. A deferred deploy task holds no worker, so a worker
  kill does not touch the provider's waiting jobs at all. Read "resume" with the last row of each
  kill: the stock operator's first state change after a scheduler kill is the reset of its
  orphaned tasks, followed by a relaunch of all three jobs; the provider's jobs ran on through the
  kill, so its next state change is simply a job finishing. Median and maximum over many kills of
  each kind: [chaos.md](chaos.md).""",
    ),
    (
        "backfill",
        "Backfill: six dates, max_active_runs 2, this provider vs the stock operators",
        ["backfill_bench.py", "--markdown"],
        ["backfill_bench.py", "--markdown", "--dates", "2", "--rounds", "1", "--extra-rounds", "0", "--work-seconds", "5"],
        """How to read it:

- The two DAGs of the first table (the same PySpark job for three regions), each backfilled over the
  same fresh dates (`POST /backfills`) with `max_active_runs=2` — the DAGs' and the backfill's —
  one side after the other, the order alternating per round, on one embedded Airflow. Wall time runs
  from the backfill's creation to every run of it ended and every date's data on disk (the
  provider's partition with its commit marker; the stock job's Parquet files).
- The provider's DAG has `cleanup_delay=600`. Each run's cleanup task only records the cleanup (due
  600 s later) and announces it with an Asset event; the `zeta_cleanup` maintenance DAG waits for
  the due time (deferred: no worker slot) and deletes then. The run ends when its work is done, so
  the next date's run gets its slot without waiting out the window: the last line gives the
  longest run against the window and how far the recorded cleanups were still due.
- With two runs at a time a backfill of N dates takes about N / 2 run lengths, so the provider's
  fixed tail per run (the first table's hops) weighs in the same proportion as for a single run;
  the hop table shows where each run's time went ("queued → started" is the wait for a run slot).
- A round in which either side re-ran anything (a second try of a task, a job launched twice for
  one run) is named and left out of the medians; `--extra-rounds` (default 1) replaces it.""",
    ),
    (
        "ready",
        "Ready-to-close at 10, 100 and 1000 sources",
        ["ready_to_close_bench.py", "--markdown"],
        ["ready_to_close_bench.py", "--markdown"],
        """How to read it:

- **A report costs one write of ~300 bytes, whatever N** — it is the source task's own XCom
  return value. Nothing rewrites a growing set.
- **A cold evaluation** (every source finished since the last look) reads each new report once
  and verifies its attempt's ledger once: linear in the number of *newly finished* sources. Add one
  XCom round trip to the API server per newly finished source for a deployment.
- **A warm evaluation** (the steady-state poll) is one task-state call for all N sources plus
  in-memory work.""",
    ),
    (
        "ready-wait",
        "Ready-to-close: the whole wait at 1000 sources",
        ["ready_to_close_bench.py", "--wait"],
        ["ready_to_close_bench.py", "--wait"],
        """The trigger (`ReadyToCloseTrigger.run`, the real code) against an in-process stand-in for the
Airflow API and real ledgers on a local state root; sources finish one per poll, after some had
finished before the sensor deferred. "Calls" are Airflow API calls (task states, XCom reads) and
ledger reads.

How to read it:

- **Per poll: one task-state call plus one XCom and one ledger read per newly finished source**
  ("most calls in one poll" = 3). The exception is the first poll after the sensor handed over more
  than 200 verified reports (the kwargs carry at most 200, to keep the trigger row bounded): it
  reads the others once, and so does the first poll after a triggerer restart.
- **The sensor needs no wake at the end**: the trigger ends it from the triggerer with the ready set
  as its return value (about 300 bytes per source), so no worker starts for it.
- **Logs grow with the changes**: one line per change naming only what changed.
- **Trigger kwargs**: most of it is the `sources` map itself (1000 task ids); the handed-over
  reports add up to ~60 kB (200 × ~300 bytes), the names of the sources already recorded ~10 kB.""",
    ),
    (
        "footprint",
        "Triggerer footprint: 500 concurrent deferred waits",
        ["triggerer_footprint_bench.py", "--markdown"],
        ["triggerer_footprint_bench.py", "--markdown", "--triggers", "50", "--seconds", "10"],
        """How to read it:

- Each deferred deploy task is one `ZetaDriverTrigger`. Every 0.5 s one thread hop stats the
  ledger files of all the triggers (`triggers/file_watch.py`); a trigger reads its ledger (one
  small file, in a thread) only when its file changed — with every heartbeat, every 5 s, as a live
  driver writes it — or at the latest every `[zeta] poll_interval`. A separate process keeps the
  ledgers heartbeating; CPU is measured after a warm-up.
- Then every driver finishes (its ledger turns `succeeded`): "noticed after" is the time from that
  write to its trigger's event, over all triggers.
- On an object-store state root there is no stat: the trigger reads on its backoff up to
  `poll_interval`.
- Not included: the triggerer's own per-trigger bookkeeping in the metadata database.
- Before: the trigger that read its ledger every `poll_interval` (5 s) took 8.4 % of one core for
  the same 500 waits (this section's earlier figure) and noticed a finished driver 2.5 s after it ended on average, up
  to 5 s.""",
    ),
    (
        "cleanup",
        "Cleanup: one sweep over 10,000 ended runs, and the cleanup record",
        ["cleanup_sweep_bench.py", "--markdown"],
        ["cleanup_sweep_bench.py", "--markdown", "--runs", "200"],
        """How to read it:

- The sweep's cost is linear in the number of run directories in the state root, and only runs
  inside their retention window (or never cleaned) have one. Add two API round trips per run
  (run count and state) for a deployment.
- A cleanup record lists one path per attempt: ~110 bytes per source. In the task state store it is
  a header plus path chunks of at most 48,000 characters (a value may hold 65,535 bytes), so a
  1000-source record is four writes.""",
    ),
    (
        "cleanup-look",
        "Cleanup DAG: 1,000 pending records across 100 runs",
        ["cleanup_cost_bench.py", "--markdown"],
        ["cleanup_cost_bench.py", "--markdown", "--runs", "10", "--seconds", "5"],
        """How to read it:

- The real code throughout: the pipeline's `DelayedCleanupOperator` writes the 1,000 records (due
  over the second hour, in announcement order), the cleanup DAG's `CarryOutCleanupsOperator` takes
  and carries them out, on a local state root; its Airflow requests go through the Task SDK's own
  message handlers to Airflow's execution API served in-process from a SQLite metadata database
  (Airflow's tables), where every SQL statement is counted (SQLAlchemy `before_cursor_execute`).
  Storage calls are counted through a subclass of the provider's `StateStorage`. The waits are
  skipped with a simulated clock; only the triggerer CPU is measured in real time.
- **One waiter per record**: each run of the cleanup DAG took the 10 records of the pipeline run
  announced before it started and waits only for those (`CleanupWaitTrigger`, one per waiting
  run). Nothing wakes for another run's due time: the 1,000 records were carried out in 100
  resumes, one per waiting run (a run's 10 records fall due within 36 s, so the task waits for
  the rest in place). With records due farther apart a run resumes once per due time.
- **Per carry-out**: a record's own run (its records, attempts, bookkeeping), its waiter entry,
  and six execution-API requests (run count, state and incarnation, asked twice: at the due time
  and just before deleting), each one SQL statement. None of it depends on how many records are
  pending elsewhere; `tests/unit/test_cleanup_cost.py` asserts that (the same count with 20 and
  200 pending).
- **A new run's first look** grows with the number of *waiting runs* of the cleanup DAG, not
  records: one listing of the waiters' folders and one read per waiter (99 here), and one
  execution-API request for all of them (how many are still queued or running). The cleanup DAG's
  `max_active_runs` (64 by default) bounds it.
- **Triggerer CPU while they wait**: a `CleanupWaitTrigger` sleeps until its run's due time and
  lists the unclaimed entries every `rescan_interval` (600 s) in a thread; in the minute measured
  no trigger listed anything. With the interval at its shortest (12 s), 100 triggers made 600
  listings of the (empty) unclaimed folder in that minute for 0.09 % of one core. The triggerer's
  own per-trigger bookkeeping in the metadata database is not included.
- **Before** (the code this replaces, figures from its own benchmark, `benchmarks/cleanup_bench.py`
  at commit 9730bfc): every run of the cleanup DAG took every pending record at its first look, and
  every look listed every run directory and read every record of the state root (1,072 listings and
  2,000 reads per look over 1,000 records), so each of up to 64 waiting runs woke at each due time
  and paid that listing. `tests/unit/test_cleanup_cost.py` counted, on that code, 79 storage calls
  for one carry-out among 20 pending records and 619 among 200.
- Add, on an object store, one HTTP request per storage call; a rename there is a copy and a delete.""",
    ),
]


def splice(document: str, title: str, body: str) -> str:
    """``document`` with its section ``## title`` replaced by ``body`` (appended when absent); a
    section runs to the next ``## `` heading."""
    lines = document.splitlines()
    heading = f"## {title}"
    new = [heading, "", *body.strip("\n").splitlines(), ""]
    try:
        start = lines.index(heading)
    except ValueError:
        return "\n".join([*lines, "", *new]).rstrip("\n") + "\n"
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return "\n".join([*lines[:start], *new, *lines[end:]]).rstrip("\n") + "\n"


HEADER = """# Benchmarks

Written by `make bench` (`benchmarks/run_all.py`): each section says when it was measured and with
which command; `make bench BENCH_ARGS="--only KEY"` measures one section again and leaves the others.
Absolute times drift on these machines (x86_64, 2 cores); compare the columns of one table, which
were measured side by side.
"""


def main() -> int:
    quick = "--quick" in sys.argv
    keys = [key for key, *_ in SECTIONS]
    only = keys
    if "--only" in sys.argv:
        position = sys.argv.index("--only")
        only = sys.argv[position + 1].split(",") if position + 1 < len(sys.argv) else []
        unknown = sorted(set(only) - set(keys))
        if not only or unknown:
            print(f"--only takes a comma-separated list of {keys}; got {only or 'nothing'}", file=sys.stderr)
            return 2
    target = ROOT / "docs" / "benchmarks.md"
    document = target.read_text() if target.exists() else HEADER
    if not document.startswith(HEADER):
        first = document.find("\n## ")
        document = HEADER + (document[first:] if first >= 0 else "")
    for key, title, full, small, notes in SECTIONS:
        if key not in only:
            continue
        command = small if quick else full
        print(f"== {title}: python benchmarks/{' '.join(command)}", flush=True)
        # stdout is the section's Markdown; progress and raw figures (stderr) go to the terminal.
        result = subprocess.run(
            [sys.executable, str(ROOT / "benchmarks" / command[0]), *command[1:]], stdout=subprocess.PIPE, text=True
        )
        if result.returncode != 0:
            sys.stderr.write(result.stdout[-3000:])
            print(f"benchmark {command[0]} failed (exit {result.returncode})", file=sys.stderr)
            return 1
        when = (
            f"Measured by `make bench` ({'quick run: smaller sizes, a smoke check, not a figure' if quick else 'full size'}) "
            f"on {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC: {platform.machine()}, {os.cpu_count()} cores, "
            f"Python {platform.python_version()}."
        )
        body = "\n".join([f"Command: `python benchmarks/{' '.join(command)}`", "", when, "", result.stdout.strip(), "", notes])
        document = splice(document, title, body)
        target.write_text(document)  # after each section: a later failure keeps the earlier ones
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
