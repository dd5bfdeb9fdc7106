"""Testing helpers for code built on ``dsh_tools``."""

from ._code_scripted import ScriptedCodeRuntime
from ._invariants import PipelineInvariants

__all__ = ["PipelineInvariants", "ScriptedCodeRuntime"]
