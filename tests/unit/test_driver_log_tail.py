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


def test_a_hard_link_is_refused(storage, tmp_path):
    # e.g. a job linking airflow.cfg (same filesystem, readable by its user) in as its driver log
    config = tmp_path / "airflow.cfg"
    config.write_text("[core]\nfernet_key = hunter2\n")
    os.link(config, tmp_path / "state" / "a" / "driver.log")
    with pytest.raises(PermissionError, match="hard links"):
        storage.read_local_tail("a/driver.log", 100)
    with pytest.raises(PermissionError, match="hard links"):
        storage.read_local_range("a/driver.log", 0, 100)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a file another owner")
def test_a_file_of_another_owner_is_refused(storage, tmp_path):
    foreign = tmp_path / "state" / "a" / "driver.log"
    foreign.write_text("someone else's file\n")
    os.chown(foreign, 4242, 4242)
    with pytest.raises(PermissionError, match="owned by uid 4242"):
        storage.read_local_tail("a/driver.log", 100)


def test_a_range_reads_from_an_offset_and_reports_the_size(storage, tmp_path):
    (tmp_path / "state" / "a" / "driver.log").write_bytes(b"0123456789")
    assert storage.read_local_range("a/driver.log", 4, 3) == (b"456", 4, 10)
    assert storage.read_local_range("a/driver.log", 50, 3) == (b"", 10, 10)  # past the end: nothing, no error
    assert storage.read_local_range("a/driver.log", -3, 100) == (b"789", 7, 10)
