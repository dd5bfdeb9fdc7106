"""dsh_tools.code: Code Mode's code runtimes and the protocol they follow.

A model in Code Mode calls one tool, ``run_code``, whose argument is a short Python program;
a *code runtime* runs it, and each tool call the program makes is an ordinary nested call
through the runtime's pipeline. Importing this module imports no sandbox.
"""

from ._code_sdk import render_python_sdk
from ._code_trusted import TrustedCodeRuntime
from ._code_values import (
    CODE_MODE_SOURCE,
    CodeRunLimits,
    CodeRunOutcome,
    CodeRuntime,
    Dispatch,
    ToolCallError,
)
from ._errors import CodeRunFailureKind
from ._wasi._artifact import PYTHON_WASM_SHA256, PYTHON_WASM_SIZE
from ._wasi._runtime import WasiCodeRuntime

__all__ = [
    "CODE_MODE_SOURCE",
    "PYTHON_WASM_SHA256",
    "PYTHON_WASM_SIZE",
    "CodeRunFailureKind",
    "CodeRunLimits",
    "CodeRunOutcome",
    "CodeRuntime",
    "Dispatch",
    "ToolCallError",
    "TrustedCodeRuntime",
    "WasiCodeRuntime",
    "render_python_sdk",
]
