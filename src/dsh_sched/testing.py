"""Testing tools for the scheduler: trace recording, invariant checking and fuzzing.

And the batch timeline, drawn from a recorded trace.

``TraceRecorder``, ``TraceEvent``, ``check_trace`` and the timeline (``timeline_rows``,
``TimelineRow``, ``render_timeline``) need nothing beyond ``dsh_sched``. The fuzzing kit is
loaded on first access: its Hypothesis strategies (``scenarios``, ``model_tool_calls``,
``moments``, ...) need ``hypothesis``; its harness and runners (``build_runtime``,
``run_scenario``, ``run_checked``, ``check_scenario_run``, ...) do not::

    from dsh_sched.testing import run_scenario, scenarios  # scenarios needs hypothesis
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._timeline_rows import TimelineRow, timeline_rows
from ._timeline_svg import render_timeline
from ._trace_checker import check_trace
from ._trace_recorder import TraceEvent, TraceRecorder

if TYPE_CHECKING:
    from ._fuzz_harness import build_runtime as build_runtime
    from ._fuzz_runners import (
        check_scenario_run as check_scenario_run,
    )
    from ._fuzz_runners import (
        run_checked as run_checked,
    )
    from ._fuzz_runners import (
        run_scenario as run_scenario,
    )
    from ._fuzz_scenario import (
        FuzzInterrupt as FuzzInterrupt,
    )
    from ._fuzz_scenario import (
        HookSpec as HookSpec,
    )
    from ._fuzz_scenario import (
        Scenario as Scenario,
    )
    from ._fuzz_scenario import (
        ScenarioRun as ScenarioRun,
    )
    from ._fuzz_scenario import (
        SinkFailure as SinkFailure,
    )
    from ._fuzz_scenario import (
        ToolSpec as ToolSpec,
    )
    from ._fuzz_strategies import (
        hook_specs as hook_specs,
    )
    from ._fuzz_strategies import (
        model_tool_calls as model_tool_calls,
    )
    from ._fuzz_strategies import (
        moments as moments,
    )
    from ._fuzz_strategies import (
        scenarios as scenarios,
    )
    from ._fuzz_strategies import (
        tool_specs as tool_specs,
    )

__all__ = [
    "TimelineRow",
    "TraceEvent",
    "TraceRecorder",
    "check_trace",
    "render_timeline",
    "timeline_rows",
]

#: The fuzzing kit's names, and the private module each is loaded from on first access.
_FUZZ_NAMES: dict[str, str] = {
    "FuzzInterrupt": "_fuzz_scenario",
    "HookSpec": "_fuzz_scenario",
    "Scenario": "_fuzz_scenario",
    "ScenarioRun": "_fuzz_scenario",
    "SinkFailure": "_fuzz_scenario",
    "ToolSpec": "_fuzz_scenario",
    "build_runtime": "_fuzz_harness",
    "check_scenario_run": "_fuzz_runners",
    "run_checked": "_fuzz_runners",
    "run_scenario": "_fuzz_runners",
    "hook_specs": "_fuzz_strategies",
    "model_tool_calls": "_fuzz_strategies",
    "moments": "_fuzz_strategies",
    "scenarios": "_fuzz_strategies",
    "tool_specs": "_fuzz_strategies",
}


def __getattr__(name: str) -> Any:
    # PEP 562 lazy attribute: importing dsh_sched.testing must not require hypothesis.
    module_name = _FUZZ_NAMES.get(name)
    if module_name is None:
        raise AttributeError(f"module 'dsh_sched.testing' has no attribute {name!r}")
    try:
        module = importlib.import_module(f"dsh_sched.{module_name}")
    except ModuleNotFoundError as exc:
        if exc.name != "hypothesis":
            raise
        raise ImportError(
            f"dsh_sched.testing.{name} needs hypothesis: pip install hypothesis"
        ) from exc
    return getattr(module, name)
