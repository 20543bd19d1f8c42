"""Every DAG file in ``dags/`` and in ``docs/examples/`` (the README's example) imports with no import
error under the real dag-processor.

Files listed in a folder's ``.airflowignore`` (the PySpark jobs the DAGs submit, which are not DAG
files) are excluded the way the dag-processor excludes them; each of them must still compile.
"""

from __future__ import annotations

import fnmatch
import py_compile
from pathlib import Path

import pytest

from tests.conftest import PROJECT_ROOT

DAGS = PROJECT_ROOT / "dags"
FOLDERS = {"dags": DAGS, "docs-examples": PROJECT_ROOT / "docs" / "examples"}


def _ignored_patterns(folder: Path) -> list[str]:
    ignore = folder / ".airflowignore"
    if not ignore.exists():
        return []
    lines = [line.split("#", 1)[0].strip() for line in ignore.read_text().splitlines()]
    return [line for line in lines if line]


def _is_ignored(relative: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatch(relative, p) or fnmatch.fnmatch(relative, p.rstrip("/") + "/*") for p in patterns)


def dag_files(folder: Path = DAGS) -> list[str]:
    patterns = _ignored_patterns(folder)
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*.py") if "__pycache__" not in p.parts)
    return [f for f in files if not _is_ignored(f, patterns)]


@pytest.mark.parametrize("folder", FOLDERS.values(), ids=FOLDERS.keys())
def test_ignored_files_still_compile(tmp_path, folder):
    patterns = _ignored_patterns(folder)
    for path in folder.rglob("*.py"):
        relative = str(path.relative_to(folder))
        if _is_ignored(relative, patterns):
            py_compile.compile(str(path), cfile=str(tmp_path / "x.pyc"), doraise=True)


@pytest.mark.parametrize("folder", FOLDERS.values(), ids=FOLDERS.keys())
def test_every_dag_file_imports_under_the_real_dag_processor(airflow_cluster, folder):
    expected = dag_files(folder)
    assert expected, f"{folder} holds no DAG file"
    cluster = airflow_cluster(folder, "sqlite", components=("api-server", "dag-processor"))

    def all_parsed():
        errors = cluster.import_errors()
        assert not errors, f"import errors in {folder}:\n" + "\n".join(
            f"{e['filename']}:\n{e['stack_trace']}" for e in errors
        )
        dags = cluster.api("GET", "/dags?limit=1000")["dags"]
        parsed = {dag["relative_fileloc"] for dag in dags}
        return parsed if set(expected) <= parsed else None

    parsed = cluster.wait_for(all_parsed, 180, f"every file of {expected} parsed into a DAG")
    assert set(expected) <= parsed
