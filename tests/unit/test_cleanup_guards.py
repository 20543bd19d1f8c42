"""Two guards of a cleanup's deletions (core/cleanup.py): a run cleared just before the delete is
left to its new incarnation (``cleared_since``), and what an interrupted publish holds is kept
(``held_by_interrupted_publish``)."""

from __future__ import annotations

import pytest

from airflow_provider_zeta.core.cleanup import (
    ALL_TOMBSTONES,
    CleanupRecord,
    RunStatus,
    cleared_since,
    held_by_interrupted_publish,
)

T0 = 1_800_000_000.0


def record(incarnation: int | None) -> CleanupRecord:
    return CleanupRecord(
        dag_id="sales",
        run_id="manual__1",
        incarnation=incarnation,
        owner="p.cleanup" if incarnation is not None else "sweep",
        created_at=T0,
        due_at=T0 + 600,
    )


@pytest.mark.parametrize(
    "incarnation, status, cleared",
    [
        (1, RunStatus("success", 2), True),  # cleared once since the record: the new incarnation owns it
        (1, RunStatus("running", 5), True),
        (1, RunStatus("success", 1), False),  # still the record's incarnation: carried out
        (2, RunStatus("success", 1), False),  # the record is newer than the run's clear number
        (0, RunStatus("failed", 0), False),
        (1, None, False),  # the run no longer exists: nobody can read its attempts any more
        (None, RunStatus("success", 3), False),  # the sweep's own record has no incarnation
    ],
)
def test_a_record_is_left_to_the_new_incarnation_only_when_the_run_was_cleared_since(incarnation, status, cleared):
    assert cleared_since(record(incarnation), status) is cleared


PENDING = "_zeta_pending/sales/manual__1/c1-n1"
TOMBSTONE = "_zeta_tombstones/sales/manual__1/ds=2026-11-01-c0"


@pytest.mark.parametrize(
    "entry, is_tombstone, held, kept",
    [
        (PENDING, False, {PENDING}, True),  # the pending directory of an interrupted publish
        (TOMBSTONE, True, {PENDING, TOMBSTONE}, True),  # the tombstone its intent names
        (TOMBSTONE, True, {PENDING, ALL_TOMBSTONES}, True),  # an unreadable intent holds every tombstone
        (PENDING + "x", False, {PENDING, ALL_TOMBSTONES}, False),  # ... but no other pending directory
        (TOMBSTONE, True, {PENDING}, False),  # a tombstone no intent names
        (TOMBSTONE, True, set(), False),
        (PENDING, False, set(), False),  # nothing interrupted: the cleanup deletes it
    ],
)
def test_a_cleanup_keeps_exactly_what_an_interrupted_publish_holds(entry, is_tombstone, held, kept):
    assert held_by_interrupted_publish(entry, is_tombstone, held) is kept
