"""The JSONL session log: a sink that appends one JSON object per line (scheduler.md §11).

Reading a log back lives in ``_session_reader``; this module writes one and reopens it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import sys
import time
from typing import TYPE_CHECKING, Any, BinaryIO, Final, final

from ._log_lines import call_line, context_line, result_line
from ._session_reader import LoggedCall, parse_line, read_session_log

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import TracebackType
    from typing import Self

    from ._sinks import CallCommitted, CallStarted, ContextAccepted

__all__ = ["JsonlSessionLog", "LoggedCall", "read_session_log"]

_parse_line: Final = parse_line  # what reopening parses a line with (also used by tests)


def _default_clock() -> int:
    return time.time_ns() // 1_000_000


def _encode(
    build: Callable[[int, object, Any, int, bool], bytes],
    seq: int,
    time: object,
    event: object,
    source: int,
) -> bytes:
    """The bytes of the line ``build`` writes for ``event``."""
    try:
        return build(seq, time, event, source, False)
    except UnicodeEncodeError:
        # A model-supplied string (a call id, raw argument text) may hold an unpaired
        # surrogate, which UTF-8 cannot carry. Escaping it keeps the line valid UTF-8 JSON
        # that reads back to the very same string.
        return build(seq, time, event, source, True)


#: How much of an existing log is read at a time, from its end, when it is reopened.
_TAIL_CHUNK: Final = 1 << 16

# The start of every line this writer writes: {"type":"<kind>","seq":<n>, ... The seq of a
# line is read from its first bytes alone, however long the line is.
_HEAD: Final = re.compile(rb'\{"type":"[^"\\]*","seq":(0|-?[1-9][0-9]*)[,}]')
_HEAD_BYTES: Final = 256


def _line_start(file: BinaryIO, stop: int) -> int:
    """The offset where the line that ends at ``stop`` (exclusive) begins: just after the
    previous ``b"\n"``, or 0. Reads backwards in chunks and searches each chunk once, so
    finding the start of a line costs its length, whatever that is."""
    pos = stop
    while pos > 0:
        start = max(0, pos - _TAIL_CHUNK)
        file.seek(start)
        chunk = file.read(pos - start)
        found = chunk.rfind(b"\n")
        if found >= 0:
            return start + found + 1
        pos = start
    return 0


def _seq_of(file: BinaryIO, start: int, stop: int) -> int | None:
    """The ``seq`` of the line ``file[start:stop]``, or ``None`` if it has none."""
    file.seek(start)
    head = file.read(min(stop - start, _HEAD_BYTES))
    match = _HEAD.match(head)
    if match is not None:
        return int(match.group(1))
    # Not a line of this writer's shape (hand-written, or another tool's): parse it whole.
    if len(head) < stop - start:
        head += file.read(stop - start - len(head))
    try:
        obj = _parse_line(head)
    except ValueError:
        return None
    if isinstance(obj, dict) and type(obj.get("seq")) is int:
        seq: int = obj["seq"]
        return seq
    return None


def _reopen(file: BinaryIO) -> tuple[int, int]:
    """Remove a trailing partial line (a torn write); return the highest ``seq`` and the
    size of the file.

    ``seq`` increases line by line, so the last line that carries one has the highest.
    Every byte is read at most once, and only the last lines are read.
    """
    size = file.seek(0, os.SEEK_END)
    end = _line_start(file, size)  # just after the last b"\n"
    if end < size:
        file.truncate(end)
    stop = end - 1  # the last line's b"\n"
    while stop >= 0:
        start = _line_start(file, stop)
        seq = _seq_of(file, start, stop)
        if seq is not None:
            return seq, end
        stop = start - 1
    return 0, end


if sys.platform == "win32":  # pragma: no cover - Windows has no flock; see _lock's docstring

    def _lock(file: BinaryIO, path: str) -> None:
        return

else:
    import fcntl

    def _lock(file: BinaryIO, path: str) -> None:
        """Take an exclusive advisory lock on the log, or refuse: one writer per file.

        Two writers would interleave their numbering (the reader then rejects the log) and
        could tear each other's lines. The lock is the operating system's (``flock``): it
        holds against another ``JsonlSessionLog`` in this process or in any other one on
        this machine, ends when the file is closed (also when a process dies), and is
        advisory (a program that does not ask for it is not stopped). On Windows no lock
        is taken.
        """
        try:
            fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            raise RuntimeError(
                f"session log {path} is already open for writing by another JsonlSessionLog "
                "(in this process or another one); close that one first, or log to another "
                "file"
            ) from None


@final
class JsonlSessionLog:
    """A :class:`~dsh_sched.Sink` appending ``tool/call``, ``tool/result`` and ``context``
    lines to a UTF-8 JSONL file.

    Every line ends with exactly one ``"\\n"`` and is written at once, unbuffered (with
    ``fsync=True`` also ``os.fsync``-ed, which blocks the whole trio thread on every line).
    A write that fails part way (a full disk) raises, and the part of the line that reached
    the file is removed at once, or before the next line if even that fails: a broken line
    never stays in the middle of the log. Values at any nesting depth are written.

    Opening an existing file first removes a trailing partial line (a torn write), then
    continues the numbering after the highest ``seq`` found; it reads the file backwards
    from its end, so reopening a long log reads only its last lines, each once.

    One writer per file: the log takes an exclusive advisory lock (``flock``) on the file,
    so a second ``JsonlSessionLog`` on a file that one in this or another process has open
    is refused.

    Args:
        path: The log file; created if missing, appended to otherwise.
        clock: Returns integer milliseconds since the Unix epoch (default: the wall clock).
        fsync: ``os.fsync`` after every line, for logs that must survive a power loss.

    Raises:
        RuntimeError: another ``JsonlSessionLog`` has the file open.
        OSError: the file cannot be opened, read or truncated.

    Example:
        >>> with JsonlSessionLog("session.jsonl") as log:  # doctest: +SKIP
        ...     outcome = await run_tool_calls(runtime, calls, sink=log)
    """

    __slots__ = (
        "_call_seqs",
        "_clock",
        "_closed",
        "_end",
        "_file",
        "_fsync",
        "_path",
        "_result_seqs",
        "_seq",
        "_torn",
    )

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        clock: Callable[[], int] | None = None,
        fsync: bool = False,
    ) -> None:
        self._clock: Callable[[], int] = _default_clock if clock is None else clock
        self._fsync = fsync
        self._closed = True
        self._path = os.fsdecode(path)
        # "a+b": created if missing, every write goes to the end, and the file can be read.
        # Unbuffered: a write that fails leaves nothing behind in a buffer that a later
        # write would flush into the middle of the file.
        self._file: BinaryIO = open(path, "a+b", buffering=0)  # noqa: SIM115 - see close()
        try:
            _lock(self._file, self._path)
            self._seq, self._end = _reopen(self._file)
        except BaseException:
            self._file.close()
            raise
        self._closed = False
        # Whether a failed write may have left part of a line after self._end.
        self._torn = False
        # (batch, index) -> seq of its tool/call line, until its tool/result is written.
        self._call_seqs: dict[tuple[int, int], int] = {}
        # (batch, index) -> [seq of its tool/result, contexts still to come]; only results
        # that carry contexts are remembered, and only until their last context is written.
        self._result_seqs: dict[tuple[int, int], list[int]] = {}

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def close(self) -> None:
        """Close the file. Idempotent; later events raise ``RuntimeError``."""
        if not self._closed:
            self._closed = True
            self._file.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _write(
        self, build: Callable[[int, object, Any, int, bool], bytes], event: object, source: int
    ) -> int:
        """Write the line ``build`` makes for ``event`` citing ``source``; return its seq."""
        if self._closed:
            raise RuntimeError("session log is closed")
        seq = self._seq + 1
        line = _encode(build, seq, self._clock(), event, source)
        if self._torn:
            self._remove_torn_line()  # raises, writing nothing, while it cannot be removed
        try:
            _write_all(self._file, line)
        except BaseException:
            # A full disk, an I/O error, or an interrupt between two partial writes: what
            # reached the file is removed, now if possible, else before the next line.
            self._torn = True
            with contextlib.suppress(OSError):
                self._remove_torn_line()
            raise
        # The line is whole: it counts, even if the sync below fails.
        self._end += len(line)
        self._seq = seq
        if self._fsync:
            os.fsync(self._file.fileno())
        return seq

    def _remove_torn_line(self) -> None:
        try:
            os.ftruncate(self._file.fileno(), self._end)
        except OSError as exc:
            raise OSError(
                exc.errno,
                f"session log {self._path}: a failed write left part of a line that cannot "
                f"be removed ({exc.strerror}); nothing more is written until it can",
            ) from exc
        self._torn = False

    def on_call(self, event: CallStarted) -> None:
        """Write a ``tool/call`` line."""
        seq = self._write(call_line, event, 0)
        self._call_seqs[event.batch, event.index] = seq

    def on_result(self, event: CallCommitted) -> None:
        """Write a ``tool/result`` line citing its ``tool/call``."""
        key = (event.batch, event.index)
        call_seq = self._call_seqs.get(key)
        if call_seq is None:
            raise ValueError(f"no tool/call was logged for batch {event.batch} index {event.index}")
        seq = self._write(result_line, event, call_seq)
        del self._call_seqs[key]
        contexts = event.result.additional_contexts
        if contexts:
            self._result_seqs[key] = [seq, len(contexts)]

    def on_context(self, event: ContextAccepted) -> None:
        """Write a ``context`` line citing the ``tool/result`` it came from."""
        key = (event.batch, event.index)
        entry = self._result_seqs.get(key)
        if entry is None:
            raise ValueError(
                f"no tool/result with contexts was logged for batch {event.batch} "
                f"index {event.index}"
            )
        self._write(context_line, event, entry[0])
        entry[1] -= 1
        if entry[1] <= 0:
            del self._result_seqs[key]


def _write_all(file: BinaryIO, line: bytes) -> None:
    """Write all of ``line``; an unbuffered write may take only part of it."""
    written = file.write(line)
    if written == len(line):  # nearly always: a regular file takes the whole line
        return
    view = memoryview(line)
    while True:
        if not written:
            raise OSError(errno.EIO, "the session log took no bytes of a line")
        view = view[written:]
        if not view:
            return
        written = file.write(view)
