"""The lossless JSON boundary: ``freeze_json``, ``thaw_json``, ``FrozenDict`` (runtime.md §2.1).

Conformance: J-020..J-023, J-027..J-031.
"""

from __future__ import annotations

import collections
import copy
import datetime
import decimal
import enum
import json
import math
import os
import pickle
import subprocess
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_tools import (
    FrozenDict,
    JsonValue,
    Output,
    TextContent,
    ToolExecution,
    ToolRunContext,
    ToolRuntime,
    freeze_json,
    thaw_json,
)
from tests.helpers import deep_equal, exactly, nest, raw_tool, run, work_budget
from tests.strategies import json_values, maybe_json_values, spec_accepts

REPO = Path(__file__).resolve().parents[1]

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

DEPTH = 5000


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def _walk(value: object) -> Iterator[object]:
    """Every node of a JSON value, iteratively."""
    stack = [value]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list | tuple):
            stack.extend(node)


def _assert_deeply_frozen(value: object) -> None:
    for node in _walk(value):
        assert not isinstance(node, list), node
        if isinstance(node, dict):
            assert type(node) is FrozenDict, type(node)


def _assert_plain(value: object) -> None:
    for node in _walk(value):
        assert type(node) is not tuple, node
        if isinstance(node, dict):
            assert type(node) is dict, type(node)


# --------------------------------------------------------------------------- J-020


@pytest.mark.parametrize(
    "scalar",
    [None, True, False, 0, -7, 2**62, 10**100, 1.5, -2.25, 0.0, 1e308, "", "text", "ünï ☃ 𝄞"],
)
def test_j020_scalars_are_returned_as_the_same_object(scalar: object) -> None:
    """J-020: ``None``, bools, ints, finite floats and strs come back unchanged (``is``)."""
    assert freeze_json(scalar) is scalar


def test_j020_lists_become_tuples_and_dicts_become_frozen_dicts() -> None:
    """J-020: lists → tuples, dicts → ``FrozenDict`` (insertion order kept), all the way down."""
    source: dict[str, Any] = {"b": [1, {"c": [2, 3]}], "a": {"d": None}, "e": "x"}
    frozen = freeze_json(source)
    assert type(frozen) is FrozenDict
    assert list(frozen) == ["b", "a", "e"]
    assert type(frozen["b"]) is tuple
    assert frozen["b"] == (1, FrozenDict({"c": (2, 3)}))
    assert type(frozen["b"][1]) is FrozenDict
    assert type(frozen["b"][1]["c"]) is tuple
    assert type(frozen["a"]) is FrozenDict
    assert frozen == {"b": (1, {"c": (2, 3)}), "a": {"d": None}, "e": "x"}
    # the caller's object is untouched and still mutable
    assert source == {"b": [1, {"c": [2, 3]}], "a": {"d": None}, "e": "x"}
    source["z"] = 1


def test_j020_frozen_array_is_a_tuple_not_equal_to_a_list() -> None:
    """J-020 (§2.1): frozen arrays are tuples, so they compare unequal to lists."""
    frozen = freeze_json({"tags": ["a"]})
    assert frozen == {"tags": ("a",)}
    assert frozen != {"tags": ["a"]}
    assert thaw_json(frozen) == {"tags": ["a"]}


def test_j020_tuple_with_mutable_items_becomes_a_new_tuple() -> None:
    """J-020 (§2.1): a tuple whose items change is rebuilt; the original is not modified."""
    source = (1, [2], {"a": 3})
    frozen = freeze_json(source)
    assert frozen is not source
    assert frozen == (1, (2,), {"a": 3})
    assert type(frozen[1]) is tuple
    assert type(frozen[2]) is FrozenDict
    assert source == (1, [2], {"a": 3})


def test_j020_shared_non_cyclic_references_are_accepted() -> None:
    """J-020: the same mutable container may occur several times; each occurrence is copied."""
    shared: list[Any] = [1, {"x": [2]}]
    source = {"a": shared, "b": shared, "c": [shared, shared]}
    frozen = freeze_json(source)
    assert frozen["a"] == frozen["b"] == frozen["c"][0] == frozen["c"][1] == (1, {"x": (2,)})
    for occurrence in (frozen["a"], frozen["b"], *frozen["c"]):
        assert occurrence is not shared
        assert type(occurrence) is tuple
    _assert_deeply_frozen(frozen)
    shared.append("later")  # mutating the caller's container changes nothing frozen
    assert frozen["a"] == (1, {"x": (2,)})


def test_j020_diamond_of_dicts_is_accepted() -> None:
    """J-020: a dict reachable along two paths is not a cycle."""
    leaf = {"v": 1}
    middle = {"l": leaf, "r": leaf}
    frozen = freeze_json([middle, middle, leaf])
    assert frozen == ({"l": {"v": 1}, "r": {"v": 1}},) * 2 + ({"v": 1},)


# --------------------------------------------------------------------------- J-021


class _Color(enum.Enum):
    RED = "red"


class _Level(enum.IntEnum):
    LOW = 1


class _StrSub(str):
    __slots__ = ()


class _ListSub(list[Any]):
    pass


class _DictSub(dict[str, Any]):
    pass


@attrs.frozen
class _Point:
    x: int = 1


class _Pair(NamedTuple):  # a tuple subclass
    a: int
    b: int


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (math.nan, "not lossless JSON: non-finite float at $"),
        (math.inf, "not lossless JSON: non-finite float at $"),
        (-math.inf, "not lossless JSON: non-finite float at $"),
        (-0.0, "not lossless JSON: negative zero at $"),
        ("a\ud800", "not lossless JSON: unpaired surrogate at $"),
        ("\udfff", "not lossless JSON: unpaired surrogate at $"),
        (10**5000, "not lossless JSON: integer too large at $"),
        ([1, {"a": math.nan}], "not lossless JSON: non-finite float at $[1].a"),
        ({"a": [0, -0.0]}, "not lossless JSON: negative zero at $.a[1]"),
        ({"k": ["ok", "x\udc80"]}, "not lossless JSON: unpaired surrogate at $.k[1]"),
        ((1, (2, math.inf)), "not lossless JSON: non-finite float at $[1][1]"),
        # Flat objects (the arguments' fast path) name the key too.
        ({"a": 1, "b": "x\ud800"}, "not lossless JSON: unpaired surrogate at $.b"),
        ({"a": 1, "b": 10**5000}, "not lossless JSON: integer too large at $.b"),
        ({"a": 1.5, "b": -0.0}, "not lossless JSON: negative zero at $.b"),
        (
            {"outer": {"inner": -(10**5000)}},
            "not lossless JSON: integer too large at $.outer.inner",
        ),
    ],
    ids=lambda v: v.rsplit(" ", 1)[-1] if isinstance(v, str) and v.startswith("not") else "",
)
def test_j021_rejected_scalars_name_reason_and_path(value: object, message: str) -> None:
    """J-021: NaN, ±inf, ``-0.0``, surrogates and huge ints fail with the exact §2.1 text."""
    with pytest.raises(TypeError) as info:
        freeze_json(value)
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("make", "path", "type_name"),
    [
        (lambda: set(), "$", "set"),
        (lambda: frozenset({1}), "$", "frozenset"),
        (lambda: b"bytes", "$", "bytes"),
        (lambda: bytearray(b"x"), "$", "bytearray"),
        (lambda: collections.OrderedDict(a=1), "$", "OrderedDict"),
        (lambda: collections.defaultdict(list), "$", "defaultdict"),
        (lambda: _DictSub(a=1), "$", "_DictSub"),
        (lambda: _ListSub([1]), "$", "_ListSub"),
        (lambda: _StrSub("s"), "$", "_StrSub"),
        (lambda: _Pair(1, 2), "$", "_Pair"),
        (lambda: _Color.RED, "$", "_Color"),
        (lambda: _Level.LOW, "$", "_Level"),
        (lambda: _Point(), "$", "_Point"),
        (lambda: lambda: None, "$", "function"),
        (lambda: 1 + 2j, "$", "complex"),
        (lambda: decimal.Decimal("1.5"), "$", "Decimal"),
        (lambda: datetime.datetime(2024, 1, 1), "$", "datetime"),
        (lambda: {"a": [{"b": {1, 2}}]}, "$.a[0].b", "set"),
        (lambda: [0, 1, b"x"], "$[2]", "bytes"),
    ],
)
def test_j021_unsupported_types_are_rejected(
    make: Callable[[], object], path: str, type_name: str
) -> None:
    """J-021: sets, bytes, dict/list/str/tuple subclasses, enums, attrs, callables… are rejected.

    The reason is ``unsupported type <qualified type name>`` at the offending path.
    """
    with pytest.raises(TypeError) as info:
        freeze_json(make())
    text = str(info.value)
    assert text.startswith("not lossless JSON: unsupported type "), text
    assert text.endswith(f" at {path}"), text
    assert type_name in text, text


@pytest.mark.parametrize(
    ("value", "prefix"),
    [
        ({1: "x"}, "not lossless JSON: non-str key at $"),
        ({None: "x"}, "not lossless JSON: non-str key at $"),
        ({("a",): 1}, "not lossless JSON: non-str key at $"),
        ({"ok": {2.5: 1}}, "not lossless JSON: non-str key at $.ok"),
        ({"\ud800": 1}, "not lossless JSON: unpaired surrogate at $"),
    ],
)
def test_j021_bad_keys_are_rejected(value: object, prefix: str) -> None:
    """J-021: non-``str`` keys and keys with an unpaired surrogate are rejected."""
    with pytest.raises(TypeError) as info:
        freeze_json(value)
    assert str(info.value).startswith(prefix), str(info.value)


def test_j021_cycles_are_rejected() -> None:
    """J-021: a container that contains itself is a ``cycle`` at the closing occurrence."""
    as_list: list[Any] = [1]
    as_list.insert(0, as_list)
    with pytest.raises(TypeError) as info:
        freeze_json(as_list)
    assert str(info.value) == "not lossless JSON: cycle at $[0]"

    as_dict: dict[str, Any] = {"a": 1}
    as_dict["self"] = as_dict
    with pytest.raises(TypeError) as info:
        freeze_json(as_dict)
    assert str(info.value) == "not lossless JSON: cycle at $.self"

    outer: list[Any] = []
    inner: dict[str, Any] = {"back": outer}
    outer.append(inner)
    with pytest.raises(TypeError) as info:
        freeze_json({"root": outer})
    assert str(info.value) == "not lossless JSON: cycle at $.root[0].back"


def test_j021_bool_is_the_only_accepted_subclass() -> None:
    """J-021 (§2.1): exact types; ``bool`` (an ``int`` subclass) is accepted."""
    assert freeze_json(True) is True
    assert freeze_json([False]) == (False,)
    with pytest.raises(TypeError):
        freeze_json(_Level.LOW)  # an int subclass, and an enum


# --------------------------------------------------------------------------- J-022


@pytest.mark.parametrize(
    "wrap",
    [
        pytest.param(lambda node: [node], id="lists"),
        pytest.param(lambda node: {"k": node}, id="dicts"),
        pytest.param(lambda node: {"k": [node, 0]}, id="mixed"),
        pytest.param(lambda node: (node,), id="tuples-of-lists"),
    ],
)
def test_j022_freeze_and_thaw_5000_deep(wrap: Callable[[object], object]) -> None:
    """J-022: 5000-deep nesting freezes and thaws without recursion; the round trip is equal."""
    source = nest(DEPTH, [1, "leaf"], wrap)
    frozen = freeze_json(source)
    _assert_deeply_frozen(frozen)
    assert deep_equal(frozen, source)
    assert freeze_json(frozen) is frozen
    thawed = thaw_json(frozen)
    _assert_plain(thawed)
    assert deep_equal(thawed, source)
    # the thawed copy is detached from the frozen value
    assert thawed is not frozen


def test_j022_rejection_at_depth_5000_reports_the_full_path() -> None:
    """J-022: a bad leaf 5000 levels down is found iteratively, with its full path."""
    with pytest.raises(TypeError) as info:
        freeze_json(nest(DEPTH, math.nan, lambda node: [node]))
    assert str(info.value) == "not lossless JSON: non-finite float at $" + "[0]" * DEPTH
    with pytest.raises(TypeError) as info:
        freeze_json(nest(DEPTH, -0.0, lambda node: {"k": node}))
    assert str(info.value) == "not lossless JSON: negative zero at $" + ".k" * DEPTH


def test_j022_frozen_dict_constructor_handles_5000_deep_values() -> None:
    """J-022: ``FrozenDict`` freezes its values with the same iterative walk."""
    fd = FrozenDict(root=nest(DEPTH, None, lambda node: {"k": [node]}))
    _assert_deeply_frozen(fd)


# --------------------------------------------------------------------------- J-023 / J-029


def test_j023_frozen_dict_rejects_assignment_and_deletion() -> None:
    """J-023: item assignment and deletion raise ``TypeError``; the content is unchanged."""
    fd = FrozenDict({"a": 1})
    with pytest.raises(TypeError):
        fd["a"] = 2
    with pytest.raises(TypeError):
        fd["b"] = 2
    with pytest.raises(TypeError):
        del fd["a"]
    assert fd == {"a": 1}


def test_j023_frozen_dict_is_hashable_and_equal_to_a_dict() -> None:
    """J-023: hashable, and equal to a ``dict`` with the same items."""
    fd = FrozenDict({"a": 1, "b": [2]})
    assert fd == {"a": 1, "b": (2,)}
    plain = {"a": 1, "b": (2,)}
    assert plain == fd  # dict.__eq__ on the left
    assert fd != {"a": 1}
    assert {fd: "ok"}[FrozenDict({"a": 1, "b": (2,)})] == "ok"
    assert isinstance(hash(fd), int)


@pytest.mark.parametrize(
    "mutate",
    [
        pytest.param(lambda fd: fd.update({"z": 1}), id="update"),
        pytest.param(lambda fd: fd.update(z=1), id="update-kwargs"),
        pytest.param(lambda fd: fd.pop("a"), id="pop"),
        pytest.param(lambda fd: fd.pop("missing", None), id="pop-default"),
        pytest.param(lambda fd: fd.popitem(), id="popitem"),
        pytest.param(lambda fd: fd.setdefault("z", 1), id="setdefault"),
        pytest.param(lambda fd: fd.setdefault("a", 1), id="setdefault-existing"),
        pytest.param(lambda fd: fd.clear(), id="clear"),
        pytest.param(lambda fd: fd.__setitem__("a", 2), id="setitem"),
        pytest.param(lambda fd: fd.__delitem__("a"), id="delitem"),
        pytest.param(lambda fd: fd.__ior__({"z": 1}), id="ior"),
    ],
)
def test_j029_frozen_dict_mutators_raise(mutate: Callable[[FrozenDict], object]) -> None:
    """J-029: every mutating method raises ``TypeError`` and leaves the dict as it was."""
    fd = FrozenDict({"a": 1, "b": 2})
    with pytest.raises(TypeError):
        mutate(fd)
    assert fd == {"a": 1, "b": 2}
    assert list(fd) == ["a", "b"]


def test_j029_in_place_or_operator_raises() -> None:
    """J-029: ``fd |= {...}`` raises instead of silently rebinding ``fd`` to a new dict."""
    fd = FrozenDict({"a": 1})
    original = fd
    with pytest.raises(TypeError):
        fd |= {"z": 1}
    assert fd is original
    assert fd == {"a": 1}


def test_j029_frozen_dict_is_a_dict_subclass() -> None:
    """J-029: ``isinstance(fd, dict)``; it reads like a dict and goes through ``json.dumps``."""
    fd = FrozenDict({"a": [1, 2], "b": "x"})
    assert isinstance(fd, dict)
    assert fd["a"] == (1, 2)
    assert fd.get("missing") is None
    assert len(fd) == 2
    assert list(fd.items()) == [("a", (1, 2)), ("b", "x")]
    assert json.dumps(fd) == '{"a": [1, 2], "b": "x"}'


def test_j029_equal_frozen_dicts_hash_equal_whatever_the_key_order() -> None:
    """J-029: equal ``FrozenDict``s hash equal, whatever their key order."""
    first = FrozenDict({"a": 1, "b": {"c": [1]}})
    second = FrozenDict({"b": {"c": [1]}, "a": 1})
    assert list(first) != list(second)
    assert first == second
    assert hash(first) == hash(second)
    assert len({first, second}) == 1


def test_j022_thaw_refuses_a_value_that_contains_itself() -> None:
    """``freeze_json`` rejects a cycle; ``thaw_json``, which also takes plain input, must not
    loop forever on one either. A container shared without a cycle is copied twice."""
    looped: list[Any] = []
    looped.append(looped)
    through_a_dict: dict[str, Any] = {}
    through_a_dict["x"] = {"y": [through_a_dict]}
    through_a_tuple: list[Any] = []
    through_a_tuple.append((through_a_tuple,))
    for value in (looped, through_a_dict, through_a_tuple):
        with pytest.raises(TypeError, match="contains itself"):
            thaw_json(value)
    shared = [1]
    thawed = thaw_json({"a": shared, "b": [shared]})
    assert thawed == {"a": [1], "b": [[1]]}
    assert thawed["a"] is not thawed["b"][0]


def test_j029_calling_init_again_cannot_change_a_frozen_dict() -> None:
    """Read-only includes ``__init__``: called again, it raises like every mutator, and
    the contents and the cached hash stay as they were."""
    fd = FrozenDict(a=1)
    before = hash(fd)
    with pytest.raises(TypeError, match=exactly("FrozenDict is read-only")):
        fd.__init__(b=2)
    assert fd == {"a": 1}
    assert hash(fd) == before == hash(FrozenDict(a=1))


def _deep(depth: int, *, through_lists: bool, reverse_keys: bool) -> dict[str, Any]:
    value: Any = 0
    for i in range(depth):
        child = [value, i] if through_lists else value
        items = [("n", i), ("child", child)]
        value = dict(reversed(items) if reverse_keys else items)
    return value  # type: ignore[no-any-return]


@pytest.mark.parametrize("through_lists", [False, True], ids=["objects", "objects-in-arrays"])
def test_j029_a_deeply_nested_frozen_dict_hashes_without_recursion(through_lists: bool) -> None:
    """J-029 at depth 5000 (freezing and validation are iterative; hashing is too): equal
    values hash equal whatever their key order, with no RecursionError."""
    first = freeze_json(_deep(5000, through_lists=through_lists, reverse_keys=False))
    second = freeze_json(_deep(5000, through_lists=through_lists, reverse_keys=True))
    assert hash(first) == hash(second)
    assert hash(first) == hash(first)  # cached
    different = freeze_json(_deep(4999, through_lists=through_lists, reverse_keys=False))
    assert hash(different) != hash(first)


@pytest.mark.parametrize("shared_as", ["object", "array"])
def test_j029_a_deep_value_sharing_its_parts_hashes_without_recursion(shared_as: str) -> None:
    """A part held by two parents, one of them nested deeper (1200 levels in all): the
    inner parent is hashed after the part, whichever parent the walk meets first."""
    value: Any = freeze_json({})
    for _ in range(600):
        part = value if shared_as == "object" else (value,)
        value = FrozenDict({"p": {"c": part}, "q": part})
    twin: Any = freeze_json({})
    for _ in range(600):
        part = twin if shared_as == "object" else (twin,)
        twin = FrozenDict({"q": part, "p": {"c": part}})
    assert hash(value) == hash(twin)


def test_j029_shared_containers_are_hashed_once() -> None:
    """A FrozenDict may hold the same frozen container under several keys: hashing walks
    each container once (60 levels of two references each are 2**60 paths)."""
    shared = FrozenDict({"leaf": 1})
    for _ in range(60):
        shared = FrozenDict({"a": shared, "b": shared, "c": (shared,)})
    twin = FrozenDict({"leaf": 1})
    for _ in range(60):
        twin = FrozenDict({"c": (twin,), "b": twin, "a": twin})
    assert hash(shared) == hash(twin)
    pair = (1, (2,))
    assert hash(FrozenDict({"a": pair, "b": pair})) == hash(FrozenDict({"a": (1, (2,)), "b": pair}))


@pytest.mark.parametrize(
    "clone",
    [
        pytest.param(lambda fd: pickle.loads(pickle.dumps(fd)), id="pickle"),
        pytest.param(
            lambda fd: pickle.loads(pickle.dumps(fd, protocol=pickle.HIGHEST_PROTOCOL)),
            id="pickle-highest",
        ),
        pytest.param(lambda fd: pickle.loads(pickle.dumps(fd, protocol=0)), id="pickle-0"),
        pytest.param(copy.copy, id="copy"),
        pytest.param(copy.deepcopy, id="deepcopy"),
    ],
)
def test_j029_pickle_and_copy_give_back_an_equal_frozen_dict(
    clone: Callable[[FrozenDict], object],
) -> None:
    """J-029: ``pickle``, ``copy.copy`` and ``copy.deepcopy`` give back an equal ``FrozenDict``."""
    fd = FrozenDict({"a": 1, "nested": {"b": [1, {"c": None}]}})
    twin = clone(fd)
    assert type(twin) is FrozenDict
    assert twin == fd
    assert list(twin) == list(fd)
    _assert_deeply_frozen(twin)
    assert hash(twin) == hash(fd)


def test_j029_constructor_freezes_its_values() -> None:
    """J-029: the constructor takes what ``dict`` takes and freezes every value."""
    inner = [1, {"b": [2]}]
    fd = FrozenDict({"a": inner}, extra={"x": []})
    assert fd == {"a": (1, {"b": (2,)}), "extra": {"x": ()}}
    _assert_deeply_frozen(fd)
    inner.append(3)
    assert fd["a"] == (1, {"b": (2,)})
    assert FrozenDict([("k", [1])]) == {"k": (1,)}
    assert FrozenDict() == {}
    assert freeze_json(fd) is fd


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(({1: "x"},), id="non-str-key"),
        pytest.param(({"a": math.nan},), id="nan-value"),
        pytest.param(({"a": {1, 2}},), id="set-value"),
    ],
)
def test_j029_constructor_rejects_what_freeze_json_rejects(args: tuple[object, ...]) -> None:
    """J-029 (§2.1): ``FrozenDict`` requires ``str`` keys and lossless values (``TypeError``)."""
    with pytest.raises(TypeError):
        FrozenDict(*args)


def test_j029_repr() -> None:
    """J-029 (§2.1): the repr is ``FrozenDict({...})``."""
    assert repr(FrozenDict({"a": 1})) == "FrozenDict({'a': 1})"
    assert repr(FrozenDict()) == "FrozenDict({})"


# --------------------------------------------------------------------------- J-028


def test_j028_int_above_the_digit_limit_is_rejected() -> None:
    """J-028: more digits than ``sys.get_int_max_str_digits()`` allows → ``integer too large``."""
    huge = 10**5000
    with pytest.raises(TypeError) as info:
        freeze_json(huge)
    assert str(info.value) == "not lossless JSON: integer too large at $"
    ordinary = 10**100
    assert freeze_json(ordinary) is ordinary
    # Past the always-fine size but well within the limit: accepted without formatting it,
    # alone and as a flat object's value (the arguments' fast path).
    large = 10**1000
    assert freeze_json(large) is large
    assert freeze_json({"n": large}) == {"n": large}


def test_j028_digit_limit_boundary_and_zero_means_no_limit() -> None:
    """J-028: the limit is exact (sign not counted) and a limit of 0 disables the check."""
    previous = sys.get_int_max_str_digits()
    try:
        sys.set_int_max_str_digits(4300)
        at_limit = 10**4299  # 4300 digits
        assert freeze_json(at_limit) is at_limit
        assert freeze_json(-at_limit) == -at_limit
        with pytest.raises(TypeError, match=r"^not lossless JSON: integer too large at \$$"):
            freeze_json(10**4300)  # 4301 digits
        sys.set_int_max_str_digits(0)
        huge = 10**5000
        assert freeze_json(huge) is huge
    finally:
        sys.set_int_max_str_digits(previous)


# --------------------------------------------------------------------------- J-030


async def test_j030_frozen_values_dump_directly_with_the_thawed_text() -> None:
    """J-030: ``json.dumps`` works on frozen values, a result's value, ``execution.arguments``."""
    arguments = {"path": "ä/ß", "opts": [1, 2.5, {"deep": [None, True]}], "empty": {}}
    produced = {"z": [1, {"b": "☃"}], "a": [], "n": None}
    seen_args: list[JsonValue] = []
    seen_body_args: list[JsonValue] = []

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        seen_body_args.append(args)
        return produced

    runtime = ToolRuntime()
    runtime.register(
        raw_tool(
            "dump",
            body,
            output=Output(schema={}, render=lambda args, value: [TextContent(_dumps(value))]),
        )
    )

    def guard(execution: ToolExecution) -> str | None:
        seen_args.append(execution.arguments)
        return None

    runtime.guard(guard)
    result = await run(runtime, "dump", arguments)
    assert not result.is_error, result

    frozen_values = [freeze_json(arguments), result.value, seen_args[0], seen_body_args[0]]
    plain_values = [arguments, produced, arguments, arguments]
    for frozen, plain in zip(frozen_values, plain_values, strict=True):
        _assert_deeply_frozen(frozen)
        for kwargs in ({}, {"ensure_ascii": False, "allow_nan": False}, {"sort_keys": True}):
            text = json.dumps(frozen, **kwargs)  # type: ignore[arg-type]
            assert text == json.dumps(thaw_json(frozen), **kwargs)  # type: ignore[arg-type]
            assert text == json.dumps(plain, **kwargs)  # type: ignore[arg-type]
    assert result.content == (TextContent(_dumps(produced)),)


# --------------------------------------------------------------------------- J-031


def test_j031_already_frozen_values_are_returned_as_is() -> None:
    """J-031: ``freeze_json(x) is x`` for a ``FrozenDict``, a tuple of frozen items, nested."""
    fd = FrozenDict({"a": [1, {"b": [2]}]})
    assert freeze_json(fd) is fd
    assert freeze_json(fd["a"]) is fd["a"]
    tup = (1, "x", None, fd, (2, (3, FrozenDict())))
    assert freeze_json(tup) is tup
    nested = freeze_json({"outer": [{"inner": [1, 2]}, (3,)]})
    assert freeze_json(nested) is nested
    assert freeze_json(nested["outer"]) is nested["outer"]
    assert freeze_json(nested["outer"][0]) is nested["outer"][0]
    assert freeze_json(()) == ()


def test_j031_frozen_parts_are_not_copied_again() -> None:
    """J-031 (§2.1): freezing a mutable wrapper reuses the already-frozen parts inside it."""
    fd = FrozenDict({"a": [1]})
    tup = (1, fd)
    frozen = freeze_json([fd, tup, {"k": fd}])
    assert frozen[0] is fd
    assert frozen[1] is tup
    assert frozen[2]["k"] is fd


# --------------------------------------------------------------------------- Hypothesis


@given(json_values())
def test_j027_any_json_value_survives_freeze_dumps_loads(value: object) -> None:
    """J-027: freeze → ``json.dumps`` → ``json.loads`` gives the value back (after thawing)."""
    frozen = freeze_json(value)
    text = _dumps(frozen)
    text.encode("utf-8")  # lossless: encodes as UTF-8
    assert json.loads(text) == thaw_json(frozen) == value
    assert text == _dumps(value)  # J-030: same text as the plain value


@given(json_values())
def test_j031_freeze_is_idempotent_and_thaw_is_fresh(value: object) -> None:
    """J-031: ``freeze_json(f) is f`` for frozen ``f``; thaw gives a fresh plain equal copy."""
    frozen = freeze_json(value)
    _assert_deeply_frozen(frozen)
    assert freeze_json(frozen) is frozen
    thawed = thaw_json(frozen)
    _assert_plain(thawed)
    assert deep_equal(thawed, value, tuple_is_list=False)
    if isinstance(thawed, list | dict):
        assert thawed is not value
        assert thawed is not frozen


@given(maybe_json_values())
def test_j020_j021_freeze_accepts_exactly_the_lossless_values(value: object) -> None:
    """J-020/J-021: ``freeze_json`` accepts a value iff §2.1 accepts it; rejects with the prefix."""
    if spec_accepts(value):
        frozen = freeze_json(value)
        _assert_deeply_frozen(frozen)
        assert freeze_json(frozen) is frozen
        assert json.loads(_dumps(frozen)) == thaw_json(frozen)
    else:
        with pytest.raises(TypeError) as info:
            freeze_json(value)
        assert str(info.value).startswith("not lossless JSON: "), str(info.value)
        assert " at $" in str(info.value)


@given(json_values(max_leaves=8), st.integers(2, 4))
def test_j020_shared_references_property(value: object, copies: int) -> None:
    """J-020: a value shared several times in one container freezes to equal occurrences."""
    container = {"list": [value] * copies, "dict": {str(i): value for i in range(copies)}}
    frozen = freeze_json(container)
    occurrences = [*frozen["list"], *frozen["dict"].values()]
    assert all(deep_equal(o, value) for o in occurrences)
    _assert_deeply_frozen(frozen)


_WRAPPERS: dict[str, Callable[[object], object]] = {
    "list": lambda node: [node],
    "tuple": lambda node: (node, 0),
    "dict": lambda node: {"k": node},
    "list-of-dict": lambda node: [{"a": node}],
}


@settings(max_examples=20)
@given(maybe_json_values(), st.sampled_from(sorted(_WRAPPERS)))
def test_j022_acceptance_is_unchanged_at_depth_5000(leaf: object, wrapper: str) -> None:
    """J-022/J-021: a leaf wrapped 5000 deep is accepted iff the leaf itself is (no recursion)."""
    value = nest(DEPTH, leaf, _WRAPPERS[wrapper])
    if spec_accepts(leaf):
        frozen = freeze_json(value)
        _assert_deeply_frozen(frozen)
        assert freeze_json(frozen) is frozen
        assert deep_equal(thaw_json(frozen), value)
    else:
        with pytest.raises(TypeError, match=r"^not lossless JSON: "):
            freeze_json(value)


_DEEP_ARRAY_HASH = """
from dsh_tools import FrozenDict, freeze_json
chain = 1
for _ in range(300_000):
    chain = [chain]
value = freeze_json({"a": chain})
twin = FrozenDict({"a": value["a"]})
assert hash(value) == hash(twin)
assert hash(value) != hash(freeze_json({"a": [[1]]}))
print("hashed")
"""


def test_j029_a_frozen_dict_holding_a_very_deep_array_hashes_without_recursion() -> None:
    """J-029 (decision "Depth"): a ``FrozenDict`` holding a frozen array nested 300,000
    deep, which the JSON boundary accepts, hashes. Python hashes a tuple by recursing in C,
    with no limit: this crashed the interpreter (so the check runs in a child process)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])}
    child = subprocess.run(
        [sys.executable, "-c", _DEEP_ARRAY_HASH],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (child.returncode, child.stdout, child.stderr) == (0, "hashed\n", "")


def test_j022_a_container_held_at_many_places_is_frozen_once() -> None:
    """J-022/J-029: a plain value that holds one container at several places (60 levels,
    each holding the level below twice: 2**60 places) freezes with work proportional to
    its containers. Each place gets the one frozen copy, never the caller's mutable one."""
    import dsh_tools._json as json_module

    shared: Any = {"leaf": [1]}
    levels = [shared]
    for _ in range(60):
        shared = {"a": shared, "b": [shared]}
        levels.append(shared)
    with work_budget(json_module, calls=60 * 40):
        frozen = freeze_json(shared)
    assert frozen["a"] is frozen["b"][0]
    assert type(frozen) is FrozenDict
    node = frozen
    for original in reversed(levels[1:]):
        assert node is not original
        assert type(node["b"]) is tuple
        node = node["a"]
    assert node == {"leaf": (1,)}
    assert hash(frozen) == hash(freeze_json(shared))


# ---------------------------------------------------------------- the recursive fast path


@given(maybe_json_values())
def test_j020_the_fast_path_and_the_walk_freeze_alike(value: object) -> None:
    """J-020/J-021: nested values take a recursive fast path while they are shallow and
    small; it freezes exactly what the iterative walk freezes, and gives the walk whatever
    it would reject (so the error names the path)."""
    import dsh_tools._json as json_module

    kind = type(value)
    if kind not in (dict, list, tuple):
        return
    try:
        walked = json_module._freeze_container(value, kind)
    except TypeError as exc:
        with pytest.raises(TypeError, match=exactly(str(exc))):
            json_module._freeze_nested(value, kind)
    else:
        fast = json_module._freeze_nested(value, kind)
        assert deep_equal(fast, walked)
        assert type(fast) is type(walked)
        _assert_deeply_frozen(fast)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"a": [{1: 2}]}, "non-str key at $.a[0]"),
        ({"a": [{"\ud800": 2}]}, "unpaired surrogate at $.a[0]"),
        ({"a": {"b": "\udfff"}}, "unpaired surrogate at $.a.b"),
        ([["\udfff"]], "unpaired surrogate at $[0][0]"),
        ({"a": {"b": -0.0}}, "negative zero at $.a.b"),
        ([[math.nan]], "non-finite float at $[0][0]"),
        ([[1j]], "unsupported type complex at $[0][0]"),
    ],
)
def test_j021_what_the_fast_path_refuses_is_reported_with_its_path(
    value: object, message: str
) -> None:
    """J-021: the fast path hands a value it cannot keep to the iterative walk."""
    with pytest.raises(TypeError, match=exactly(f"not lossless JSON: {message}")):
        freeze_json(value)


def test_j020_the_fast_path_keeps_frozen_parts_and_ordinary_leaves() -> None:
    """J-020/J-031: frozen dicts and tuples of frozen items are kept as they are; a big int,
    floats, booleans and ``None`` pass."""
    inner = FrozenDict({"x": 1})
    kept = (1, "é", (2.5,))
    value = {"a": [inner, kept], "b": {"n": 2**2100, "f": -1.5, "z": 0.0, "t": True, "v": None}}
    frozen = freeze_json(value)
    assert frozen["a"][0] is inner
    assert frozen["a"][1] is kept
    assert frozen["b"] == {"n": 2**2100, "f": -1.5, "z": 0.0, "t": True, "v": None}
    nested_tuple = ([1],)
    assert freeze_json({"k": nested_tuple})["k"] == ((1,),)


def test_j022_values_too_deep_or_too_large_for_the_fast_path_freeze_alike() -> None:
    """J-022: past the fast path's depth or size the iterative walk takes over, with the
    same result (a shared, already frozen tuple deep inside stays itself)."""
    import dsh_tools._json as json_module

    shared = (1, 2)
    deep: Any = [shared, shared]
    for _ in range(json_module._FAST_DEPTH + 5):
        deep = {"d": deep}
    frozen = freeze_json(deep)
    node = frozen
    while type(node) is FrozenDict:
        node = node["d"]
    assert node[0] is shared
    assert node[1] is shared
    wide = [{"i": i, "v": [i]} for i in range(json_module._FAST_CONTAINERS)]
    assert freeze_json(wide) == tuple({"i": i, "v": (i,)} for i in range(len(wide)))


def test_j022_the_fast_path_gives_way_near_the_recursion_limit() -> None:
    """J-022: called with little recursion left (a caller deep in its own recursion), the
    fast path's frames (one per level, 30 here) would overflow; the iterative walk freezes
    the value instead. Each recursion limit just above the current depth is tried: wherever
    the walk alone fits, ``freeze_json`` succeeds."""
    import dsh_tools._json as json_module

    value: Any = [1]
    for _ in range(30):
        value = {"a": value}

    def walk_alone(v: Any) -> Any:
        # As deep as freeze_json's own way to the walk: freeze_json, _freeze_nested.
        return (lambda w: json_module._freeze_container(w, dict))(v)

    def attempt(fn: Any, v: Any) -> Any:
        try:
            return fn(v)
        except RecursionError:
            return RecursionError

    limit = sys.getrecursionlimit()
    depth = len(traceback.extract_stack())
    fitted = 0
    try:
        for extra in range(120):
            try:
                sys.setrecursionlimit(depth + extra)
            except RecursionError:
                continue  # below the current depth (C calls count too)
            walked = attempt(walk_alone, value)
            frozen = attempt(freeze_json, value)
            sys.setrecursionlimit(limit)
            if walked is not RecursionError:
                fitted += 1
                assert frozen is not RecursionError, extra
                assert deep_equal(frozen, value)
                _assert_deeply_frozen(frozen)
    finally:
        sys.setrecursionlimit(limit)
    assert fitted > 0
