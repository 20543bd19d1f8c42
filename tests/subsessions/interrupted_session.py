"""Not collected by the suite (no ``test_`` prefix): the pytest session that ``tests/test_interrupt.py``
starts and then interrupts. It starts a cluster through the suite's own ``airflow_cluster`` fixture,
says which (``$ZETA_INTERRUPT_INFO``), and waits to be signalled."""

from __future__ import annotations

import json
import os
import time

from tests.conftest import PROJECT_ROOT


def test_start_a_cluster_and_wait_to_be_interrupted(airflow_cluster):
    cluster = airflow_cluster(PROJECT_ROOT / "tests" / "dags", "sqlite", components=("api-server", "scheduler"))
    info = {
        "cluster_id": cluster.cluster_id,
        "sessions": [component.pid for component in cluster.component_history],
        "home": str(cluster.home),
    }
    path = os.environ["ZETA_INTERRUPT_INFO"]
    with open(path + ".tmp", "w") as out:
        json.dump(info, out)
    os.replace(path + ".tmp", path)
    time.sleep(600)
