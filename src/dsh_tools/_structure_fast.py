"""Structuring validated arguments without the converter, where that builds the same object.

``@tool`` structures each argument with the package's cattrs converter. For the commonest
annotations (``str``, ``int``, ``float``, ``bool``, a ``Literal`` of strings, ``list[...]``
and attrs classes of these) :func:`fast_structurer` compiles, once per parameter, a plan
that builds the object the converter would build, directly from the frozen value. A value
the plan does not match exactly (another type, a missing or an unknown key, a string
outside the ``Literal``) makes it return :data:`MISS`, and the caller then asks the
converter, whose result or message stands: the plan only ever takes the converter's
success path.

A plan runs no user code of its own accord: the only code it calls is the class itself
(the ``__init__`` attrs generated, for a class with no validator, converter,
``__attrs_pre_init__``/``__attrs_post_init__``, factory default or aliased field), once,
and only once every field's value matched. So a plan that gives up leaves nothing behind,
and the converter then runs exactly as it would have. (Should a class's own ``__new__`` or
``__setattr__`` raise while it is built, the plan gives up too, and the converter, which
calls the class the same way, reports the failure.)

The plan of an attrs class is one function compiled for it, as attrs and cattrs compile
theirs: it tests each field inline and calls the class by position where
:func:`binds_by_position` proves that Python binds that call exactly as the converter's
keyword call (the generated ``__init__``, cheaper to call so), and with the converter's
keywords otherwise; a ``list`` of such a class is the same function in a loop. For a whole
``@tool``, :func:`compile_fit` compiles one function that takes a call's arguments through
every parameter's plan and calls the body with what they built.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Awaitable, Callable, Sequence
from types import FunctionType
from typing import Any, Final, Literal, Protocol

import attrs

from ._json import FrozenDict

__all__ = [
    "MISS",
    "Fit",
    "Parameter",
    "Plan",
    "binds_by_position",
    "compile_fit",
    "fast_structurer",
]

#: What a plan returns when the converter must decide.
MISS: Final[Any] = object()

#: A compiled plan: the structured object, or :data:`MISS`.
Plan = Callable[[object], object]

# The converter's hooks for these return a value of exactly that type unchanged (the strict
# str/bool hooks; cattrs' int()/float() of an exact int/float is that object itself).
_EXACT: Final = (str, int, float, bool)
# Classes the converter has hooks of its own for (not the generated attrs structuring).
_OWN_PREFIX: Final = "dsh_tools."


def fast_structurer(annotation: object) -> Plan | None:
    """The plan for ``annotation``, or ``None`` when the converter must do every value."""
    return _plan(annotation, ())


def _plan(tp: Any, active: tuple[type, ...]) -> Plan | None:
    if tp is Any or tp is object:
        return _identity
    if tp in _EXACT:
        return _exact(tp)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is Literal:
        if args and all(type(a) is str for a in args):
            return _literal(frozenset(args))
        return None
    if origin is list and len(args) == 1:
        if isinstance(args[0], type) and attrs.has(args[0]):
            return _attrs_class(args[0], active, many=True)  # the class's plan, in a loop
        item = _plan(args[0], active)
        return None if item is None else _list(args[0], item)
    if isinstance(tp, type) and attrs.has(tp):
        return _attrs_class(tp, active)
    return None


def _identity(value: object) -> object:
    return value


def _exact(kind: type) -> Plan:
    def plan(value: object) -> object:
        return value if type(value) is kind else MISS

    return plan


def _literal(values: frozenset[str]) -> Plan:
    def plan(value: object) -> object:
        return value if type(value) is str and value in values else MISS

    return plan


def _list(item_type: Any, item: Plan) -> Plan:
    if item_type in _EXACT:
        kind = item_type

        def scalars(value: object) -> object:
            if type(value) is not tuple:
                return MISS
            for x in value:
                if type(x) is not kind:
                    return MISS
            return list(value)

        return scalars

    def plan(value: object) -> object:
        if type(value) is not tuple:
            return MISS
        out = []
        for x in value:
            y = item(x)
            if y is MISS:
                return MISS
            out.append(y)
        return out

    return plan


def _attrs_class(cls: type, active: tuple[type, ...], *, many: bool = False) -> Plan | None:
    if (
        cls in active
        or cls.__module__.startswith(_OWN_PREFIX)
        or bool(getattr(cls, "__parameters__", None))  # generic: cattrs maps its parameters
        or any(
            hasattr(cls, name)
            for name in ("__attrs_init__", "__attrs_pre_init__", "__attrs_post_init__")
        )
    ):
        return None
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except Exception:
        return None
    active = (*active, cls)
    fields: list[_Field] = []
    for field in attrs.fields(cls):
        if (
            not field.init
            or field.validator is not None
            or field.converter is not None
            or field.alias != field.name
            or isinstance(field.default, attrs.Factory)  # type: ignore[arg-type]
        ):
            return None
        annotation = hints.get(field.name, field.type)
        plan = _plan(annotation, active)
        if plan is None:
            return None
        fields.append(_Field(field.name, annotation, plan, field.default, field.kw_only))
    return _instance(cls, tuple(fields), many=many)


@attrs.frozen
class _Field:
    """A field of a class: its name, annotation, plan, default and whether keyword-only."""

    name: str
    annotation: Any
    plan: Plan
    default: object
    kw_only: bool

    @property
    def required(self) -> bool:
        return self.default is attrs.NOTHING


def binds_by_position(cls: type) -> bool:
    """Whether ``cls(<every field, in order>)`` is the converter's ``cls(**present)``.

    It is when nothing between the call and a plain Python ``__init__`` sees how the
    arguments were passed (the class's ``__new__`` and its metaclass's ``__call__`` are
    ``object``'s and ``type``'s), and that ``__init__`` takes exactly the fields: each
    one by name, positionally unless it is keyword-only, with the field's own default
    object as its default. Python then binds ``cls(a, b)`` as it binds ``cls(a=a, b=b)``,
    and a field passed its default object as it binds the field left out. That is the
    ``__init__`` attrs generates; anything else takes the converter's call as it is.
    """
    init: Any = getattr(cls, "__init__", None)
    new: object = cls.__new__
    call: object = type(cls).__call__
    if call is not type.__call__ or new is not object.__new__ or type(init) is not FunctionType:
        return False
    code = init.__code__
    if code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS) or not (
        code.co_argcount >= 1 and code.co_posonlyargcount <= 1  # only ``self`` by position
    ):
        return False
    # attrs puts the keyword-only fields last, each group in field order.
    ordered = sorted(attrs.fields(cls), key=lambda f: f.kw_only)
    names = code.co_varnames[1 : code.co_argcount + code.co_kwonlyargcount]
    positional = code.co_argcount - 1
    if names != tuple(f.name for f in ordered):
        return False
    defaults = dict(zip(names[:positional][::-1], (init.__defaults__ or ())[::-1], strict=False))
    defaults.update(init.__kwdefaults__ or {})
    for index, field in enumerate(ordered):
        if field.kw_only != (index >= positional):
            return False
        required = field.default is attrs.NOTHING
        if not required and defaults.get(field.name, _NO_DEFAULT) is not field.default:
            return False
    return True


_NO_DEFAULT: Final = object()


def _instance(cls: type, fields: tuple[_Field, ...], *, many: bool) -> Plan:
    """The plan of an attrs class: one function compiled for the class (as attrs and cattrs
    compile theirs). It takes every field's value out first (no key missing, none extra),
    then tests each inline (or through its plan), and calls the class once, only when
    every field matched. With ``many``, the plan of a ``list`` of the class: the same
    steps in a loop over the items, with no call per item."""
    by_position = binds_by_position(cls)
    namespace: dict[str, Any] = {"_cls": cls, "_MISS": MISS, "_FrozenDict": FrozenDict}
    required = [(i, f) for i, f in enumerate(fields) if f.required]
    optional = [(i, f) for i, f in enumerate(fields) if not f.required]
    lines = ["if type(value) is not _FrozenDict:", "    return _MISS"]
    if not optional:
        # As many keys as fields, and each field's among them: no other key either.
        lines.extend([f"if len(value) != {len(fields)}:", "    return _MISS"])
    if required:
        lines.append("try:")
        lines.extend(f"    x{i} = value[{f.name!r}]" for i, f in required)
        lines.extend(["except KeyError:", "    return _MISS  # a required field is missing"])
    if optional:
        lines.append(f"present = {len(required)}")
        for i, f in optional:
            lines.extend(
                [
                    f"if {f.name!r} in value:",
                    f"    x{i} = value[{f.name!r}]",
                    "    present += 1",
                    "else:",
                    f"    x{i} = _MISS",
                ]
            )
        lines.extend(["if len(value) != present:", "    return _MISS  # a key of no field"])
    if not by_position:
        lines.append("kwargs = {}")
    arguments: list[str] = []
    keywords: list[str] = []
    for index, field in enumerate(fields):
        var = f"x{index}"
        body = _check(field.annotation, field.plan, var, index, namespace, "_MISS")
        if not by_position:
            body.append(f"kwargs[{field.name!r}] = {var}")
        if field.required:
            lines.extend(body)
        elif by_position:
            # Left out: its default object, which the __init__ binds as its own default.
            namespace[f"_d{index}"] = field.default
            lines.extend([f"if {var} is _MISS:", f"    {var} = _d{index}"])
            if body:
                lines.append("else:")
                lines.extend(f"    {line}" for line in body)
        else:  # left out: left out of the keywords too
            lines.append(f"if {var} is not _MISS:")
            lines.extend(f"    {line}" for line in body)
        if field.kw_only:
            keywords.append(f"{field.name}={var}")
        else:
            arguments.append(var)
    # By position in field order, then the keyword-only ones (which attrs puts last).
    call = f"_cls({', '.join([*arguments, *keywords])})" if by_position else "_cls(**kwargs)"
    lines.extend(
        [
            "try:",
            f"    append({call})" if many else f"    return {call}",
            "except Exception:",
            "    # Code of the class's own raised (a __new__ or __setattr__ it defines): the",
            "    # converter builds it again and reports the failure in its words.",
            "    return _MISS",
        ]
    )
    name = f"{cls.__module__}.{cls.__qualname__}"
    if many:
        head = ["if type(items) is not tuple:", "    return _MISS", "out = []"]
        loop = ["append = out.append", "for value in items:", *(f"    {x}" for x in lines)]
        lines = [*head, *loop, "return out"]
        name = f"list[{name}]"
    source = f"def plan({'items' if many else 'value'}):\n"
    source += "".join(f"    {line}\n" for line in lines)
    name = f"<dsh_tools plan for {name}>"
    exec(compile(source, name, "exec"), namespace)  # our own source, built above
    plan: Plan = namespace["plan"]
    return plan


def _check(
    annotation: Any, plan: Plan, var: str, index: int, namespace: dict[str, Any], miss: str
) -> list[str]:
    """Source lines that test (and, through ``plan``, build) the value in ``var``, or
    return ``miss`` when it does not match."""
    if annotation in _EXACT:
        namespace[f"_t{index}"] = annotation
        return [f"if type({var}) is not _t{index}:", f"    return {miss}"]
    if typing.get_origin(annotation) is Literal:  # of strings only, or it had no plan
        namespace[f"_l{index}"] = frozenset(typing.get_args(annotation))
        return [f"if type({var}) is not str or {var} not in _l{index}:", f"    return {miss}"]
    if plan is _identity:  # Any, object: the frozen value as it is
        return []
    item = typing.get_args(annotation)[0] if typing.get_origin(annotation) is list else None
    if item is str:
        # Every item a str: str.join takes str instances and raises TypeError for anything
        # else, in C, at a third of a loop's cost; and a frozen value's strings are never a
        # subclass of str (freeze_json refuses one), so "a str instance" is "exactly str".
        namespace["_join"] = "".join
        return [
            f"if type({var}) is not tuple:",
            f"    return {miss}",
            "try:",
            f"    _join({var})",
            "except TypeError:",
            f"    return {miss}",
            f"{var} = list({var})",
        ]
    if item in _EXACT:  # list[int] and the like: each item's type, in a loop here
        namespace[f"_t{index}"] = item
        return [
            f"if type({var}) is not tuple:",
            f"    return {miss}",
            f"for item in {var}:",
            f"    if type(item) is not _t{index}:",
            f"        return {miss}",
            f"{var} = list({var})",
        ]
    namespace[f"_p{index}"] = plan
    return [f"{var} = _p{index}({var})", f"if {var} is _MISS:", f"    return {miss}"]


class Parameter(Protocol):
    """What :func:`compile_fit` reads of a function's parameter."""

    @property
    def name(self) -> str: ...
    @property
    def annotation(self) -> Any: ...
    @property
    def default(self) -> Any: ...
    @property
    def positional(self) -> bool: ...
    @property
    def is_context(self) -> bool: ...
    @property
    def fast(self) -> Plan | None: ...


#: ``fit(arguments, ctx)``: ``fn(<the fitted arguments>)`` when every plan matches them,
#: else ``None``.
Fit = Callable[[object, object], Awaitable[object] | None]


def compile_fit(label: str, parameters: Sequence[Parameter], fn: Callable[..., Any]) -> Fit:
    """One function, compiled for ``fn``'s parameters, that fits a call's frozen arguments
    to them through their plans and calls ``fn`` with them (an ``async def``: the call only
    makes the coroutine), or returns ``None`` when one does not match (a parameter with no
    plan, a required one missing): the caller then validates and asks the converter.

    ``fn`` is called exactly as ``fn(*positional, **keywords)`` would be with the lists the
    converter's path builds: the context parameter gets ``ctx``; a positional-only one its
    value by position, or its default when left out (a later one may still follow); any
    other its value by name, in parameter order, and nothing when left out (Python applies
    its default).
    """
    namespace: dict[str, Any] = {"_MISS": MISS, "_FrozenDict": FrozenDict, "_fn": fn}
    lines = ["if type(arguments) is not _FrozenDict:", "    return None"]
    required = [
        (i, p)
        for i, p in enumerate(parameters)
        if not p.is_context and p.default is inspect.Parameter.empty
    ]
    if required:
        lines.append("try:")
        lines.extend(f"    x{i} = arguments[{p.name!r}]" for i, p in required)
        lines.extend(["except KeyError:", "    return None  # the validator reports it"])
    checks: list[str] = []
    arguments: list[str] = []
    keywords: list[str] = []
    rest: list[str] = []  # from the first keyword that may be left out, in order
    for index, parameter in enumerate(parameters):
        var = f"x{index}"
        key = repr(parameter.name)
        optional = False
        if parameter.is_context:
            lines.append(f"{var} = ctx")
        else:
            plan = parameter.fast
            check = (
                ["return None"]
                if plan is None
                else _check(parameter.annotation, plan, var, index, namespace, "None")
            )
            if parameter.default is inspect.Parameter.empty:
                checks.extend(check)
            else:
                optional = True
                lines.append(f"{var} = arguments[{key}] if {key} in arguments else _MISS")
                if parameter.positional:
                    namespace[f"_d{index}"] = parameter.default
                    checks.extend([f"if {var} is _MISS:", f"    {var} = _d{index}"])
                    if check:
                        checks.append("else:")
                        checks.extend(f"    {line}" for line in check)
                elif check:
                    checks.append(f"if {var} is not _MISS:")
                    checks.extend(f"    {line}" for line in check)
        if parameter.positional:
            arguments.append(var)
        elif optional or rest:
            if not rest:
                rest.append("rest = {}")
            store = f"rest[{key}] = {var}"
            rest.extend([f"if {var} is not _MISS:", f"    {store}"] if optional else [store])
        else:
            keywords.append(f"{parameter.name}={var}")
    if rest:
        keywords.append("**rest")
    lines.extend([*checks, *rest, f"return _fn({', '.join([*arguments, *keywords])})"])
    source = "def fit(arguments, ctx):\n" + "".join(f"    {line}\n" for line in lines)
    exec(compile(source, f"<dsh_tools fit for {label}>", "exec"), namespace)  # built above
    fit: Fit = namespace["fit"]
    return fit
