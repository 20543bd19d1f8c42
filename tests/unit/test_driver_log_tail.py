"""The driver log tail the page serves never follows a link out of the state root."""

from __future__ import annotations

import os

import pytest

from airflow_provider_zeta.storage import StateStorage


@pytest.fixture
def storage(tmp_path):
    root = tmp_path / "state"
    (root / "a").mkdir(parents=True)
    return StateStorage.from_url(str(root))


def test_the_tail_of_a_regular_file(storage, tmp_path):
    (tmp_path / "state" / "a" / "driver.log").write_bytes(b"x" * 100 + b"last line\n")
    assert storage.read_local_tail("a/driver.log", 10) == b"last line\n"
    assert storage.read_local_tail("a/driver.log", 1000).endswith(b"last line\n")
    assert storage.read_local_tail("a/missing.log", 10) is None


def test_a_symbolic_link_is_refused(storage, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("hunter2")
    os.symlink(secret, tmp_path / "state" / "a" / "driver.log")
    with pytest.raises(PermissionError, match="symbolic link"):
        storage.read_local_tail("a/driver.log", 100)


def test_a_symbolic_link_inside_the_root_is_refused_too(storage, tmp_path):
    (tmp_path / "state" / "a" / "other.log").write_text("x")
    os.symlink(tmp_path / "state" / "a" / "other.log", tmp_path / "state" / "a" / "driver.log")
    with pytest.raises(PermissionError):
        storage.read_local_tail("a/driver.log", 100)


def test_a_directory_leading_out_of_the_root_is_refused(storage, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "driver.log").write_text("hunter2")
    os.symlink(outside, tmp_path / "state" / "b")
    with pytest.raises(PermissionError, match="outside the state root"):
        storage.read_local_tail("b/driver.log", 100)


def test_a_fifo_is_refused_without_blocking(storage, tmp_path):
    os.mkfifo(tmp_path / "state" / "a" / "driver.log")
    with pytest.raises(PermissionError, match="regular file"):
        storage.read_local_tail("a/driver.log", 100)
