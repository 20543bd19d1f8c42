"""Not collected by the suite: a seeded test that fails, run by ``tests/test_failure_reports.py``."""


def test_seeded_and_failing(chaos_seed):
    assert chaos_seed < 0, "fails on purpose"
