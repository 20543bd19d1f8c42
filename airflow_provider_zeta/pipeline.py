"""``zeta_pipeline``: one TaskGroup wiring a multi-source PySpark pipeline.

::

    <pipeline_id>.deploy_<source>   ZetaSparkJobOperator, one per source      (G1, G6, G8)
    <pipeline_id>.deploy[i]         ... or one mapped task, a map index per source, for ``sources=XComArg``
    <pipeline_id>.ready_to_close    ReadyToCloseSensor, starts with the deploys (G2)
    <pipeline_id>.completed_point   CompletedPointOperator, after the sensor    (G3)
    <pipeline_id>.cleanup           DelayedCleanupOperator, a teardown after all: records the cleanup (G4, G5, G8)

The sensor has no upstream edge from the deploy tasks on purpose: it waits beside them (deferred,
no worker slot) and fails fast, naming the source, when one fails for good — a downstream sensor
would only ever see "upstream_failed". The deploy tasks stay the run's last tasks that count:
Airflow decides a run's state from them (its teardown aside), so a run with a source that failed,
or that a user marked failed, ends ``failed``. (Were the deploys upstream of the sensor, a run
marked failed by hand would end ``success`` once its teardown ran: its completed point, the only
last task left, is then ``skipped``.)

Reprocessing a source of a run whose wait has ended means clearing its deploy task *together with*
``ready_to_close`` and everything downstream of it (``completed_point``, ``cleanup``): the run then
publishes the cleared sources' new attempts beside the other sources' current ones, once, under a
newer incarnation (the replaced partition becomes a tombstone). A deploy task cleared without the
sensor launches nothing and fails, naming what to clear (``cleared_without_downstream``), so the
run ends ``failed``, never ``success`` over output that is not published.

Sources decided at run time: ``sources`` may be an ``XComArg`` — an upstream task's return value,
a list of source names or of per-source dicts (``source``, optionally ``application``,
``application_args`` and spark-submit options; ``core.ready.mapped_entry_kwargs``). The pipeline then
has one mapped deploy task, ``deploy``, expanded over that list (``expand_kwargs``): map index ``i``
is the list's entry ``i``, with its own attempts, staging, ledger, report and task state store
(every key and path holds the map index). The sensor renders the same list, so it waits for exactly
the sources this run mapped, and the completed point publishes exactly those. An empty list is a run
with nothing to load: Airflow skips the mapped deploy task, the sensor skips itself saying so
(``zeta.ready.no_sources``), the completed point is skipped (nothing published, no Asset event) and
the run ends ``success``. Reprocess one source by clearing its map index with downstream.

The cleanup is an Airflow teardown downstream of every other task: it runs whether the run
succeeded or failed, and Airflow leaves it out when it decides the run's state, so a run whose
source failed ends ``failed`` and a run that published ends ``success``. It records what to delete
and when (the due time, an absolute moment), emits an event of ``CLEANUP_ASSET`` and ends: the run
does not wait for the retention window. The cleanup DAG (``maintenance.zeta_cleanup_dag``, shipped
in ``dags/zeta_maintenance.py``), scheduled on that Asset, deletes the data at the due time; deploy
it beside your pipelines.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow.sdk import Asset, TaskGroup, XComArg

from airflow_provider_zeta.core.durations import Duration
from airflow_provider_zeta.core.publish import DEFAULT_PARTITION
from airflow_provider_zeta.core.ready import mapped_entry_kwargs
from airflow_provider_zeta.core.submit_options import SPARK_SUBMIT_OPTIONS
from airflow_provider_zeta.operators.cleanup import DelayedCleanupOperator
from airflow_provider_zeta.operators.completed_point import CompletedPointOperator
from airflow_provider_zeta.operators.spark_job import ZetaSparkJobOperator
from airflow_provider_zeta.sensors.ready_to_close import ReadyToCloseSensor


def zeta_pipeline(
    pipeline_id: str,
    sources: Mapping[str, str] | XComArg,
    output: str,
    cleanup_delay: Duration | None = None,
    conn_id: str = "spark_default",
    *,
    application_args: Mapping[str, list[str]] | None = None,
    job_params: Mapping[str, Any] | None = None,
    conf: Mapping[str, str] | None = None,
    spark_submit_kwargs: Mapping[str, Any] | None = None,
    spark_options: Mapping[str, Mapping[str, Any]] | None = None,
    deploy_kwargs: Mapping[str, Any] | None = None,
    ready_timeout: Duration = 6 * 3600,
    asset: Asset | None = None,
    completed_point_kwargs: Mapping[str, Any] | None = None,
    openlineage_inject_parent_job_info: bool | None = None,
    openlineage_inject_transport_info: bool | None = None,
    partition: str = DEFAULT_PARTITION,
    audits: list[Any] | None = None,
    application: str | None = None,
) -> TaskGroup:
    """Build the pipeline's TaskGroup in the current DAG.

    :param pipeline_id: the TaskGroup id (and the Asset's default name).
    :param sources: source name -> PySpark application path. Each job writes its rows under
        ``zeta_context().output_path`` and reports them with ``zeta_context().report(rows=...)``.
        Or, for sources decided at run time, an ``XComArg`` (an upstream task's output) holding a
        list of source names or of per-source dicts (``source``, and optionally ``application``,
        ``application_args`` and spark-submit options): one mapped deploy task, a map index per
        entry. The job learns its name from ``zeta_context().source``.
    :param application: with a mapped ``sources``: the PySpark application of every entry that does
        not name its own.
    :param output: root of the output table; the run's partition lands at
        ``{output}/<partition>/source={name}/``.
    :param partition: the run's partition spec (templated), default ``"ds={{ ds }}"`` (one partition
        per logical date). Once rendered: one or more ``key=value`` path segments joined by ``/``.
        A schedule more frequent than daily needs one that tells its runs apart, e.g.
        ``"ds={{ ds }}/hour={{ logical_date.strftime('%H') }}"`` for an hourly one; runs rendering
        the same partition fail (``partition_of_another_owner``), unless the earlier one was
        deleted and had the same logical date (``owner_run_deleted``: replaced). Every job sees the rendered
        partition as ``zeta_context().partition``.
    :param cleanup_delay: retention window (``timedelta`` or seconds) of staging data and replaced partitions before
        the delayed cleanup deletes them (templated); default ``[zeta] cleanup_retention``.
    :param conn_id: Airflow Spark connection of every deploy task.
    :param application_args: optional per-source application arguments (with a mapped ``sources``:
        by name, for entries that do not give their own).
    :param job_params: ``zeta_context().params`` of every job (templated).
    :param spark_options: per-source spark-submit options: source name -> ``{option: value}``
        with the option names of ``ZetaSparkJobOperator`` (and ``SparkSubmitOperator``):
        ``py_files``, ``jars``, ``packages``, ``driver_memory``, ``executor_memory``,
        ``num_executors``, ... (``core.submit_options.SPARK_SUBMIT_OPTIONS``). A source's options
        override the same option given for every source in ``deploy_kwargs``.
    :param deploy_kwargs: further ``ZetaSparkJobOperator``/BaseOperator arguments (``retries``, ...).
    :param ready_timeout: how long (``timedelta`` or seconds) the ready-to-close wait may take
        before it fails.
    :param asset: the output's Asset; default ``Asset(name=pipeline_id, uri=output)``. Asset names are
        global: two DAGs using one ``pipeline_id`` with different outputs must each pass their own.
        The completed point emits one event for it per new commit (none for a no-op re-execution).
    :param openlineage_inject_parent_job_info, openlineage_inject_transport_info: passed to every
        deploy task (``ZetaSparkJobOperator``, same names as ``SparkSubmitOperator``'s); ``None``
        keeps the operator's default, ``[openlineage] spark_inject_parent_job_info`` /
        ``spark_inject_transport_info``. Without ``apache-airflow-providers-openlineage`` nothing is
        injected.
    :param completed_point_kwargs: further ``CompletedPointOperator``/BaseOperator arguments
        (``retries`` defaults to 3, ``retry_delay`` to 10 s).
    :param audits: audits of the staged data before the publish (write-audit-publish, ``core.audits``:
        ``rows_within``, ``same_schema``, ``not_null``, ``unique_key``, ``user_audit`` or a callable);
        a failed audit fails the completed point and publishes nothing. Audits that read the data
        run in the provider's audit job on ``conn_id`` with ``conf``, merged with
        ``completed_point_kwargs["audit_spark_submit_kwargs"]["conf"]`` (which wins per key).
    """
    if audits:
        # The completed point audits; its audit job runs on the pipeline's Spark connection and
        # conf (e.g. spark.hadoop.* credentials), like the deploy tasks.
        given = dict(completed_point_kwargs or {})
        submit = dict(given.pop("audit_spark_submit_kwargs", None) or {})
        if conf:
            submit["conf"] = {**dict(conf), **dict(submit.get("conf") or {})}
        completed_point_kwargs = {"audits": audits, "audit_conn_id": conn_id, "audit_spark_submit_kwargs": submit, **given}
    if isinstance(sources, XComArg):
        return _mapped_pipeline(
            pipeline_id, sources, output, cleanup_delay, conn_id,
            application=application, application_args=application_args, job_params=job_params, conf=conf,
            spark_submit_kwargs=spark_submit_kwargs, spark_options=spark_options, deploy_kwargs=deploy_kwargs,
            ready_timeout=ready_timeout, asset=asset, completed_point_kwargs=completed_point_kwargs,
            openlineage=_openlineage(openlineage_inject_parent_job_info, openlineage_inject_transport_info),
            partition=partition,
        )
    if application is not None:
        raise ValueError(f"zeta_pipeline {pipeline_id!r}: 'application' is for a mapped 'sources' (an XComArg); a mapping names each source's application")
    if not sources:
        raise ValueError(f"zeta_pipeline {pipeline_id!r}: 'sources' must name at least one source")
    bad = [name for name in sources if not name or "/" in name or "=" in name]
    if bad:
        raise ValueError(f"zeta_pipeline {pipeline_id!r}: source names {bad} may not be empty or hold '/' or '='")
    unknown_args = set(application_args or {}) - set(sources)
    if unknown_args:
        raise ValueError(f"zeta_pipeline {pipeline_id!r}: application_args for unknown sources {sorted(unknown_args)}")
    unknown_options = set(spark_options or {}) - set(sources)
    if unknown_options:
        raise ValueError(f"zeta_pipeline {pipeline_id!r}: spark_options for unknown sources {sorted(unknown_options)}")
    _check_spark_options(pipeline_id, spark_options)
    openlineage = _openlineage(openlineage_inject_parent_job_info, openlineage_inject_transport_info)
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
                partition=partition,
                **{**dict(deploy_kwargs or {}), **openlineage, **dict((spark_options or {}).get(name, {}))},
            )
            for name, application in sources.items()
        }
        ready = ReadyToCloseSensor(
            task_id="ready_to_close",
            sources={name: task.task_id for name, task in deploys.items()},
            timeout=ready_timeout,
        )
        _publish_and_cleanup(
            pipeline_id, list(deploys.values()), ready, output, cleanup_delay, asset, partition, completed_point_kwargs
        )
    return group


def _check_spark_options(pipeline_id: str, spark_options: Mapping[str, Mapping[str, Any]] | None) -> None:
    for name, options in (spark_options or {}).items():
        not_options = sorted(set(options) - set(SPARK_SUBMIT_OPTIONS))
        if not_options:
            raise ValueError(
                f"zeta_pipeline {pipeline_id!r}: spark_options[{name!r}] holds {not_options}, which are not "
                f"spark-submit options; the options are {list(SPARK_SUBMIT_OPTIONS)}"
            )


def _openlineage(parent_job_info: bool | None, transport_info: bool | None) -> dict[str, bool]:
    return {
        name: value
        for name, value in (
            ("openlineage_inject_parent_job_info", parent_job_info),
            ("openlineage_inject_transport_info", transport_info),
        )
        if value is not None
    }


def _publish_and_cleanup(
    pipeline_id: str,
    deploys: list[Any],
    ready: ReadyToCloseSensor,
    output: str,
    cleanup_delay: Duration | None,
    asset: Asset | None,
    partition: str,
    completed_point_kwargs: Mapping[str, Any] | None,
) -> None:
    """The pipeline's tail, the same for fixed and mapped sources: the completed point after the
    wait, and the delayed cleanup after every task of the pipeline (a mapped deploy task counts its
    map indexes under its one task id)."""
    publish = CompletedPointOperator(
        task_id="completed_point",
        output_root=output,
        ready_task_id=ready.task_id,
        asset=asset or _default_asset(pipeline_id, output),
        pipeline_id=pipeline_id,
        partition=partition,
        **dict(completed_point_kwargs or {}),
    )
    ready >> publish
    cleanup = DelayedCleanupOperator(
        task_id="cleanup",
        retention=cleanup_delay,
        task_ids=[task.task_id for task in deploys],
        output_roots=[output],
    )
    [*deploys, ready, publish] >> cleanup


def _default_asset(pipeline_id: str, output: str) -> Asset:
    return Asset(name=pipeline_id, uri=output if "://" in output else f"file://{output}")


def _mapped_pipeline(
    pipeline_id: str,
    sources: XComArg,
    output: str,
    cleanup_delay: Duration | None,
    conn_id: str,
    *,
    application: str | None,
    application_args: Mapping[str, list[str]] | None,
    job_params: Mapping[str, Any] | None,
    conf: Mapping[str, str] | None,
    spark_submit_kwargs: Mapping[str, Any] | None,
    spark_options: Mapping[str, Mapping[str, Any]] | None,
    deploy_kwargs: Mapping[str, Any] | None,
    ready_timeout: Duration,
    asset: Asset | None,
    completed_point_kwargs: Mapping[str, Any] | None,
    openlineage: Mapping[str, Any],
    partition: str,
) -> TaskGroup:
    """``zeta_pipeline`` over a source list known only at run time: one mapped deploy task."""
    _check_spark_options(pipeline_id, spark_options)
    common = dict(deploy_kwargs or {})
    # Options every source has, which an entry may override: passed per map index, never both in
    # partial() and in the expanded kwargs (Airflow refuses an argument given twice).
    common_options = {name: common.pop(name) for name in list(common) if name in SPARK_SUBMIT_OPTIONS}
    reserved = sorted({"task_id", "application", "application_args", "source"} & set(common))
    if reserved:
        raise ValueError(f"zeta_pipeline {pipeline_id!r}: deploy_kwargs may not hold {reserved} with a mapped 'sources'")
    where = f"zeta_pipeline {pipeline_id!r}"
    args_by_name = {name: list(args) for name, args in (application_args or {}).items()}
    options_by_name = {name: dict(options) for name, options in (spark_options or {}).items()}

    def deploy_arguments(entry: Any) -> dict[str, Any]:
        # Runs in the deploy task's worker, for its own map index's entry.
        name = entry.get("source") if isinstance(entry, Mapping) else entry
        defaults = {**common_options, **options_by_name.get(name, {})} if isinstance(name, str) else common_options
        kwargs = mapped_entry_kwargs(entry, application, defaults, where)
        if not kwargs["application_args"] and not (isinstance(entry, Mapping) and "application_args" in entry):
            kwargs["application_args"] = args_by_name.get(kwargs["source"], [])
        return kwargs

    with TaskGroup(group_id=pipeline_id) as group:
        deploy = ZetaSparkJobOperator.partial(
            task_id="deploy",
            conn_id=conn_id,
            conf=dict(conf or {}),
            spark_submit_kwargs=dict(spark_submit_kwargs or {}),
            job_params=dict(job_params or {}),
            require_logical_date=True,
            partition=partition,
            **{**common, **openlineage},
        ).expand_kwargs(sources.map(deploy_arguments))
        ready = ReadyToCloseSensor(
            task_id="ready_to_close",
            mapped_task_id=deploy.task_id,
            mapped_sources=sources,
            timeout=ready_timeout,
        )
        _publish_and_cleanup(pipeline_id, [deploy], ready, output, cleanup_delay, asset, partition, completed_point_kwargs)
    return group
