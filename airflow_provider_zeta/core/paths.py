"""Where the provider keeps each piece of its own data, relative to ``[zeta] state_root``.

::

    attempts/<dag>/<run>/<task>/<map_index>/<token>/ledger.json   driver ledger (driver writes)
                                                   /cancel        cancel marker (coordinator writes)
                                                   /output/       this attempt's staging output

Every segment goes through ``safe_segment``: Airflow run ids hold ``:`` and ``+``, which Hadoop
paths (and so Spark) reject.
"""

from __future__ import annotations

import hashlib
import re

LEDGER_FILE = "ledger.json"
CANCEL_MARKER = "cancel"
OUTPUT_DIR = "output"

_UNSAFE = re.compile(r"[^A-Za-z0-9._=-]")


def safe_segment(value: str) -> str:
    """A path segment that Hadoop, object stores and shells all accept, unique per input.

    Values that need no change are kept as they are, so paths stay readable.
    """
    if value and not _UNSAFE.search(value) and value not in (".", ".."):
        return value
    digest = hashlib.sha1(value.encode()).hexdigest()[:8]
    return f"{_UNSAFE.sub('_', value)[:80]}-{digest}"


def task_attempts_dir(dag_id: str, run_id: str, task_id: str, map_index: int) -> str:
    return "/".join(("attempts", safe_segment(dag_id), safe_segment(run_id), safe_segment(task_id), str(map_index)))


def attempt_dir(dag_id: str, run_id: str, task_id: str, map_index: int, token: str) -> str:
    return f"{task_attempts_dir(dag_id, run_id, task_id, map_index)}/{safe_segment(token)}"
