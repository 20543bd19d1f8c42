"""OpenLineage names and partition facts of a published partition: pure, no OpenLineage import.

The completed point reports its output table to OpenLineage (``lineage.py`` builds the
OpenLineage objects when ``apache-airflow-providers-openlineage`` is installed). This module holds
the rules, testable without that provider:

* ``dataset_name(output_root)``: the table's OpenLineage (namespace, name), following the
  OpenLineage dataset naming conventions (https://openlineage.io/docs/spec/naming): a local path is
  namespace ``file`` with the absolute path as name; ``s3://bucket/key`` is ``s3://bucket`` +
  ``key`` (``s3a``/``s3n`` are named ``s3``, as the Spark integration names them); ``gs://bucket/key``
  is ``gs://bucket`` + ``key``; ``hdfs://host:port/path`` is ``hdfs://host:port`` + ``/path``;
  ``abfss``/``wasbs`` keep ``container@account...`` as their authority. Any other scheme is
  ``scheme://authority`` + the path without its leading slash. An Airflow connection id in the
  URL (``s3://aws_default@bucket/key``, ObjectStoragePath's form) is not part of the name.
* The table is the dataset, not the partition directory: each run publishes one partition
  (``ds=...``) of the same table, so the partition is reported as a subset of it (the
  ``subset`` output facet), and OpenLineage clients that trim partition-like path parts from
  names see the same table either way.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

#: Schemes whose authority ``container@account`` is part of the location, not a user or conn id.
_AUTHORITY_WITH_AT = ("abfss", "abfs", "wasbs", "wasb")
#: Schemes named as another one (OpenLineage names S3 ``s3`` whatever the Hadoop connector).
_SCHEME_ALIASES = {"s3a": "s3", "s3n": "s3", "gcs": "gs"}

#: The name of the completed point's own run facet (custom facets carry a producer prefix).
COMMIT_RUN_FACET = "zeta_commit"


def dataset_name(output_root: str) -> tuple[str, str]:
    """The OpenLineage (namespace, name) of the output table at ``output_root`` (an absolute path or a URL)."""
    if not output_root:
        raise ValueError("output_root is empty: it must be the output table's root path or URL")
    if "://" not in output_root:
        return "file", _absolute(output_root)
    parts = urlsplit(output_root)
    scheme = _SCHEME_ALIASES.get(parts.scheme.lower(), parts.scheme.lower())
    authority = parts.netloc
    if scheme in ("file", "local"):
        # file:///abs/path, and file://relative/path as fsspec reads it (netloc + path).
        return "file", _absolute(authority + parts.path if authority else parts.path)
    if "@" in authority and scheme not in _AUTHORITY_WITH_AT:
        authority = authority.rpartition("@")[2]  # an Airflow connection id, not the location
    path = posixpath.normpath(parts.path) if parts.path not in ("", "/") else "/"
    if scheme == "hdfs":
        return f"hdfs://{authority}", path
    name = path.lstrip("/") or "/"
    return f"{scheme}://{authority}", name


def _absolute(path: str) -> str:
    if not path.startswith("/"):
        # The process's working directory is I/O: the adapter resolves a relative path first.
        raise ValueError(f"{path!r} is a relative path: pass the output table's absolute path")
    return posixpath.normpath(path)


def partition_dimensions(partition_path: str) -> dict[str, str]:
    """The partition's dimensions as the table is partitioned: one column per ``key=value``
    segment of the rendered partition (``ds=2026-06-01/hour=13`` -> ``ds``, ``hour``)."""
    return dict(segment.split("=", 1) for segment in partition_path.split("/") if "=" in segment)


def commit_facet_values(extra: Mapping[str, Any], partition_url: str, rule: str, new_commit: bool) -> dict[str, Any]:
    """What the completed point's run facet says about its commit (``core.publish.asset_extra`` + where and how)."""
    return {
        "commitId": extra["commit_id"],
        "partition": partition_url,
        "ds": extra["ds"],
        "incarnation": extra["incarnation"],
        "dagId": extra["dag_id"],
        "pipelineId": extra["pipeline_id"],
        "runId": extra["run_id"],
        # "attempt", not "token": Airflow's secrets masker hides the value of any key containing
        # "token", and OpenLineage events go through it (an attempt token is an id, not a secret).
        "sources": {
            name: {"attempt": token, "rows": extra["rows"].get(name)} for name, token in sorted(extra["tokens"].items())
        },
        "rule": rule,
        "newCommit": new_commit,
    }


def rows_written(extra: Mapping[str, Any]) -> int | None:
    """The partition's row count when every source reported one, else None."""
    rows = list(extra["rows"].values())
    if not rows or any(r is None for r in rows):
        return None
    return int(sum(rows))
