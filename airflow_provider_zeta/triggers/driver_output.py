"""The driver's output in the deploy task's log: read incrementally by the driver trigger.

Purpose
    spark-submit's output (the job's prints, Spark's log) goes to ``driver.log`` in the attempt's
    directory. While the task waits deferred, ``ZetaDriverTrigger`` calls ``DriverOutput.poll``
    on every look at the ledger and logs each new line through its own ``self.log``. Airflow writes
    a trigger's log lines into the log of the task instance's current try, so the driver's output is
    in the task's Logs tab, stored by remote logging like any task log, and passes Airflow's secrets
    masker on the way (the triggerer's log processors apply ``mask_logs``).

How it works
    * **Masking, by value first.** Before the first line, ``register_secrets`` fetches every
      connection the driver can reach — the operator's Spark connection and each ``AIRFLOW_CONN_*``
      in the driver's environment (``connections_visible_to_driver``) — through the Task SDK, and
      registers their passwords and the extras' values under sensitive names (this provider's key
      test and ``[core] sensitive_var_conn_names``) with Airflow's masker. The values only the
      worker knows (a connection defined in its environment or in ``env_vars``, sensitive
      ``env_vars``/``conf`` entries and flags, ``core.redaction.driver_secret_values``) come sealed
      with Airflow's Fernet key in the kwargs (``seal_driver_secrets``), which Airflow stores
      unencrypted, and are registered too. Every value is registered with its printed variants
      (``core.redaction.secret_variants``). Each line then passes ``mask_by_value`` whole (Airflow's
      masker, then the registered values longest first) *before* ``core.redaction.redact``'s
      patterns, which only see what is left: a pattern that stops at ``&`` or ``,`` can no longer
      cut a registered value in two.
    * **Bounded.** One poll reads at most ``max_bytes`` (64 KiB) and logs only complete lines; a
      line longer than ``max_line`` is cut. A driver that writes faster than that is followed with a
      lag, never by reading the whole file at once. A cut never falls inside a registered value
      (``safe_cut``): each piece is masked alone, so a value across it would leak in halves.
    * **Offset.** The offset of the next unread byte is kept in the attempt directory
      (``driver.log.offset``, replaced atomically after each poll that advanced), and the one at
      defer time is in the trigger's kwargs; a new trigger — after a triggerer restart, or the next
      deferral of the same attempt — starts from the larger of the two. A restart repeats at most
      the lines of the poll that was running when it died; it never loses any. A log that became
      shorter than the offset (replaced) is read again from its start.
    * **Safety.** The file is opened with ``StateStorage.read_local_range``: a symbolic link, a
      hard link, a FIFO, a file of another owner, or a path leading out of the state root is
      refused (the job can write its attempt directory).

    * **Object stores.** Where the state root is not a filesystem (``s3://``, ``gs://``), the
      launcher runs spark-submit behind ``runtime/log_shipper.py``, which uploads the output as
      numbered chunks closed by an end marker; the same reader follows them as one stream
      (``StateStorage.chunk_stream``: after the first listing, only the chunks after those already
      seen are looked up), never re-reads a stream that looks shorter (a chunk still on its way),
      takes an unterminated last line only once the end marker is there, and after the driver
      ended waits up to ``SETTLE_SECONDS`` for it (``settle``).

What it does not do
    It masks only what Airflow was told about or what
    looks like a credential: a bare secret the job generated itself and prints is not known to
    either. It makes no coordination decision.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from airflow_provider_zeta.airflow_internals import fernet, masker_hides_key, masker_redact
from airflow_provider_zeta.core.paths import DRIVER_LOG, DRIVER_LOG_CHUNKS
from airflow_provider_zeta.core.redaction import (
    MASK,
    PEM_BEGIN,
    PEM_END,
    driver_secret_values,
    is_sensitive_key,
    redact,
    secret_variants,
)

OFFSET_FILE = "driver.log.offset"
MAX_BYTES_PER_POLL = 64 * 1024
MAX_LINE = 8 * 1024
#: How long the trigger of an ended driver waits for the shipped output's last chunk (object stores).
SETTLE_SECONDS = 15.0
LINE_PREFIX = "[driver] "
CONN_ENV_PREFIX = "AIRFLOW_CONN_"
_log = logging.getLogger(__name__)


def connections_visible_to_driver(conn_id: str | None, environment: Mapping[str, str]) -> list[str]:
    """Connection ids whose secrets the driver can print: the operator's own and each one its
    environment defines (``AIRFLOW_CONN_<ID>``), which the driver inherits from the worker."""
    found = {conn_id} if conn_id else set()
    for name in environment:
        if name.startswith(CONN_ENV_PREFIX) and len(name) > len(CONN_ENV_PREFIX):
            found.add(name[len(CONN_ENV_PREFIX) :].lower())
    return sorted(found)


def split_lines(data: bytes, max_line: int, final: bool, keep_whole: Sequence[bytes] = ()) -> tuple[list[str], int]:
    """Complete lines of ``data`` (decoded, without newline) and how many bytes they used.

    An unterminated rest is left for the next poll unless it is longer than ``max_line`` or this is
    the ``final`` read (the driver has ended), then it is taken as it is. A line longer than
    ``max_line`` is cut into pieces, never inside one of ``keep_whole`` (the registered secret
    values: each piece is masked alone, so a value across a cut would reach the log in halves);
    a cut whose value might continue past what was read waits for the next poll.
    """
    lines: list[str] = []
    used = 0
    longest = max((len(value) for value in keep_whole), default=0)
    while used < len(data):
        newline = data.find(b"\n", used, used + max_line + 1)
        if newline < 0:
            rest = len(data) - used
            if rest > max_line:
                if not final and used and rest < max_line + longest:
                    break  # the piece's end is not all here yet: next poll, from this line's piece
                cut = safe_cut(data, used, used + max_line, keep_whole)
                lines.append(data[used:cut].decode(errors="replace") + " …(line cut)")
                used = cut
                continue
            if final and rest:
                lines.append(data[used:].decode(errors="replace"))
                used = len(data)
            break
        lines.append(data[used:newline].decode(errors="replace").rstrip("\r"))
        used = newline + 1
    return lines, used


def safe_cut(data: bytes, start: int, cut: int, values: Sequence[bytes], rounds: int = 64) -> int:
    """``cut`` moved so that no occurrence of any of ``values`` in ``data`` spans it: before the
    occurrence, or after it when it begins the piece (a piece is then longer than the cut). Also
    never inside a UTF-8 character."""
    for _ in range(rounds):
        moved = False
        for value in values:
            size = len(value)
            if size < 2:
                continue
            found = data.find(value, max(start, cut - size + 1), min(len(data), cut + size - 1))
            if 0 <= found < cut < found + size:
                cut = found if found > start else found + size
                moved = True
        if not moved:
            break
    while start < cut < len(data) and (data[cut] & 0xC0) == 0x80:  # a UTF-8 continuation byte
        cut -= 1
    return cut if cut > start else min(len(data), start + 1)


class DriverOutput:
    """Reads ``driver.log`` of one attempt from ``offset`` on, a bounded slice per poll."""

    def __init__(
        self,
        state_root: str,
        attempt_dir: str,
        offset: int = 0,
        conn_ids: Iterable[str] = (),
        sealed_secrets: str | None = None,
        max_bytes: int = MAX_BYTES_PER_POLL,
        max_line: int = MAX_LINE,
    ) -> None:
        self.state_root = state_root
        self.attempt_dir = attempt_dir
        self.offset = max(0, int(offset))
        self.conn_ids = list(conn_ids)
        self.sealed_secrets = sealed_secrets
        self.max_bytes = max_bytes
        self.max_line = max_line
        self._attempt = None
        self._resumed = False
        self._refusal_logged = False
        # Inside a PEM private key block that began on an earlier line (lines are masked one by
        # one, so the block's state is carried, and kept with the offset across a restart).
        self.in_private_key = False
        self._stream = None  # the shipped chunks seen so far (object stores: core.paths.ChunkStream)

    # ------------------------------------------------------------------ trigger side

    @classmethod
    def from_kwargs(cls, state_root: str, attempt_dir: str, kwargs: Mapping[str, Any] | None) -> DriverOutput | None:
        """The reader the trigger's ``driver_output`` kwargs describe; ``None`` when it streams no output."""
        if not kwargs:
            return None
        return cls(
            state_root, attempt_dir, int(kwargs.get("offset") or 0), kwargs.get("conn_ids") or (), kwargs.get("sealed_secrets")
        )

    def to_kwargs(self) -> dict[str, Any]:
        """The kwargs that re-create this reader at its current offset."""
        return {"offset": self.offset, "conn_ids": list(self.conn_ids), "sealed_secrets": self.sealed_secrets}

    async def register_secrets(self, log) -> None:
        """Let Airflow's masker know the secrets of every connection the driver can reach, and
        each one's variants (``core.redaction.secret_variants``)."""
        from airflow.sdk import BaseHook

        for conn_id in self.conn_ids:
            try:
                connection = await BaseHook.aget_connection(conn_id)  # masks password and extra
                extra = await connection.aextra_dejson()  # masks extra values under sensitive key names
                values = driver_secret_values({}, {}, (), [{"password": connection.password, "extra": extra}], _sensitive_name)
                await aregister_secret_values(values)
            except Exception as error:  # an unknown id in the environment is not an error here
                log.info("zeta.driver_output: connection %r not registered for masking: %s", conn_id, type(error).__name__)
        if self.sealed_secrets:
            try:
                values = unseal_secrets(self.sealed_secrets)
            except Exception as error:  # a triggerer without the workers' [core] fernet_key
                log.warning(
                    "zeta.driver_output: the secret values the deploy task handed over cannot be decrypted here "
                    "(%s; does this triggerer have the workers' [core] fernet_key?): they are not masked by value",
                    type(error).__name__,
                )
                return
            await aregister_secret_values(values)

    def _storage(self):
        if self._attempt is None:
            from airflow_provider_zeta.settings import open_state_storage

            self._attempt = open_state_storage(self.state_root).child(self.attempt_dir)
        return self._attempt

    @property
    def is_local(self) -> bool:
        """Whether the attempt's storage is local."""
        return bool(self._storage().is_local)

    def _resume_offset(self) -> None:
        """Once: continue from the offset a previous trigger of this attempt recorded, if larger."""
        if self._resumed:
            return
        self._resumed = True
        raw = self._storage().read_bytes(OFFSET_FILE)
        try:
            fields = (raw or b"0").decode().split()
            recorded = int(fields[0]) if fields else 0
        except (UnicodeDecodeError, ValueError):
            recorded, fields = 0, []  # the job can write here; a bad value only costs a repetition
        if recorded > self.offset:
            self.offset = recorded
            self.in_private_key = "private-key" in fields[1:]

    def poll(self, final: bool = False) -> list[str]:
        """The next complete lines (masked by form; Airflow masks by value when they are logged).

        ``final``: the driver has ended; an unterminated last line is taken too. Blocking I/O: call
        it in a thread from the trigger's event loop.
        """
        storage = self._storage()
        self._resume_offset()
        try:
            found = self._read(self.offset, self.max_bytes, final)
        except PermissionError as refused:
            if self._refusal_logged:
                return []
            self._refusal_logged = True
            return [f"(driver output not streamed: {refused})"]
        if found is None:
            return []
        data, start, size, complete = found
        lines: list[str] = []
        if size < self.offset:
            if not storage.is_local:  # shipped chunks only grow: a chunk still on its way
                return []
            # the log was replaced by a shorter one: read it from its start
            lines.append(f"(driver log shrank from {self.offset} to {size} bytes: reading it again from the start)")
            self.offset = 0
            found = self._read(0, self.max_bytes, final)
            if found is None:
                return lines
            data, start, size, complete = found
        # The last, unterminated line counts only when nothing can follow it.
        text_lines, used = split_lines(
            data, self.max_line, final and complete and start + len(data) >= size, keep_whole=registered_values_bytes()
        )
        lines.extend(self._mask(text_lines))
        if used:
            self.offset = start + used
            storage.write_atomic(OFFSET_FILE, f"{self.offset}{' private-key' if self.in_private_key else ''}".encode())
        return lines

    def _mask(self, lines: list[str]) -> list[str]:
        """Each line whole through Airflow's value masker first (``mask_driver_line``), then
        ``redact``'s patterns over what is left, carrying "inside a private key block" from line to
        line."""
        masked = []
        for line in lines:
            line = mask_by_value(line)
            if self.in_private_key:
                end = PEM_END.search(line)
                if end is None:
                    masked.append(MASK)
                    continue
                self.in_private_key = False
                line = MASK + line[end.start() :]
            shown = redact(line) or ""
            last_begin = None
            for last_begin in PEM_BEGIN.finditer(line):  # noqa: B007 - the last BEGIN of the line counts
                pass
            if last_begin is not None and PEM_END.search(line, last_begin.end()) is None:
                self.in_private_key = True
            masked.append(shown)
        return masked

    def _read(self, offset: int, max_bytes: int, with_end: bool = False) -> tuple[bytes, int, int, bool] | None:
        """``(data, start, size, complete)`` of the driver's output: ``driver.log`` on a local or
        mounted state root (complete: the file is all there is), the chunks ``runtime/log_shipper.py``
        ships elsewhere (complete once its end marker is there; looked up only ``with_end``)."""
        storage = self._storage()
        if storage.is_local:
            found = storage.read_local_range(DRIVER_LOG, offset, max_bytes)
            return None if found is None else (*found, True)
        stream = self._chunks(with_end)
        if stream is None:
            return None
        return (*storage.read_stream_range(DRIVER_LOG_CHUNKS, stream, offset, max_bytes), stream.complete)

    def _chunks(self, with_end: bool):
        """The shipped stream as it is now, looked up from what was seen before (object stores)."""
        stream = self._storage().chunk_stream(DRIVER_LOG_CHUNKS, known=self._stream, with_end=with_end)
        if stream is not None:
            self._stream = stream
        return stream

    def reached_end(self) -> bool:
        """Whether every byte of the log has been logged (after ``drain``: the driver ended). A log
        that is absent or refused counts as done: a worker could log no more of it either. A
        shipped log (object store) counts as done only once its end marker is there: until then
        its last chunks may still be on their way."""
        storage = self._storage()
        if not storage.is_local:
            stream = self._chunks(with_end=True)
            return stream is not None and stream.complete and stream.size <= self.offset
        try:
            found = storage.read_local_range(DRIVER_LOG, self.offset, 0)  # only the size
        except PermissionError:
            return True
        return found is None or found[2] <= self.offset

    def settled(self) -> bool:
        """Whether the whole output is readable now that the driver ended: always on a local state
        root (the file is the output); on an object store once the shipper wrote its end marker."""
        if self._storage().is_local:
            return True
        stream = self._chunks(with_end=True)
        return stream is not None and stream.complete

    async def settle(self, timeout: float = SETTLE_SECONDS, pause: float = 0.5) -> bool:
        """Wait (up to ``timeout``) until ``settled``: the shipper uploads the output's last chunk a
        moment after the driver wrote its terminal ledger. False when it did not in time (the
        shipper was killed with the driver, or the store is slow): the task that resumes logs the
        rest it finds."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                if await asyncio.to_thread(self.settled):
                    return True
            except Exception:  # unreachable for a moment: as not settled yet
                _log.info("zeta.driver_output: could not look at the shipped output", exc_info=True)
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(pause)

    def drain(self, max_polls: int = 16) -> list[str]:
        """Everything left after the driver ended, bounded by ``max_polls`` slices."""
        lines: list[str] = []
        for _ in range(max_polls):
            batch = self.poll(final=True)
            if not batch:
                break
            lines.extend(batch)
        return lines


# ---------------------------------------------------------------- Airflow's value masker

#: Every value this process registered through ``register_secret_values`` (variants included):
#: a cut of a long line never splits one, and they are replaced longest first.
_REGISTERED: set[str] = set()
_REGISTERED_STATE: dict[str, Any] = {"bytes": (), "pattern": None}
#: Airflow's ``[logging] min_length_masked_secret`` default: shorter values are not masked by value.
MIN_VALUE_LENGTH = 5


def _remember(values: Iterable[str]) -> list[str]:
    new = [variant for value in values for variant in secret_variants(str(value)) if len(variant) >= MIN_VALUE_LENGTH]
    if not set(new) <= _REGISTERED:
        import re

        _REGISTERED.update(new)
        ordered = sorted(_REGISTERED, key=len, reverse=True)
        _REGISTERED_STATE["bytes"] = tuple(value.encode() for value in ordered)
        _REGISTERED_STATE["pattern"] = re.compile("|".join(map(re.escape, ordered)))
    return new


def register_secret_values(values: Iterable[str]) -> None:
    """Register ``values`` and their printed variants with Airflow's masker of this process (and,
    in a task, its supervisor's)."""
    from airflow.sdk.log import mask_secret

    for variant in _remember(values):
        mask_secret(variant)


async def aregister_secret_values(values: Iterable[str]) -> None:
    """``register_secret_values`` for the triggerer's event loop."""
    from airflow.sdk.log import amask_secret

    for variant in _remember(values):
        await amask_secret(variant)


def forget_registered_values() -> None:
    """Forget what ``register_secret_values`` registered here (tests: another process's view)."""
    _REGISTERED.clear()
    _REGISTERED_STATE.update(bytes=(), pattern=None)


def registered_values_bytes() -> tuple[bytes, ...]:
    """The secret values registered in this process, as bytes."""
    return _REGISTERED_STATE["bytes"]


def mask_by_value(text: str) -> str:
    """``text`` with every value Airflow's masker knows replaced, then every value registered here
    (longest first: Airflow's alternation of values does not prefer the longer of two that share a
    prefix)."""
    text = masker_redact(text)
    pattern = _REGISTERED_STATE["pattern"]
    return pattern.sub(MASK, text) if pattern is not None else text


def mask_driver_line(line: str) -> str:
    """One line of driver output as the task log gets it: by value first, whole, then by form."""
    return redact(mask_by_value(line)) or ""


def log_lines(log, token: str, lines: Iterable[str]) -> None:
    """Write driver lines to the trigger's (so the task's) log, one log record per line."""
    for line in lines:
        log.info("%s%s", LINE_PREFIX, line)


def driver_output_kwargs(
    conn_id: str | None,
    env_vars: Mapping[str, str] | None,
    conf: Mapping[str, Any] | None = None,
    application_args: Sequence[Any] = (),
    log=None,
    seal: bool = True,
) -> dict[str, Any]:
    """The ``driver_output`` kwargs of a new ``ZetaDriverTrigger`` (the operator's call site, in
    the worker): the connections the triggerer should look up itself, and the secret values only
    the worker knows, sealed (``seal_driver_secrets``). Sealing never fails the try: when it
    cannot be done, the values are masked by form only, and a warning says so."""
    log = log or _log
    conn_ids = worker_conn_ids(conn_id, env_vars)
    sealed = None
    if seal:
        try:
            sealed = seal_driver_secrets(conn_ids, env_vars or {}, conf or {}, application_args, log)
        except Exception as error:  # a malformed [core] fernet_key, an SDK without the masker's module
            log.warning(
                "zeta.driver_output: the driver's secret values could not be sealed for the triggerer (%s): "
                "they are masked by form only in the streamed output",
                type(error).__name__,
            )
    return {"offset": 0, "conn_ids": conn_ids, "sealed_secrets": sealed}


def register_worker_secrets(
    conn_id: str | None, env_vars: Mapping[str, str], conf: Mapping[str, Any], application_args: Sequence[Any], log
) -> None:
    """Tell this process's masker every secret value the driver was handed (a worker that logs
    driver output itself: a non-deferrable wait, the rest after the trigger, a failure's log
    tail). Never fails the try."""
    try:
        register_secret_values(worker_secret_values(worker_conn_ids(conn_id, env_vars), env_vars, conf, application_args, log))
    except Exception as error:
        log.warning("zeta.driver_output: the driver's secret values could not be registered for masking (%s)", type(error).__name__)


def worker_conn_ids(conn_id: str | None, env_vars: Mapping[str, str] | None) -> list[str]:
    """The connections the driver can reach, seen from the worker that launches it."""
    return connections_visible_to_driver(conn_id, {**os.environ, **(env_vars or {})})


def seal_driver_secrets(
    conn_ids: Iterable[str], env_vars: Mapping[str, str], conf: Mapping[str, Any], application_args: Sequence[Any], log
) -> str | None:
    """The driver's secret values (``core.redaction.driver_secret_values``) as the worker sees them,
    encrypted with Airflow's Fernet key, for the trigger to register with the triggerer's masker.

    The worker may know more than the triggerer: a connection defined only in its environment or in
    ``env_vars``, the values of ``env_vars`` and ``conf``. Trigger kwargs of a task deferred from
    a worker are stored unencrypted in the metadata database, so the values travel only as a Fernet
    token (as Airflow stores connection passwords); a worker without ``[core] fernet_key`` hands
    over nothing and says so.
    """
    values = worker_secret_values(conn_ids, env_vars, conf, application_args, log)
    if not values:
        return None
    sealer = fernet()
    if not sealer.is_encrypted:
        log.warning(
            "zeta.driver_output: no [core] fernet_key on this worker: %d secret value(s) of env_vars, conf, "
            "application_args or worker-only connections are not handed to the triggerer, which cannot mask "
            "them by value in the driver's output",
            len(values),
        )
        return None
    return sealer.encrypt(json.dumps(values).encode()).decode()


def worker_secret_values(
    conn_ids: Iterable[str], env_vars: Mapping[str, str], conf: Mapping[str, Any], application_args: Sequence[Any], log
) -> list[str]:
    """``core.redaction.driver_secret_values`` with the connections as this worker resolves them
    (reading one registers its secrets with this process's masker)."""
    connections = []
    for conn_id in conn_ids:
        try:
            connection = _worker_connection(conn_id, env_vars)
            connections.append({"password": connection.password, "extra": connection.extra_dejson})
        except Exception as error:  # an unknown id in the environment is not an error here
            log.info("zeta.driver_output: connection %r not read in the worker for masking: %s", conn_id, type(error).__name__)
    return driver_secret_values(env_vars, conf, application_args, connections, _sensitive_name)


#: Slices (``MAX_BYTES_PER_POLL`` each) the resumed deploy task reads of an ended driver's output
#: that its trigger left (the trigger drains ``drain``'s 16 at most): 64 MiB.
WORKER_DRAIN_POLLS = 1024


def drain_in_worker(output: DriverOutput, log, max_polls: int = WORKER_DRAIN_POLLS) -> None:
    """Log what the trigger left of an ended driver's output into the resumed task's log, masked by
    form here and by value by this worker's masker (the caller registers the driver's values first:
    ``register_worker_secrets``); the offset file moves on, so nothing is logged twice. Past
    ``max_polls`` slices a line says where the rest is."""
    for _ in range(max_polls):
        batch = output.poll(final=True)
        if not batch:
            break
        log_lines(log, "", batch)
    else:
        if not output.reached_end():
            log_lines(log, "", [f"(driver output past {max_polls * output.max_bytes} more bytes is only in {DRIVER_LOG})"])
        return
    if not output.is_local and not output.reached_end():  # a shipped log whose end marker never came
        log_lines(log, "", ["(the driver's shipped output ends here without its end marker: its last part may be missing; "
                            "the launching host keeps a whole copy, named in the launch line of this log)"])


def unseal_secrets(sealed: str) -> list[str]:
    """The values ``seal_driver_secrets`` sealed (raises when this process's Fernet key cannot)."""
    values = json.loads(fernet().decrypt(sealed.encode()))
    return [str(value) for value in values]


def _worker_connection(conn_id: str, env_vars: Mapping[str, str]):
    """The connection as the driver sees it: from ``env_vars`` when the operator defines it there
    (the worker's own environment may not), else as the worker resolves it."""
    from airflow.sdk import BaseHook, Connection

    defined = env_vars.get(f"{CONN_ENV_PREFIX}{conn_id.upper()}")
    if defined is None:
        return BaseHook.get_connection(conn_id)
    if defined.lstrip().startswith("{"):
        return Connection.from_json(defined, conn_id=conn_id)
    return Connection.from_uri(defined, conn_id=conn_id)


def _sensitive_name(name: str) -> bool:
    """Sensitive by this provider's key test or by Airflow's (``[core] sensitive_var_conn_names``)."""
    return is_sensitive_key(name) or masker_hides_key(name)
