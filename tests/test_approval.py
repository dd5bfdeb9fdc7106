"""Conformance group P, approval items P-006..P-014: resolving ``Ask`` (runtime.md §9)."""

from __future__ import annotations

from typing import Any

import pytest

from dsh_tools import (
    Abort,
    ApprovalOutcome,
    ApprovalRequest,
    Ask,
    CallNext,
    ErrorInfo,
    HarnessError,
    JsonValue,
    PostDecision,
    PreDecision,
    ToolExecution,
    ToolResult,
    ToolRunContext,
    ToolRuntime,
)
from tests.helpers import make_echo
from tests.pipeline_helpers import denied, failure, raw_tool, tool_call


class FakeApproval:
    """An approval service that records its requests and answers with a fixed outcome."""

    def __init__(self, outcome: object) -> None:
        self.outcome = outcome
        self.requests: list[ApprovalRequest] = []

    async def request(self, request: ApprovalRequest) -> Any:
        self.requests.append(request)
        return self.outcome


class RaisingApproval:
    """An approval service that fails."""

    async def request(self, request: ApprovalRequest) -> ApprovalOutcome:
        raise HarnessError("approval backend down", "APPROVAL_DOWN")


def _asking(reason: str | None) -> Any:
    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        return Ask(reason)

    return pre


class _Traffic:
    """A runtime with ``echo`` whose pre hook asks; records body runs, guards and post hooks."""

    def __init__(self, reason: str | None = "needs review", *, approval: Any = None) -> None:
        self.log: list[str] = []
        self.runtime = ToolRuntime(approval=approval)
        self.runtime.register(raw_tool(execute=self._body))
        self.runtime.on_pre_execute(_asking(reason))
        self.runtime.guard(self._guard)
        self.runtime.on_post_execute(self._post)

    async def _body(self, args: JsonValue, ctx: ToolRunContext) -> object:
        self.log.append("body")
        return args["text"]

    def _guard(self, execution: ToolExecution) -> str | None:
        self.log.append("guard")
        return None

    async def _post(
        self, execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        self.log.append("post")
        return await call_next()


async def test_p006_ask_with_reason_and_no_service() -> None:
    """P-006: ``Ask("needs review")`` with no service denies with the reason."""
    traffic = _Traffic("needs review")
    result = await traffic.runtime.execute(tool_call())
    assert result == denied("needs review")
    assert traffic.log == ["post"]


async def test_p006_no_service_wins_over_a_missing_scope() -> None:
    """P-006 (§9): with no service, a scoped call is denied with the reason too."""
    traffic = _Traffic("needs review")
    scope = traffic.runtime.open_scope()
    result = await traffic.runtime.execute(tool_call(scope=scope))
    assert result == denied("needs review")


async def test_p007_ask_without_reason_and_no_service() -> None:
    """P-007: ``Ask()`` with no service → ``tool "echo" requires approval (not yet supported)``."""
    runtime = ToolRuntime()
    runtime.register(make_echo())
    runtime.on_pre_execute(_asking(None))
    result = await runtime.execute(tool_call())
    assert result == denied('tool "echo" requires approval (not yet supported)')


async def test_p008_allowed_once_dispatches_with_an_exact_request() -> None:
    """P-008: ``ALLOWED_ONCE`` dispatches; the request carries the call's exact data."""
    service = FakeApproval(ApprovalOutcome.ALLOWED_ONCE)
    traffic = _Traffic("please confirm", approval=service)
    scope = traffic.runtime.open_scope(name="agent")
    abort = Abort()
    result = await traffic.runtime.execute(
        tool_call(scope=scope, abort=abort, call_id="call-approve")
    )
    assert result.is_error is False
    assert result.value == "hi"
    assert traffic.log == ["guard", "body", "post"]
    [request] = service.requests
    assert request.scope is scope
    assert request.tool_name == "echo"
    assert request.call_id == "call-approve"
    assert request.reason == "please confirm"
    assert request.abort is abort


async def test_p008_allowed_once_still_runs_the_guards() -> None:
    """P-008 (§9): an ask resolved to allow is still subject to the guards."""
    service = FakeApproval(ApprovalOutcome.ALLOWED_ONCE)
    traffic = _Traffic(approval=service)
    traffic.runtime.guard(lambda execution: "guard says no")
    scope = traffic.runtime.open_scope()
    result = await traffic.runtime.execute(tool_call(scope=scope))
    assert result == denied("guard says no")
    assert "body" not in traffic.log
    assert len(service.requests) == 1


@pytest.mark.parametrize(
    ("outcome", "text"),
    [
        (ApprovalOutcome.REJECTED, 'the user rejected tool "echo"'),
        (ApprovalOutcome.CANCELLED, 'approval for tool "echo" was cancelled'),
        (
            ApprovalOutcome.UNAVAILABLE,
            'tool "echo" requires approval, but no approval channel is available',
        ),
    ],
    ids=["P-009-rejected", "P-010-cancelled", "P-011-unavailable"],
)
async def test_p009_p010_p011_unsuccessful_outcomes(outcome: ApprovalOutcome, text: str) -> None:
    """P-009 / P-010 / P-011: ``REJECTED``, ``CANCELLED`` (no abort), ``UNAVAILABLE``."""
    service = FakeApproval(outcome)
    traffic = _Traffic(approval=service)
    scope = traffic.runtime.open_scope()
    call = tool_call(scope=scope)
    result = await traffic.runtime.execute(call)
    assert result == denied(text)
    assert traffic.log == ["post"]
    assert len(service.requests) == 1
    assert not call.abort.aborted


async def test_p012_scope_less_ask_does_not_reach_the_service() -> None:
    """P-012: with a service, a scope-less ``Ask`` is denied without asking."""
    service = FakeApproval(ApprovalOutcome.ALLOWED_ONCE)
    traffic = _Traffic(approval=service)
    result = await traffic.runtime.execute(tool_call())
    assert result == denied(
        'tool "echo" requires approval, but the call has no scope to route it through'
    )
    assert service.requests == []
    assert traffic.log == ["post"]


async def test_p013_service_returns_an_unknown_outcome() -> None:
    """P-013: an outcome outside ``ApprovalOutcome`` → final ``unreachable`` error, no post."""
    service = FakeApproval("yes")
    traffic = _Traffic(approval=service)
    scope = traffic.runtime.open_scope()
    result = await traffic.runtime.execute(tool_call(scope=scope))
    assert result == failure("unreachable variant in ApprovalOutcome: 'yes'")
    assert traffic.log == []


async def test_p013_service_raises() -> None:
    """P-013 (§9, §7.8): a raising service is a final error with its info; no post."""
    traffic = _Traffic(approval=RaisingApproval())
    scope = traffic.runtime.open_scope()
    result = await traffic.runtime.execute(tool_call(scope=scope))
    assert result == failure("approval backend down", ErrorInfo("HarnessError", "APPROVAL_DOWN"))
    assert traffic.log == []


async def test_p014_approval_assigned_after_construction() -> None:
    """P-014: ``runtime.approval`` is read at ask time, so a later assignment is used."""
    traffic = _Traffic("needs review")
    scope = traffic.runtime.open_scope()
    before = await traffic.runtime.execute(tool_call(scope=scope))
    assert before == denied("needs review")

    service = FakeApproval(ApprovalOutcome.ALLOWED_ONCE)
    traffic.runtime.approval = service
    after = await traffic.runtime.execute(tool_call(scope=scope))
    assert after.is_error is False
    assert len(service.requests) == 1

    traffic.runtime.approval = None
    again = await traffic.runtime.execute(tool_call(scope=scope))
    assert again == denied("needs review")
    assert len(service.requests) == 1
