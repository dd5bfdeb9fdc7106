"""The compiled structuring plans of ``@tool`` parameters (``_structure_fast``).

A plan must only ever take the converter's success path: whenever it builds an object, the
converter builds an equal one of the same types from the same value, and the value is valid
for the schema ``@tool`` derives from the annotation (so a call whose plans all match may
skip validation). Conformance: the structuring parts of H-003, H-006 and H-009.
"""

from __future__ import annotations

import typing
from typing import Annotated, Any, Generic, Literal, Optional, TypeVar

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_tools import UserMessage, freeze_json
from dsh_tools._annotations import schema_for
from dsh_tools._convert import converter
from dsh_tools._schema_validate import validate_json_value
from dsh_tools._structure_fast import MISS, binds_by_position, fast_structurer
from tests.helpers import Picky
from tests.strategies import frozen_json_values, near_values, valid_values

T = TypeVar("T")


@attrs.frozen
class Point:
    x: int
    y: float


@attrs.define
class Item:
    name: str
    kind: Literal["a", "b"]
    tags: list[str]
    flag: bool = False


@attrs.frozen
class Nested:
    items: list[Item]
    point: Point
    note: Any
    extra: object = None
    scores: list[list[int]] = [[1]]  # noqa: RUF008 - an immutable-looking default, never mutated


@attrs.frozen
class WithValidator:
    x: int = attrs.field(validator=attrs.validators.ge(0))


@attrs.frozen
class WithConverter:
    x: int = attrs.field(converter=int)


@attrs.frozen
class WithFactory:
    xs: list[int] = attrs.field(factory=list)


@attrs.frozen
class WithPostInit:
    x: int

    def __attrs_post_init__(self) -> None:
        pass


@attrs.frozen
class WithAlias:
    _x: int


@attrs.frozen
class WithInitFalse:
    x: int
    y: int = attrs.field(init=False, default=0)


@attrs.define
class WithOwnInit:
    x: int

    def __init__(self, x: int) -> None:
        self.__attrs_init__(x)  # type: ignore[attr-defined]


@attrs.frozen
class Box(Generic[T]):
    value: T


@attrs.frozen
class WithAnnotated:
    x: Annotated[int, "doc"]


@attrs.frozen
class WithOptional:
    x: Optional[int]  # noqa: UP045 - the spelling under test


@attrs.frozen
class Tree:
    children: list[Tree]


@attrs.frozen
class Unresolvable:
    x: NotDefinedAnywhere  # type: ignore[name-defined]  # noqa: F821


@attrs.frozen(kw_only=True)
class KeywordOnly:
    a: int
    b: str = "x"


@attrs.frozen
class Mixed:
    k: str = attrs.field(kw_only=True)  # before the others, yet keyword-only: last in __init__
    a: int
    b: bool = False


class _Meta(type):
    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        return super().__call__(*args, **kwargs)


@attrs.frozen
class WithMetaclassCall(metaclass=_Meta):
    x: int
    y: bool = True


@attrs.frozen
class WithNew:
    x: int
    y: bool = True

    def __new__(cls, *args: Any, **kwargs: Any) -> WithNew:
        return super().__new__(cls)


class InitNotAFunction(Point):
    __init__ = object.__init__


class InitTakingAnything(Point):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)


class InitByPosition(Point):
    def __init__(self, x: int, y: float, /) -> None:
        super().__init__(x, y)


class InitWithoutSelf(Point):
    def __init__(*, x: int, y: float) -> None:  # type: ignore[misc]
        pass


class Swapped(Point):
    def __init__(self, y: float, x: int) -> None:
        super().__init__(x, y)


class AllByKeyword(Point):
    def __init__(self, *, x: int, y: float) -> None:
        super().__init__(x, y)


class OtherDefault(Item):
    def __init__(
        self, name: str, kind: Literal["a", "b"], tags: list[str], flag: bool = True
    ) -> None:
        super().__init__(name, kind, tags, flag)


COVERED: list[Any] = [
    str,
    int,
    float,
    bool,
    Any,
    object,
    Literal["a", "b"],
    list[str],
    list[int],
    list[Point],
    list[list[bool]],
    Point,
    Item,
    Nested,
    KeywordOnly,
    Mixed,
    WithMetaclassCall,
    WithNew,
    InitTakingAnything,
    Swapped,
    AllByKeyword,
    OtherDefault,
    list[Item],
    list[Mixed],
    list[Swapped],
    list[OtherDefault],
]
NOT_COVERED: list[Any] = [
    Optional[int],  # noqa: UP045
    int | None,
    Literal[1, 2],
    Literal["a", 1],
    dict[str, int],
    tuple[int, ...],
    list,
    list[Optional[int]],  # noqa: UP045
    WithValidator,
    WithConverter,
    WithFactory,
    WithPostInit,
    WithAlias,
    WithInitFalse,
    WithOwnInit,
    Box,
    Box[int],
    WithAnnotated,
    WithOptional,
    Tree,
    Unresolvable,
    UserMessage,
    list[WithValidator],
]


def _same(a: object, b: object) -> bool:
    """Equal, with the same types all the way down (``1 == 1.0`` and ``[1] != (1,)``)."""
    if type(a) is not type(b):
        return False
    if type(a) is list:
        assert type(b) is list
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if attrs.has(type(a)):
        names = [f.name for f in attrs.fields(typing.cast("type[attrs.AttrsInstance]", type(a)))]
        return all(_same(getattr(a, name), getattr(b, name)) for name in names)
    return a == b


@pytest.mark.parametrize("annotation", COVERED, ids=repr)
def test_covered_annotations_have_a_plan(annotation: Any) -> None:
    assert fast_structurer(annotation) is not None


@pytest.mark.parametrize("annotation", NOT_COVERED, ids=repr)
def test_other_annotations_are_left_to_the_converter(annotation: Any) -> None:
    """A class whose structuring runs user code that could fail or notice it, a class the
    converter has its own hook for, and anything not in the plan's subset have no plan."""
    assert fast_structurer(annotation) is None


def _matching(annotation: Any) -> st.SearchStrategy[Any]:
    """Frozen values that the plan of ``annotation`` matches."""
    origin = typing.get_origin(annotation)
    if annotation is str:
        return st.text(max_size=5)
    if annotation is bool:
        return st.booleans()
    if annotation is int:
        return st.integers()
    if annotation is float:
        return st.floats(allow_nan=False, allow_infinity=False).filter(
            lambda x: x != 0 or str(x) == "0.0"
        )
    if annotation is Any or annotation is object:
        return frozen_json_values(max_leaves=4)
    if origin is Literal:
        return st.sampled_from(typing.get_args(annotation))
    if origin is list:
        (item,) = typing.get_args(annotation)
        return st.lists(_matching(item), max_size=3).map(tuple)
    hints = typing.get_type_hints(annotation)
    fields = attrs.fields(typing.cast("type[attrs.AttrsInstance]", annotation))
    required = {f.name: _matching(hints[f.name]) for f in fields if f.default is attrs.NOTHING}
    optional = {f.name: _matching(hints[f.name]) for f in fields if f.default is not attrs.NOTHING}
    return st.fixed_dictionaries(required, optional=optional).map(freeze_json)


@settings(max_examples=100, deadline=None)
@given(data=st.data(), annotation=st.sampled_from(COVERED))
def test_h009_a_plan_builds_what_the_converter_builds(data: st.DataObject, annotation: Any) -> None:
    """H-009: the plan matches every value of its shape and builds the converter's object."""
    plan = fast_structurer(annotation)
    assert plan is not None
    value = data.draw(_matching(annotation))
    built = plan(value)
    assert built is not MISS
    assert validate_json_value(schema_for(annotation), value) == []
    assert _same(built, converter.structure(value, annotation))


@settings(max_examples=100, deadline=None)
@given(data=st.data(), annotation=st.sampled_from(COVERED))
def test_h009_a_plan_matches_valid_values_only(data: st.DataObject, annotation: Any) -> None:
    """H-009: whatever the value, a plan that builds an object builds the converter's, from a
    value valid for the derived schema (so a call whose plans all match skips nothing)."""
    plan = fast_structurer(annotation)
    assert plan is not None
    schema = schema_for(annotation)
    value = data.draw(
        st.one_of(valid_values(schema), near_values(schema), frozen_json_values(max_leaves=8)).map(
            freeze_json
        )
    )
    built = plan(value)
    if built is MISS:
        return
    assert validate_json_value(schema, value) == []
    assert _same(built, converter.structure(value, annotation))


@pytest.mark.parametrize(
    ("annotation", "value", "expected"),
    [
        (str, "x", "x"),
        (bool, True, True),
        (int, 3, 3),
        (float, 2.5, 2.5),
        (Literal["a", "b"], "b", "b"),
        (list[int], (1, 2), [1, 2]),
        (list[Point], ({"x": 1, "y": 2.0},), [Point(1, 2.0)]),
        (list[list[bool]], ((True,), ()), [[True], []]),
        (Item, {"name": "n", "kind": "a", "tags": ("t",)}, Item("n", "a", ["t"])),
        (
            Nested,
            {"items": (), "point": {"x": 0, "y": 0.5}, "note": ("any",)},
            Nested([], Point(0, 0.5), ("any",)),
        ),
    ],
)
def test_h003_matching_values_are_built_by_the_plan(
    annotation: Any, value: object, expected: object
) -> None:
    """H-003, H-006: each kind of plan builds the object from a matching value."""
    plan = fast_structurer(annotation)
    assert plan is not None
    built = plan(freeze_json(value))
    assert _same(built, expected)
    assert _same(built, converter.structure(freeze_json(value), annotation))


@pytest.mark.parametrize(
    ("annotation", "value"),
    [
        (str, 1),
        (int, True),
        (int, 2.0),  # valid for "integer", but the converter makes it 2: its job
        (float, 2),
        (Literal["a", "b"], "c"),
        (Literal["a", "b"], 1),
        (list[int], 1),
        (list[int], (1, "2")),
        (list[Point], ({"x": 1},)),
        (list[Point], ({"x": 1, "y": "no"},)),
        (list[Point], ({"x": 1, "y": 2.0}, {"x": 1, "y": 2.0, "z": 3})),
        (list[Point], ({"x": 1, "y": 2.0}, ("x", 1))),
        (list[list[int]], ((1,), ("2",))),
        (list[Item], ({"name": "n", "kind": "a", "tags": ()}, {"name": "n", "kind": "a"})),
        (list[Swapped], ({"x": 1, "y": 2.0}, {"x": 1})),
        (Point, ("x", 1)),
        (Point, {"x": 1, "y": 2.0, "z": 3}),
        (Point, {"y": 2.0}),
        (Item, {"name": "n", "kind": "c", "tags": ()}),
        (Item, {"name": "n", "kind": "a", "tags": ("t", 1)}),
        (Item, {"name": "n", "kind": "a", "tags": (None,)}),
        (Item, {"name": "n", "kind": "a", "tags": (True, "t")}),
        (Item, {"name": "n", "kind": "a", "tags": (("t",),)}),
        (Item, {"name": "n", "kind": "a", "tags": ({"t": "u"},)}),
        (Item, {"name": "n", "kind": "a", "tags": "t"}),
    ],
)
def test_values_that_do_not_match_are_left_to_the_converter(annotation: Any, value: object) -> None:
    plan = fast_structurer(annotation)
    assert plan is not None
    assert plan(freeze_json(value)) is MISS


def test_a_plan_resolves_string_annotations_of_a_class() -> None:
    """This module's classes have string annotations (``from __future__``): resolved."""
    assert isinstance(attrs.fields(Point).x.type, str | type)
    plan = fast_structurer(Point)
    assert plan is not None
    assert plan(freeze_json({"x": 1, "y": 1.5})) == Point(1, 1.5)
    assert typing.get_type_hints(Point) == {"x": int, "y": float}


def test_a_plain_dict_is_left_to_the_converter() -> None:
    """Validated arguments hold ``FrozenDict`` objects: a plan takes nothing else."""
    plan = fast_structurer(Point)
    assert plan is not None
    assert plan({"x": 1, "y": 2.0}) is MISS


def test_h050_a_class_whose_own_code_raises_is_left_to_the_converter() -> None:
    """H-050: a class whose own ``__setattr__`` raises while it is built: the plan gives
    up and the converter reports the failure (as it did before plans existed)."""
    plan = fast_structurer(Picky)
    assert plan is not None
    assert plan(freeze_json({"x": 1})) == Picky(1)
    assert plan(freeze_json({"x": 13})) is MISS
    with pytest.raises(Exception, match="Picky"):
        converter.structure(freeze_json({"x": 13}), Picky)


@pytest.mark.parametrize(
    ("cls", "expected"),
    [
        (Point, True),
        (Item, True),
        (Nested, True),
        (KeywordOnly, True),
        (Mixed, True),
        (Picky, True),
        (WithMetaclassCall, False),
        (WithNew, False),
        (InitNotAFunction, False),
        (InitTakingAnything, False),
        (InitByPosition, False),
        (InitWithoutSelf, False),
        (Swapped, False),
        (AllByKeyword, False),
        (OtherDefault, False),
    ],
    ids=lambda x: getattr(x, "__name__", repr(x)),
)
def test_a_class_is_called_by_position_only_where_python_binds_it_the_same(
    cls: type, expected: bool
) -> None:
    """H-009: the plan calls a class by position (every field, a missing one as its default
    object) only when its ``__init__`` binds that exactly as the converter's keyword call;
    any other class is called with the converter's keywords. Both build what it builds
    (the oracles above, over every class here that has a plan)."""
    assert binds_by_position(cls) is expected


@pytest.mark.parametrize(
    ("annotation", "value", "expected"),
    [
        (KeywordOnly, {"a": 1}, KeywordOnly(a=1)),
        (KeywordOnly, {"a": 1, "b": "y"}, KeywordOnly(a=1, b="y")),
        (Mixed, {"k": "k", "a": 2}, Mixed(2, k="k")),
        (Mixed, {"k": "k", "a": 2, "b": True}, Mixed(2, True, k="k")),
        (WithMetaclassCall, {"x": 1}, WithMetaclassCall(1)),
        (WithNew, {"x": 1, "y": False}, WithNew(1, False)),
        (Swapped, {"x": 1, "y": 2.0}, Swapped(2.0, 1)),
        (AllByKeyword, {"x": 1, "y": 2.0}, AllByKeyword(x=1, y=2.0)),
        (OtherDefault, {"name": "n", "kind": "a", "tags": ()}, OtherDefault("n", "a", [])),
    ],
)
def test_h009_every_way_of_calling_a_class_builds_the_converters_object(
    annotation: Any, value: object, expected: object
) -> None:
    """H-009: by position (keyword-only fields by name, absent ones as their defaults) or
    with the converter's keywords (an ``__init__`` of its own, a default of its own, which
    applies when the field is left out), the plan builds the converter's object."""
    plan = fast_structurer(annotation)
    assert plan is not None
    built = plan(freeze_json(value))
    assert _same(built, expected)
    assert _same(built, converter.structure(freeze_json(value), annotation))
    if annotation is OtherDefault:
        assert built.flag is True  # type: ignore[attr-defined]  # __init__'s own default


@pytest.mark.parametrize("cls", [InitNotAFunction, InitByPosition, InitWithoutSelf])
def test_a_class_the_converter_cannot_call_is_left_to_it(cls: type) -> None:
    """The converter calls these with keywords, which they refuse: the plan does the same
    and gives up, and the converter reports the failure."""
    plan = fast_structurer(cls)
    assert plan is not None
    value = freeze_json({"x": 1, "y": 2.0})
    assert plan(value) is MISS
    with pytest.raises(Exception):  # noqa: B017, PT011 - the converter's own wording
        converter.structure(value, cls)
