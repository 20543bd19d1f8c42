"""Driver bootstrap: the program spark-submit runs; it runs the user's PySpark job unchanged.

Theory of operation
-------------------
``ZetaSparkJobOperator`` submits this file as the application, with a JSON spec and the user's
own arguments::

    spark-submit [options from SparkSubmitHook] .../runtime/driver.py --zeta-spec '{...}' -- ARGS

The bootstrap then

1. **claims** the attempt: writes the ledger (status ``running``, pid, host, first heartbeat);
2. **checks the cancel marker** of its token *after* the claim. A coordinator that gave up on the
   token wrote the marker *before* re-reading the ledger, so either the coordinator sees this claim
   and waits for the driver, or the driver sees the marker and exits here without running the job
   (the fence handshake, see ``core/deploy.py``);
3. installs ``zeta_context()`` and runs the user's file with ``runpy`` as ``__main__`` with
   ``sys.argv = [application, *ARGS]``; once the job has a SparkSession, a listener records a
   checkpoint for every Structured Streaming progress and idle event (``runtime/streaming.py``);
4. meanwhile a heartbeat thread rewrites the ledger every ``heartbeat_interval`` seconds (heartbeat,
   checkpoints, Spark application id and UI URL) and polls the cancel marker; when the marker
   appears it cancels the Spark jobs, writes ``cancelled`` and exits the process;
   the **lease** (``core.ledger.driver_lease``: a fraction of ``lost_after``, counted on
   ``CLOCK_BOOTTIME`` — which keeps counting while the host is suspended — from the *start* of the
   last successful write) ends the process when no write has renewed it in time, whether the
   writes fail or hang: a kernel timer delivers ``SIGKILL`` at the deadline (no code of this
   process runs first, even after a freeze), a separate watchdog process then kills the driver's
   process group (the JVM), and a thread does the same where the kernel timer is unavailable
   (``runtime/lease.py``). No write of any kind *starts* after the lease expired: ``write()``
   checks it first, and so do the job's ``report()`` / ``checkpoint()``. Coordinators count a
   driver as certainly stopped only after its heartbeat has been silent longer than that (plus a
   margin), and only then redeploy;
5. at the end writes the terminal status: ``succeeded`` (with output path, rows and metrics the job
   reported), or ``failed`` with the error. ``SystemExit(0)`` counts as success. The lease stays
   armed through that write: a terminal write that hangs ends the driver like a heartbeat that does.

The driver computes and reports only (G8): it never publishes or deletes anything. Every ledger
write is an atomic replace, and the terminal write happens under the same lock as heartbeats, after
which no heartbeat is written, so the last document a reader sees is the terminal one. The SIGTERM
handler never waits for that lock when it interrupted the very thread that holds it (the lock is
not reentrant): it then leaves the terminal write to that thread, right after its write.

It imports no Airflow module: the environment a task gives its children cannot import Airflow.
"""

from __future__ import annotations

import contextlib
import json
import os
import runpy
import signal
import socket
import sys
import threading
import time
import traceback
from typing import Any

if __package__ in (None, ""):
    # Run as a script by spark-submit: sys.path[0] is this directory, not the package root.
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from airflow_provider_zeta import runtime  # noqa: E402
from airflow_provider_zeta.core.ledger import Ledger, LedgerStatus, driver_lease  # noqa: E402
from airflow_provider_zeta.core.paths import CANCEL_MARKER, INTENT_FILE, LEDGER_FILE  # noqa: E402
from airflow_provider_zeta.processes import host_id  # noqa: E402
from airflow_provider_zeta.runtime import streaming  # noqa: E402
from airflow_provider_zeta.runtime.lease import KernelKillTimer, LeaseWatchdogProcess, lease_now  # noqa: E402
from airflow_provider_zeta.storage import StateStorage  # noqa: E402

EXIT_FAILED = 1
EXIT_FENCED = 3
EXIT_CANCELLED = 143
EXIT_LEASE_LOST = 4
SPEC_FLAG = "--zeta-spec"


class AttemptDeleted(RuntimeError):
    """The attempt's directory was deleted by the cleanup: stop and write nothing."""


class LeaseExpired(RuntimeError):
    """No write renewed the lease in time: a coordinator may count this driver lost. Write nothing."""


class DriverBootstrap:
    """The bootstrap of one attempt: claims it, runs the user's job under the lease and the heartbeat,
    and records how it ended."""

    def __init__(self, spec: dict[str, Any], user_args: list[str]) -> None:
        self.spec = spec
        self.user_args = user_args
        self.token: str = spec["token"]
        self.attempt = StateStorage.from_url(spec["attempt_url"])
        self.heartbeat_interval = float(spec.get("heartbeat_interval", 5))
        # A driver that cannot heartbeat for most of this long stops itself: past lost_after the
        # coordinator counts it as lost and may redeploy, and it might not be able to kill us (we
        # may be on another host, or our cancel marker unreadable).
        self.lost_after = float(spec.get("lost_after", 60))
        self.lease = driver_lease(self.lost_after)
        # Start of the last ledger write that succeeded, on the lease clock (CLOCK_BOOTTIME: it
        # counts while the host is suspended, unlike the monotonic clock): the lease counts from there.
        self._renewed_at = lease_now()
        # The launch started spark-submit in its own session: the group is this driver's (the JVM
        # included), and the lease ends all of it.
        self._kill_group = bool(spec.get("process_group"))
        self._kill_timer: KernelKillTimer | None = None
        self._watchdog_process: LeaseWatchdogProcess | None = None
        self.started_at = time.time()
        self._lock = threading.Lock()
        self._lock_owner: int | None = None  # thread holding _lock (the SIGTERM handler reads it)
        self._pending_signal: int | None = None
        self._beat = 0
        self._host_id = host_id()
        self._terminal = False
        self._spark_seen: tuple[str | None, str | None] = (None, None)
        self._stop = threading.Event()
        self._last_change_write = 0.0
        self.context = runtime.ZetaContext(
            output_path=spec["output_url"],
            source=spec.get("source") or spec["task_id"],
            dag_id=spec["dag_id"],
            run_id=spec["run_id"],
            task_id=spec["task_id"],
            map_index=int(spec.get("map_index", -1)),
            incarnation=int(spec.get("incarnation", 0)),
            token=self.token,
            logical_date=spec.get("logical_date"),
            ds=spec.get("ds"),
            params=dict(spec.get("params") or {}),
            partition=spec.get("partition"),
        )

    # -- ledger

    def _ledger(self, status: LedgerStatus, error: str | None = None) -> Ledger:
        ctx = self.context
        # Remembered once seen: a job that stops its SparkSession before it returns still reports
        # which application it ran in its terminal ledger.
        app_id, ui_url = _spark_identity()
        if app_id is None:
            app_id, ui_url = self._spark_seen
        else:
            self._spark_seen = (app_id, ui_url)
        now = time.time()
        return Ledger(
            token=self.token,
            status=status,
            started_at=self.started_at,
            heartbeat_at=now,
            ended_at=now if status.terminal else None,
            output_path=ctx.output_path,
            rows=ctx.rows,
            last_checkpoint_at=ctx.last_checkpoint_at,
            checkpoints=ctx.checkpoints,
            error=error,
            pid=os.getpid(),
            host=socket.gethostname(),
            spark_app_id=app_id,
            spark_ui_url=ui_url,
            metrics=dict(ctx.metrics),
            dag_id=ctx.dag_id,
            run_id=ctx.run_id,
            task_id=ctx.task_id,
            source=ctx.source,
            incarnation=ctx.incarnation,
            beat=self._beat,
            host_id=self._host_id,
            files=ctx.files if status is LedgerStatus.SUCCEEDED else None,
        )

    def write(self, status: LedgerStatus, error: str | None = None, claim: bool = False) -> bool:
        """Write the ledger unless a terminal status was already written; True when written.

        Only the claim may create the attempt directory, and only while the launch's intent file is
        there (the launch writes it before it starts the driver): a driver that starts, or comes
        out of a hang, after its run's cleanup deleted the attempt stops without claiming — a task
        on another host relies on that after a clear (``earlier_incarnation_cleanup_wait``). After
        the claim, the attempt counts as deleted by the run's cleanup (or the sweep) when the
        launch's intent file is gone — or, for a launch that wrote none, the ledger — whatever else
        the directory holds: the job's own staging writes (``output/`` is inside the attempt) and
        the log shipper re-create the directory at once. Writing would re-create a ledger nobody
        will delete again (a ``succeeded`` one would even be reused), so the driver stops instead,
        and no write after the claim creates a missing directory. A ledger file missing beside the
        intent file is outside damage: the write restores it.
        """
        started = lease_now()
        try:
            with self._lock:
                self._lock_owner = threading.get_ident()
                try:
                    if self._terminal:
                        return False
                    if self.lease_expired():
                        # Past the lease nothing may start: a replacement may be running already.
                        raise LeaseExpired(self.token)
                    if not claim and self._attempt_deleted():
                        self._terminal = True
                        raise AttemptDeleted(self.token)
                    # The launch wrote the intent file into the attempt directory: the claim then
                    # never creates the directory (a check and a write are two steps; the write
                    # without parents closes the gap between them on local storage).
                    intent_written = claim and bool(self.spec.get("intent_file"))
                    make_parents = claim and not intent_written
                    if intent_written and not self.attempt.exists(INTENT_FILE):
                        self._terminal = True
                        raise AttemptDeleted(self.token)
                    self._beat += 1
                    try:
                        self.attempt.write_atomic(
                            LEDGER_FILE, self._ledger(status, error).to_json(), make_parents=make_parents
                        )
                    except FileNotFoundError:
                        if make_parents:
                            raise
                        self._terminal = True
                        raise AttemptDeleted(self.token) from None
                    self._renewed_at = max(self._renewed_at, started)
                    self._arm_lease()
                    if status.terminal:
                        self._terminal = True
                        if self._watchdog_process is not None:
                            # The driver's work is over: its JVM may now shut down in its own time.
                            self._watchdog_process.done()
                    return True
                finally:
                    self._lock_owner = None
        finally:
            if self._pending_signal is not None:
                # SIGTERM arrived while this thread held the lock: act on it now that it is free.
                signum, self._pending_signal = self._pending_signal, None
                self._on_sigterm(signum, None)

    def _attempt_deleted(self) -> bool:
        if self.spec.get("intent_file"):
            return not self.attempt.exists(INTENT_FILE)
        return not self.attempt.exists(LEDGER_FILE)

    def cancel_requested(self) -> bool:
        """Whether the coordinator wrote the attempt's cancel marker."""
        return self.attempt.exists(CANCEL_MARKER)

    # -- heartbeat

    def _heartbeat_loop(self) -> None:
        # At least three beats per lease, whatever the configured interval: the settings only
        # require the interval below the lease, and the wait starts when the previous write ended
        # (the lease counts from when it started), so an interval near the lease would leave no room
        # for a slow write or a scheduling stall before the kernel timer ends a healthy driver.
        while not self._stop.wait(min(self.heartbeat_interval, self.lease / 3)):
            try:
                if self.cancel_requested():
                    self._cancel()
                    return
                self.write(LedgerStatus.RUNNING)
            except AttemptDeleted:
                self._stop_deleted()
            except LeaseExpired:
                self._lease_lost()
            except Exception:  # a flaky store must not kill the job at once; the lease bounds it
                traceback.print_exc()

    def lease_expired(self, now: float | None = None) -> bool:
        """No write that started within the lease has succeeded: coordinators may soon count us lost."""
        return (lease_now() if now is None else now) - self._renewed_at > self.lease

    def _start_lease(self) -> None:
        """Arm the kernel timer and start the watchdog process at the first deadline."""
        deadline = self._renewed_at + self.lease
        try:
            self._kill_timer = KernelKillTimer()
        except (OSError, AttributeError) as unavailable:
            print(f"[zeta] no kernel lease timer ({unavailable}); the lease watchdog thread enforces the lease", file=sys.stderr)
        try:
            self._watchdog_process = LeaseWatchdogProcess(deadline, self.lease, self._kill_group)
        except OSError as unavailable:
            print(f"[zeta] no lease watchdog process ({unavailable})", file=sys.stderr)
        self._arm_lease()

    def _arm_lease(self) -> None:
        deadline = self._renewed_at + self.lease
        if self._kill_timer is not None:
            self._kill_timer.arm(deadline)
        if self._watchdog_process is not None:
            self._watchdog_process.renew(deadline)

    def _lease_lost(self) -> None:
        """End the driver now, with no I/O first: no print to a pipe a hung mount drains, no py4j
        call (the watchdog process says why, after the kill)."""
        if self._kill_group:
            with contextlib.suppress(OSError):
                os.killpg(os.getpgid(0), signal.SIGKILL)
        os._exit(EXIT_LEASE_LOST)

    def _watchdog_loop(self) -> None:
        # Its own thread and deadline: a heartbeat write that hangs (a stuck NFS mount, an object
        # store that never answers) blocks the heartbeat thread, never this one. The kernel timer
        # normally ends the process first; this covers a host without one.
        period = max(0.05, min(1.0, self.lease / 20))
        while not self._stop.wait(period):
            if self.lease_expired():
                self._lease_lost()

    def _stop_deleted(self) -> None:
        print(
            f"[zeta] the ledger of attempt {self.token} was deleted by the run's cleanup: stopping, writing nothing",
            file=sys.stderr,
            flush=True,
        )
        _cancel_spark_jobs()
        os._exit(EXIT_CANCELLED)

    def _cancel(self) -> None:
        print(f"[zeta] cancel marker found for attempt {self.token}: stopping the driver", file=sys.stderr, flush=True)
        _cancel_spark_jobs()
        with contextlib.suppress(AttemptDeleted, LeaseExpired):
            self.write(LedgerStatus.CANCELLED, error="cancelled by the coordinator (cancel marker)")
        sys.stderr.flush()
        os._exit(EXIT_CANCELLED)

    # -- main

    def _on_sigterm(self, signum, frame) -> None:
        # Stopped from outside (a coordinator after its grace, or the host shutting down): leave a
        # terminal ledger behind instead of one that only goes stale. The handler runs in the main
        # thread between two bytecodes: if that thread is inside write() it holds the (non-
        # reentrant) lock, and taking it here would deadlock. Then write() finishes its document
        # and calls back here on its way out.
        if self._lock_owner == threading.get_ident():
            self._pending_signal = signum
            return
        why = "cancelled by the coordinator (cancel marker)" if self.cancel_requested() else f"terminated by signal {signum}"
        status = LedgerStatus.CANCELLED if self.cancel_requested() else LedgerStatus.FAILED
        _cancel_spark_jobs()
        with contextlib.suppress(AttemptDeleted, LeaseExpired):
            self.write(status, error=why)
        sys.stderr.flush()
        os._exit(EXIT_CANCELLED)

    def run(self) -> int:
        """Claim the attempt, run the user's job unless fenced or past the lease, and record how it
        ended; returns the exit status."""
        signal.signal(signal.SIGTERM, self._on_sigterm)
        self._start_lease()
        try:
            self.write(LedgerStatus.RUNNING, claim=True)  # 1. claim
        except AttemptDeleted:
            print(
                f"[zeta] attempt {self.token} was deleted (its intent file is gone) before this driver "
                "claimed it: the run's cleanup ran; not running the job",
                file=sys.stderr,
                flush=True,
            )
            return EXIT_CANCELLED
        if self.lease_expired():
            # The claim took longer than the lease (a hung write that came back): a coordinator
            # may have counted this attempt lost or deleted meanwhile; run no user code.
            print(f"[zeta] attempt {self.token}: the claim outlasted the lease; not running the job", file=sys.stderr)
            return EXIT_LEASE_LOST
        if self.cancel_requested():  # 2. fence check, strictly after the claim
            self.write(LedgerStatus.CANCELLED, error="fenced before start: the coordinator gave up on this attempt")
            print(f"[zeta] attempt {self.token} was fenced before it started; not running the job", file=sys.stderr)
            return EXIT_FENCED
        self.context._on_change = self._on_context_change
        runtime._install(self.context)
        beat = threading.Thread(target=self._heartbeat_loop, name="zeta-heartbeat", daemon=True)
        beat.start()
        threading.Thread(target=self._watchdog_loop, name="zeta-lease-watchdog", daemon=True).start()
        # Streaming progress and idle events record checkpoints as soon as the job's SparkSession exists.
        streaming.SessionWatcher(self.context.checkpoint, self._stop).start()
        try:
            # The heartbeat and the lease watchdog run until the terminal write is done: a terminal
            # write that hangs is inside the lease like any other.
            return self._run_job()
        finally:
            self._stop.set()

    def _run_job(self) -> int:
        application = self.spec["application"]
        sys.argv = [application, *self.user_args]
        try:
            runpy.run_path(application, run_name="__main__")
        except SystemExit as exit_:
            if exit_.code not in (None, 0):
                return self._finish_failed(f"the job exited with status {exit_.code!r}")
        except BaseException as error:  # the job's own failure, reported in the ledger
            traceback.print_exc()
            return self._finish_failed(f"{type(error).__name__}: {error}"[:2000])
        # Listed while the heartbeat and the lease watchdog still run: a large or remote staging
        # directory may take longer than the lease, and a silent driver would be judged lost.
        try:
            self.context._record_staged_files()
        except Exception as error:  # an unreadable staging directory is this attempt's failure
            traceback.print_exc()
            return self._finish_failed(f"could not list the staged output: {type(error).__name__}: {error}"[:2000])
        return self._finish(LedgerStatus.SUCCEEDED, None, 0)

    def _finish_failed(self, error: str) -> int:
        return self._finish(LedgerStatus.FAILED, error, EXIT_FAILED)

    def _finish(self, status: LedgerStatus, error: str | None, exit_code: int) -> int:
        try:
            self.write(status, error=error)
        except AttemptDeleted:
            print(f"[zeta] attempt {self.token} was cleaned up before it ended; its result is dropped", file=sys.stderr)
            return EXIT_CANCELLED
        except LeaseExpired:
            self._lease_lost()
        return exit_code

    def _on_context_change(self) -> None:
        # Checkpoints and reports reach the ledger promptly, not only at the next heartbeat, but
        # at most once a second: a streaming query may checkpoint far more often than that. Past
        # the lease the job's thread goes no further (a report after it must not reach anything).
        if self.lease_expired():
            self._lease_lost()
        now = time.monotonic()
        if now - self._last_change_write < 1.0:
            return
        self._last_change_write = now
        try:
            self.write(LedgerStatus.RUNNING)
        except AttemptDeleted:
            self._stop_deleted()
        except LeaseExpired:
            self._lease_lost()
        except Exception:
            traceback.print_exc()


def _spark_identity() -> tuple[str | None, str | None]:
    try:
        from pyspark import SparkContext

        sc = SparkContext._active_spark_context
        if sc is None:
            return None, None
        return sc.applicationId, sc.uiWebUrl
    except Exception:
        return None, None


def _cancel_spark_jobs() -> None:
    try:
        from pyspark import SparkContext

        sc = SparkContext._active_spark_context
        if sc is not None:
            sc.cancelAllJobs()
    except Exception:
        traceback.print_exc()


def parse_argv(argv: list[str]) -> tuple[dict[str, Any], list[str]]:
    """The spec and the user's arguments from ``--zeta-spec JSON [-- ARGS...]``."""
    if len(argv) < 2 or argv[0] != SPEC_FLAG:
        raise SystemExit(f"usage: driver.py {SPEC_FLAG} JSON [-- ARGS...] (got {argv[:2]!r})")
    spec = json.loads(argv[1])
    rest = argv[2:]
    if rest and rest[0] == "--":
        rest = rest[1:]
    return spec, rest


#: The driver's output, ledger and staging may hold every secret the deploy rendered into the job:
#: what this process (and the job inside it) creates is private to the user it runs as.
PRIVATE_UMASK = 0o077


def make_attempt_private(attempt: StateStorage) -> None:
    """On a local state root: the attempt directory 0700 and what the launcher already put in it
    (the intent file, ``driver.log``, which spark-submit writes) 0600. Symbolic links are left
    alone (never followed); nothing here is worth failing the driver for."""
    import stat

    local = attempt.local_path()
    if local is None:
        return
    with contextlib.suppress(OSError):
        if not stat.S_ISDIR(os.lstat(local).st_mode):
            return
        os.chmod(local, 0o700)
        with os.scandir(local) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):
                    if entry.is_dir(follow_symlinks=False):
                        os.chmod(entry.path, 0o700)
                    elif entry.is_file(follow_symlinks=False):
                        os.chmod(entry.path, 0o600)


def main(argv: list[str] | None = None) -> int:
    """The driver's entry point: read the spec, make the attempt private, run the bootstrap."""
    os.umask(PRIVATE_UMASK)
    spec, user_args = parse_argv(sys.argv[1:] if argv is None else argv)
    bootstrap = DriverBootstrap(spec, user_args)
    make_attempt_private(bootstrap.attempt)
    return bootstrap.run()


if __name__ == "__main__":
    sys.exit(main())
