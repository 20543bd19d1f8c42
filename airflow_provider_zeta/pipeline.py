"""``zeta_pipeline``: one TaskGroup wiring a multi-source PySpark pipeline.

::

    <pipeline_id>.deploy_<source>   ZetaSparkJobOperator, one per source      (G1, G6, G8)
    <pipeline_id>.ready_to_close    ReadyToCloseSensor, starts with the deploys (G2)
    <pipeline_id>.completed_point   CompletedPointOperator, after the sensor    (G3)
    <pipeline_id>.cleanup           DelayedCleanupOperator, a teardown after all (G4, G5, G8)

The sensor has no upstream edge from the deploy tasks on purpose: it waits beside them (deferred,
no worker slot) and fails fast, naming the source, when one fails for good — a downstream sensor
would only ever see "upstream_failed".

The cleanup is an Airflow teardown downstream of every other task: it runs whether the run
succeeded or failed, and Airflow leaves it out when it decides the run's state, so a run whose
source failed ends ``failed`` and a run that published ends ``success`` (and stays ``running``
during the retention window, while the cleanup waits deferred, without a worker slot).
"""

from __future__ import annotations

from typing import Any, Mapping

from airflow.sdk import Asset, TaskGroup

from airflow_provider_zeta.operators.cleanup import DelayedCleanupOperator
from airflow_provider_zeta.operators.completed_point import CompletedPointOperator
from airflow_provider_zeta.operators.spark_job import ZetaSparkJobOperator
from airflow_provider_zeta.sensors.ready_to_close import ReadyToCloseSensor


def zeta_pipeline(
    pipeline_id: str,
    sources: Mapping[str, str],
    output: str,
    cleanup_delay: float | str | None = None,
    conn_id: str = "spark_default",
    *,
    application_args: Mapping[str, list[str]] | None = None,
    job_params: Mapping[str, Any] | None = None,
    conf: Mapping[str, str] | None = None,
    spark_submit_kwargs: Mapping[str, Any] | None = None,
    deploy_kwargs: Mapping[str, Any] | None = None,
    ready_timeout: float = 6 * 3600,
    asset: Asset | None = None,
) -> TaskGroup:
    """Build the pipeline's TaskGroup in the current DAG.

    :param pipeline_id: the TaskGroup id (and the Asset's default name).
    :param sources: source name -> PySpark application path. Each job writes its rows under
        ``zeta_context().output_path`` and reports them with ``zeta_context().report(rows=...)``.
    :param output: root of the output table; the run's partition lands at
        ``{output}/ds={ds}/source={name}/``.
    :param cleanup_delay: retention window (seconds) of staging data and replaced partitions before
        the delayed cleanup deletes them (templated); default ``[zeta] cleanup_retention``.
    :param conn_id: Airflow Spark connection of every deploy task.
    :param application_args: optional per-source application arguments.
    :param job_params: ``zeta_context().params`` of every job (templated).
    :param deploy_kwargs: further ``ZetaSparkJobOperator``/BaseOperator arguments (``retries``, ...).
    :param ready_timeout: seconds the ready-to-close wait may take before it fails.
    :param asset: the output's Asset; default ``Asset(name=pipeline_id, uri=output)``. Asset names are
        global: two DAGs using one ``pipeline_id`` with different outputs must each pass their own.
    """
    if not sources:
        raise ValueError(f"zeta_pipeline {pipeline_id!r}: 'sources' must name at least one source")
    bad = [name for name in sources if not name or "/" in name or "=" in name]
    if bad:
        raise ValueError(f"zeta_pipeline {pipeline_id!r}: source names {bad} may not be empty or hold '/' or '='")
    unknown_args = set(application_args or {}) - set(sources)
    if unknown_args:
        raise ValueError(f"zeta_pipeline {pipeline_id!r}: application_args for unknown sources {sorted(unknown_args)}")
    if asset is None:
        asset = Asset(name=pipeline_id, uri=output if "://" in output else f"file://{output}")
    with TaskGroup(group_id=pipeline_id) as group:
        deploys = {
            name: ZetaSparkJobOperator(
                task_id=f"deploy_{name}",
                application=application,
                application_args=list((application_args or {}).get(name, [])),
                source=name,
                conn_id=conn_id,
                conf=dict(conf or {}),
                spark_submit_kwargs=dict(spark_submit_kwargs or {}),
                job_params=dict(job_params or {}),
                require_logical_date=True,
                **dict(deploy_kwargs or {}),
            )
            for name, application in sources.items()
        }
        ready = ReadyToCloseSensor(
            task_id="ready_to_close",
            sources={name: task.task_id for name, task in deploys.items()},
            timeout=ready_timeout,
        )
        publish = CompletedPointOperator(
            task_id="completed_point", output_root=output, ready_task_id=ready.task_id, asset=asset
        )
        ready >> publish
        cleanup = DelayedCleanupOperator(
            task_id="cleanup",
            retention=cleanup_delay,
            task_ids=[task.task_id for task in deploys.values()],
            output_roots=[output],
        )
        [*deploys.values(), ready, publish] >> cleanup
    return group
