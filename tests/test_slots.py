"""The per-call values built by filling a plain base and sealing it (``dsh_tools._slots``).

Each factory must give an object that is in every way the frozen class's own instance: the
exact type, frozen, weak-referenceable, equal (and hashing equal, where the class hashes)
to what the constructor builds from the same fields, and usable with attrs' functions. A
class whose attrs decorator added slots of its own is refused where it is defined: its
fields would live in other slots than the factories write.
"""

from __future__ import annotations

import copy
import weakref
from typing import TYPE_CHECKING, Any

import attrs
import pytest

from dsh_sched import ModelToolCall
from dsh_sched._outcome import CommittedCall, committed_call
from dsh_tools import (
    Abort,
    ExecutionMode,
    TextContent,
    ToolCall,
    ToolResult,
    ToolRuntime,
    freeze_json,
    lowlevel,
)
from dsh_tools._calls import ExecState, ToolExecution, unchecked_tool_call
from dsh_tools._content import text_block
from dsh_tools._results import ToolError, error_result, sealed_result
from dsh_tools._slots import sealable, sealed_factory, slot_setter
from dsh_tools._steps import NeedsFinalize, ReadyToDispatch, needs_finalize, ready_to_dispatch

if TYPE_CHECKING:
    from collections.abc import Callable

_ABORT = Abort()
_FROZEN = freeze_json({"a": 1})
_OK = ToolResult(is_error=False, content=(TextContent("ok"),), value=3)
_CALL = ModelToolCall(call_id="c", name="t", arguments="{}")
_EXECUTION = lowlevel.create(ToolRuntime(), ToolCall(call_id="c1", name="t"))
_STATE = _EXECUTION._state

# name: (the factory's value, the constructor's value from the same fields)
_BUILT: dict[str, Callable[[], tuple[Any, Any]]] = {
    "ToolCall": lambda: (
        unchecked_tool_call("c1", "t", _FROZEN, None, _ABORT, "r", None),
        ToolCall(call_id="c1", name="t", arguments=_FROZEN, abort=_ABORT, root_call_id="r"),
    ),
    "TextContent": lambda: (text_block("ok"), TextContent("ok")),
    "ToolResult success": lambda: (
        sealed_result(False, (TextContent("ok"),), 3, None, _FROZEN, (), True),
        ToolResult(
            is_error=False, content=(TextContent("ok"),), value=3, meta=_FROZEN, concludes_turn=True
        ),
    ),
    "ToolResult error": lambda: (
        error_result(ValueError("boom")),
        ToolResult(
            is_error=True, content=(TextContent("Error: boom"),), error=ToolError("boom", None)
        ),
    ),
    "ReadyToDispatch": lambda: (
        ready_to_dispatch(_STATE, _EXECUTION),
        ReadyToDispatch(_EXECUTION),
    ),
    "NeedsFinalize": lambda: (
        needs_finalize(_STATE, _EXECUTION, _OK),
        NeedsFinalize(_EXECUTION, _OK),
    ),
    "CommittedCall": lambda: (
        committed_call(2, _CALL, _OK, False, ExecutionMode.PARALLEL),
        CommittedCall(
            index=2, call=_CALL, result=_OK, synthetic=False, mode=ExecutionMode.PARALLEL
        ),
    ),
}


@pytest.mark.parametrize("name", list(_BUILT))
def test_a_sealed_value_is_the_frozen_class_own_instance(name: str) -> None:
    built, constructed = _BUILT[name]()
    cls = type(constructed)
    assert type(built) is cls
    assert vars(cls)["__slots__"] == ()  # every field lives in the base's slots
    assert built == constructed
    if cls.__hash__ is not None:
        assert hash(built) == hash(constructed)
    assert repr(built) == repr(constructed)
    assert attrs.asdict(built, recurse=False) == attrs.asdict(constructed, recurse=False)
    field = attrs.fields(cls)[0].name
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        setattr(built, field, None)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        delattr(built, field)
    assert weakref.ref(built)() is built
    assert copy.copy(built) == built


def test_a_sealed_execution_reads_back_every_field() -> None:
    # ToolExecution has no public constructor: compare with the call it was made from.
    call = ToolCall(call_id="c9", name="t", arguments={"a": 1}, abort=_ABORT)
    state = ExecState(ToolRuntime())
    execution = ToolExecution._make(call, {"a": 1}, state)
    assert type(execution) is ToolExecution
    assert vars(ToolExecution)["__slots__"] == ()
    assert (execution.call_id, execution.root_call_id, execution.name) == ("c9", "c9", "t")
    assert execution.arguments == {"a": 1}
    assert (execution.scope, execution.parent, execution.abort) == (None, None, _ABORT)
    assert execution._state is state
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        execution.name = "other"  # type: ignore[misc]
    assert weakref.ref(execution)() is execution


def test_a_class_with_slots_of_its_own_is_refused_where_it_is_defined() -> None:
    class Base:
        __slots__ = ("__weakref__", "a")

    with pytest.raises(
        TypeError, match=r"Wide must take all its slots from its base, not \('b',\)"
    ):

        @sealable
        @attrs.frozen
        class Wide(Base):
            a: int
            b: int

    @sealable
    @attrs.frozen
    class Fits(Base):
        a: int

    assert Fits(1).a == 1


def test_a_slot_setter_writes_a_slot_its_class_inherits() -> None:
    call = ToolCall(call_id="c1", name="t")
    slot_setter(ToolCall, "name")(call, "renamed")
    assert call.name == "renamed"


def test_a_sealed_factory_is_compiled_from_its_signature() -> None:
    class Base:
        __slots__ = ("__weakref__", "a", "b")

    @sealable
    @attrs.frozen
    class Pair(Base):
        a: int
        b: str

    @sealed_factory(Pair)
    def pair(b: str, a: int) -> Pair:
        """A Pair, by position or keyword."""
        raise AssertionError("compiled by sealed_factory")  # pragma: no cover

    assert pair("x", 1) == Pair(1, "x")
    assert type(pair(a=2, b="y")) is Pair
    assert (pair.__name__, pair.__doc__) == ("pair", "A Pair, by position or keyword.")
    assert pair.__annotations__ == {"b": "str", "a": "int", "return": "Pair"}
    assert pair.__qualname__.endswith("<locals>.pair")
    assert unchecked_tool_call.__module__ == "dsh_tools._calls"

    def missing(a: int) -> Pair:
        raise AssertionError  # pragma: no cover

    with pytest.raises(TypeError, match=r"missing\(\) must take exactly the fields of Pair"):
        sealed_factory(Pair)(missing)

    @attrs.frozen
    class Wide(Base):
        a: int
        b: str
        c: int

    with pytest.raises(
        TypeError, match=r"Wide must take all its slots from its base, not \('c',\)"
    ):
        sealed_factory(Wide)
