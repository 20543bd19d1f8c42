"""CPU seconds per Airflow component during each clean run of ``pipeline_bench.py``.

Theory of operation
    ``sample OUT`` reads every process's CPU time (utime + stime, ``/proc/<pid>/stat``) every 2 s
    until it is stopped and appends one line per sample to ``OUT``: cumulative CPU seconds per
    component, named from the command line (scheduler, triggerer, API server, dag-processor, task
    workers, Spark JVMs, Spark's Python). A process that exits keeps its last reading, so the
    totals only grow; a process whose command line reads empty (one that exited and is not reaped
    yet, a kernel thread) counts as "exited or kernel".

    ``report OUT BENCH_JSON`` takes the JSON list of runs that ``pipeline_bench.py`` prints last
    (one line on stderr, starting with ``[{``) and prints, per side, the mean CPU seconds each
    component used between a clean run's trigger time (its run id) and its end (``polled_wall_s``
    later; runs the samples do not cover are left out). On 2 busy cores, CPU one side uses beyond the other stretches that side's launch and jobs.

Run it beside the benchmark::

    python benchmarks/cpu_by_component.py sample /tmp/cpu.jsonl &
    make bench BENCH_ARGS="--only overhead" 2> /tmp/bench.log
    kill %1; python benchmarks/cpu_by_component.py report /tmp/cpu.jsonl /tmp/bench.log
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import datetime

COMPONENTS = ("triggerer", "scheduler", "dag-processor", "api_server", "serve-logs")


def component(command: str) -> str:
    if not command.strip():
        return "exited or kernel"
    if "org.apache.spark" in command:
        return "Spark JVM"
    if "regional_sales_job.py" in command or "runtime/driver.py" in command or "pyspark" in command:
        return "Spark Python"
    for name in COMPONENTS:
        if name in command:
            return name
    if "airflow worker" in command or "LocalExecutor" in command:
        return "task workers"
    return "everything else"


def sample(path: str) -> None:
    ticks = os.sysconf("SC_CLK_TCK")
    last: dict[str, tuple[str, float]] = {}  # pid -> (component, cpu seconds)
    with open(path, "a") as out:
        while True:
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    with open(f"/proc/{pid}/stat") as stat:
                        fields = stat.read().rsplit(")", 1)[1].split()
                    with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                        command = cmdline.read().replace(b"\0", b" ").decode(errors="replace")
                except OSError:
                    continue
                last[pid] = (component(command), (int(fields[11]) + int(fields[12])) / ticks)
            totals: dict[str, float] = {}
            for name, cpu in last.values():
                totals[name] = totals.get(name, 0.0) + cpu
            out.write(json.dumps({"t": time.time(), "cpu": totals}) + "\n")
            out.flush()
            time.sleep(2)


def report(samples_path: str, bench_log: str) -> None:
    samples = [json.loads(line) for line in open(samples_path)]
    runs = [json.loads(line) for line in open(bench_log) if line.startswith("[{")][-1]

    def at(moment: float) -> dict[str, float]:
        return min(samples, key=lambda s: abs(s["t"] - moment))["cpu"]

    per_side: dict[str, list[dict[str, float]]] = {}
    for run in runs:
        if run.get("kind") != "plain":
            continue
        start = datetime.fromisoformat(run["run_id"].split("__", 1)[1]).timestamp()
        if start < samples[0]["t"] or start + run["polled_wall_s"] > samples[-1]["t"]:
            continue  # not sampled from start to end
        before, after = at(start), at(start + run["polled_wall_s"])
        side = "stock SparkSubmitOperator" if run["dag"].endswith("_baseline") else "this provider"
        per_side.setdefault(side, []).append({name: after[name] - before.get(name, 0.0) for name in after})
    sides = sorted(per_side, reverse=True)
    names = sorted({name for side in sides for run in per_side[side] for name in run})

    def mean(side: str, name: str | None) -> float:
        runs_of_side = per_side[side]
        return sum(sum(run.values()) if name is None else run.get(name, 0.0) for run in runs_of_side) / len(runs_of_side)

    print(f"| CPU seconds per clean run (mean of {min(len(per_side[s]) for s in sides)}) | " + " | ".join(sides) + " |")
    print("|---|" + "---|" * len(sides))
    for name in sorted(names, key=lambda n: -mean(sides[0], n)):
        print(f"| {name} | " + " | ".join(f"{mean(side, name):.1f}" for side in sides) + " |")
    print("| **all** | " + " | ".join(f"**{mean(side, None):.1f}**" for side in sides) + " |")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "sample":
        sample(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "report":
        report(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
