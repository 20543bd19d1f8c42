"""Durations as users write them: one parser for every duration parameter and ``[zeta]`` option.

Airflow's own durations (``retry_delay``, ``execution_timeout``, a sensor's ``timeout``) accept a
``datetime.timedelta``; users also write plain seconds. Every duration of this provider therefore
accepts:

- a ``datetime.timedelta`` (``timedelta(minutes=10)``);
- a number of seconds, ``int`` or ``float`` (``600``, ``0.5``);
- a string holding either, as a rendered template or an ``airflow.cfg`` value gives it: a number
  (``"600"``, ``" 2.5 "``) or what ``str(timedelta)`` prints (``"0:10:00"``, ``"1 day, 2:00:00"``),
  since a Jinja expression yielding a ``timedelta`` renders to that text.

Anything else — a bool, ``None`` where a value is required, NaN or infinity, a negative duration,
zero where the duration must be positive, other text — is an error naming the parameter and
saying what to pass. The parser is pure (no I/O) and returns seconds as a ``float``, which is what
the operators compute deadlines from (triggers serialize absolute deadlines, never durations).
"""

from __future__ import annotations

import math
import re
from datetime import timedelta

#: What a duration parameter accepts (see the module docstring).
Duration = timedelta | int | float | str

# What ``str(timedelta)`` prints: "[-]N day[s], H:MM:SS[.ffffff]" or "H:MM:SS[.ffffff]".
_TIMEDELTA_TEXT = re.compile(
    r"^(?:(?P<days>-?\d+) days?, )?(?P<hours>\d+):(?P<minutes>[0-5]\d):(?P<seconds>[0-5]\d(?:\.\d+)?)$"
)


class InvalidDuration(ValueError):
    """A duration parameter or option holds something that is not a duration."""


def duration_seconds(value: object, name: str, *, allow_zero: bool = False) -> float:
    """Seconds of ``value``, a duration given as a ``timedelta``, a number or a string of either.

    :param name: how the user knows the parameter, used in the error, e.g. ``"deploy_emea:
        'lost_after'"`` or ``"[zeta] poll_interval"``.
    :param allow_zero: accept a zero duration (a retention window may be zero; intervals may not).
    :raises InvalidDuration: (a ``ValueError``) for anything that is not a finite duration >= 0,
        or zero when ``allow_zero`` is false.
    """
    seconds = _parse(value)
    if seconds is None or not math.isfinite(seconds):
        raise InvalidDuration(
            f"{name} must be a duration: a datetime.timedelta or a number of seconds "
            f"(e.g. timedelta(minutes=10) or 600), got {value!r}"
        )
    if seconds < 0 or (seconds == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "positive"
        raise InvalidDuration(f"{name} must be a {bound} duration, got {value!r}")
    return seconds


def duration_or_default(value: object, default: float, name: str, *, allow_zero: bool = False) -> float:
    """``duration_seconds(value)``, or ``default`` when the parameter was left unset (None or "")."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return default
    return duration_seconds(value, name, allow_zero=allow_zero)


def check_duration_unless_template(value: object, name: str, *, allow_zero: bool = False) -> None:
    """Validate at DAG parse time what is already a value; a Jinja template is checked once rendered.

    Unset (None) passes: the operator falls back to its ``[zeta]`` default at run time.
    """
    if value is None or (isinstance(value, str) and ("{{" in value or "{%" in value)):
        return
    duration_seconds(value, name, allow_zero=allow_zero)


def _parse(value: object) -> float | None:
    if isinstance(value, bool):  # a bool is an int to Python, never a duration to a user
        return None
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        try:
            return float(text)
        except ValueError:
            pass
        match = _TIMEDELTA_TEXT.match(text)
        if match:
            return timedelta(
                days=int(match["days"] or 0),
                hours=int(match["hours"]),
                minutes=int(match["minutes"]),
                seconds=float(match["seconds"]),
            ).total_seconds()
    return None
