"""Everything that happens where a Code Mode program runs (with ``_code_checks``).

A ``run_code`` program is the body of an ``async def`` with no parameters. This module
compiles it, builds its globals and ``tools`` object, runs it and words how it ended, in the
exact texts of the failure details. The trusted runtime imports it in the host; the
WebAssembly guest runs *the same source*: ``guest_source()`` (host side) joins the sources of
``GUEST_MODULES`` (``dsh_tools/_code_checks.py``, then this file), and the guest runs that
text in one namespace (``exec`` into a dict), where every name below is then defined. So both
modules use only the standard library (no ``dsh_tools``, trio, attrs or ``typing``), run on
CPython 3.11 and 3.12, never import ``ast``, ``importlib.util`` or ``asyncio`` (start-up
cost: parsing goes through ``compile`` with the builtin ``_ast`` module's flags), never
touch an event loop (they await only what they are given) and share no top-level name.

* ``compile_program(code) -> CompiledProgram``: ``code`` parsed as a module, its statements
  compiled as the body of ``async def program()``, line numbers unchanged, file name
  ``<program>``. Raises :class:`ProgramSyntaxError` (``.detail``: the ``syntax`` detail), also
  for a ``yield`` outside nested functions and classes. ``.imports_asyncio``: whether some
  ``import asyncio`` / ``from asyncio import ...`` occurs (the guest imports asyncio only then).
* ``program_globals(tools, tool_call_error, **extra) -> dict``: fresh globals:
  ``__name__ == "__run_code__"``, ``tools``, ``ToolCallError``, the builtins and ``extra``
  (the trusted runtime adds its capturing ``print``).
* ``make_main(compiled, globals)``: the program as an async function of no arguments.
* ``make_tools(names, submit, tool_call_error) -> Tools``: the ``tools`` object over the bound
  ``names``. ``await submit(name, args)`` sends one call (``args`` a fresh plain ``dict``) and
  returns its plain JSON value or raises ``tool_call_error(name, message)``. A binding takes
  keyword arguments or one ``dict`` (else ``TypeError`` at once), copies them when called,
  and returns a coroutine that awaits ``submit`` when it starts running, or, for arguments
  that are not lossless JSON, raises ``tool_call_error`` without submitting.
* ``await run_program(main, capture, memory_bytes=None) -> ProgramEnd``: run the program to its
  end and classify it: ``kind is None`` (success, ``has_result``/``result``), or ``kind``
  ``output-limit``, ``memory``, ``exception`` or ``result`` with its ``detail``. It catches
  every exception the program lets out (``CancelledError`` and ``SystemExit`` too): a runtime
  that stopped the program itself (time, cancellation) decides the outcome itself.
  ``ProgramEnd.done_message()`` is the guest's ``done`` message as a dict. The two steps of
  that classification are ``end_for_exception(exc, capture, memory_bytes=None)`` and
  ``end_for_return(value, capture)``, for a runtime that meets the program's end elsewhere.
* ``ToolCallError(tool_name, message)``: the class the guest injects (the trusted runtime
  injects ``dsh_tools.code.ToolCallError``, of the same name and shape).
* Re-exported from ``_code_checks`` (see that module): ``lossless_copy``, ``NotLosslessJson``,
  ``OutputCapture``, ``OutputLimitExceeded``, ``split_logs``, ``FILENAME``, and the failure
  details ``syntax_detail``, ``exception_detail``, ``RESULT_DETAIL``,
  ``output_limit_detail``, ``memory_detail``, ``wall_timeout_detail``,
  ``cpu_timeout_detail``.
"""

import _ast
import builtins
import keyword

# mypy treats a module-level name ``TYPE_CHECKING`` as true; at run time this avoids
# importing ``typing`` (start-up cost in the guest).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Coroutine, Iterable
    from types import CodeType
    from typing import Any

    Submit = Callable[[str, dict[str, Any]], Awaitable[Any]]

# In the host this module is ``dsh_tools._code_program`` and imports its sibling. In the
# WASI guest, ``_code_checks``' source ran first in this same namespace (``guest_source()``),
# so these names are already defined.
if globals().get("__package__"):
    from ._code_checks import (
        FILENAME,
        RESULT_DETAIL,
        NotLosslessJson,
        OutputCapture,
        OutputLimitExceeded,
        cpu_timeout_detail,
        exception_detail,
        lossless_copy,
        memory_detail,
        output_limit_detail,
        split_logs,
        syntax_detail,
        wall_timeout_detail,
    )

__all__ = [
    "FILENAME",
    "GUEST_MODULES",
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
    "end_for_exception",
    "end_for_return",
    "exception_detail",
    "guest_source",
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

#: The modules whose sources the guest runs, in this order, in one namespace.
GUEST_MODULES = ("_code_checks", "_code_program")
#: The name of the async function the program's statements become the body of.
_FUNCTION_NAME = "program"
#: ``__name__`` in the program's globals.
_PROGRAM_NAME = "__run_code__"


def _nothing() -> None:
    """Only here for its type and its code object's type."""


_FunctionType = type(_nothing)
_CodeType = type(_nothing.__code__)


def guest_source() -> str:
    """The sources of :data:`GUEST_MODULES`, joined: what the guest runs in one namespace.

    Only the host calls it (it reads the package's files).
    """
    import importlib.resources  # the host only: the guest never calls this

    files = importlib.resources.files(__package__)
    return "\n".join(files.joinpath(f"{name}.py").read_text("utf-8") for name in GUEST_MODULES)


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
    fields: dict[str, Any] = {
        "name": _FUNCTION_NAME,
        "args": _ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
        "body": tree.body or [_ast.Pass(**where)],
        "decorator_list": [],
        "returns": None,
        "type_params": [],  # Python 3.12 requires it; 3.11 keeps it as an unused attribute
        **where,
    }
    function = _ast.AsyncFunctionDef(**fields)
    module = _ast.Module(body=[function], type_ignores=[])
    try:
        module_code = compile(module, FILENAME, "exec", dont_inherit=True)
    except Exception as exc:
        raise ProgramSyntaxError(syntax_detail(exc)) from None
    # The module holds one statement, the async def: its code is the only code constant.
    function_code = next(c for c in module_code.co_consts if isinstance(c, _CodeType))
    return CompiledProgram(function_code, imports_asyncio)


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
    """A tool call made by a Code Mode program failed or was refused.

    ``tool_name`` names the tool; ``str(error)`` is the message: for a failed sub-call, its
    ``error.message``. One class serves both sides: ``dsh_tools.code`` exports it, the
    trusted runtime raises it in programs, and the WASI guest, which runs this module's
    source, defines the same class there.

    Example:
        >>> err = ToolCallError("read_file", "no such file")
        >>> err.tool_name, str(err)
        ('read_file', 'no such file')
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
        return ProgramEnd(kind="output-limit", detail=output_limit_detail(capture.limit_bytes))
    if isinstance(exc, MemoryError):
        return ProgramEnd(kind="memory", detail=memory_detail(memory_bytes))
    return ProgramEnd(kind="exception", detail=exception_detail(exc))


def end_for_return(value: object, capture: OutputCapture) -> ProgramEnd:
    """The end of a program that returned ``value``."""
    if capture.limit_hit:
        return ProgramEnd(kind="output-limit", detail=output_limit_detail(capture.limit_bytes))
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
