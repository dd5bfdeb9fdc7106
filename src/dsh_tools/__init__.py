"""dsh_tools: the tool runtime of dsh-trio.

Register tools globally or per scope, install policy as hooks and guards, and run calls
through one pipeline that turns every failure into a frozen, lossless result with a stable
error code. Importing the package does nothing: a :class:`ToolRuntime` is an explicit object.
"""

from ._abort import Abort
from ._approval import ApprovalOutcome, ApprovalRequest, ApprovalService
from ._calls import ExecutionToken, ToolCall, ToolExecution, ToolRunContext
from ._code_events import (
    CodeDispatch,
    CodeDispatchLogHook,
    CodeDispatchObserver,
    CodeDispatchStart,
    CodeDispatchStartObserver,
)
from ._code_present import CodeModePrompt, PresentationMode
from ._content import ContentBlock, ImageContent, TextContent, UserMessage
from ._decisions import UNSET, Accept, Allow, Ask, Block, Deny, PostDecision, PreDecision
from ._define import define_tool
from ._definition import ExecutionMode, Output, ToolDefinition, ToolSchema
from ._disposer import Disposer
from ._errors import (
    ABORTED,
    ABORTED_BEFORE_DISPATCH,
    CODE_RUN_FAILED,
    INVALID_ARGS,
    INVALID_TOOL_OUTPUT,
    TOOL_DENIED,
    TOOL_TIMEOUT,
    UNKNOWN_TOOL,
    AbortError,
    CodeRunFailedError,
    ErrorCode,
    HarnessError,
    JsonSchemaError,
    ToolArgsError,
    ToolDeniedError,
    ToolNotFoundError,
    ToolOutputError,
    ToolTimeoutError,
)
from ._hooks import (
    CallNext,
    ChangeObserver,
    ExecuteWrapper,
    Guard,
    PostExecuteHook,
    PreExecuteHook,
    ResultObserver,
)
from ._json import FrozenDict, JsonValue, freeze_json, thaw_json
from ._registry import RUN_CODE_NAME
from ._results import ErrorInfo, ToolError, ToolResult, error_result
from ._runtime import ToolRuntime
from ._schema_check import assert_supported_json_schema
from ._schema_validate import validate_args, validate_json_value
from ._scope import Scope
from ._statistics import RuntimeStatistics, ScopeStatistics
from ._tool_decorator import tool

__all__ = [
    "ABORTED",
    "ABORTED_BEFORE_DISPATCH",
    "CODE_RUN_FAILED",
    "INVALID_ARGS",
    "INVALID_TOOL_OUTPUT",
    "RUN_CODE_NAME",
    "TOOL_DENIED",
    "TOOL_TIMEOUT",
    "UNKNOWN_TOOL",
    "UNSET",
    "Abort",
    "AbortError",
    "Accept",
    "Allow",
    "ApprovalOutcome",
    "ApprovalRequest",
    "ApprovalService",
    "Ask",
    "Block",
    "CallNext",
    "ChangeObserver",
    "CodeDispatch",
    "CodeDispatchLogHook",
    "CodeDispatchObserver",
    "CodeDispatchStart",
    "CodeDispatchStartObserver",
    "CodeModePrompt",
    "CodeRunFailedError",
    "ContentBlock",
    "Deny",
    "Disposer",
    "ErrorCode",
    "ErrorInfo",
    "ExecuteWrapper",
    "ExecutionMode",
    "ExecutionToken",
    "FrozenDict",
    "Guard",
    "HarnessError",
    "ImageContent",
    "JsonSchemaError",
    "JsonValue",
    "Output",
    "PostDecision",
    "PostExecuteHook",
    "PreDecision",
    "PreExecuteHook",
    "PresentationMode",
    "ResultObserver",
    "RuntimeStatistics",
    "Scope",
    "ScopeStatistics",
    "TextContent",
    "ToolArgsError",
    "ToolCall",
    "ToolDefinition",
    "ToolDeniedError",
    "ToolError",
    "ToolExecution",
    "ToolNotFoundError",
    "ToolOutputError",
    "ToolResult",
    "ToolRunContext",
    "ToolRuntime",
    "ToolSchema",
    "ToolTimeoutError",
    "UserMessage",
    "assert_supported_json_schema",
    "define_tool",
    "error_result",
    "freeze_json",
    "thaw_json",
    "tool",
    "validate_args",
    "validate_json_value",
]
