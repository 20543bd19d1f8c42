"""The multi-host test's oracles over the jobs' own start/end log (zeta_harness/chaos.py), on hand-made logs."""

from zeta_harness.chaos import driver_lives, overlapping_drivers, relaunches


def start(token, at, host="h1", ns="pid:[1]", task="p.deploy_a", source="a"):
    return {"token": token, "at": at, "task": task, "source": source, "run_id": "r", "incarnation": 0, "host": host, "pid_namespace": ns}


def end(token, at):
    return {"token": token, "source": "a", "end": at}


def test_a_driver_killed_with_its_host_ends_at_the_kill_and_a_later_redeploy_does_not_overlap():
    log = [start("A", 10), start("B", 30, host="h2", ns="pid:[2]"), end("B", 40)]
    lives = driver_lives(log, host_kills={"h1": 25.0}, now=100)
    assert [(life.token, life.end, life.ended_by) for life in lives] == [("A", 25.0, "host_killed"), ("B", 40, "end")]
    assert overlapping_drivers(lives) == []


def test_a_redeploy_before_the_old_driver_died_is_an_overlap_of_the_measured_seconds():
    log = [start("A", 10), start("B", 20, host="h2", ns="pid:[2]"), end("B", 40)]
    (first, second, seconds), = overlapping_drivers(driver_lives(log, host_kills={"h1": 25.0}, now=100))
    assert (first.token, second.token, seconds) == ("A", "B", 5.0)


def test_a_driver_without_end_on_a_host_nobody_killed_is_alive_until_now():
    log = [start("A", 10), start("B", 20, host="h2", ns="pid:[2]"), end("B", 30)]
    lives = driver_lives(log, host_kills={}, now=50)
    assert lives[0].ended_by == "open"
    assert [seconds for _, _, seconds in overlapping_drivers(lives)] == [10]


def test_drivers_of_different_tasks_never_overlap_each_other():
    log = [start("A", 10), start("B", 10, task="p.deploy_b", source="b")]
    assert overlapping_drivers(driver_lives(log, host_kills={}, now=50)) == []


def test_a_completed_job_launched_again_is_a_violation_and_a_redeploy_after_death_is_counted():
    violations, redeploys = relaunches([start("A", 1), end("A", 2), start("B", 3)])
    assert len(violations) == 1 and "A ran to its end" in violations[0] and redeploys == {}
    violations, redeploys = relaunches([start("A", 1), start("B", 3)])
    assert violations == [] and redeploys == {("r", "a", 0): 1}
