"""The test and demo harness: a real Airflow cluster on this machine (``cluster``), chaos scenarios,
namespace hosts, a Spark standalone cluster and the oracles the tests read.

Not part of the provider: it lives at the repository root, outside the wheel (setup.py packages only
``airflow_provider_zeta``), and nothing in the provider imports it. The tests, ``scripts/`` and
``benchmarks/`` import it from the repository root.
"""
