"""Which task instance an event is for (core/events.py): an unmapped task's map index may be
written as -1 or left out (None), and both name the same instance; any other index does not."""

from __future__ import annotations

import pytest

from airflow_provider_zeta.core.events import event_is_for, task_key


@pytest.mark.parametrize(
    "theirs, ours, same",
    [
        (None, -1, True),
        (-1, None, True),
        (None, None, True),
        (1, None, False),
        (None, 1, False),
        (1, -1, False),
        (2, 2, True),
        ("3", 3, True),  # a map index that went through JSON as text
    ],
)
def test_an_unmapped_task_is_named_by_map_index_minus_one_or_none(theirs, ours, same):
    event = {"task_key": {**task_key("d", "r", "t"), "map_index": theirs}}
    own = {**task_key("d", "r", "t"), "map_index": ours}
    assert event_is_for(event, own) is same
