"""OpenLineage, when ``apache-airflow-providers-openlineage`` is installed; nothing otherwise.

Two things, both optional (the provider is the ``openlineage`` extra of this package):

* ``inject_openlineage_properties``: the deploy's Spark conf gains the OpenLineage parent job
  (``spark.openlineage.parentJobNamespace``, ``parentJobName``, ``parentRunId``, ``rootParent*``)
  and, where asked, the transport (``spark.openlineage.transport.*``), exactly as
  ``SparkSubmitOperator`` injects them: through the OpenLineage provider's own public
  ``inject_parent_job_information_into_spark_properties`` and
  ``inject_transport_information_into_spark_properties``, not a copy of them. Keys the user already
  set are left alone (those functions skip the injection then).
* ``completed_point_lineage``: the completed point's ``OperatorLineage`` — its output table as one
  OpenLineage dataset (named by ``core.lineage.dataset_name``) with the published partition as the
  ``subset`` output facet, the commit id as the dataset ``version`` facet, the rows written as
  ``outputStatistics`` (a new commit only), and a ``zeta_commit`` run facet (commit, partition,
  owner, sources with their tokens and rows, the publish rule).

Every OpenLineage import happens inside these functions: the package imports, and a deploy
launches, without the provider (``ImportError`` makes the injection a no-op, logged when it was
asked for). A lineage failure never fails a deploy: it is logged and the driver launches without
the properties.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow_provider_zeta.core.lineage import (
    COMMIT_RUN_FACET,
    commit_facet_values,
    dataset_name,
    partition_dimensions,
    rows_written,
)

if TYPE_CHECKING:
    from airflow.sdk import Context

log = logging.getLogger(__name__)


def openlineage_default(option: str) -> bool:
    """``[openlineage] <option>`` as ``SparkSubmitOperator`` reads it (false when unset or no provider)."""
    from airflow_provider_zeta.airflow_internals import airflow_config

    return airflow_config().getboolean("openlineage", option, fallback=False)


def openlineage_listener_enabled() -> bool:
    """Whether Airflow's OpenLineage listener reports task events here (the provider is installed
    and configured, as ``airflow.providers.openlineage.conf.is_disabled`` decides)."""
    try:
        from airflow.providers.openlineage.conf import is_disabled
    except ImportError:
        return False
    try:
        return not is_disabled()
    except Exception:  # an unreadable configuration: assume it reports, keep the worker's end
        log.warning("zeta: could not tell whether OpenLineage is enabled; assuming it is", exc_info=True)
        return True


def inject_openlineage_properties(
    conf: Mapping[str, Any], context: Context, *, parent_job_info: bool, transport_info: bool
) -> dict[str, Any]:
    """``conf`` plus the OpenLineage properties asked for; ``conf`` unchanged without the provider.

    Called once per driver launch, with the launching try's context: ``parentRunId`` is the
    OpenLineage run of the try that launched the driver. The result is passed to the launch only;
    it is not stored, and no attempt identity (token, incarnation, try) depends on it.
    """
    properties = dict(conf)
    if not (parent_job_info or transport_info):
        return properties
    try:
        from airflow.providers.openlineage.utils.spark import (
            inject_parent_job_information_into_spark_properties,
            inject_transport_information_into_spark_properties,
        )
    except ImportError:
        log.warning(
            "zeta.deploy.openlineage: apache-airflow-providers-openlineage is not installed; "
            "the Spark conf gets no OpenLineage properties (install the 'openlineage' extra)"
        )
        return properties
    try:
        if parent_job_info:
            properties = inject_parent_job_information_into_spark_properties(properties, context)
        if transport_info:
            properties = inject_transport_information_into_spark_properties(properties, context)
    except Exception as error:  # lineage is best effort: the driver launches without it
        log.warning("zeta.deploy.openlineage: OpenLineage properties not injected: %s", error, exc_info=True)
        return dict(conf)
    return dict(properties)


def output_dataset_name(output_root: str) -> tuple[str, str]:
    """``core.lineage.dataset_name`` with a relative local path made absolute (from the working directory)."""
    if "://" not in output_root:
        output_root = os.path.abspath(output_root)
    elif output_root.startswith("file://") and not output_root.startswith("file:///"):
        output_root = "file://" + os.path.abspath(output_root[len("file://") :])
    return dataset_name(output_root)


@functools.cache
def _commit_facet_class() -> type:
    import attr
    from openlineage.client.facet_v2 import RunFacet

    @attr.define
    class ZetaCommitRunFacet(RunFacet):
        """The completed point's commit: what it published, for whom, from which attempts."""

        commitId: str  # noqa: N815 (OpenLineage facets are camelCase JSON)
        partition: str
        ds: str
        incarnation: int
        dagId: str  # noqa: N815
        pipelineId: str  # noqa: N815
        runId: str  # noqa: N815
        sources: dict
        rule: str
        newCommit: bool  # noqa: N815

    return ZetaCommitRunFacet


def completed_point_lineage(
    output_root: str, published: Mapping[str, Any] | None
) -> Any:
    """The completed point's ``OperatorLineage``: its output table and the partition it published.

    ``published`` is what the operator returned (``core.publish.asset_extra`` plus ``partition``,
    ``rule`` and ``new_commit``); ``None`` (nothing published: the task failed before) gives no
    outputs.
    """
    from airflow.providers.openlineage.extractors import OperatorLineage

    if not published:
        return OperatorLineage()
    from openlineage.client.event_v2 import OutputDataset
    from openlineage.client.facet_v2 import (
        base_subset_dataset,
        dataset_version_dataset,
        output_statistics_output_dataset,
    )

    namespace, name = output_dataset_name(output_root)
    ds = str(published["ds"])
    output_facets: dict[str, Any] = {
        "subset": base_subset_dataset.OutputSubsetOutputDatasetFacet(
            outputCondition=base_subset_dataset.PartitionSubsetCondition(
                partitions=[
                    base_subset_dataset.Partition(
                        dimensions=partition_dimensions(str(published.get("partition_path") or f"ds={ds}")),
                        identifier=str(published["partition"]),
                    )
                ]
            )
        )
    }
    if published.get("new_commit"):
        output_facets["outputStatistics"] = output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
            rowCount=rows_written(published)
        )
    table = OutputDataset(
        namespace=namespace,
        name=name,
        facets={"version": dataset_version_dataset.DatasetVersionDatasetFacet(datasetVersion=str(published["commit_id"]))},
        outputFacets=output_facets,
    )
    facet = _commit_facet_class()(
        **commit_facet_values(published, str(published["partition"]), str(published["rule"]), bool(published.get("new_commit")))
    )
    return OperatorLineage(outputs=[table], run_facets={COMMIT_RUN_FACET: facet})
