"""Maintenance: the zeta sweep every 15 minutes (ZETA_SWEEP_SCHEDULE overrides, e.g. "@hourly").

It stops drivers whose run has ended, carries out cleanups whose task never ran (a run marked
failed by hand, a removed cleanup task) and gives unrecorded leftovers a retention window.
"""

import os

from airflow_provider_zeta.maintenance import zeta_sweep_dag

dag = zeta_sweep_dag(schedule=os.environ.get("ZETA_SWEEP_SCHEDULE") or "*/15 * * * *")
