"""The cleanup DAG of the test clusters: it carries out every pipeline's cleanup at its due time.

Its task is ``WindowedCarryOutCleanups``: a test arms one of the crash windows of
``CarryOutCleanupsOperator`` (``before_delete``, ``after_delete``) for the record of one pipeline
run by writing ``$AIRFLOW_HOME/cleanup-windows/<dag>/<run>.json`` = ``{"crash_at": <window>,
"crash_marker": <path>}``; the first time the task reaches that window with that run's record it
writes the marker and kills its own process with SIGKILL (tests/test_cleanup_windows.py). Unarmed,
it is the shipped operator: the other tests' cleanups go through it unchanged. (One cleanup DAG, not
a second one for the crashes: both would take every pending record, and the armed record could be
carried out by the other, never reaching the window.)
"""

import json
import os
import signal
import time
from pathlib import Path

from airflow_provider_zeta.core.paths import safe_segment
from airflow_provider_zeta.maintenance import zeta_cleanup_dag
from airflow_provider_zeta.operators.cleanup import CarryOutCleanupsOperator

ARMED = Path(os.environ.get("AIRFLOW_HOME", "/tmp")) / "cleanup-windows"


class WindowedCarryOutCleanups(CarryOutCleanupsOperator):
    def failure_window(self, name, context, record=None):
        if record is None:
            return
        armed = ARMED / safe_segment(record.dag_id) / f"{safe_segment(record.run_id)}.json"
        if not armed.exists():
            return
        conf = json.loads(armed.read_text())
        marker = Path(conf["crash_marker"])
        if conf.get("crash_at") != name or marker.exists():  # only the first time the window is reached
            return
        marker.write_text(json.dumps({"pid": os.getpid(), "cleanup_run_id": context["dag_run"].run_id, "at": time.time()}))
        self.log.warning("test: killing the task process at window %s (%s %s)", name, record.dag_id, record.run_id)
        os.kill(os.getpid(), signal.SIGKILL)


dag = zeta_cleanup_dag("zeta_cleanup", recheck_interval=5, operator_class=WindowedCarryOutCleanups)
