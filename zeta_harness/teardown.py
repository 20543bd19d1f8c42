"""Tear the harness's clusters down when their process is interrupted or exits without stopping them.

Theory of operation
-------------------
A test session, the demo or the chaos soak normally stops each ``AirflowCluster`` it started (a
fixture finalizer, a ``with`` block). Three ways of ending skip that: ``SIGTERM`` (a CI or ``timeout``
time limit: Python's default action ends the process at once, no ``finally`` runs), ``SIGINT``
(Ctrl-C: the ``KeyboardInterrupt`` may land anywhere, pytest then skips finalizers of fixtures not
yet set up, and a second Ctrl-C cuts the rest short), and an interpreter exit with clusters still
up. Each cluster's components run in sessions of their own, so nothing takes them down with the
parent: a run stopped at its time limit once left 42 Airflow processes behind.

So every cluster registers here when it starts its first process (``register``) and leaves when it
stops (``unregister``). On ``SIGTERM`` or ``SIGINT`` the handler installed on the first
registration kills every registered cluster's processes (``kill_leftover_processes``: ``SIGKILL`` by
PID, sessions and the harness marker, never by name), stops each cluster (drops its database,
removes a temporary home), and then hands the signal on to what was installed before: for
``SIGINT`` Python's ``KeyboardInterrupt`` (pytest reports the interruption as usual), for
``SIGTERM`` the default action, so the process still ends by that signal. Further signals that
arrive during the teardown are held back until it is done. ``atexit`` covers the normal exit.
A process driven by a parent that receives the signals instead (a pytest-xdist worker) also
watches that parent (``watch_parent``) and tears down when it is gone.

Handlers can only be installed from the main thread; a cluster started elsewhere first (never the
case in this project) is covered by ``atexit`` alone. Nothing here imports Airflow or pytest.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
from typing import Any, Protocol

HANDLED_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class _Cluster(Protocol):
    def kill_leftover_processes(self) -> list[int]: ...

    def stop(self) -> None: ...


_lock = threading.RLock()
_live: dict[int, _Cluster] = {}
_previous_handlers: dict[int, Any] = {}
_installed = False
_tearing_down = False


def register(cluster: _Cluster) -> None:
    """Track ``cluster`` until ``unregister``; installs the handlers on first use."""
    with _lock:
        _live[id(cluster)] = cluster
        _install()


def unregister(cluster: _Cluster) -> None:
    with _lock:
        _live.pop(id(cluster), None)


def live_clusters() -> list[_Cluster]:
    with _lock:
        return list(_live.values())


def teardown_all(reason: str) -> None:
    """Kill every registered cluster's processes first (fast, all of them), then stop each one."""
    global _tearing_down
    with _lock:
        clusters = list(_live.values())
        if not clusters or _tearing_down:
            return
        _tearing_down = True
    try:
        print(f"zeta harness: {reason}: tearing down {len(clusters)} cluster(s)", file=sys.stderr, flush=True)
        for cluster in clusters:
            with contextlib.suppress(Exception):
                cluster.kill_leftover_processes()
        for cluster in clusters:
            with contextlib.suppress(Exception):
                cluster.stop()
            unregister(cluster)
    finally:
        _tearing_down = False


def watch_parent(parent_pid: int, interval: float = 1.0) -> threading.Thread:
    """In a process that a parent drives (a pytest-xdist worker: its clusters live here, the
    signals go to the parent), tear the clusters down and exit once the parent is gone — killed by
    a time limit, or ended without shutting this process down. The parent's death shows as a new
    parent (re-parented to init or a subreaper)."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            threading.Event().wait(interval)
        teardown_all(f"the parent process {parent_pid} ended")
        os._exit(1)

    thread = threading.Thread(target=watch, name="zeta-parent-watch", daemon=True)
    thread.start()
    return thread


def _install() -> None:
    global _installed
    if _installed:
        return
    _installed = True
    atexit.register(teardown_all, "interpreter exit with clusters still running")
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in HANDLED_SIGNALS:
        _previous_handlers[signum] = signal.getsignal(signum)
        signal.signal(signum, _on_signal)


def _on_signal(signum: int, frame: Any) -> None:
    name = signal.Signals(signum).name
    # Hold back further SIGTERM/SIGINT (an impatient second Ctrl-C) until the processes are gone.
    held = {s: signal.signal(s, signal.SIG_IGN) for s in HANDLED_SIGNALS}
    try:
        teardown_all(f"{name} received")
    finally:
        for s, handler in held.items():
            signal.signal(s, handler)
    previous = _previous_handlers.get(signum, signal.SIG_DFL)
    if callable(previous):
        previous(signum, frame)  # e.g. default_int_handler: KeyboardInterrupt, as without us
    elif previous == signal.SIG_IGN:
        return
    else:  # SIG_DFL: end the process by the same signal, as it would have been without us
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
