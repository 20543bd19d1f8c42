"""Edges of the OpenLineage naming rules (core/lineage.py): the schemes read as local files, a
connection id before the location, partition values holding ``=``, and row counts only when every
source reported one."""

from __future__ import annotations

import pytest

from airflow_provider_zeta.core.lineage import dataset_name, partition_dimensions, rows_written


def test_an_empty_output_root_is_refused_saying_what_it_must_be():
    with pytest.raises(ValueError) as refused:
        dataset_name("")
    assert str(refused.value) == "output_root is empty: it must be the output table's root path or URL"


@pytest.mark.parametrize("root", ["file:///data/out/", "local:///data/out", "LOCAL:///data/./out", "/data/out"])
def test_local_file_urls_and_paths_name_the_same_file_dataset(root):
    assert dataset_name(root) == ("file", "/data/out")


def test_a_file_url_with_a_host_part_is_read_as_a_relative_path_and_refused():
    with pytest.raises(ValueError, match="'data/out' is a relative path"):
        dataset_name("file://data/out")


def test_the_location_is_what_follows_the_last_at_sign_of_the_authority():
    assert dataset_name("s3a://my_conn@extra@bucket/table") == ("s3://bucket", "table")


def test_only_slashes_are_stripped_from_the_front_of_an_object_name():
    assert dataset_name("s3://bucket/XYZ/table") == ("s3://bucket", "XYZ/table")
    assert dataset_name("s3://bucket/") == ("s3://bucket", "/")


def test_a_partition_value_may_hold_an_equals_sign():
    assert partition_dimensions("ds=2026-06-01/expr=a=b") == {"ds": "2026-06-01", "expr": "a=b"}


@pytest.mark.parametrize("rows, total", [({"a": 3, "b": 4}, 7), ({"a": 3, "b": None}, None), ({}, None)])
def test_the_row_count_is_known_only_when_every_source_reported_one(rows, total):
    assert rows_written({"rows": rows}) == total
