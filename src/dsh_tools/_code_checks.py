"""What a Code Mode program's values and output must satisfy, and how failures are worded.

The checks and texts that apply where the program runs, self-contained like ``_code_program`` (which
imports this module, see its docstring): only the standard library, no ``typing``, nothing of
``dsh_tools``, so the WebAssembly guest runs this very source.

* ``lossless_copy(value)``: a fresh plain copy (``dict``/``list``) of a lossless JSON value,
  built iteratively; raises :class:`NotLosslessJson` whose ``text`` is ``<reason> at <path>``
  in exactly the words, order and paths of ``dsh_tools.freeze_json`` (without its
  ``not lossless JSON:`` prefix), so a program sees the same text under every runtime.
* ``OutputCapture(limit_bytes)``: a text stream (for ``sys.stdout``, ``sys.stderr`` or
  ``print(file=...)``) keeping at most ``limit_bytes`` UTF-8 bytes; past that it keeps what
  fits, raises :class:`OutputLimitExceeded` (a ``BaseException``) and remembers it in
  ``limit_hit``, so the run ends ``output-limit`` even if the program catches it. ``text()``,
  ``logs()`` and ``drain()`` (the text kept since the last ``drain``, whose size in bytes is
  ``pending_bytes``) read it.
* ``split_logs(text)``: log lines: one trailing ``"\\n"`` removed, split on ``"\\n"``.
* The failure details of code-mode §7.5: ``syntax_detail(exc)``, ``exception_detail(exc)``
  (``<class>: <message> (line <n>)``, the line of the innermost frame of ``<program>``),
  ``RESULT_DETAIL``, ``output_limit_detail(n)``, ``memory_detail(n)``,
  ``wall_timeout_detail(s)``, ``cpu_timeout_detail(s)``.
"""

import io
import math
import sys

# mypy treats a module-level name ``TYPE_CHECKING`` as true; at run time this avoids
# importing ``typing`` (start-up cost in the guest).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import TracebackType
    from typing import Any

__all__ = [
    "FILENAME",
    "RESULT_DETAIL",
    "NotLosslessJson",
    "OutputCapture",
    "OutputLimitExceeded",
    "cpu_timeout_detail",
    "exception_detail",
    "lossless_copy",
    "memory_detail",
    "output_limit_detail",
    "split_logs",
    "syntax_detail",
    "wall_timeout_detail",
]

#: The file name programs are compiled with; tracebacks name it.
FILENAME = "<program>"
#: The ``result`` kind's detail.
RESULT_DETAIL = "the program returned a value that is not lossless JSON"


# --- failure details (code-mode §7.5) --------------------------------------------------


def output_limit_detail(output_bytes: int) -> str:
    """The ``output-limit`` detail for a program that wrote too much."""
    return f"the program wrote more than {output_bytes} bytes of output"


def _safe_str(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:
        return "<unprintable thrown value>"


def _with_line(name: str, message: str, line: int | None) -> str:
    text = f"{name}: {message}" if message else name
    return text if line is None else f"{text} (line {line})"


def syntax_detail(exc: BaseException) -> str:
    """The ``syntax`` detail of a compile error: ``<class>: <msg> (line <n>)``."""
    line: int | None = None
    if isinstance(exc, SyntaxError):
        message = exc.msg or ""  # None for a SyntaxError built without arguments
        line = exc.lineno if isinstance(exc.lineno, int) else None
    else:
        message = _safe_str(exc)
    return _with_line(type(exc).__name__, message, line)


def _program_line(tb: "TracebackType | None") -> int | None:
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == FILENAME:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def exception_detail(exc: BaseException) -> str:
    """The ``exception`` detail: ``<class>: <message> (line <n>)``.

    The message part is left out when ``str(exc)`` is empty and reads
    ``<unprintable thrown value>`` when ``str(exc)`` raises; the line is that of the
    innermost traceback frame in the program, left out when there is none.
    """
    return _with_line(type(exc).__name__, _safe_str(exc), _program_line(exc.__traceback__))


def memory_detail(memory_bytes: int | None) -> str:
    """The ``memory`` detail (``None``: the limit is not known where the program runs)."""
    if memory_bytes is None:
        return "the program ran out of memory"
    return f"the program ran out of memory (limit {memory_bytes} bytes)"


def wall_timeout_detail(wall_seconds: float) -> str:
    """The ``timeout`` detail for the wall-clock limit."""
    return f"the program ran longer than {float(wall_seconds)!r}s"


def cpu_timeout_detail(cpu_seconds: float) -> str:
    """The ``timeout`` detail for the CPU budget."""
    return f"the program used more than {float(cpu_seconds)!r}s of CPU time"


# --- the lossless JSON check (mirrors dsh_tools.freeze_json's reasons and paths) ---------

_LOG2_10 = math.log2(10)
# At most 2000 bits: at most 603 digits, under every digit limit Python allows (0 or >= 640).
_SMALL_INT_BITS = 2000
_CONTAINERS = (dict, list, tuple)
_MISSING = object()


class NotLosslessJson(Exception):
    """A value is not lossless JSON; ``text`` is ``<reason> at <path>``."""

    def __init__(self, reason: str, path: str) -> None:
        self.reason = reason
        self.path = path
        self.text = f"{reason} at {path}"
        super().__init__(self.text)


class _Bad(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _type_name(kind: type) -> str:
    if kind.__module__ == "builtins":
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"


def _int_fits(value: int) -> bool:
    bits = value.bit_length()
    if bits <= _SMALL_INT_BITS:
        return True
    limit = sys.get_int_max_str_digits()
    if limit == 0 or bits <= (limit - 1) * _LOG2_10:
        return True
    try:
        str(value)
    except ValueError:
        return False
    return True


def _str_fits(value: str) -> bool:
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _is_container(value: object) -> bool:
    """``True`` for a dict/list/tuple, ``False`` for a lossless scalar; else ``_Bad``."""
    kind = type(value)
    if kind is str:
        if not _str_fits(value):  # type: ignore[arg-type]
            raise _Bad("unpaired surrogate")
        return False
    if kind is int:
        if not _int_fits(value):  # type: ignore[arg-type]
            raise _Bad("integer too large")
        return False
    if kind is float:
        number: float = value  # type: ignore[assignment]
        if number != number or number in (math.inf, -math.inf):
            raise _Bad("non-finite float")
        if number == 0.0 and math.copysign(1.0, number) < 0:
            raise _Bad("negative zero")
        return False
    if value is None or kind is bool:
        return False
    if kind in _CONTAINERS:
        return True
    raise _Bad(f"unsupported type {_type_name(kind)}")


class _Frame:
    __slots__ = ("items", "keys", "out", "pos", "src")

    def __init__(self, src: "Any") -> None:
        self.src = src
        self.pos = 0
        self.keys: list[Any] | None
        self.out: Any
        if type(src) is dict:
            self.keys = list(src)
            self.items: list[Any] = [src[key] for key in self.keys]
            self.out = {}
        else:
            self.keys = None
            self.items = list(src)
            self.out = []

    def add(self, value: object) -> None:
        if self.keys is None:
            self.out.append(value)
        else:
            self.out[self.keys[self.pos - 1]] = value


def _failure(frames: "list[_Frame]", reason: str) -> NotLosslessJson:
    parts = ["$"]
    for frame in frames:
        step = frame.pos - 1
        parts.append(f"[{step}]" if frame.keys is None else f".{frame.keys[step]}")
    return NotLosslessJson(reason, "".join(parts))


def _check_keys(frames: "list[_Frame]") -> None:
    # A bad key is reported at the path of the dict that holds it (its own frame excluded).
    keys = frames[-1].keys
    assert keys is not None
    for key in keys:
        if type(key) is not str:
            raise _failure(frames[:-1], "non-str key")
        if not _str_fits(key):
            raise _failure(frames[:-1], "unpaired surrogate")


def lossless_copy(value: object) -> "Any":
    """A fresh plain copy of a lossless JSON value (dicts and lists), built iteratively.

    Raises:
        NotLosslessJson: the first problem, in the order and words of ``freeze_json``.
    """
    try:
        container = _is_container(value)
    except _Bad as bad:
        raise NotLosslessJson(bad.reason, "$") from None
    if not container:
        return value
    frames = [_Frame(value)]
    if frames[0].keys is not None:
        _check_keys(frames)
    on_path = {id(value)}
    # A container held at several places is copied once (its copy serves every place).
    done: dict[int, Any] = {}
    while True:
        frame = frames[-1]
        if frame.pos < len(frame.items):
            child = frame.items[frame.pos]
            frame.pos += 1
            try:
                container = _is_container(child)
            except _Bad as bad:
                raise _failure(frames, bad.reason) from None
            if not container:
                frame.add(child)
                continue
            copy = done.get(id(child), _MISSING)
            if copy is not _MISSING:
                frame.add(copy)
                continue
            if id(child) in on_path:
                raise _failure(frames, "cycle")
            on_path.add(id(child))
            frames.append(_Frame(child))
            if frames[-1].keys is not None:
                _check_keys(frames)
            continue
        frames.pop()
        on_path.discard(id(frame.src))
        if not frames:
            return frame.out
        done[id(frame.src)] = frame.out
        frames[-1].add(frame.out)


# --- output capture and logs --------------------------------------------------------------


class OutputLimitExceeded(BaseException):
    """Raised by :class:`OutputCapture` at its limit.

    A ``BaseException``, so that ``except Exception`` in the program does not swallow it;
    the run ends ``output-limit`` even if the program catches it anyway.
    """


def _replace_surrogates(text: str) -> str:
    # Output must be valid UTF-8: a pair of surrogates becomes its character, a lone one
    # becomes U+FFFD.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


class OutputCapture(io.TextIOBase):
    """A text stream keeping at most ``limit_bytes`` UTF-8 bytes of what is written."""

    def __init__(self, limit_bytes: int) -> None:
        super().__init__()
        self.limit_bytes = limit_bytes
        self._used = 0
        self._chunks: list[str] = []
        self._drained = 0
        self._drained_bytes = 0
        self.limit_hit = False

    @property
    def pending_bytes(self) -> int:
        """UTF-8 bytes kept since the last ``drain`` (the guest ships logs every 4096)."""
        return self._used - self._drained_bytes

    @property
    def encoding(self) -> str:  # type: ignore[override]
        """Always ``utf-8``."""
        return "utf-8"

    def writable(self) -> bool:
        """Always ``True``."""
        return True

    def write(self, text: str) -> int:
        """Keep ``text``; raise :class:`OutputLimitExceeded` past the limit (keeping what fits)."""
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        if self.limit_hit:
            raise OutputLimitExceeded(output_limit_detail(self.limit_bytes))
        count = len(text)
        kept = text if text.isascii() else _replace_surrogates(str(text))
        size = len(kept) if kept.isascii() else len(kept.encode("utf-8"))
        if self._used + size > self.limit_bytes:
            room = self.limit_bytes - self._used
            part = kept.encode("utf-8")[:room].decode("utf-8", "ignore")
            self._chunks.append(part)
            self._used += len(part.encode("utf-8"))
            self.limit_hit = True
            raise OutputLimitExceeded(output_limit_detail(self.limit_bytes))
        self._chunks.append(kept)
        self._used += size
        return count

    def text(self) -> str:
        """Everything kept so far."""
        return "".join(self._chunks)

    def drain(self) -> str:
        """The text kept since the last ``drain`` (all of it the first time)."""
        new = "".join(self._chunks[self._drained :])
        self._drained = len(self._chunks)
        self._drained_bytes = self._used
        return new

    def logs(self) -> "tuple[str, ...]":
        """Everything kept so far, as log lines (:func:`split_logs`)."""
        return split_logs(self.text())


def split_logs(text: str) -> "tuple[str, ...]":
    """Log lines of captured text: one trailing ``"\\n"`` removed, split on ``"\\n"``."""
    if not text:
        return ()
    if text.endswith("\n"):
        text = text[:-1]
    return tuple(text.split("\n"))
