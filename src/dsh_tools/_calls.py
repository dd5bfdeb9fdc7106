"""Calls and executions: ``ToolCall``, ``ToolExecution``, ``ExecutionToken``, ``ToolRunContext``."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any, NoReturn, final

import attrs

from ._abort import Abort
from ._content import UserMessage
from ._json import JsonValue
from ._scope import Scope
from ._slots import slot_setter

if TYPE_CHECKING:
    from ._results import ToolResult
    from ._runtime import ToolRuntime

__all__ = ["ExecState", "ExecutionToken", "Stage", "ToolCall", "ToolExecution", "ToolRunContext"]

_token_numbers = itertools.count(1)


@final
class ExecutionToken:
    """An opaque, hashable identity of one execution; ``repr`` is ``<ExecutionToken #n>``.

    Key per-call hook state by it: every stage of one call sees the same token.
    """

    __slots__ = ("__weakref__", "_n")
    _n: int

    def __init__(self) -> None:
        raise TypeError("ExecutionToken cannot be created directly; the runtime mints tokens")

    @classmethod
    def _mint(cls) -> ExecutionToken:
        self = object.__new__(cls)
        self._n = next(_token_numbers)
        return self

    def __repr__(self) -> str:
        return f"<ExecutionToken #{self._n}>"

    def __reduce__(self) -> Any:
        raise TypeError("an ExecutionToken is a live identity and cannot be pickled")


def _wrong_type(field: str, expected: str, value: object) -> NoReturn:
    raise TypeError(f"ToolCall.{field} must be {expected}, got {type(value).__name__}")


@final
@attrs.frozen(kw_only=True)
class ToolCall:
    """One request to run a tool.

    Args:
        call_id: The model's id for the call.
        name: The tool name.
        arguments: The raw arguments; the runtime snapshots them with ``freeze_json``.
        scope: The scope whose view resolves the tool (``None``: the global view).
        abort: The :class:`Abort` that cancels this call's body (default: a fresh one).
        root_call_id: Defaults to ``call_id`` in the execution.
        parent: The execution token of the enclosing call, for nested calls.

    Raises:
        TypeError: a field of the wrong type.
    """

    call_id: str
    name: str
    arguments: object = attrs.field(factory=dict)
    scope: Scope | None = None
    abort: Abort = attrs.field(factory=Abort)
    root_call_id: str | None = None
    parent: ExecutionToken | None = None

    def __attrs_post_init__(self) -> None:
        # One check method instead of one attrs validator per field: a ToolCall is built
        # per scheduled call, so this is on the hot path.
        if type(self.call_id) is not str:
            _wrong_type("call_id", "a str", self.call_id)
        if type(self.name) is not str:
            _wrong_type("name", "a str", self.name)
        if self.scope is not None and type(self.scope) is not Scope:
            _wrong_type("scope", "a Scope or None", self.scope)
        if type(self.abort) is not Abort:
            _wrong_type("abort", "an Abort", self.abort)
        if self.root_call_id is not None and type(self.root_call_id) is not str:
            _wrong_type("root_call_id", "a str or None", self.root_call_id)
        if self.parent is not None and type(self.parent) is not ExecutionToken:
            _wrong_type("parent", "an ExecutionToken or None", self.parent)


class Stage:
    """Where an execution stands in the staged pipeline (private bookkeeping)."""

    CREATED = 0
    PREPARING = 1
    READY = 2
    DISPATCHING = 3
    NEEDS_FINALIZE = 4
    FINALIZING = 5
    NEEDS_FINISH = 6
    FINISHED = 7


@final
class ExecState:
    """The runtime's private, mutable state of one execution (lives in its private slot)."""

    __slots__ = (
        "body_started",
        "canonical",
        "concluded",
        "ctx_active",
        "deferred",
        "finalizer",
        "lossless",
        "runtime",
        "stage",
        "stage0_error",
    )

    def __init__(self, runtime: ToolRuntime) -> None:
        self.runtime = runtime
        self.stage = Stage.CREATED
        self.body_started = False
        self.concluded = False
        self.ctx_active = True
        self.deferred: list[UserMessage] | None = None
        self.canonical: list[ToolResult] | None = None
        self.finalizer: Any = None
        self.stage0_error: ToolResult | None = None
        #: The last success built from a value: known lossless, so stage 4 skips its check.
        self.lossless: ToolResult | None = None

    @property
    def finished(self) -> bool:
        return self.stage == Stage.FINISHED

    def deferred_contexts(self) -> tuple[UserMessage, ...]:
        return () if self.deferred is None else tuple(self.deferred)

    def is_canonical(self, result: ToolResult) -> bool:
        canonical = self.canonical
        if canonical is None:
            return False
        return any(result is r for r in canonical)


@final
@attrs.frozen(kw_only=True, eq=False, init=False)
class ToolExecution:
    """The runtime's frozen snapshot of one call; every stage of the call sees this object.

    Created only by the runtime. ``arguments`` is frozen JSON (``None`` when the arguments
    could not be snapshotted), ``abort`` is the caller's own object and ``token`` is unique
    per execution. Executions compare by identity.
    """

    call_id: str
    root_call_id: str
    name: str
    arguments: JsonValue
    scope: Scope | None
    parent: ExecutionToken | None
    abort: Abort
    token: ExecutionToken
    _state: ExecState = attrs.field(repr=False, alias="_state")

    def __init__(self) -> None:
        raise TypeError("ToolExecution is created by the runtime only")

    @classmethod
    def _make(
        cls,
        call: ToolCall,
        arguments: JsonValue,
        state: ExecState,
    ) -> ToolExecution:
        self = object.__new__(cls)
        call_id = call.call_id
        root = call.root_call_id
        _SET_CALL_ID(self, call_id)
        _SET_ROOT_CALL_ID(self, call_id if root is None else root)
        _SET_NAME(self, call.name)
        _SET_ARGUMENTS(self, arguments)
        _SET_SCOPE(self, call.scope)
        _SET_PARENT(self, call.parent)
        _SET_ABORT(self, call.abort)
        token = object.__new__(ExecutionToken)  # ExecutionToken._mint(), inlined
        token._n = next(_token_numbers)
        _SET_TOKEN(self, token)
        _SET_STATE(self, state)
        return self


# The slots' own setters: the runtime fills a new execution without the frozen __setattr__.
_SET_CALL_ID = slot_setter(ToolExecution, "call_id")
_SET_ROOT_CALL_ID = slot_setter(ToolExecution, "root_call_id")
_SET_NAME = slot_setter(ToolExecution, "name")
_SET_ARGUMENTS = slot_setter(ToolExecution, "arguments")
_SET_SCOPE = slot_setter(ToolExecution, "scope")
_SET_PARENT = slot_setter(ToolExecution, "parent")
_SET_ABORT = slot_setter(ToolExecution, "abort")
_SET_TOKEN = slot_setter(ToolExecution, "token")
_SET_STATE = slot_setter(ToolExecution, "_state")


_INACTIVE = "tool call context is no longer active"


@final
class ToolRunContext:
    """What a tool body receives as its second argument.

    It exposes the execution's read-only attributes, the execution itself, and two actions
    that are valid only while the call's dispatch stage runs.
    """

    __slots__ = ("_execution", "_state")
    _execution: ToolExecution
    _state: ExecState

    def __init__(self) -> None:
        raise TypeError("ToolRunContext is created by the runtime only")

    @classmethod
    def _make(cls, execution: ToolExecution) -> ToolRunContext:
        self = object.__new__(cls)
        self._execution = execution
        self._state = execution._state
        return self

    def __repr__(self) -> str:
        e = self._execution
        return f"<ToolRunContext {e.name!r} call_id={e.call_id!r} {e.token!r}>"

    @property
    def execution(self) -> ToolExecution:
        """The frozen :class:`ToolExecution` of this call."""
        return self._execution

    @property
    def call_id(self) -> str:
        """The model's id for the call."""
        return self._execution.call_id

    @property
    def root_call_id(self) -> str:
        """The id of the top-level call this one belongs to."""
        return self._execution.root_call_id

    @property
    def name(self) -> str:
        """The tool name."""
        return self._execution.name

    @property
    def arguments(self) -> JsonValue:
        """The frozen arguments."""
        return self._execution.arguments

    @property
    def scope(self) -> Scope | None:
        """The call's scope."""
        return self._execution.scope

    @property
    def parent(self) -> ExecutionToken | None:
        """The enclosing call's token, for nested calls."""
        return self._execution.parent

    @property
    def abort(self) -> Abort:
        """The caller's :class:`Abort`."""
        return self._execution.abort

    @property
    def token(self) -> ExecutionToken:
        """This execution's token."""
        return self._execution.token

    def defer_context(self, message: UserMessage) -> None:
        """Attach ``message`` to this call's result as an additional context.

        Raises:
            TypeError: ``message`` is not a :class:`UserMessage`.
            RuntimeError: the call's dispatch stage has ended.
        """
        if type(message) is not UserMessage:
            raise TypeError("defer_context() expects a UserMessage")
        state = self._state
        if not state.ctx_active:
            raise RuntimeError(_INACTIVE)
        if state.deferred is None:
            state.deferred = [message]
        else:
            state.deferred.append(message)

    def conclude_turn(self) -> None:
        """Mark the call as concluding the agent's turn.

        Raises:
            RuntimeError: the call's dispatch stage has ended.
        """
        state = self._state
        if not state.ctx_active:
            raise RuntimeError(_INACTIVE)
        state.concluded = True
