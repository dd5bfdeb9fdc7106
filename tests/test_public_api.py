"""The public surface of ``dsh_tools`` is exactly runtime.md §1, and every name is documented."""

from __future__ import annotations

import inspect

import dsh_tools
import dsh_tools.cli
import dsh_tools.examples
import dsh_tools.lowlevel
import dsh_tools.policies
import dsh_tools.testing

SPEC_NAMES = {
    "ToolRuntime", "Scope", "Disposer", "ToolDefinition", "Output", "define_tool", "tool",
    "ToolCall", "ToolExecution", "ExecutionToken", "ToolRunContext", "ToolResult", "ToolError",
    "ErrorInfo", "error_result", "ToolSchema", "ExecutionMode", "TextContent", "ImageContent",
    "ContentBlock", "UserMessage", "Allow", "Deny", "Ask", "Accept", "Block", "UNSET", "Abort",
    "ApprovalService", "ApprovalRequest", "ApprovalOutcome", "HarnessError",
    "ToolNotFoundError", "ToolArgsError", "ToolOutputError", "ToolTimeoutError", "AbortError",
    "ToolDeniedError",
    "CodeRunFailedError", "JsonSchemaError", "ErrorCode", "freeze_json", "thaw_json",
    "FrozenDict", "JsonValue", "validate_args", "validate_json_value",
    "assert_supported_json_schema", "CallNext", "PreDecision", "PostDecision",
    "PreExecuteHook", "ExecuteWrapper", "PostExecuteHook", "ResultObserver", "ChangeObserver",
    "Guard", "RUN_CODE_NAME",
    # Issue 12: introspection snapshots (trio's statistics() habit), beyond the spec's list.
    "RuntimeStatistics", "ScopeStatistics",
    # Code Mode (code-mode §1).
    "PresentationMode", "CodeModePrompt",
    # Code Mode's events (code-mode §1).
    "CodeDispatchStart", "CodeDispatch", "CodeDispatchStartObserver", "CodeDispatchObserver",
    "CodeDispatchLogHook",
}  # fmt: skip
ERROR_CODE_CONSTANTS = {code.name for code in dsh_tools.ErrorCode}


def test_dsh_tools_all_is_the_spec_surface() -> None:
    assert set(dsh_tools.__all__) == SPEC_NAMES | ERROR_CODE_CONSTANTS
    assert len(dsh_tools.__all__) == len(set(dsh_tools.__all__))
    assert {
        "UNKNOWN_TOOL", "INVALID_ARGS", "INVALID_TOOL_OUTPUT", "TOOL_TIMEOUT", "ABORTED",
        "ABORTED_BEFORE_DISPATCH", "TOOL_DENIED", "CODE_RUN_FAILED",
    } == ERROR_CODE_CONSTANTS  # fmt: skip
    for name in ERROR_CODE_CONSTANTS:
        assert getattr(dsh_tools, name) == name
    assert dsh_tools.RUN_CODE_NAME == "run_code"


def test_submodules_export_exactly_their_names() -> None:
    assert sorted(dsh_tools.lowlevel.__all__) == sorted(
        ["create", "prepare", "dispatch", "dispatch_in_abort_scope", "finalize", "finish",
         "Lane", "LaneClient", "LaneStatistics", "is_cancellation", "exception_leaves",
         "is_async_callable", "parse_json_text", "parse_frozen_json_text", "split_cancelled",
         "finished_result", "cancelled_result", "unchecked_tool_call",
         "ReadyToDispatch", "NeedsFinalize", "NeedsFinish"]
    )  # fmt: skip
    assert dsh_tools.policies.__all__ == ["install_timeout_policy"]
    assert dsh_tools.testing.__all__ == ["PipelineInvariants", "ScriptedCodeRuntime"]
    assert sorted(dsh_tools.cli.__all__) == ["UnknownEntryError", "inspect_report", "main"]


def test_every_exported_name_resolves_and_public_callables_are_documented() -> None:
    modules = [
        dsh_tools,
        dsh_tools.lowlevel,
        dsh_tools.policies,
        dsh_tools.testing,
        dsh_tools.cli,
        dsh_tools.examples,
    ]
    for module in modules:
        for name in module.__all__:
            value = getattr(module, name)
            if inspect.isclass(value) or inspect.isfunction(value):
                assert inspect.getdoc(value), f"{module.__name__}.{name} has no docstring"
