"""``PipelineInvariants``: check, on live traffic, that every call took a legal path."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Final, final

from ._calls import ExecutionToken, ToolExecution
from ._code_events import CodeDispatch, CodeDispatchStart
from ._results import ToolResult

if TYPE_CHECKING:
    from ._decisions import PostDecision, PreDecision
    from ._disposer import Disposer
    from ._hooks import CallNext
    from ._runtime import ToolRuntime

__all__ = ["PipelineInvariants"]

_STAGES: Final = ("pre", "execute", "post", "result")
# The stage each stage needs before it (result needs nothing: a pre-aborted call has only it).
_PREDECESSOR: Final = {"execute": "pre", "post": "pre"}


@final
class PipelineInvariants:
    """Record a violation when a call's stages are not one of the legal sequences.

    Legal, per execution token: ``result``; ``pre, result``; ``pre, post, result``;
    ``pre, execute, result``; ``pre, execute, post, result``. Violations are recorded in
    :attr:`violations` (never raised): ``repeated <stage>``, ``<stage> without
    <predecessor>``, ``<stage> after <later stage>``, an empty ``name`` or ``call_id`` at
    ``tools/result``, or a hook that receives something other than a ``ToolExecution`` /
    ``ToolResult``.

    Code Mode's sub-calls are checked too (:meth:`record_code_dispatch`): one start and one
    settle event per sub-call id, the same root in both, and every start inside its
    parent's dispatch stage.

    Example:
        >>> import trio
        >>> from dsh_tools import ToolCall, ToolRuntime, tool
        >>> @tool
        ... async def ping() -> str:
        ...     '''Answer pong.'''
        ...     return "pong"
        >>> runtime = ToolRuntime()
        >>> invariants = PipelineInvariants()
        >>> dispose = invariants.install(runtime)
        >>> _ = runtime.register(ping)
        >>> result = trio.run(runtime.execute, ToolCall(call_id="c1", name="ping"))
        >>> result.value, invariants.violations
        ('pong', [])
        >>> dispose()
    """

    __slots__ = ("_code_roots", "_code_settled", "_seen", "violations")

    def __init__(self) -> None:
        #: The violations recorded so far, in order.
        self.violations: list[str] = []
        self._seen: weakref.WeakKeyDictionary[ExecutionToken, list[str]] = (
            weakref.WeakKeyDictionary()
        )
        # Per Code Mode sub-call id: the root its start carried, and whether it settled.
        self._code_roots: dict[str, str] = {}
        self._code_settled: set[str] = set()

    def install(self, runtime: ToolRuntime) -> Disposer:
        """Register one global hook of each kind on ``runtime``; the disposer removes them all.

        Install it before other hooks so that its hooks are outermost.
        """
        disposers = [
            runtime.on_pre_execute(self._pre),
            runtime.wrap_execute(self._execute),
            runtime.on_post_execute(self._post),
            runtime.on_result(self._result),
            runtime.on_code_dispatch_start(self.record_code_dispatch),
            runtime.on_code_dispatch(self.record_code_dispatch),
        ]
        from ._disposer import Disposer

        def undo() -> None:
            for disposer in reversed(disposers):
                disposer()

        return Disposer._make(undo, None)

    def record(self, stage: str, execution: object, result: object = None) -> None:
        """Record that ``execution`` reached ``stage`` (``pre``, ``execute``, ``post`` or
        ``result``), checking the sequence so far. Public so that tests can forge sequences.

        Raises:
            ValueError: ``stage`` is not one of the four stages.
        """
        if stage not in _STAGES:
            raise ValueError(f"unknown stage {stage!r}; expected one of {', '.join(_STAGES)}")
        if type(execution) is not ToolExecution:
            self.violations.append(
                f"{stage} received {type(execution).__name__}; expected ToolExecution"
            )
            return
        if stage in ("post", "result") and type(result) is not ToolResult:
            self.violations.append(f"{stage} received {type(result).__name__}; expected ToolResult")
        if stage == "result" and (not execution.name or not execution.call_id):
            self.violations.append("result for an execution with an empty name or call_id")
        seen = self._seen.setdefault(execution.token, [])
        if stage in seen:
            self.violations.append(f"repeated {stage}")
            return
        needed = _PREDECESSOR.get(stage)
        if needed is not None and needed not in seen:
            self.violations.append(f"{stage} without {needed}")
        order = _STAGES.index(stage)
        later = [s for s in seen if _STAGES.index(s) > order]
        if later:
            self.violations.append(f"{stage} after {later[0]}")
        seen.append(stage)

    def record_code_dispatch(self, event: object) -> None:
        """Record a Code Mode sub-call's start (``CodeDispatchStart``) or settlement
        (``CodeDispatch``), checking the sequence so far. Public so that tests can forge
        sequences; it never raises.

        Violations: ``code dispatch with an empty id``, ``code dispatch <id> started
        twice``, ``... settled without a start``, ``... settled twice``, ``... changed root
        from "<a>" to "<b>"`` and ``... outside its parent's dispatch stage`` (a start while
        the parent execution is not between its ``execute`` and ``result`` stages as
        recorded here).
        """
        if not isinstance(event, CodeDispatchStart | CodeDispatch):
            self.violations.append(
                f"code dispatch received {type(event).__name__}; expected CodeDispatchStart "
                "or CodeDispatch"
            )
            return
        sub_call_id = event.sub_call_id
        if not (event.root_call_id and event.parent_call_id and sub_call_id):
            self.violations.append("code dispatch with an empty id")
            return
        roots = self._code_roots
        if isinstance(event, CodeDispatchStart):
            if sub_call_id in roots:
                self.violations.append(f"code dispatch {sub_call_id} started twice")
                return
            roots[sub_call_id] = event.root_call_id
            parent = event.execution.parent
            stages = None if parent is None else self._seen.get(parent)
            if stages is None or "execute" not in stages or "result" in stages:
                self.violations.append(
                    f"code dispatch {sub_call_id} outside its parent's dispatch stage"
                )
            return
        root = roots.get(sub_call_id)
        if root is None:
            self.violations.append(f"code dispatch {sub_call_id} settled without a start")
        elif sub_call_id in self._code_settled:
            self.violations.append(f"code dispatch {sub_call_id} settled twice")
        elif root != event.root_call_id:
            self.violations.append(
                f'code dispatch {sub_call_id} changed root from "{root}" to "{event.root_call_id}"'
            )
        self._code_settled.add(sub_call_id)

    async def _pre(self, execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        self.record("pre", execution)
        return await call_next()

    async def _execute(
        self, execution: ToolExecution, call_next: CallNext[ToolResult]
    ) -> ToolResult:
        self.record("execute", execution)
        return await call_next()

    async def _post(
        self, execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        self.record("post", execution, result)
        return await call_next()

    def _result(self, execution: ToolExecution, result: ToolResult) -> None:
        self.record("result", execution, result)
