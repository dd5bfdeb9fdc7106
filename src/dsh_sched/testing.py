"""Testing tools for the scheduler: trace recording, invariant checking and fuzzing.

``TraceRecorder``, ``TraceEvent`` and ``check_trace`` need nothing beyond ``dsh_sched``.
The Hypothesis strategies and the fuzz runner (``scenarios``, ``run_scenario``,
``model_tool_calls``, ``run_checked``, ...) are loaded on first access, so ``hypothesis``
is only needed by code that uses them::

    from dsh_sched.testing import run_scenario, scenarios  # needs hypothesis
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._trace import TraceEvent, TraceRecorder, check_trace

if TYPE_CHECKING:
    from ._strategies import (
        FuzzInterrupt as FuzzInterrupt,
    )
    from ._strategies import (
        HookSpec as HookSpec,
    )
    from ._strategies import (
        Scenario as Scenario,
    )
    from ._strategies import (
        ScenarioRun as ScenarioRun,
    )
    from ._strategies import (
        SinkFailure as SinkFailure,
    )
    from ._strategies import (
        ToolSpec as ToolSpec,
    )
    from ._strategies import (
        build_runtime as build_runtime,
    )
    from ._strategies import (
        check_scenario_run as check_scenario_run,
    )
    from ._strategies import (
        hook_specs as hook_specs,
    )
    from ._strategies import (
        model_tool_calls as model_tool_calls,
    )
    from ._strategies import (
        moments as moments,
    )
    from ._strategies import (
        run_checked as run_checked,
    )
    from ._strategies import (
        run_scenario as run_scenario,
    )
    from ._strategies import (
        scenarios as scenarios,
    )
    from ._strategies import (
        tool_specs as tool_specs,
    )

__all__ = ["TraceEvent", "TraceRecorder", "check_trace"]

_STRATEGY_NAMES = frozenset(
    {
        "FuzzInterrupt",
        "HookSpec",
        "Scenario",
        "ScenarioRun",
        "SinkFailure",
        "ToolSpec",
        "build_runtime",
        "check_scenario_run",
        "hook_specs",
        "model_tool_calls",
        "moments",
        "run_checked",
        "run_scenario",
        "scenarios",
        "tool_specs",
    }
)


def __getattr__(name: str) -> Any:
    # PEP 562 lazy attribute: importing dsh_sched.testing must not require hypothesis.
    if name in _STRATEGY_NAMES:
        try:
            module = importlib.import_module("dsh_sched._strategies")
        except ModuleNotFoundError as exc:
            if exc.name != "hypothesis":
                raise
            raise ImportError(
                f"dsh_sched.testing.{name} needs hypothesis: pip install hypothesis"
            ) from exc
        return getattr(module, name)
    raise AttributeError(f"module 'dsh_sched.testing' has no attribute {name!r}")
