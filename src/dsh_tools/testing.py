"""Testing helpers for code built on ``dsh_tools``."""

from ._invariants import PipelineInvariants

__all__ = ["PipelineInvariants"]
