"""The sweep, triggered by the tests (no schedule), with a short window for unrecorded leftovers."""

from airflow_provider_zeta.maintenance import zeta_sweep_dag

dag = zeta_sweep_dag("zeta_sweep_test", schedule=None, retention=15)
