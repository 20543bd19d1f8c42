"""What a test asserts about the state root and an output table once runs have ended (G4).

``leftovers_past_due`` lists everything the provider left that no pending cleanup record covers,
and every pending record whose due time has passed. An empty list means: nothing is orphaned.
``dag_ids`` limits the look to the runs of those DAGs (on a cluster shared with DAGs that run a
bare deploy task, without a cleanup, whose attempt directories stay until a sweep).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from pathlib import Path


def _pending_records(run: Path) -> list[tuple[Path, dict]]:
    found = []
    for path in sorted((run / "cleanup").glob("*.json")):
        record = json.loads(path.read_text())
        if record.get("status") == "pending":
            found.append((path, record))
    return found


def leftovers_past_due(
    state_root: Path,
    output_roots: list[Path],
    now: float | None = None,
    slack: float = 0.0,
    dag_ids: Iterable[str] | None = None,
) -> list[str]:
    now = time.time() if now is None else now
    wanted = None if dag_ids is None else {_dag_folder(dag_id) for dag_id in dag_ids}
    problems, covered_out = _state_root_problems(state_root, now, slack, wanted)
    for root in output_roots:
        problems += _output_problems(root, covered_out, wanted)
    return problems


def _state_root_problems(
    state_root: Path, now: float, slack: float, wanted: set[str] | None
) -> tuple[list[str], set[tuple[str, str]]]:
    """The state root's pending records past due and attempt directories no record covers, and the
    (output root, entry) pairs the pending records cover."""
    problems: list[str] = []
    covered_state: set[str] = set()
    covered_out: set[tuple[str, str]] = set()
    for run in sorted((state_root / "runs").glob("*/*")):
        if wanted is not None and run.parent.name not in wanted:
            continue
        for path, record in _pending_records(run):
            if record["due_at"] < now - slack:
                problems.append(f"cleanup record past due by {now - record['due_at']:.0f}s: {path}")
            covered_state.update(record["state_paths"])
            covered_out.update((root.removeprefix("file://"), p) for root, paths in record["outputs"].items() for p in paths)
        for attempt in sorted(run.glob("attempts/*/*/*")):
            relative = attempt.relative_to(state_root).as_posix()
            if relative not in covered_state:
                problems.append(f"attempt directory without a pending cleanup record: {relative}")
    return problems, covered_out


def _output_problems(root: Path, covered_out: set[tuple[str, str]], wanted: set[str] | None) -> list[str]:
    """The pending and tombstone entries of one output table that no pending record covers."""
    problems: list[str] = []
    for folder in ("_zeta_pending", "_zeta_tombstones"):
        for entry in sorted((root / folder).glob("*/*/*")):
            if wanted is not None and entry.parent.parent.name not in wanted:
                continue
            relative = entry.relative_to(root).as_posix()
            if (str(root), relative) not in covered_out:
                problems.append(f"{folder} entry without a pending cleanup record: {root}/{relative}")
    return problems

def _dag_folder(dag_id: str) -> str:
    from airflow_provider_zeta.core.paths import safe_segment

    return safe_segment(dag_id)


def run_directory(state_root: Path, dag_id: str, run_id: str) -> Path:
    from airflow_provider_zeta.core.paths import run_dir

    return state_root / run_dir(dag_id, run_id)
