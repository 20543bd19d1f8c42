"""Maintenance: the delayed cleanups at their due times, and the zeta sweep every 15 minutes
(ZETA_SWEEP_SCHEDULE overrides, e.g. "@hourly").

``zeta_cleanup`` is scheduled on the Asset every pipeline's cleanup task emits: it deletes each
run's staging data and tombstones at the due time its run recorded. The sweep stops drivers whose
run has ended, carries out cleanups whose cleanup DAG run never came (or whose task never ran: a
run marked failed by hand, a removed cleanup task) and gives unrecorded leftovers a retention window.
"""

import os

from airflow_provider_zeta.maintenance import zeta_cleanup_dag, zeta_sweep_dag

cleanup = zeta_cleanup_dag()
dag = zeta_sweep_dag(schedule=os.environ.get("ZETA_SWEEP_SCHEDULE") or "*/15 * * * *")
