"""State-root names that must stay stable (core/paths.py): a name written by one version is read by
the next, so these are pinned, not derived."""

from __future__ import annotations

from airflow_provider_zeta.core.paths import SWEEP_RECORD_NAME, cleanup_record_path, output_registration_path


def test_the_sweeps_own_cleanup_record_is_the_one_without_an_incarnation():
    assert cleanup_record_path("d", "r", "grp.cleanup", None) == f"runs/d/r/cleanup/{SWEEP_RECORD_NAME}"
    assert cleanup_record_path("d", "r", "grp.cleanup", 2) != cleanup_record_path("d", "r", "grp.cleanup", None)


def test_an_output_roots_registration_keeps_its_name_across_versions():
    # A run registered by an earlier version must be found by this one: the name is the first 12
    # hex digits of the SHA-1 of the root, as every version so far has written it.
    assert output_registration_path("d", "r", "s3://bucket/table") == "runs/d/r/outputs/b029bf15eac8.json"
    assert output_registration_path("d", "r", "s3://bucket/other") != output_registration_path("d", "r", "s3://bucket/table")
