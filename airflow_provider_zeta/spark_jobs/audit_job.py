"""The audit job: reads the staged Parquet of a run's reporting attempts and writes what it found.

The completed point submits this file with ``spark-submit`` (``SparkSubmitHook``, the pipeline's
Spark connection) when an audit needs to look at the data (``same_schema``, ``not_null``,
``unique_key``, a ``user_audit`` asking for them): the data is read by Spark, not by the Airflow
worker. Its one argument is the path of a request document (``core.audits.audit_job_request``):
each source's staged output URL, what to read, and where to write the result. For each source it
writes the rows it counted, the schema ((column, type) pairs in file order), the null count of
each requested column the data has, and for each requested key the rows beyond the first of each
key value (nulls are a value). It decides nothing: the completed point judges the result with
``core.audits``. It imports nothing of the provider or of Airflow (a task's environment holds an
unusable metadata database setting) and writes its result atomically (a temporary file renamed).
"""

from __future__ import annotations

import json
import os
import sys

FORMAT = 1


def _column(name: str):
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def read_source(spark, path: str, request: dict) -> dict:
    """What the request asks of one source's staged Parquet at ``path``."""
    from pyspark.sql import functions as F

    frame = spark.read.parquet(path)
    present = set(frame.columns)
    wanted_nulls = [c for c in request.get("not_null", []) if c in present]
    aggregates = [F.count(F.lit(1)).alias("rows")] + [
        F.sum(F.when(_column(c).isNull(), 1).otherwise(0)).alias(f"nulls_{i}") for i, c in enumerate(wanted_nulls)
    ]
    totals = frame.agg(*aggregates).first()
    rows = int(totals["rows"])
    duplicates = []
    for key in request.get("unique_keys", []):
        if all(c in present for c in key):
            distinct = frame.select(*[_column(c) for c in key]).distinct().count()
            duplicates.append([list(key), rows - int(distinct)])
    return {
        "rows": rows,
        "schema": [[field.name, field.dataType.simpleString()] for field in frame.schema.fields],
        "nulls": {c: int(totals[f"nulls_{i}"] or 0) for i, c in enumerate(wanted_nulls)},
        "duplicates": duplicates,
    }


def main(argv: list[str]) -> int:
    """Read the request at ``argv[0]``, audit every source, write the result document."""
    if len(argv) != 1:
        print("usage: audit_job.py <request.json>", file=sys.stderr)
        return 2
    with open(argv[0]) as handle:
        request = json.load(handle)
    if request.get("format") != FORMAT:
        print(f"audit_job: request format {request.get('format')!r}, expected {FORMAT}", file=sys.stderr)
        return 2
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("zeta-audit").getOrCreate()
    try:
        found = {name: read_source(spark, path, request) for name, path in sorted(request["sources"].items())}
    finally:
        spark.stop()
    target = request["result"]
    partial = f"{target}.partial"
    with open(partial, "w") as handle:
        json.dump({"format": FORMAT, "sources": found}, handle)
    os.replace(partial, target)
    print(f"audit_job: {len(found)} source(s) read; result at {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
