"""Structuring validated arguments without the converter, where that builds the same object.

``@tool`` structures each argument with the package's cattrs converter. For the commonest
annotations (``str``, ``int``, ``float``, ``bool``, a ``Literal`` of strings, ``list[...]``
and attrs classes of these) :func:`fast_structurer` compiles, once per parameter, a plan
that builds the object the converter would build, directly from the frozen value. A value
the plan does not match exactly (another type, a missing or an unknown key, a string
outside the ``Literal``) makes it return :data:`MISS`, and the caller then asks the
converter, whose result or message stands: the plan only ever takes the converter's
success path.

A plan runs no user code of its own accord: the only code it calls is the ``__init__``
that attrs generated for a class with no validator, converter,
``__attrs_pre_init__``/``__attrs_post_init__``, factory default or aliased field, and only
once every field's value matched. So a plan that gives up leaves nothing behind, and the
converter then runs exactly as it would have. (Should a class's own ``__new__`` or
``__setattr__`` raise while it is built, the plan gives up too, and the converter, which
calls the class the same way, reports the failure.)
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Any, Final, Literal

import attrs

from ._json import FrozenDict

__all__ = ["MISS", "Plan", "fast_structurer"]

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


def _attrs_class(cls: type, active: tuple[type, ...]) -> Plan | None:
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
        # An exact scalar is tested inline, without a call (most fields are one).
        exact = annotation if annotation in _EXACT else None
        fields.append((field.name, exact, plan, field.default is attrs.NOTHING))
    return _instance(cls, tuple(fields))


#: A field of a class: its name, its exact scalar type (or ``None``), its plan, required.
_Field = tuple[str, type | None, Plan, bool]


def _instance(cls: type, fields: tuple[_Field, ...]) -> Plan:
    names = frozenset(name for name, _, _, _ in fields)

    def plan(value: object) -> object:
        # Validated arguments hold FrozenDicts; anything else is the converter's.
        if type(value) is not FrozenDict or not names.issuperset(value):
            return MISS  # not an object, or a key the class does not have
        kwargs: dict[str, object] = {}
        for name, exact, field_plan, required in fields:
            if name in value:
                item = value[name]
                if exact is not None:
                    if type(item) is not exact:
                        return MISS
                else:
                    item = field_plan(item)
                    if item is MISS:
                        return MISS
                kwargs[name] = item
            elif required:
                return MISS
        try:
            return cls(**kwargs)
        except Exception:
            # Code of the class's own raised (a __new__ or __setattr__ it defines): the
            # converter builds it again and reports the failure in its words.
            return MISS

    return plan
