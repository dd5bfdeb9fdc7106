"""Everything that happens where a Code Mode program runs, in one self-contained module.

A ``run_code`` program is the body of an ``async def`` with no parameters. This module
compiles it, builds its globals and its ``tools`` object, checks the values it passes and
returns, captures what it writes, and describes how it ended in the exact words of the
failure details. Two runtimes use it: the trusted runtime in the host process, and the
WebAssembly guest, which ships *this file's source* into the sandbox. So it imports only the
standard library (no ``dsh_tools``, trio or attrs) and runs on CPython 3.11 and 3.12; for the
guest's start-up cost it imports neither ``ast``, ``importlib.util`` nor ``asyncio`` (it
parses through ``compile`` with the builtin ``_ast`` module's flags), and it never touches an
event loop: it awaits only what it is given.

API:

* ``compile_program(code) -> CompiledProgram``: parse ``code`` as a module and compile its
  statements as the body of ``async def program()`` with their line numbers unchanged, file
  name ``<program>``. Raises :class:`ProgramSyntaxError` (its ``detail`` is the ``syntax``
  kind's detail), also for a ``yield`` outside nested functions and classes.
  ``CompiledProgram.imports_asyncio`` says whether any ``import asyncio`` /
  ``from asyncio import ...`` statement occurs (the guest imports asyncio only then).
* ``program_globals(tools, tool_call_error, **extra) -> dict``: a fresh globals dict with
  ``__name__ == "__run_code__"``, ``tools``, ``ToolCallError`` and the builtins, plus
  ``extra`` (the trusted runtime injects ``print``).
* ``make_main(compiled, globals) -> () -> Coroutine``: the program as an async function.
* ``make_tools(names, submit, tool_call_error) -> Tools``: the ``tools`` object over the
  bound ``names``. ``submit`` is ``async submit(name, args: dict) -> value``, awaited when a
  binding's coroutine starts running; it returns plain JSON data or raises
  ``tool_call_error``. A binding checks and copies its arguments when it is called (a
  ``TypeError`` for a wrong call form, at once); a value that is not lossless JSON makes the
  coroutine raise ``tool_call_error(name, "tool arguments must be lossless JSON (...)")``
  without submitting.
* ``lossless_copy(value)``: a fresh plain copy (``dict``/``list``) of a lossless JSON value,
  iteratively; raises :class:`NotLosslessJson` whose ``text`` is ``<reason> at <path>``,
  exactly as ``dsh_tools.freeze_json`` words it (without its ``not lossless JSON:`` prefix).
* ``OutputCapture(limit_bytes)``: a text stream for ``sys.stdout``/``print(file=...)`` that
  keeps at most ``limit_bytes`` UTF-8 bytes; past that it raises
  :class:`OutputLimitExceeded` (a ``BaseException``) and remembers it (``limit_hit``), so the
  run ends ``output-limit`` even if the program catches it. ``text()``, ``logs()`` and
  ``drain()`` (the text written since the last ``drain``) read it.
* ``split_logs(text) -> tuple[str, ...]``: one trailing ``"\\n"`` removed, split on ``"\\n"``.
* ``await run_program(main, capture, memory_bytes=None) -> ProgramEnd``: run the program to
  its end and classify it: success with or without a result, or a failure ``kind`` and
  ``detail`` (``output-limit``, ``memory``, ``exception`` or ``result``). It catches every
  exception the program lets out (``CancelledError``, ``SystemExit`` included): a runtime
  that stopped the program itself (a timeout, a cancellation) decides the outcome itself.
  ``ProgramEnd.done_message()`` is the guest's ``done`` line as a dict.
* Details: ``syntax_detail(exc)``, ``exception_detail(exc)``, ``RESULT_DETAIL``,
  ``output_limit_detail(n)``, ``memory_detail(n)``, ``wall_timeout_detail(s)``,
  ``cpu_timeout_detail(s)``.
* ``ToolCallError(tool_name, message)``: the class the guest injects (the trusted runtime
  injects ``dsh_tools.code.ToolCallError``, of the same name and shape).
"""

import _ast
import builtins
import io
import keyword
import math
import sys

# mypy treats a module-level name ``TYPE_CHECKING`` as true; at run time this avoids
# importing ``typing`` (start-up cost in the guest).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Coroutine, Iterable
    from types import CodeType, TracebackType
    from typing import Any

    Submit = Callable[[str, dict[str, Any]], Awaitable[Any]]

__all__ = [
    "FILENAME",
    "RESULT_DETAIL",
    "CompiledProgram",
    "NotLosslessJson",
    "OutputCapture",
    "OutputLimitExceeded",
    "ProgramEnd",
    "ProgramSyntaxError",
    "ToolCallError",
    "Tools",
    "compile_program",
    "cpu_timeout_detail",
    "exception_detail",
    "lossless_copy",
    "make_main",
    "make_tools",
    "memory_detail",
    "output_limit_detail",
    "program_globals",
    "run_program",
    "split_logs",
    "syntax_detail",
    "wall_timeout_detail",
]

#: The file name the program is compiled with; tracebacks name it.
FILENAME = "<program>"
#: The name of the async function the program's statements become the body of.
_FUNCTION_NAME = "program"
#: The ``result`` kind's detail.
RESULT_DETAIL = "the program returned a value that is not lossless JSON"
#: ``__name__`` in the program's globals.
_PROGRAM_NAME = "__run_code__"


def _nothing() -> None:
    """Only here for its type and its code object's type."""


_FunctionType = type(_nothing)
_CodeType = type(_nothing.__code__)


# --- failure details (code-mode §7.5) --------------------------------------------------


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
    if isinstance(exc, SyntaxError) and isinstance(exc.msg, str):
        message = exc.msg
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


def output_limit_detail(output_bytes: int) -> str:
    """The ``output-limit`` detail for a program that wrote too much."""
    return f"the program wrote more than {output_bytes} bytes of output"


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


# --- compiling (code-mode §4.1) ----------------------------------------------------------


class ProgramSyntaxError(Exception):
    """The program does not compile; ``detail`` is the ``syntax`` kind's detail."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class CompiledProgram:
    """A compiled program: ``code`` is the code object of its async function."""

    __slots__ = ("code", "imports_asyncio")

    def __init__(self, code: "CodeType", imports_asyncio: bool) -> None:
        self.code = code
        self.imports_asyncio = imports_asyncio


# Nodes whose ``body`` is a scope of its own: a ``yield`` there belongs to that scope. Their
# other fields (decorators, defaults, bases) are evaluated in the enclosing scope.
_NESTED_SCOPES = (_ast.FunctionDef, _ast.AsyncFunctionDef, _ast.Lambda, _ast.ClassDef)
_YIELDS = (_ast.Yield, _ast.YieldFrom)


def _is_asyncio(module: str | None) -> bool:
    return module is not None and (module == "asyncio" or module.startswith("asyncio."))


def _scan(body: "list[Any]") -> "tuple[Any, bool]":
    """Find the first ``yield`` of the program's own scope, and any asyncio import.

    Iterative (a deeply nested program must not exhaust the recursion limit).
    """
    first_yield: Any = None
    imports_asyncio = False
    stack: list[tuple[Any, bool]] = [(node, False) for node in body]
    while stack:
        node, nested = stack.pop()
        if isinstance(node, _YIELDS):
            if not nested and (
                first_yield is None
                or (node.lineno, node.col_offset) < (first_yield.lineno, first_yield.col_offset)
            ):
                first_yield = node
        elif isinstance(node, _ast.Import):
            imports_asyncio = imports_asyncio or any(_is_asyncio(a.name) for a in node.names)
        elif isinstance(node, _ast.ImportFrom):
            imports_asyncio = imports_asyncio or (node.level == 0 and _is_asyncio(node.module))
        scope = isinstance(node, _NESTED_SCOPES)
        for field in node._fields:
            value = getattr(node, field, None)
            inner = nested or (scope and field == "body")
            if isinstance(value, list):
                stack.extend((item, inner) for item in value if isinstance(item, _ast.AST))
            elif isinstance(value, _ast.AST):
                stack.append((value, inner))
    return first_yield, imports_asyncio


def compile_program(code: str) -> CompiledProgram:
    """Compile ``code`` as the body of ``async def program()`` (line numbers unchanged).

    Raises:
        ProgramSyntaxError: the code does not compile, or yields in the program's own scope.
    """
    try:
        tree: Any = compile(code, FILENAME, "exec", _ast.PyCF_ONLY_AST, dont_inherit=True)
    except Exception as exc:
        raise ProgramSyntaxError(syntax_detail(exc)) from None
    first_yield, imports_asyncio = _scan(tree.body)
    if first_yield is not None:
        raise ProgramSyntaxError(
            f"SyntaxError: 'yield' inside a run_code program (line {first_yield.lineno})"
        )
    where: dict[str, Any] = {"lineno": 1, "col_offset": 0, "end_lineno": 1, "end_col_offset": 0}
    body = tree.body or [_ast.Pass(**where)]
    function: Any = _ast.AsyncFunctionDef(
        name=_FUNCTION_NAME,
        args=_ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
        body=body,
        decorator_list=[],
        returns=None,
        **where,
    )
    if "type_params" in _ast.AsyncFunctionDef._fields:  # Python 3.12+ requires the field
        function.type_params = []
    module = _ast.Module(body=[function], type_ignores=[])
    try:
        module_code = compile(module, FILENAME, "exec", dont_inherit=True)
    except Exception as exc:
        raise ProgramSyntaxError(syntax_detail(exc)) from None
    for const in module_code.co_consts:  # pragma: no branch - the function is always there
        if isinstance(const, _CodeType) and const.co_name == _FUNCTION_NAME:
            return CompiledProgram(const, imports_asyncio)
    raise AssertionError("unreachable")  # pragma: no cover - the loop above always returns


def program_globals(tools: object, tool_call_error: type, **extra: object) -> "dict[str, Any]":
    """A fresh globals dict for one run: ``__name__``, ``tools``, ``ToolCallError``, builtins."""
    namespace: dict[str, Any] = {
        "__name__": _PROGRAM_NAME,
        "__builtins__": builtins,
        "tools": tools,
        "ToolCallError": tool_call_error,
    }
    namespace.update(extra)
    return namespace


def make_main(
    compiled: CompiledProgram, namespace: "dict[str, Any]"
) -> "Callable[[], Coroutine[Any, Any, Any]]":
    """The program as an async function over ``namespace`` (its globals)."""
    function_type: Any = _FunctionType
    main: Callable[[], Coroutine[Any, Any, Any]] = function_type(compiled.code, namespace)
    return main


# --- tools and bindings (code-mode §4.2) -------------------------------------------------


class ToolCallError(Exception):
    """A tool call of the program failed or was refused (the guest's copy of the class).

    ``tool_name`` names the tool; ``str(error)`` is the message.
    """

    def __init__(self, tool_name: str, message: str) -> None:
        super().__init__(tool_name, message)
        self.tool_name = tool_name
        self.message = message

    def __str__(self) -> str:
        return self.message


def _attribute_name(name: str) -> bool:
    """Whether a bound name is reachable as ``tools.<name>``."""
    return (
        name.isidentifier()
        and not keyword.iskeyword(name)
        and not (name.startswith("__") and name.endswith("__"))
    )


class _Binding:
    """One bound tool: calling it returns a coroutine that submits the call."""

    __slots__ = ("_error", "_name", "_submit")

    def __init__(self, name: str, submit: "Submit", error: type) -> None:
        self._name = name
        self._submit = submit
        self._error = error

    def __repr__(self) -> str:
        return f'<tool "{self._name}">'

    def __call__(self, *args: object, **kwargs: object) -> "Coroutine[Any, Any, Any]":
        name = self._name
        if args:
            if len(args) != 1 or not isinstance(args[0], dict):
                raise TypeError(f'tool "{name}" takes keyword arguments or one dict')
            if kwargs:
                raise TypeError(f'tool "{name}" takes keyword arguments or one dict, not both')
            value: object = args[0]
        else:
            value = kwargs
        # The arguments are copied now, at the call: what the program changes afterwards is
        # not what the tool receives.
        try:
            snapshot = lossless_copy(value)
        except NotLosslessJson as exc:
            return self._refuse(f"tool arguments must be lossless JSON ({exc.text})")
        return self._call(snapshot)

    async def _call(self, snapshot: "dict[str, Any]") -> "Any":
        return await self._submit(self._name, snapshot)

    async def _refuse(self, message: str) -> "Any":
        raise self._error(self._name, message)


class Tools:
    """The program's ``tools`` object over a fixed set of bound names.

    ``tools.<name>`` reaches a bound name that is an identifier, not a keyword and not a
    dunder; ``tools["<name>"]`` reaches every bound name; ``in``, ``dir``, ``iter`` and
    ``len`` see the bound names, sorted. It is read-only.
    """

    __slots__ = ("_Tools__bindings",)

    def __init__(self, bindings: "dict[str, _Binding]") -> None:
        object.__setattr__(self, "_Tools__bindings", bindings)

    def __getattribute__(self, name: str) -> "Any":
        if name.startswith("__") and name.endswith("__"):
            return object.__getattribute__(self, name)
        bindings: dict[str, _Binding] = object.__getattribute__(self, "_Tools__bindings")
        binding = bindings.get(name)
        if binding is not None and _attribute_name(name):
            return binding
        if binding is not None:
            raise AttributeError(f'tool "{name}" is not an attribute name: use tools["{name}"]')
        raise AttributeError(f'no tool named "{name}"')

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("tools is read-only")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("tools is read-only")

    def __getitem__(self, name: object) -> "Any":
        bindings: dict[str, _Binding] = object.__getattribute__(self, "_Tools__bindings")
        binding = bindings.get(name) if isinstance(name, str) else None
        if binding is None:
            raise KeyError(f'no tool named "{name}"')
        return binding

    def __contains__(self, name: object) -> bool:
        bindings: dict[str, _Binding] = object.__getattribute__(self, "_Tools__bindings")
        return isinstance(name, str) and name in bindings

    def __dir__(self) -> "list[str]":
        return list(object.__getattribute__(self, "_Tools__bindings"))

    def __iter__(self) -> "Any":
        return iter(list(object.__getattribute__(self, "_Tools__bindings")))

    def __len__(self) -> int:
        return len(object.__getattribute__(self, "_Tools__bindings"))

    def __repr__(self) -> str:
        names = ", ".join(object.__getattribute__(self, "_Tools__bindings"))
        return f"<tools: {names}>"


def make_tools(names: "Iterable[str]", submit: "Submit", tool_call_error: type) -> Tools:
    """The ``tools`` object over the bound ``names`` (see the module docstring)."""
    return Tools({name: _Binding(name, submit, tool_call_error) for name in sorted(set(names))})


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
        self._limit = limit_bytes
        self._used = 0
        self._chunks: list[str] = []
        self._drained = 0
        self.limit_hit = False

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
            raise OutputLimitExceeded(output_limit_detail(self._limit))
        count = len(text)
        kept = text if text.isascii() else _replace_surrogates(str(text))
        size = len(kept) if kept.isascii() else len(kept.encode("utf-8"))
        if self._used + size > self._limit:
            room = self._limit - self._used
            part = kept.encode("utf-8")[:room].decode("utf-8", "ignore")
            self._chunks.append(part)
            self._used += len(part.encode("utf-8"))
            self.limit_hit = True
            raise OutputLimitExceeded(output_limit_detail(self._limit))
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


# --- running and classifying the end ------------------------------------------------------


class ProgramEnd:
    """How a program ended: ``kind is None`` for success, else a failure kind and detail."""

    __slots__ = ("detail", "has_result", "kind", "result")

    def __init__(
        self,
        *,
        kind: str | None = None,
        detail: str = "",
        has_result: bool = False,
        result: object = None,
    ) -> None:
        self.kind = kind
        self.detail = detail
        self.has_result = has_result
        self.result = result

    def __repr__(self) -> str:
        if self.kind is None:
            return f"ProgramEnd(result={self.result!r})" if self.has_result else "ProgramEnd()"
        return f"ProgramEnd(kind={self.kind!r}, detail={self.detail!r})"

    def done_message(self) -> "dict[str, Any]":
        """The guest's ``done`` message for this end (code-mode §8.2.5)."""
        if self.kind is not None:
            return {"op": "done", "status": "error", "kind": self.kind, "detail": self.detail}
        if self.has_result:
            return {"op": "done", "status": "ok", "result": self.result}
        return {"op": "done", "status": "ok"}


def end_for_exception(
    exc: BaseException, capture: OutputCapture, memory_bytes: int | None = None
) -> ProgramEnd:
    """The end of a program that let ``exc`` out (the output limit, once hit, decides)."""
    if capture.limit_hit:
        return ProgramEnd(kind="output-limit", detail=output_limit_detail(capture._limit))
    if isinstance(exc, MemoryError):
        return ProgramEnd(kind="memory", detail=memory_detail(memory_bytes))
    return ProgramEnd(kind="exception", detail=exception_detail(exc))


def end_for_return(value: object, capture: OutputCapture) -> ProgramEnd:
    """The end of a program that returned ``value``."""
    if capture.limit_hit:
        return ProgramEnd(kind="output-limit", detail=output_limit_detail(capture._limit))
    if value is None:
        return ProgramEnd()
    try:
        result = lossless_copy(value)
    except NotLosslessJson:
        return ProgramEnd(kind="result", detail=RESULT_DETAIL)
    return ProgramEnd(has_result=True, result=result)


async def run_program(
    main: "Callable[[], Coroutine[Any, Any, Any]]",
    capture: OutputCapture,
    memory_bytes: int | None = None,
) -> ProgramEnd:
    """Run the program to its end and classify it (see the module docstring)."""
    try:
        value = await main()
    except BaseException as exc:
        return end_for_exception(exc, capture, memory_bytes)
    return end_for_return(value, capture)
