"""``@tool``: a validating tool definition from an annotated ``async def`` (runtime.md §12.4)."""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Annotated, Any, Final, final, overload

from ._annotations import UnsupportedAnnotation, json_default, schema_for
from ._calls import ToolRunContext
from ._content import ContentBlock
from ._convert import converter
from ._define import Classifier, FinalizeContent, build_validating_tool
from ._definition import Output, ToolDefinition
from ._errors import ToolArgsError, ToolOutputError, normalize_message
from ._exception_groups import leaves
from ._json import FrozenDict, freeze_json
from ._structure_fast import Plan, compile_fit, fast_structurer
from ._success import default_render
from ._sync_body import async_body

if TYPE_CHECKING:
    from ._schema_validate import CompiledSchema

__all__ = ["tool"]

AsyncFunction = Callable[..., Awaitable[Any]]
#: What ``@tool`` takes: an ``async def`` or a plain ``def``.
ToolFunction = Callable[..., Any]
Render = Callable[[Any, Any], Sequence[ContentBlock]]
PresentationMeta = Callable[[Any, Any], Any]

# cattrs has no structure hook for ``object`` or ``NoneType``. An ``object`` annotation means
# "any JSON value", taken as it is (frozen), exactly like ``Any``; a ``None`` annotation admits
# only ``null``, which validation has already checked. Predicate hooks match these two types
# only, where a class-based hook for ``object`` would become the fallback for every class.
_PASSTHROUGH: Final = (object, type(None))
converter.register_structure_hook_func(lambda t: t in _PASSTHROUGH, lambda value, _: value)

# Types whose structure and unstructure hooks return a value of exactly that type unchanged:
# the strict str/bool hooks (``_convert``), cattrs' int/float (``int(v)``, ``float(v)``) and
# identity unstructuring. ``_body`` skips the converter for them.
_EXACT: Final = frozenset((str, int, float, bool))


@overload
def tool(fn: ToolFunction, /) -> ToolDefinition: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    is_concurrency_safe: Classifier = False,
    render: Render | None = None,
    presentation_meta: PresentationMeta | None = None,
    finalize_content: FinalizeContent | None = None,
    blocking: bool | None = None,
) -> Callable[[ToolFunction], ToolDefinition]: ...


def tool(
    fn: ToolFunction | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    is_concurrency_safe: Classifier = False,
    render: Render | None = None,
    presentation_meta: PresentationMeta | None = None,
    finalize_content: FinalizeContent | None = None,
    blocking: bool | None = None,
) -> ToolDefinition | Callable[[ToolFunction], ToolDefinition]:
    """Turn an annotated ``async def`` or plain ``def`` into a validating tool definition.

    Every parameter but one annotated :class:`ToolRunContext` becomes a property of an open
    object schema (required when it has no default); the return annotation becomes the
    output schema. A call's arguments are validated, then each present one is structured into
    its annotation with the package's cattrs converter; the returned object is unstructured
    with it. See runtime.md §12.4 for the annotation mapping.

    Args:
        fn: The function, when used as a bare ``@tool``.
        name: The tool name; defaults to the function's ``__name__``.
        description: Defaults to the first paragraph of the docstring.
        timeout: Seconds, enforced by the timeout policy; positive and finite.
        is_concurrency_safe: ``True``, ``False`` or a classifier over the valid, frozen
            arguments mapping.
        render: ``render(args, value)``; by default a ``str`` value is one text block and
            anything else ``json.dumps(value, ensure_ascii=False, indent=2)``.
        presentation_meta: Optional ``presentation_meta(args, value)``.
        finalize_content: As for :class:`ToolDefinition`.
        blocking: For a plain ``def`` only. ``False`` declares that it never blocks: it is
            called inline, in the trio thread (nothing can interrupt it). Otherwise (the
            default) it runs in a worker thread (``trio.to_thread.run_sync``) that the call
            always waits for: a cancellation or a timeout cannot interrupt it, so a success
            it returns after the ``Abort`` fired is ``ABORTED`` and after the tool's
            deadline ``TOOL_TIMEOUT``.

    Returns:
        The definition (bare form), or a decorator that returns it.

    Raises:
        TypeError: not a function (``async def`` or ``def``); ``blocking`` given for an
            ``async def``; ``*args``/``**kwargs``; a missing or unsupported annotation; a
            default that is not lossless JSON; or a definition check.
        ValueError: no description, or a bad ``timeout``.

    Example:
        >>> @tool
        ... async def read_file(path: str, limit: int = 100) -> str:
        ...     '''Read a text file.'''
        ...     return open(path).read(limit)
        >>> read_file.parameters["required"]
        ('path',)
    """
    options = _Options(
        name=name,
        description=description,
        timeout=timeout,
        is_concurrency_safe=is_concurrency_safe,
        render=render,
        presentation_meta=presentation_meta,
        finalize_content=finalize_content,
        blocking=blocking,
    )
    if fn is not None:
        return _make_tool(fn, options)
    return lambda f: _make_tool(f, options)


@final
class _Options:
    __slots__ = (
        "blocking",
        "description",
        "finalize_content",
        "is_concurrency_safe",
        "name",
        "presentation_meta",
        "render",
        "timeout",
    )

    def __init__(
        self,
        *,
        name: str | None,
        description: str | None,
        timeout: float | None,
        is_concurrency_safe: Classifier,
        render: Render | None,
        presentation_meta: PresentationMeta | None,
        finalize_content: FinalizeContent | None,
        blocking: bool | None,
    ) -> None:
        self.blocking = blocking
        self.name = name
        self.description = description
        self.timeout = timeout
        self.is_concurrency_safe = is_concurrency_safe
        self.render = render
        self.presentation_meta = presentation_meta
        self.finalize_content = finalize_content


@final
class _Param:
    """How one parameter of the function is filled from the validated arguments."""

    __slots__ = ("annotation", "default", "exact", "fast", "is_context", "name", "positional")

    def __init__(
        self, name: str, annotation: Any, default: Any, *, positional: bool, is_context: bool
    ) -> None:
        self.name = name
        self.annotation = annotation
        self.default = default
        self.positional = positional
        self.is_context = is_context
        #: A value of exactly this type is taken as it is: structuring would return it
        #: unchanged (the converter's hooks for these types return an exact-type value itself).
        self.exact: type | None = (
            annotation if type(annotation) is type and annotation in _EXACT else None
        )
        #: Builds what the converter would from a matching value, or returns ``MISS``.
        self.fast: Plan | None = None if is_context else fast_structurer(annotation)


_PARAGRAPH_BREAK: Final = re.compile(r"\n\s*\n")


def _first_paragraph(doc: str | None) -> str:
    if not doc:
        return ""
    first = _PARAGRAPH_BREAK.split(inspect.cleandoc(doc).strip(), maxsplit=1)[0]
    return " ".join(line.strip() for line in first.splitlines())


def _is_context(annotation: Any) -> bool:
    if typing.get_origin(annotation) is Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation is ToolRunContext


def _make_tool(fn: ToolFunction, options: _Options) -> ToolDefinition:
    tool_name = options.name
    if tool_name is None:
        tool_name = getattr(fn, "__name__", None) or repr(fn)
    label = f"@tool({tool_name})"
    body = async_body(label, fn, options.blocking)
    if body is None:
        raise TypeError(f"{label} requires a function (async def or def)")
    signature = inspect.signature(fn)
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    if any(p.kind in variadic for p in signature.parameters.values()):
        raise TypeError(f"{label}: *args and **kwargs are not supported")
    description = options.description
    if description is None:
        description = _first_paragraph(fn.__doc__)
        if not description:
            raise ValueError(
                f"{label}: a description is required (pass description= or write a docstring)"
            )
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:  # e.g. a forward reference that does not resolve
        raise TypeError(f"{label}: cannot resolve the annotations: {exc}") from exc
    # What arguments are structured into: the same hints with every Annotated stripped
    # (its metadata only documents; it may even be unhashable, which cattrs cannot take).
    structure_hints = typing.get_type_hints(fn)

    params: list[_Param] = []
    properties: dict[str, Any] = {}
    required: list[str] = []
    has_context = False
    for p in signature.parameters.values():
        if p.name not in hints:
            raise TypeError(f'{label}: parameter "{p.name}" needs a type annotation')
        annotation = hints[p.name]
        positional = p.kind is inspect.Parameter.POSITIONAL_ONLY
        if _is_context(annotation):
            if has_context:
                raise TypeError(f"{label}: only one parameter may receive the ToolRunContext")
            has_context = True
            params.append(
                _Param(p.name, annotation, p.default, positional=positional, is_context=True)
            )
            continue
        schema = _schema_of(label, annotation, p.name)
        if p.default is inspect.Parameter.empty:
            required.append(p.name)
        else:
            try:
                schema["default"] = json_default(p.default)
            except TypeError:
                shown = _shown(p.default)
                raise TypeError(
                    f'{label}: the default of "{p.name}" is not lossless JSON: {shown}'
                ) from None
        properties[p.name] = schema
        params.append(
            _Param(
                p.name,
                structure_hints[p.name],
                p.default,
                positional=positional,
                is_context=False,
            )
        )
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = required

    output = Output(
        schema=_schema_of(label, hints.get("return", Any), "return"),
        render=default_render if options.render is None else options.render,
        presentation_meta=options.presentation_meta,
    )
    return build_validating_tool(
        label=label,
        name=tool_name,
        description=description,
        parameters=parameters,
        output=output,
        execute=_body(tool_name, body, tuple(params), None),
        checked_execute=partial(_body, tool_name, body, tuple(params)),
        timeout=options.timeout,
        is_concurrency_safe=options.is_concurrency_safe,
        finalize_content=options.finalize_content,
        present_call=None,
        present_result=None,
    )


def _schema_of(label: str, annotation: Any, where: str) -> dict[str, Any]:
    try:
        return schema_for(annotation)
    except UnsupportedAnnotation as exc:
        raise TypeError(
            f'{label}: unsupported annotation {_shown(exc.annotation)} for "{where}"'
        ) from None


def _shown(value: object) -> str:
    """``repr(value)`` for an error message, or a stand-in when it cannot be printed (an int
    beyond the interpreter's digit limit, or an annotation holding one)."""
    try:
        return repr(value)
    except Exception:
        return f"<{type(value).__name__} that cannot be printed>"


def _structure(value: object, annotation: Any) -> object:
    if annotation is Any or annotation is object:
        return value  # frozen JSON, as it came (no converter round trip)
    return converter.structure(value, annotation)


def _structure_message(exc: Exception) -> str:
    # cattrs reports failures inside attrs classes and containers as exception groups whose
    # own text ("While structuring X (1 sub-exception)") says nothing; the leaves do.
    return "; ".join(normalize_message(e) for e in leaves(exc))


# What a tool may return that is already JSON: such a value, once frozen, is what the
# converter would give (it unstructures JSON to equal JSON), without the converter's
# recursion, which a deep value (the JSON boundary accepts any depth) would exhaust.
_JSON_CONTAINERS: Final = frozenset((dict, list, tuple, FrozenDict))


def _unstructure(tool_name: str, result: object) -> object:
    if type(result) in _JSON_CONTAINERS:
        try:
            return freeze_json(result)
        except TypeError:
            pass  # not plain JSON (an attrs instance inside, say): the converter's turn
    try:
        return converter.unstructure(result)
    except RecursionError:
        raise ToolOutputError(
            tool_name,
            [
                f"the returned {type(result).__name__} is nested too deeply to convert "
                "to JSON (Python's recursion limit)"
            ],
        ) from None


def _body(
    tool_name: str,
    fn: AsyncFunction,
    params: tuple[_Param, ...],
    validator: CompiledSchema | None,
) -> Callable[[FrozenDict, ToolRunContext], Awaitable[object]]:
    """The tool's ``execute``: structure the arguments, await ``fn``, unstructure its value.

    With a ``validator``, the arguments are first fitted to the parameters' compiled plans:
    a plan only matches a valid value (the schema is derived from the same annotations),
    so when every one matches, that is the validation and the structuring at once.
    Otherwise the arguments are validated (its violations raised as ``ToolArgsError``) and
    structured with the converter, as without a ``validator``.
    """

    # Compiled once per tool: the parameters' plans tested inline, and ``fn`` called with
    # what they built, in one function.
    fit = None if validator is None else compile_fit(tool_name, params, fn)

    async def execute(arguments: FrozenDict, ctx: ToolRunContext) -> object:
        call = None if fit is None else fit(arguments, ctx)
        if call is None:
            if validator is not None:
                violations = validator.validate_frozen(arguments, "")
                if violations:
                    raise ToolArgsError(violations)
            positional, keywords = _structure_all(params, arguments, ctx)
            call = fn(*positional, **keywords)
        result = await call
        if type(result) in _EXACT:
            return result  # what the converter would return for it
        return _unstructure(tool_name, result)

    return execute


Fitted = tuple[list[object], dict[str, object]]


def _structure_all(
    params: tuple[_Param, ...], arguments: FrozenDict, ctx: ToolRunContext
) -> Fitted:
    """Structure valid arguments with the converter (every failure is reported)."""
    positional: list[object] = []
    keywords: dict[str, object] = {}
    problems: list[str] = []
    for param in params:
        value: object
        if param.is_context:
            value = ctx
        elif param.name in arguments:
            value = arguments[param.name]
            if type(value) is not param.exact:
                try:
                    value = _structure(value, param.annotation)
                except Exception as exc:
                    message = _structure_message(exc)
                    problems.append(f'"{param.name}" could not be structured: {message}')
                    continue
        elif param.positional:
            value = param.default  # a later positional argument may still follow
        else:
            continue  # Python applies the default
        if param.positional:
            positional.append(value)
        else:
            keywords[param.name] = value
    if problems:
        raise ToolArgsError(problems)
    return positional, keywords
