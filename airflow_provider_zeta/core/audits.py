"""Write-audit-publish: checks on a run's staged data before the completed point publishes it.

Theory of operation
-------------------
The completed point publishes the outputs of the attempts that reported ready-to-close. With
``audits=[...]`` it first looks at exactly those outputs — the staged data of the reporting
attempts, where they lie before anything moves — and publishes only when every audit passes. A
failed audit fails the completed point naming the audit and its numbers; the table is untouched
and the staging stays for the delayed cleanup, so clearing the failed sources (with the
ready-to-close sensor and downstream) runs them again and the next completed point audits anew.

Facts come from two places:

* what each reporting attempt's driver reported: its row count (``Report.rows``, which the
  completed point has verified against the attempt's ledger). ``rows_within`` needs nothing else;
* what the provider's audit job (``airflow_provider_zeta/spark_jobs/audit_job.py``, a PySpark
  application submitted like the sources, never run in the worker) read of the staged Parquet:
  schema, null counts per column, duplicate keys. ``spark_request`` says what to read; the job
  answers in ``AUDIT_JOB_FORMAT`` (``parse_audit_job_result``).

Every audit gives one ``AuditResult`` per source it looks at (``same_schema`` compares the sources
with each other, and still judges each source: the ones whose schema differs from the others'
fail), each with a name, numbers, pass or fail and a message. ``decide_audits`` runs them all, in
the order given, and the outcome fails when any result fails. A user callable is one more audit: it
is called once per source with that source's ``SourceFacts`` and returns ``True``/``None`` (pass),
``False`` (fail), a string (fail, with that message) or ``(passed, message)``; an exception it
raises fails its result (type and message recorded), never the decision itself.

Nothing here does I/O.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_zeta.core.ledger import CorruptState

#: The completed point's XCom with the audit outcome (``AuditOutcome.to_value``): written before it
#: publishes or fails, wiped by Airflow when the task starts afresh.
AUDIT_RESULTS_XCOM = "zeta_audit_results"
#: The version of the audit job's request and result documents.
AUDIT_JOB_FORMAT = 1


@dataclass(frozen=True)
class SourceFacts:
    """What is known of one reporting source's staged output when the audits run.

    ``rows``: the row count its driver reported (``None``: it reported none). ``staging``: where
    its staged output lies (a URL). The rest is what the audit job read of the staged Parquet,
    ``None`` when no audit asked for it: ``schema`` ((column, type) in file order), ``nulls``
    (column -> rows where it is null; a column the data lacks is absent), ``duplicates`` (key
    columns -> rows beyond the first of each key value), ``read_rows`` (rows the job counted).
    """

    source: str
    token: str
    rows: int | None
    staging: str = ""
    schema: tuple[tuple[str, str], ...] | None = None
    nulls: Mapping[str, int] | None = None
    duplicates: Mapping[tuple[str, ...], int] | None = None
    read_rows: int | None = None


@dataclass(frozen=True)
class AuditResult:
    """One audit's verdict on one source (``source`` ``None``: on the run as a whole)."""

    audit: str
    source: str | None
    passed: bool
    numbers: Mapping[str, Any]
    message: str

    def to_value(self) -> dict[str, Any]:
        """The result as JSON-ready data."""
        return {
            "audit": self.audit,
            "source": self.source,
            "passed": self.passed,
            "numbers": dict(self.numbers),
            "message": self.message,
        }


@dataclass(frozen=True)
class SparkRequest:
    """What the audit job must read of each source's staged Parquet."""

    schema: bool = False
    not_null: tuple[str, ...] = ()
    unique_keys: tuple[tuple[str, ...], ...] = ()

    def __bool__(self) -> bool:
        return self.schema or bool(self.not_null) or bool(self.unique_keys)


class Audit:
    """An audit of the staged data: a name, what it needs read, and its verdicts."""

    name: str = ""

    def spark_request(self) -> SparkRequest:
        """What the audit job must read for this audit (nothing: it needs no Spark)."""
        return SparkRequest()

    def evaluate(self, facts: Mapping[str, SourceFacts]) -> list[AuditResult]:
        """The audit's results, one per source it looks at."""
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        """The audit's specification as JSON-ready data (shown with its results)."""
        return {"name": self.name}

    def __repr__(self) -> str:
        return self.name


def _check_columns(columns: Any, what: str) -> tuple[str, ...]:
    if isinstance(columns, str):
        columns = (columns,)
    try:
        names = tuple(columns)
    except TypeError:
        raise ValueError(f"{what}: 'columns' must be a column name or a list of names, not {columns!r}") from None
    if not names or not all(isinstance(name, str) and name for name in names):
        raise ValueError(f"{what}: 'columns' must name at least one column, each a non-empty string (got {columns!r})")
    if len(set(names)) != len(names):
        raise ValueError(f"{what}: 'columns' names a column twice ({list(names)})")
    return names


def _bound(value: Any, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{what} must be a whole number of rows, 0 or more, or None (got {value!r})")
    return value


@dataclass(frozen=True, repr=False)
class RowsWithin(Audit):
    """Each source's reported row count within ``[min, max]`` (bounds included; ``None``: open)."""

    min: int | None = None
    max: int | None = None
    sources: tuple[str, ...] | None = None
    name: str = ""

    def __post_init__(self) -> None:
        low = _bound(self.min, "rows_within: 'min'")
        high = _bound(self.max, "rows_within: 'max'")
        if low is None and high is None:
            raise ValueError("rows_within: give 'min', 'max' or both")
        if low is not None and high is not None and low > high:
            raise ValueError(f"rows_within: 'min' ({low}) is above 'max' ({high})")
        if self.sources is not None:
            if isinstance(self.sources, str) or not all(isinstance(s, str) and s for s in self.sources):
                raise ValueError(f"rows_within: 'sources' must be a list of source names, not {self.sources!r}")
            object.__setattr__(self, "sources", tuple(self.sources))
        if not self.name:
            object.__setattr__(self, "name", f"rows_within(min={low}, max={high})")

    def evaluate(self, facts: Mapping[str, SourceFacts]) -> list[AuditResult]:
        """Pass a source whose reported rows lie within the bounds; fail one that lies outside,
        reported no count, or (named in ``sources``) did not report in this run."""
        names = sorted(facts) if self.sources is None else list(self.sources)
        bounds = {"min": self.min, "max": self.max}
        results = []
        for source in names:
            fact = facts.get(source)
            if fact is None:
                results.append(
                    AuditResult(self.name, source, False, {**bounds, "rows": None},
                                f"source {source!r} is not among this run's reporting sources {sorted(facts)}")
                )
                continue
            rows = fact.rows
            if rows is None:
                results.append(
                    AuditResult(self.name, source, False, {**bounds, "rows": None},
                                f"source {source!r}: its driver reported no row count (report it with zeta_context().report(rows=...))")
                )
            elif self.min is not None and rows < self.min:
                results.append(
                    AuditResult(self.name, source, False, {**bounds, "rows": rows},
                                f"source {source!r}: {rows} rows, below the minimum {self.min}")
                )
            elif self.max is not None and rows > self.max:
                results.append(
                    AuditResult(self.name, source, False, {**bounds, "rows": rows},
                                f"source {source!r}: {rows} rows, above the maximum {self.max}")
                )
            else:
                results.append(
                    AuditResult(self.name, source, True, {**bounds, "rows": rows},
                                f"source {source!r}: {rows} rows, within [{_show(self.min)}, {_show(self.max)}]")
                )
        return results

    def describe(self) -> dict[str, Any]:
        """The audit's specification as JSON-ready data."""
        return {"name": self.name, "kind": "rows_within", "min": self.min, "max": self.max,
                "sources": None if self.sources is None else list(self.sources)}


def _show(bound: int | None) -> str:
    return "-" if bound is None else str(bound)


@dataclass(frozen=True, repr=False)
class SameSchema(Audit):
    """Every source's staged Parquet has the same columns with the same types (order ignored).

    The reference is the schema most sources have (on a tie, that of the first source by name); a
    source with another schema fails, naming the columns it lacks, has in excess, or types otherwise.
    """

    name: str = "same_schema"

    def spark_request(self) -> SparkRequest:
        """The schema of every source."""
        return SparkRequest(schema=True)

    def evaluate(self, facts: Mapping[str, SourceFacts]) -> list[AuditResult]:
        """One result per source: its schema against the reference schema."""
        unread = [s for s in sorted(facts) if facts[s].schema is None]
        results = [
            AuditResult(self.name, s, False, {}, f"source {s!r}: its schema was not read") for s in unread
        ]
        schemas = {s: dict(facts[s].schema or ()) for s in sorted(facts) if s not in unread}
        if not schemas:
            return results
        counts = Counter(_schema_key(schema) for schema in schemas.values())
        best = max(counts.values())
        reference_source = next(s for s, schema in schemas.items() if counts[_schema_key(schema)] == best)
        reference = schemas[reference_source]
        for source, schema in schemas.items():
            missing = sorted(set(reference) - set(schema))
            extra = sorted(set(schema) - set(reference))
            differing = {c: [reference[c], schema[c]] for c in sorted(set(schema) & set(reference)) if schema[c] != reference[c]}
            numbers = {"reference_source": reference_source, "columns": len(schema),
                       "missing": missing, "extra": extra, "type_differs": differing}
            if missing or extra or differing:
                parts = []
                if missing:
                    parts.append(f"lacks {missing}")
                if extra:
                    parts.append(f"has extra {extra}")
                if differing:
                    parts.append("types differ " + ", ".join(f"{c}: {a} vs {b}" for c, (a, b) in differing.items()))
                message = f"source {source!r}: schema differs from {reference_source!r}'s: " + "; ".join(parts)
                results.append(AuditResult(self.name, source, False, numbers, message))
            else:
                results.append(
                    AuditResult(self.name, source, True, numbers, f"source {source!r}: same schema as {reference_source!r} ({len(schema)} columns)")
                )
        return results

    def describe(self) -> dict[str, Any]:
        """The audit's specification as JSON-ready data."""
        return {"name": self.name, "kind": "same_schema"}


def _schema_key(schema: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(schema.items()))


@dataclass(frozen=True, repr=False)
class NotNull(Audit):
    """No null in the given columns of any source's staged Parquet (a missing column fails)."""

    columns: tuple[str, ...] = ()
    name: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "columns", _check_columns(self.columns, "not_null"))
        if not self.name:
            object.__setattr__(self, "name", f"not_null({', '.join(self.columns)})")

    def spark_request(self) -> SparkRequest:
        """The null count of each column (and the schema, to tell a missing column)."""
        return SparkRequest(schema=True, not_null=self.columns)

    def evaluate(self, facts: Mapping[str, SourceFacts]) -> list[AuditResult]:
        """One result per source: its null count per column."""
        results = []
        for source in sorted(facts):
            fact = facts[source]
            if fact.nulls is None:
                results.append(AuditResult(self.name, source, False, {}, f"source {source!r}: its null counts were not read"))
                continue
            columns = {name for name, _ in fact.schema or ()} if fact.schema is not None else set(fact.nulls)
            missing = [c for c in self.columns if c not in columns or c not in fact.nulls]
            nulls = {c: int(fact.nulls[c]) for c in self.columns if c not in missing}
            with_nulls = {c: n for c, n in nulls.items() if n > 0}
            numbers = {"nulls": nulls, "missing": missing}
            if missing or with_nulls:
                parts = [f"no column {missing}"] if missing else []
                parts += [f"{n} null(s) in {c!r}" for c, n in with_nulls.items()]
                results.append(AuditResult(self.name, source, False, numbers, f"source {source!r}: " + ", ".join(parts)))
            else:
                results.append(AuditResult(self.name, source, True, numbers, f"source {source!r}: no nulls in {list(self.columns)}"))
        return results

    def describe(self) -> dict[str, Any]:
        """The audit's specification as JSON-ready data."""
        return {"name": self.name, "kind": "not_null", "columns": list(self.columns)}


@dataclass(frozen=True, repr=False)
class UniqueKey(Audit):
    """The given columns identify each row of a source's staged Parquet: no key value repeats
    within a source (nulls count as a value; a missing column fails)."""

    columns: tuple[str, ...] = ()
    name: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "columns", _check_columns(self.columns, "unique_key"))
        if not self.name:
            object.__setattr__(self, "name", f"unique_key({', '.join(self.columns)})")

    def spark_request(self) -> SparkRequest:
        """The duplicate count of the key (and the schema, to tell a missing column)."""
        return SparkRequest(schema=True, unique_keys=(self.columns,))

    def evaluate(self, facts: Mapping[str, SourceFacts]) -> list[AuditResult]:
        """One result per source: how many of its rows repeat a key value."""
        results = []
        for source in sorted(facts):
            fact = facts[source]
            if fact.duplicates is None or fact.schema is None:
                results.append(AuditResult(self.name, source, False, {}, f"source {source!r}: its key counts were not read"))
                continue
            present = {name for name, _ in fact.schema}
            missing = [c for c in self.columns if c not in present]
            if missing or self.columns not in fact.duplicates:
                results.append(
                    AuditResult(self.name, source, False, {"missing": missing}, f"source {source!r}: no column {missing or list(self.columns)}")
                )
                continue
            duplicates = int(fact.duplicates[self.columns])
            numbers = {"duplicates": duplicates, "rows": fact.read_rows}
            if duplicates:
                results.append(
                    AuditResult(self.name, source, False, numbers,
                                f"source {source!r}: {duplicates} row(s) repeat a key value of {list(self.columns)}")
                )
            else:
                results.append(AuditResult(self.name, source, True, numbers, f"source {source!r}: {list(self.columns)} is unique"))
        return results

    def describe(self) -> dict[str, Any]:
        """The audit's specification as JSON-ready data."""
        return {"name": self.name, "kind": "unique_key", "columns": list(self.columns)}


@dataclass(frozen=True, repr=False)
class UserAudit(Audit):
    """A user function called once per source with its ``SourceFacts``; see the module docstring
    for what it may return."""

    check: Callable[[SourceFacts], Any] = field(default=lambda facts: True)
    name: str = ""
    request: SparkRequest = SparkRequest()

    def __post_init__(self) -> None:
        if not callable(self.check):
            raise ValueError(f"an audit must be an audit spec (rows_within, ...) or a callable, not {self.check!r}")
        if not self.name:
            object.__setattr__(self, "name", getattr(self.check, "__name__", "") or type(self.check).__name__)

    def spark_request(self) -> SparkRequest:
        """What the function wants read before it is called (``user_audit(needs=...)``)."""
        return self.request

    def evaluate(self, facts: Mapping[str, SourceFacts]) -> list[AuditResult]:
        """Call the function for each source; its answer (or exception) is the source's result."""
        results = []
        for source in sorted(facts):
            try:
                answer = self.check(facts[source])
            except Exception as error:  # a user function's failure fails its own result only
                results.append(
                    AuditResult(self.name, source, False, {"error": type(error).__name__},
                                f"source {source!r}: the audit raised {type(error).__name__}: {error}")
                )
                continue
            results.append(self._result(source, answer, facts[source].rows))
        return results

    def _result(self, source: str, answer: Any, rows: int | None) -> AuditResult:
        numbers: dict[str, Any] = {"rows": rows}
        if answer is None or answer is True:
            return AuditResult(self.name, source, True, numbers, f"source {source!r}: passed")
        if answer is False:
            return AuditResult(self.name, source, False, numbers, f"source {source!r}: failed")
        if isinstance(answer, str):
            return AuditResult(self.name, source, False, numbers, f"source {source!r}: {answer}")
        if isinstance(answer, tuple) and len(answer) == 2 and isinstance(answer[0], bool):
            passed, message = answer
            return AuditResult(self.name, source, passed, numbers, f"source {source!r}: {message}")
        return AuditResult(
            self.name, source, False, numbers,
            f"source {source!r}: the audit returned {type(answer).__name__}; return True/None, False, a message or (passed, message)",
        )

    def describe(self) -> dict[str, Any]:
        """The audit's specification as JSON-ready data."""
        return {"name": self.name, "kind": "callable"}


# -- the public constructors -------------------------------------------------------------------------


def rows_within(min: int | None = None, max: int | None = None, sources: Iterable[str] | None = None, *, name: str = "") -> RowsWithin:  # noqa: A002
    """Each source's reported row count between ``min`` and ``max``, bounds included (``None``:
    no bound on that side); ``sources``: only these sources (each must report), default all."""
    return RowsWithin(min, max, sources if sources is None or isinstance(sources, str) else tuple(sources), name)  # type: ignore[arg-type]


def same_schema(*, name: str = "same_schema") -> SameSchema:
    """The staged Parquet of every source has the same columns and types."""
    return SameSchema(name)


def not_null(columns: str | Sequence[str], *, name: str = "") -> NotNull:
    """No null in ``columns`` in any source's staged Parquet."""
    return NotNull(columns, name)  # type: ignore[arg-type]  # checked and made a tuple by NotNull


def unique_key(columns: str | Sequence[str], *, name: str = "") -> UniqueKey:
    """``columns`` identify each row within every source's staged Parquet."""
    return UniqueKey(columns, name)  # type: ignore[arg-type]  # checked and made a tuple by UniqueKey


def user_audit(
    check: Callable[[SourceFacts], Any], *, name: str = "", needs_schema: bool = False,
    null_counts: Sequence[str] = (), unique_keys: Sequence[Sequence[str]] = (),
) -> UserAudit:
    """``check(facts)`` per source; ``needs_schema``/``null_counts``/``unique_keys``: what the audit
    job must read first so that ``facts`` carries it. A bare callable in ``audits=`` is the same
    with nothing read."""
    request = SparkRequest(
        schema=needs_schema or bool(null_counts) or bool(unique_keys),
        not_null=_check_columns(null_counts, "user_audit null_counts") if null_counts else (),
        unique_keys=tuple(_check_columns(key, "user_audit unique_keys") for key in unique_keys),
    )
    return UserAudit(check, name, request)


def check_audits(audits: Any, where: str) -> tuple[Audit, ...]:
    """``audits`` as an operator receives it: a list of audits and callables (a callable becomes a
    ``UserAudit``), with distinct names. Raises ``ValueError`` naming ``where``."""
    if audits is None:
        return ()
    if isinstance(audits, (Audit, str)) or callable(audits):
        raise ValueError(f"{where}: 'audits' must be a list of audits, e.g. [rows_within(min=1)], not {audits!r}")
    checked: list[Audit] = []
    for audit in audits:
        if isinstance(audit, Audit):
            checked.append(audit)
        elif callable(audit):
            checked.append(UserAudit(audit))
        else:
            raise ValueError(
                f"{where}: {audit!r} in 'audits' is neither an audit (rows_within, same_schema, not_null, "
                "unique_key, user_audit) nor a callable"
            )
    names = Counter(audit.name for audit in checked)
    twice = sorted(name for name, count in names.items() if count > 1)
    if twice:
        raise ValueError(f"{where}: audit names {twice} appear twice in 'audits'; give one of them name=...")
    return tuple(checked)


def spark_request(audits: Iterable[Audit]) -> SparkRequest:
    """What the audit job must read for all ``audits`` together (falsy: no job needed)."""
    schema, not_nulls, keys = False, [], []
    for audit in audits:
        wanted = audit.spark_request()
        schema = schema or wanted.schema
        not_nulls += [c for c in wanted.not_null if c not in not_nulls]
        keys += [k for k in wanted.unique_keys if k not in keys]
    return SparkRequest(schema, tuple(not_nulls), tuple(keys))


@dataclass(frozen=True)
class AuditOutcome:
    """Every audit's results, and whether the publish may go on."""

    results: tuple[AuditResult, ...]
    audits: tuple[dict[str, Any], ...] = ()

    @property
    def passed(self) -> bool:
        """Whether every result passed (no audit: passed)."""
        return all(result.passed for result in self.results)

    @property
    def failed(self) -> tuple[AuditResult, ...]:
        """The results that failed, in order."""
        return tuple(result for result in self.results if not result.passed)

    @property
    def failed_sources(self) -> tuple[str, ...]:
        """The sources with a failed result (the ones to fix and clear), sorted."""
        return tuple(sorted({r.source for r in self.failed if r.source is not None}))

    def summary(self) -> str:
        """One line for logs and the failure message: each failed audit, its source and numbers."""
        if self.passed:
            return f"{len(self.results)} audit result(s), all passed"
        parts = [f"{r.audit} on {r.source or 'the run'}: {r.message} {json.dumps(dict(r.numbers), sort_keys=True, default=str)}"
                 for r in self.failed]
        return f"{len(self.failed)} of {len(self.results)} audit result(s) failed: " + "; ".join(parts)

    def to_value(self) -> dict[str, Any]:
        """The outcome as the ``AUDIT_RESULTS_XCOM`` value."""
        return {
            "passed": self.passed,
            "failed_sources": list(self.failed_sources),
            "audits": [dict(a) for a in self.audits],
            "results": [result.to_value() for result in self.results],
        }


def decide_audits(audits: Sequence[Audit], facts: Mapping[str, SourceFacts]) -> AuditOutcome:
    """Run every audit over ``facts`` (source name -> facts) and collect the outcome."""
    results: list[AuditResult] = []
    for audit in audits:
        results.extend(audit.evaluate(facts))
    return AuditOutcome(tuple(results), tuple(audit.describe() for audit in audits))


#: ``SparkSubmitHook`` arguments the completed point sets itself for its audit job (the application,
#: its one argument, the connection: ``audit_conn_id``); refused in ``audit_spark_submit_kwargs``.
AUDIT_JOB_OWN_KWARGS = ("application", "application_args", "conn_id")


def check_audit_submit_kwargs(kwargs: Any, where: str) -> dict[str, Any]:
    """The audit job's further ``SparkSubmitHook`` arguments, checked when the DAG is parsed: a
    mapping, without the arguments the completed point sets itself (``AUDIT_JOB_OWN_KWARGS``)."""
    if kwargs is None:
        return {}
    if not isinstance(kwargs, Mapping):
        raise ValueError(f"{where}: 'audit_spark_submit_kwargs' must be a mapping of SparkSubmitHook arguments, got {kwargs!r}")
    own = [key for key in AUDIT_JOB_OWN_KWARGS if key in kwargs]
    if own:
        raise ValueError(
            f"{where}: 'audit_spark_submit_kwargs' may not set {', '.join(repr(k) for k in own)}: the completed point "
            "sets it for its audit job (the connection is 'audit_conn_id')"
        )
    return dict(kwargs)


def audited_before(publishing: Any, commit: str) -> bool:
    """Whether an earlier try of this completed point already passed the audits of ``commit``.

    ``publishing`` is the task's publish fence record (``{"commit_id": ..., "at": ...}``), written
    only after the audits passed, right before the table changes. When it names ``commit`` (the
    same commit id: the same reporting attempts, hence the same staged data), the earlier try was
    interrupted in the middle of its publish — possibly between the two renames of a replacement,
    with the old partition already a tombstone — and the retry finishes that publish without
    auditing again: audits that fail now (tightened, a user callable, an audit job that no longer
    runs) would otherwise leave the table without the partition. Anything else: audit."""
    return isinstance(publishing, Mapping) and publishing.get("commit_id") == commit


def parse_outcome(value: Any) -> dict[str, Any] | None:
    """An ``AUDIT_RESULTS_XCOM`` value as stored (JSON text or data), for readers such as the
    plugin; ``None`` when it is not one."""
    if isinstance(value, (str, bytes)):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if not isinstance(value, Mapping) or not isinstance(value.get("results"), list):
        return None
    return dict(value)


# -- the audit job's documents -----------------------------------------------------------------------


def audit_job_request(request: SparkRequest, staging: Mapping[str, str], result_path: str) -> dict[str, Any]:
    """The document the audit job is given: each source's staged Parquet (URL), what to read, and
    where to write its result."""
    return {
        "format": AUDIT_JOB_FORMAT,
        "sources": {name: staging[name] for name in sorted(staging)},
        "schema": request.schema,
        "not_null": list(request.not_null),
        "unique_keys": [list(key) for key in request.unique_keys],
        "result": result_path,
    }


def parse_audit_job_result(raw: bytes | str | None, sources: Iterable[str], where: str) -> dict[str, dict[str, Any]]:
    """The audit job's result: source -> ``schema``, ``nulls``, ``duplicates``, ``rows`` as
    ``SourceFacts`` fields. Raises ``CorruptState`` naming ``where`` when it is missing, unreadable
    or lacks a source."""
    if raw is None:
        raise CorruptState(f"the audit job wrote no result at {where}; see its output in the task log")
    try:
        data = json.loads(raw)
    except ValueError as error:
        raise CorruptState(f"the audit job's result at {where} is not JSON ({error})") from None
    if not isinstance(data, Mapping) or data.get("format") != AUDIT_JOB_FORMAT or not isinstance(data.get("sources"), Mapping):
        raise CorruptState(f"the audit job's result at {where} is not a format-{AUDIT_JOB_FORMAT} result document")
    found: dict[str, dict[str, Any]] = {}
    for name in sources:
        entry = data["sources"].get(name)
        if not isinstance(entry, Mapping):
            raise CorruptState(f"the audit job's result at {where} has nothing for source {name!r}")
        try:
            schema = None if entry.get("schema") is None else tuple((str(c), str(t)) for c, t in entry["schema"])
            nulls = None if entry.get("nulls") is None else {str(c): _count(n) for c, n in dict(entry["nulls"]).items()}
            duplicates = (
                None if entry.get("duplicates") is None
                else {tuple(str(c) for c in key): _count(n) for key, n in entry["duplicates"]}
            )
            rows = None if entry.get("rows") is None else _count(entry["rows"])
        except (TypeError, ValueError) as error:
            raise CorruptState(f"the audit job's result at {where} has an invalid entry for {name!r}: {error}") from None
        found[name] = {"schema": schema, "nulls": nulls, "duplicates": duplicates, "read_rows": rows}
    return found


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0 or int(value) != value:
        raise ValueError(f"{value!r} is not a count")
    return int(value)


# -- rows per source over runs (the pipeline page's chart) -------------------------------------------


@dataclass(frozen=True)
class RowsPoint:
    """One run's rows per source of one pipeline: published (``"published"``), or audited and
    refused (``"audit_failed"``), or audited and passed but not published yet (``"audited"``)."""

    run_id: str
    rows: Mapping[str, int | None]
    status: str
    failed_sources: tuple[str, ...] = ()


def rows_history(runs: Sequence[tuple[str, Sequence[Any], Sequence[Any]]]) -> dict[str, list[RowsPoint]]:
    """Rows per source of each pipeline over ``runs`` (oldest first): for each run its id, its
    completed points' return values and their audit outcomes (``AUDIT_RESULTS_XCOM`` values). A
    publish's rows win over an audit's (they are the rows of the same attempts, or of a newer one);
    values that are neither are skipped. Pipeline id -> points, oldest first."""
    history: dict[str, list[RowsPoint]] = {}
    for run_id, published, audited in runs:
        points: dict[str, RowsPoint] = {}
        for value in audited:
            outcome = parse_outcome(value)
            if outcome is None or not isinstance(outcome.get("rows"), Mapping):
                continue
            pipeline = str(outcome.get("pipeline_id") or "")
            status = "audited" if outcome.get("passed") else "audit_failed"
            failed = tuple(str(s) for s in outcome.get("failed_sources") or ())
            points[pipeline] = RowsPoint(run_id, _rows_of(outcome["rows"]), status, failed)
        for value in published:
            if isinstance(value, (str, bytes)):
                try:
                    value = json.loads(value)
                except ValueError:
                    continue
            if not isinstance(value, Mapping) or not isinstance(value.get("rows"), Mapping) or "commit_id" not in value:
                continue
            pipeline = str(value.get("pipeline_id") or "")
            points[pipeline] = RowsPoint(run_id, _rows_of(value["rows"]), "published")
        for pipeline, point in points.items():
            history.setdefault(pipeline, []).append(point)
    return history


def _rows_of(rows: Mapping[str, Any]) -> dict[str, int | None]:
    found: dict[str, int | None] = {}
    for source, count in rows.items():
        found[str(source)] = count if isinstance(count, int) and not isinstance(count, bool) and count >= 0 else None
    return found
