"""The values of the code-runtime protocol: limits, outcomes, ToolCallError, CodeRunFailedError."""

from __future__ import annotations

import copy
import math
import pickle
from typing import Any

import pytest

from dsh_tools import (
    CODE_RUN_FAILED,
    UNSET,
    CodeRunFailedError,
    FrozenDict,
    ToolRuntime,
)
from dsh_tools._code_values import is_valid_code_runtime
from dsh_tools.code import (
    CODE_MODE_SOURCE,
    CodeRunFailureKind,
    CodeRunLimits,
    CodeRunOutcome,
    ToolCallError,
)

from .helpers import raw_tool, run


async def test_l041_for_run_as_a_result() -> None:
    """L-041: for_run("syntax", "x") has code CODE_RUN_FAILED, message and info as a result."""
    exc = CodeRunFailedError.for_run("syntax", "x")
    assert exc.code == CODE_RUN_FAILED
    assert str(exc) == "code run failed (syntax): x"

    async def body(args: Any, ctx: Any) -> None:
        raise exc

    runtime = ToolRuntime()
    runtime.register(raw_tool("t", body))
    result = await run(runtime, "t")
    assert result.is_error
    assert result.error is not None
    assert result.error.info is not None
    assert (result.error.info.name, result.error.info.code) == (
        "CodeRunFailedError",
        CODE_RUN_FAILED,
    )
    assert result.error.message == "code run failed (syntax): x"


def test_l080_for_run_api() -> None:
    """L-080: kind, detail, logs; unknown kinds; pickle and copy; the plain constructor."""
    exc = CodeRunFailedError.for_run("output-limit", "too much", ["a", "b"])
    assert exc.kind is CodeRunFailureKind.OUTPUT_LIMIT
    assert (exc.detail, exc.logs) == ("too much", ("a", "b"))
    assert str(exc) == "code run failed (output-limit): too much\nCaptured output:\na\nb"
    for clone in (pickle.loads(pickle.dumps(exc)), copy.copy(exc), copy.deepcopy(exc)):
        assert isinstance(clone, CodeRunFailedError)
        assert (clone.kind, clone.detail, clone.logs) == (exc.kind, exc.detail, exc.logs)
        assert str(clone) == str(exc)
    with pytest.raises(ValueError, match=r'^unknown code run failure kind "weird"$'):
        CodeRunFailedError.for_run("weird", "x")
    plain = CodeRunFailedError("plain")
    assert (plain.kind, plain.detail, plain.logs, str(plain)) == (None, None, (), "plain")
    assert [k.value for k in CodeRunFailureKind] == [
        "syntax",
        "exception",
        "timeout",
        "memory",
        "output-limit",
        "result",
        "internal",
    ]


def make_limits(fields: dict[str, Any]) -> CodeRunLimits:
    return CodeRunLimits(**fields)


def test_l081_limits_defaults_and_checks() -> None:
    """L-081: defaults; seconds must be positive finite numbers; ints positive integers."""
    limits = CodeRunLimits()
    assert (
        limits.cpu_seconds,
        limits.wall_seconds,
        limits.memory_bytes,
        limits.output_bytes,
        limits.max_sub_calls,
    ) == (10.0, 300.0, 268435456, 1048576, 1000)
    assert type(CodeRunLimits(wall_seconds=5).wall_seconds) is float
    for field in ("cpu_seconds", "wall_seconds"):
        message = f"^CodeRunLimits.{field} must be a positive finite number$"
        for bad in (0, -1.0, math.inf, math.nan, 10**400):
            with pytest.raises(ValueError, match=message):
                make_limits({field: bad})
        for wrong in ("1", True, None):
            with pytest.raises(TypeError, match=message):
                make_limits({field: wrong})
    for field in ("memory_bytes", "output_bytes", "max_sub_calls"):
        message = f"^CodeRunLimits.{field} must be a positive integer$"
        with pytest.raises(ValueError, match=message):
            make_limits({field: 0})
        for not_int in (1.0, True, "3"):
            with pytest.raises(TypeError, match=message):
                make_limits({field: not_int})


def test_l082_outcome() -> None:
    """L-082: logs become a tuple of str; result is frozen; UNSET by default."""
    assert CodeRunOutcome(logs=["a"]).logs == ("a",)
    assert CodeRunOutcome().result is UNSET
    assert CodeRunOutcome().logs == ()
    for bad in ([1], "ab", 3, None):
        with pytest.raises(TypeError, match=r"^CodeRunOutcome.logs must be a sequence of str$"):
            CodeRunOutcome(logs=bad)
    frozen = CodeRunOutcome(result={"k": [1, 2]}).result
    assert isinstance(frozen, FrozenDict)
    assert frozen == {"k": (1, 2)}
    with pytest.raises(TypeError):
        CodeRunOutcome(result={1, 2})


def test_tool_call_error_shape() -> None:
    """code-mode §7.4: tool_name, message, str(); pickle and copy round-trip."""
    err = ToolCallError("fs.read", "no such file")
    assert not isinstance(err, CodeRunFailedError)
    assert (err.tool_name, err.message, str(err)) == ("fs.read", "no such file", "no such file")
    for clone in (pickle.loads(pickle.dumps(err)), copy.copy(err)):
        assert (clone.tool_name, clone.message, str(clone)) == (
            "fs.read",
            "no such file",
            "no such file",
        )


def test_code_mode_source_and_runtime_check() -> None:
    """The image-message source; what counts as a valid code runtime (code-mode §2.2)."""
    assert CODE_MODE_SOURCE == {"kind": "plugin", "plugin": "tools-code-mode"}

    class Good:
        language = "python"

        async def run(self, code: str, **kw: object) -> CodeRunOutcome:
            return CodeRunOutcome()

    class SyncRun:
        language = "python"

        def run(self) -> None:
            return None

    class Exploding:
        @property
        def language(self) -> str:
            raise RuntimeError("no")

    class NoLanguage:
        async def run(self) -> None:
            return None

    assert is_valid_code_runtime(Good())
    assert not is_valid_code_runtime(SyncRun())
    assert not is_valid_code_runtime(Exploding())
    assert not is_valid_code_runtime(NoLanguage())
    assert not is_valid_code_runtime(object())
