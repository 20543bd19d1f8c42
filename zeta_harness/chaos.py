"""Chaos scenarios: pipeline runs under seeded ``kill -9`` of the scheduler, triggerer and workers.

One scenario, on a running ``AirflowCluster``:

1. a run of the pipeline for the first date (manual trigger with a logical date);
2. a backfill of ``dates`` that reprocesses the first date (``reprocess_behavior="completed"``):
   the first date's run is cleared (a new incarnation), the others are new runs (on SQLite a
   backfill refused for a locked database may delete that run instead: ``create_backfill``);
3. meanwhile, at seeded random moments, ``kill -9`` of one component, the kinds taking turns in a
   seeded order — the scheduler or the triggerer (restarted after a few seconds, like a supervisor would) or every LocalExecutor worker
   with its task processes (nothing restarts those; the scheduler's heartbeat timeout notices);
   a component that dies of a kill of another part (a LocalExecutor scheduler whose worker was
   killed while writing a result to their shared queue exits with 1) is restarted as a supervisor
   would, and reported in ``collateral_deaths`` with the tail of its log;
4. a reader thread lists the output table every 0.2 s the whole time.

It then checks, and reports as ``violations``:

* every published partition holds exactly the expected rows per source (none duplicated or lost);
* at most one driver launch per (run, source, incarnation), except a redeploy after a driver that
  really died (no ``end`` in the launch log), which is counted apart;
* the reader never saw a partition half-published (missing marker, source or data file);
* after the retention window: nothing left in the state root or the table's hidden directories,
  and no driver process of the scenario alive;
* every run reached a terminal state within ``bound_s``.

The same scenario runs the baseline DAG (stock operators): its figures (extra launches, duplicate
or lost rows, half-visible partitions, leftovers) are reported, not asserted.

The oracles over the jobs' own launch log (``relaunches``, ``driver_lives``,
``overlapping_drivers``) also serve the multi-host test (tests/test_multi_host.py): there a driver's
life runs from its start entry to its end entry, or to the moment the test killed its host, and two
lives of one task key must never overlap.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from airflow_provider_zeta.processes import pids_carrying
from zeta_harness.cluster import AirflowCluster, ClusterError
from zeta_harness.leftovers import leftovers_past_due

COMPONENTS = ("scheduler", "triggerer", "worker")


def kill_workers(cluster: AirflowCluster) -> list[int]:
    """SIGKILL every busy LocalExecutor worker of the cluster (one supervising a task) and its task;
    none (``[]``) while any task instance of the cluster is queued.

    A worker that has taken a queued task from the executor's queue has not yet told the API server
    that it runs it, and a LocalExecutor worker killed then loses the task for good: it stays queued
    until the scheduler restarts (the LocalExecutor has no ``revoke_task``, so Airflow's
    ``task_queued_timeout`` passes it by). No provider code runs before a task is running, so that
    window is Airflow's own and the kill waits it out; what is left is a task queued and picked up
    in the milliseconds between this look and the kill.

    Processes are found the way the harness finds its own (session id), not by their environment:
    setproctitle hides a worker's ``/proc/<pid>/environ``.
    """
    queued = cluster.api("GET", "/dags/~/dagRuns/~/taskInstances?state=queued&limit=1")["total_entries"]
    if queued:
        return []
    processes = cluster.harness_processes()
    pool = {p["pid"] for p in processes if "LocalExecutor" in p["cmdline"]}
    tasks = [p["pid"] for p in processes if p["ppid"] in pool]
    workers = sorted({p["ppid"] for p in processes if p["pid"] in tasks})
    for pid in tasks + workers:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return workers


@dataclasses.dataclass
class Kill:
    component: str
    at: float  # seconds since the scenario started
    restart_after: float
    resume_s: float | None = None  # restart (or kill) -> next task state change of a scenario run; None: none came (or none was left to come)


class TableWatcher(threading.Thread):
    """Lists the output table every ``interval`` s; records any partition seen incomplete."""

    def __init__(self, root: Path, sources: tuple[str, ...], interval: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.root, self.sources, self.interval = root, set(sources), interval
        self.stop = threading.Event()
        self.half: list[str] = []
        self.looks = 0

    def run(self) -> None:
        while not self.stop.wait(self.interval):
            self.looks += 1
            try:
                partitions = [p for p in self.root.iterdir() if p.name.startswith("ds=")]
            except FileNotFoundError:
                continue
            for partition in partitions:
                problem = self._problem(partition)
                if problem:
                    self.half.append(f"{partition.name}: {problem}")

    def _problem(self, partition: Path) -> str | None:
        try:
            sources = {p.name.removeprefix("source=") for p in partition.iterdir() if p.name.startswith("source=")}
            if not (partition / "_zeta_commit.json").exists() and self.kind_needs_marker:
                return "no commit marker"
            if sources != self.sources:
                return f"sources {sorted(sources)}"
            for source in sources:
                if not any(not f.name.startswith(("_", ".")) for f in (partition / f"source={source}").iterdir()):
                    return f"source {source} has no data file"
        except FileNotFoundError:
            return None  # replaced while listing: the next look sees the new one
        return None

    kind_needs_marker = True


@dataclasses.dataclass
class ScenarioReport:
    dag_id: str
    db: str
    seed: int
    runs: int
    kills: list[Kill]
    launches: int
    extra_launches: int
    redeploys_after_death: int
    duplicate_rows: int
    lost_rows: int
    half_visible: int
    leftovers: list[str]
    drivers_alive: int
    collateral_deaths: list[str]
    run_seconds: dict[str, float]
    bound_s: float
    violations: list[str]

    def summary(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["kills"] = [dataclasses.asdict(k) for k in self.kills]
        return data


def entries(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()] if log.exists() else []


# ---------------------------------------------------------------------- oracles over the jobs' own log
#
# The counting job (tests/jobs/counting_job.py) appends a start entry when it starts (``at``, its
# task, run, source, incarnation, host and PID namespace) and an end entry (``end``) as its last act.
# These functions judge a run from those entries alone, never from the provider's bookkeeping.


def relaunches(log_entries: list[dict]) -> tuple[list[str], dict[tuple, int]]:
    """Second launches per (run, source, incarnation), in launch order.

    Returns the violations — a launch after an earlier launch of the same key that ran to its end
    (a completed job launched again) — and, per key, how many launches followed a driver that never
    logged its end (redeploys after a driver death, legitimate when the driver really died).
    """
    launched = [e for e in log_entries if "end" not in e]
    ended = {e["token"] for e in log_entries if "end" in e}
    groups: dict[tuple, list[dict]] = {}
    for entry in launched:
        groups.setdefault((entry.get("run_id"), entry["source"], entry.get("incarnation")), []).append(entry)
    violations: list[str] = []
    redeploys: dict[tuple, int] = {}
    for key, items in groups.items():
        for earlier in items[:-1]:
            if earlier["token"] in ended:
                violations.append(f"{key}: a second launch although {earlier['token']} ran to its end")
            else:
                redeploys[key] = redeploys.get(key, 0) + 1
    return violations, redeploys


@dataclasses.dataclass(frozen=True)
class DriverLife:
    """When one driver was alive, as its own log and the test's host kills tell."""

    token: str
    task_key: tuple  # (run_id, task): the task key (map index -1 throughout these DAGs)
    host: str | None
    pid_namespace: str | None
    start: float  # wall clock of its start entry
    end: float  # its end entry, else the kill of its host, else ``now`` (still alive or vanished)
    ended_by: str  # "end" | "host_killed" | "open"


def driver_lives(log_entries: list[dict], host_kills: dict[str, float], now: float) -> list[DriverLife]:
    """One ``DriverLife`` per start entry. ``host_kills`` maps a killed host's hostname to the
    wall-clock moment the test saw its last process die: a driver killed with its host logs no end,
    and its life ends then. Hosts are matched by hostname, which the harness makes unique per host
    (``<component>.<n>``), not by PID namespace: the kernel reuses a dead namespace's inode number
    for a new one (seen: a replacement worker host got its killed predecessor's ``pid:[…]``). A driver without an end entry on a host nobody killed counts as alive
    until ``now`` (the measurement's moment): the oracle never shortens a life it cannot see end."""
    ends = {e["token"]: e["end"] for e in log_entries if "end" in e}
    lives = []
    for entry in log_entries:
        if "end" in entry:
            continue
        token, host = entry["token"], entry.get("host")
        if token in ends:
            end, ended_by = ends[token], "end"
        elif host in host_kills:
            end, ended_by = host_kills[host], "host_killed"
        else:
            end, ended_by = now, "open"
        lives.append(
            DriverLife(
                token=token,
                task_key=(entry.get("run_id"), entry.get("task")),
                host=host,
                pid_namespace=entry.get("pid_namespace"),
                start=entry["at"],
                end=end,
                ended_by=ended_by,
            )
        )
    return lives


def overlapping_drivers(lives: list[DriverLife]) -> list[tuple[DriverLife, DriverLife, float]]:
    """Every pair of drivers of one task key alive at the same moment, with the overlap in seconds."""
    found = []
    by_key: dict[tuple, list[DriverLife]] = {}
    for life in lives:
        by_key.setdefault(life.task_key, []).append(life)
    for group in by_key.values():
        group.sort(key=lambda life: life.start)
        for i, first in enumerate(group):
            for second in group[i + 1:]:
                overlap = min(first.end, second.end) - max(first.start, second.start)
                if overlap > 0:
                    found.append((first, second, overlap))
    return found


def run_scenario(
    cluster: AirflowCluster,
    *,
    dag_id: str,
    dates: list[str],
    output: Path,
    sources: tuple[str, ...],
    expected_rows: Callable[[str, str], list[Any]],
    read_rows: Callable[[Path], list[Any]],
    kills: int,
    seed: int,
    conf: dict[str, Any] | None = None,
    bound_s: float = 900,
    retention_s: float = 15,
    provider: bool = True,
    kill_window_s: float = 60,
    log: Callable[[str], None] = print,
) -> ScenarioReport:
    rng = random.Random(seed)
    launch_log = cluster.home / f"chaos-{dag_id}-{seed}.jsonl"
    run_conf = {"launch_log": str(launch_log), **(conf or {})}
    watcher = TableWatcher(output, sources)
    watcher.kind_needs_marker = provider
    watcher.start()
    scenario = _ScenarioRun(cluster, dag_id, dates, rng, log)
    log(f"chaos: {dag_id} on {cluster._db_spec}, seed {seed}, {kills} kills, dates {dates}")

    first = cluster.trigger_run(dag_id, f"{dates[0]}T00:00:00Z", conf=run_conf)

    # Kills spread over the first run and the backfill; the backfill starts after the first run.
    schedule = sorted(rng.uniform(3, kill_window_s) for _ in range(kills))
    # Every kind of kill in turn, in a seeded order (a worker kill with no worker busy becomes a
    # scheduler or triggerer kill, logged): a short run still tries each kind.
    kinds = [COMPONENTS[i % len(COMPONENTS)] for i in range(kills)]
    rng.shuffle(kinds)
    first_half = [t for t in schedule if t < kill_window_s / 2]
    second_half = [t for t in schedule if t >= kill_window_s / 2]
    scenario.kill_at(first_half, kinds, time.monotonic())
    early_violations = scenario.wait_first_run(first, bound_s)
    backfill = create_backfill(
        cluster,
        {
            "dag_id": dag_id,
            "from_date": f"{dates[0]}T00:00:00Z",
            "to_date": f"{dates[-1]}T00:00:00Z",
            "reprocess_behavior": "completed",
            "dag_run_conf": run_conf,
            "max_active_runs": len(dates),
        },
        log=log,
    )
    log(f"  backfill {backfill['id']} of {dates[0]}..{dates[-1]} (reprocessing {dates[0]})")
    scenario.kill_at(second_half, kinds, time.monotonic() - kill_window_s / 2)

    violations: list[str] = list(early_violations)
    states = scenario.wait_all_runs(bound_s)
    violations += _run_state_violations(states, bound_s)
    run_seconds: dict[str, float] = {}
    for run in scenario.runs():
        if run.get("end_date") and run.get("queued_at"):
            run_seconds[run["dag_run_id"]] = _seconds_between(run["queued_at"], run["end_date"])
    watcher.stop.set()
    watcher.join(5)

    duplicate_rows, lost_rows, row_violations = _row_violations(output, dates, sources, expected_rows, read_rows)
    violations += row_violations

    # Launches per (run, source, incarnation).
    launched = [e for e in entries(launch_log) if "end" not in e]
    relaunched, redeploys_per_key = relaunches(entries(launch_log))
    extra_launches, redeploys = len(relaunched), sum(redeploys_per_key.values())
    violations += relaunched

    # After the retention window: nothing left, no driver alive.
    time.sleep(retention_s + 5)
    leftovers = _leftovers_after_retention(cluster, dag_id, output, provider)
    if provider:
        violations += [f"left behind: {item}" for item in leftovers]
    alive = sum(1 for entry in launched if pids_carrying(entry["token"]))
    if alive and provider:
        violations.append(f"{alive} driver process(es) still alive after the runs ended")
    if watcher.half and provider:
        violations += [f"half-visible partition seen: {item}" for item in sorted(set(watcher.half))[:10]]
    report = ScenarioReport(
        dag_id=dag_id,
        db=str(cluster._db_spec),
        seed=seed,
        runs=len(states),
        kills=scenario.kills,
        launches=len(launched),
        extra_launches=extra_launches,
        redeploys_after_death=redeploys,
        duplicate_rows=duplicate_rows,
        lost_rows=lost_rows,
        half_visible=len(set(watcher.half)),
        leftovers=leftovers,
        drivers_alive=alive,
        collateral_deaths=scenario.collateral_deaths,
        run_seconds=run_seconds,
        bound_s=bound_s,
        violations=violations,
    )
    log(f"chaos: {dag_id}: {len(scenario.kills)} kills, {len(launched)} launches, {len(violations)} violation(s)")
    return report


_TERMINAL = ("success", "failed")


class _ScenarioRun:
    """The runs of one scenario on its cluster, and the kills made during them."""

    def __init__(
        self, cluster: AirflowCluster, dag_id: str, dates: list[str], rng: random.Random, log: Callable[[str], None]
    ) -> None:
        self.cluster, self.dag_id, self.dates, self.rng, self.log = cluster, dag_id, dates, rng, log
        self.started = time.monotonic()
        self.kills: list[Kill] = []
        self.collateral_deaths: list[str] = []

    def runs(self) -> list[dict]:
        """The runs of the scenario's dates only: a scheduled DAG may have others."""
        runs = self.cluster.api("GET", f"/dags/{self.dag_id}/dagRuns?limit=200")["dag_runs"]
        return [r for r in runs if (r.get("logical_date") or "")[:10] in self.dates]

    def restart_the_dead(self) -> None:
        """Restart the components found dead that the scenario did not kill (``restart_dead_components``)."""
        self.collateral_deaths.extend(restart_dead_components(self.cluster, time.monotonic() - self.started, self.log))

    def run_states(self) -> dict[str, str]:
        """Run id -> state of the scenario's runs (after restarting any component found dead)."""
        self.restart_the_dead()
        return {r["dag_run_id"]: r["state"] for r in self.runs()}

    def task_states(self) -> dict:
        """(run id, task id) -> (state, try number) of every task instance of the scenario's runs."""
        found = {}
        for run_id in self.run_states():
            for ti in self.cluster.task_instances(self.dag_id, run_id):
                found[(run_id, ti["task_id"])] = (ti["state"], ti["try_number"])
        return found

    def kill_at(self, moments: list[float], kinds: list[str], phase_start: float) -> None:
        """One kill (of ``kinds.pop()``) at each moment (seconds after ``phase_start``), then restart
        what died and wait for a healthy cluster."""
        for moment in moments:
            time.sleep(max(0.0, moment - (time.monotonic() - phase_start)))
            self.kill_one(kinds.pop())
        self.restart_the_dead()
        self.cluster.wait_healthy()

    def kill_one(self, component: str) -> None:
        """``kill -9`` of ``component`` (restarted after a seeded pause unless it is the workers),
        then the wait for the scenario's next task state change."""
        at = time.monotonic() - self.started
        restart_after = self.rng.uniform(1, 6)
        before = self.task_states()
        killed: list[int] = []
        if component == "worker":
            killed = self._kill_busy_workers()
            if not killed:
                component = self.rng.choice(("scheduler", "triggerer"))
                self.log(f"  {at:6.1f}s no task worker busy: killing the {component} instead")
        if component == "worker":
            self.log(f"  {at:6.1f}s kill -9 {len(killed)} worker(s) and their tasks")
            resumed_from = time.monotonic()
        else:
            self.cluster.kill(component)
            self.log(f"  {at:6.1f}s kill -9 {component}; restart in {restart_after:.1f}s")
            time.sleep(restart_after)
            self.cluster.start_component(component)
            resumed_from = time.monotonic()
        kill = Kill(component, at, restart_after if component != "worker" else 0.0)
        try:
            outcome = self.cluster.wait_for(
                lambda: self._moved_or_idle(before), 300, f"progress after the {component} kill", interval=0.5
            )
            kill.resume_s = time.monotonic() - resumed_from if outcome == "moved" else None
        except Exception:
            kill.resume_s = None
        self.kills.append(kill)

    def _kill_busy_workers(self) -> list[int]:
        """Deferred tasks hold no worker, and none is killed while a task is queued
        (``kill_workers``): wait a little for a busy one; the workers killed."""
        deadline = time.monotonic() + 10
        killed: list[int] = []
        while not killed and time.monotonic() < deadline:
            killed = kill_workers(self.cluster)
            if not killed:
                time.sleep(0.2)
        return killed

    def _moved_or_idle(self, before: dict) -> str | None:
        if self.task_states() != before:
            return "moved"
        # A worker kill may hit another DAG's task (the cleanup DAG's) while every scenario
        # run has ended: nothing of the scenario is left to resume (without this check the wait
        # after a kill runs its whole 300 s).
        states = self.run_states()
        return "idle" if states and all(s in _TERMINAL for s in states.values()) else None

    def wait_first_run(self, first: str, bound_s: float) -> list[str]:
        """Wait up to ``bound_s`` for the first run to end; the violation when it does not."""
        try:
            self.cluster.wait_for(
                lambda: self.run_states().get(first) in _TERMINAL, bound_s, "the first run to end", interval=2
            )
        except ClusterError as error:
            # Reported, not raised: a stuck baseline run is a figure of the comparison, and the
            # backfill (which reprocesses this date) still runs.
            self.log(f"  the first run did not end within {bound_s:.0f}s; going on with the backfill")
            return [f"run {first} did not end within {bound_s:.0f}s: {error}"]
        return []

    def wait_all_runs(self, bound_s: float) -> dict[str, str]:
        """Wait up to ``bound_s`` for a run of every date, all ended; their states then."""
        deadline = time.monotonic() + bound_s
        while time.monotonic() < deadline:
            states = self.run_states()
            if len(states) >= len(self.dates) and all(s in _TERMINAL for s in states.values()):
                break
            time.sleep(2)
        return self.run_states()


def _run_state_violations(states: dict[str, str], bound_s: float) -> list[str]:
    violations = []
    for run_id, state in states.items():
        if state not in _TERMINAL:
            violations.append(f"run {run_id} still {state} after the bound of {bound_s:.0f}s")
        elif state != "success":
            violations.append(f"run {run_id} ended {state}")
    return violations


def _row_violations(
    output: Path,
    dates: list[str],
    sources: tuple[str, ...],
    expected_rows: Callable[[str, str], list[Any]],
    read_rows: Callable[[Path], list[Any]],
) -> tuple[int, int, list[str]]:
    """Rows per published partition: (duplicated rows, lost rows, one violation per wrong partition)."""
    duplicate_rows = lost_rows = 0
    violations = []
    for ds in dates:
        for source in sources:
            folder = output / f"ds={ds}" / f"source={source}"
            got = read_rows(folder) if folder.exists() else []
            want = expected_rows(source, ds)
            extra = len(got) - len(set(map(_key, got)))
            missing = len(set(map(_key, want)) - set(map(_key, got)))
            wrong = len(set(map(_key, got)) - set(map(_key, want)))
            duplicate_rows += extra + wrong
            lost_rows += missing
            if extra or missing or wrong:
                violations.append(f"ds={ds} source={source}: {extra} duplicated, {missing} lost, {wrong} foreign rows")
    return duplicate_rows, lost_rows, violations


def _leftovers_after_retention(cluster: AirflowCluster, dag_id: str, output: Path, provider: bool) -> list[str]:
    """The provider's leftovers past due (asked again for up to 120 s while there are some), or
    Spark's own ``_temporary`` directories for the baseline."""
    if not provider:
        return [str(p) for p in output.glob("ds=*/source=*/_temporary")]
    deadline = time.monotonic() + 120
    while (leftovers := leftovers_past_due(cluster.home / "zeta-state", [output], dag_ids=[dag_id])) and time.monotonic() < deadline:
        time.sleep(2)
    return leftovers

def create_backfill(
    cluster: AirflowCluster, body: dict[str, Any], timeout: float = 120, log: Callable[[str], None] = print
) -> dict[str, Any]:
    """POST /backfills, asked again while the API answers 503: on SQLite Airflow refuses a backfill
    whose creation meets another writer ("Database is locked. Backfill creation is not supported on
    SQLite under concurrent access"), which the scheduler restarted by a kill makes likely.

    The refusal is not clean. Airflow 3.3 deletes every run carrying the refused backfill's id, and
    on SQLite the clear of an existing run it was reprocessing is already committed by then (its
    savepoint's release commits): that run is deleted too, with its task instances (open upstream:
    apache/airflow#68705 makes the creation one transaction). Asking again then creates a new
    ``backfill__`` run for that date, whose completed point replaces the deleted run's partition
    (``owner_run_deleted``). Each refusal is logged with the runs that existed before it and are
    gone after it. A refusal can also leave the backfill itself behind: asked again, the API then
    answers 409 ("already a running backfill"), and the running backfill of those dates is the one
    asked for."""
    deadline = time.monotonic() + timeout
    dag_id = body["dag_id"]
    refused = False

    def run_ids() -> set[str] | None:
        try:
            return {r["dag_run_id"] for r in cluster.api("GET", f"/dags/{dag_id}/dagRuns?limit=200")["dag_runs"]}
        except ClusterError:
            return None  # only for the log line: a busy API must not end the scenario here

    while True:
        before = run_ids()
        try:
            return cluster.api("POST", "/backfills", body)
        except ClusterError as error:
            left_behind = _backfill_left_by_a_refusal(cluster, body) if refused and "HTTP 409" in str(error) else None
            if left_behind is not None:
                log(f"  POST /backfills answered 409 after a 503: backfill {left_behind['id']} of the refused creation runs")
                return left_behind
            if "HTTP 503" not in str(error) or time.monotonic() > deadline:
                raise
            refused = True
            after = run_ids()
            gone = sorted(before - after) if before is not None and after is not None else "(could not list the runs)"
            log(f"  POST /backfills answered 503 (database locked); runs gone meanwhile: {gone}")
        time.sleep(2)


def _backfill_left_by_a_refusal(cluster: AirflowCluster, body: dict[str, Any]) -> dict[str, Any] | None:
    """The running backfill of ``body``'s DAG and dates, if there is one."""
    backfills = cluster.api("GET", f"/backfills?dag_id={body['dag_id']}&limit=100")["backfills"]
    running = [
        b for b in backfills
        if b.get("completed_at") is None
        and b["from_date"].replace("+00:00", "Z").startswith(body["from_date"].removesuffix("Z"))
        and b["to_date"].replace("+00:00", "Z").startswith(body["to_date"].removesuffix("Z"))
    ]
    return running[-1] if running else None


def restart_dead_components(cluster: AirflowCluster, at: float, log: Callable[[str], None] = print) -> list[str]:
    """Restart, as a supervisor would (systemd, Kubernetes), every Airflow component found dead that
    the scenario did not kill itself; return one line per death with the tail of its log. A
    component dead of a kill of another part (a LocalExecutor scheduler whose worker was killed
    while writing to their shared result queue exits with 1) is one more crash the guarantees must
    survive, not the end of the scenario."""
    deaths = []
    for name in ("scheduler", "triggerer", "dag-processor", "api-server"):
        component = cluster.components.get(name)
        if component is None or component.alive():
            continue
        code = component.process.returncode
        log(f"  {at:6.1f}s {name} (pid {component.pid}) died by itself (exit {code}); restarting it")
        deaths.append(f"{at:.1f}s {name} exit {code}: {_tail_of(component.log_path, 30)}")
        cluster.start_component(name)
    return deaths


def _tail_of(path: Path, lines: int) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as error:
        return f"(log unreadable: {error})"


def _seconds_between(start: str, end: str) -> float:
    from datetime import datetime

    return (datetime.fromisoformat(end.replace("Z", "+00:00")) - datetime.fromisoformat(start.replace("Z", "+00:00"))).total_seconds()


def _key(row: Any) -> str:
    return json.dumps(row, sort_keys=True, default=str)
