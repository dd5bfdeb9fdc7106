"""Hypothesis strategies for fuzzing tool sets against the trace invariants.

Importing this module needs ``hypothesis``; nothing else in ``dsh_sched`` does. Reach it
through ``dsh_sched.testing`` (for example ``from dsh_sched.testing import scenarios``).

Two ways to fuzz:

- :func:`scenarios` generates everything (tools, classifiers, bodies, hooks, calls,
  ``max_parallel``, abort/cancel moments, sink failures); :func:`run_scenario` runs one and
  :func:`check_scenario_run` checks it.
- For your own tools: register ``recorder.instrument(defn)`` on a runtime with a
  :class:`~dsh_sched.testing.TraceRecorder`, draw calls with :func:`model_tool_calls` and
  moments with :func:`moments`, and run :func:`run_checked`.

Run each example under ``trio.testing.MockClock(autojump_threshold=0)``: every run of a
:class:`Scenario` from :func:`scenarios` is then deterministic (the same trace and the same
outcome every time), and the moments below are virtual seconds.

The timing model that makes generated runs deterministic is described in
:mod:`dsh_sched._fuzz_scenario`; the moments drawn here follow it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hypothesis import strategies as st

from ._calls import ModelToolCall
from ._fuzz_scenario import (
    ABORT_PHASE,
    BLOCK_PHASE,
    CANCEL_PHASE,
    CLOSE_PHASE,
    DELAYS,
    STEP,
    BodyKind,
    HookSpec,
    Scenario,
    ToolSpec,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["hook_specs", "model_tool_calls", "moments", "scenarios", "tool_specs"]


def moments(*, phase: float = ABORT_PHASE) -> st.SearchStrategy[float | None]:
    """``None`` (never), ``0.0`` (before the batch starts) or ``phase + k/2`` for k in 0..7.

    The default phase puts every moment on an odd multiple of a quarter second, strictly
    between the half seconds on which whole-half-second waits end. Give each kind of moment
    its own phase, so that two never coincide: :func:`scenarios` uses 1/4 for the abort,
    1/8 for the cancellation and 3/8 for the block's exception.

    Args:
        phase: Where in each half second the moments fall.

    Raises:
        ValueError: ``phase`` is not strictly between 0 and 0.5.
    """
    if not 0 < phase < STEP:
        raise ValueError(f"phase must be strictly between 0 and 0.5, got {phase!r}")
    # k = -1 stands for 0.0: "before the batch starts" as often as any one moment.
    return st.one_of(
        st.none(), st.integers(-1, 7).map(lambda k: 0.0 if k < 0 else phase + k * STEP)
    )


@st.composite
def tool_specs(draw: st.DrawFn, name: str, *, allow_interrupt: bool = True) -> ToolSpec:
    """A generated tool named ``name``.

    Args:
        draw: Supplied by Hypothesis.
        name: The tool's name.
        allow_interrupt: Whether an ``interrupt`` body may be drawn.
    """
    bodies: list[BodyKind] = [
        "instant",
        "sleep",
        "sleep",
        "raise",
        "swallow_cancel",
        "shielded",
        "abort_batch",
    ]
    if allow_interrupt:
        bodies.append("interrupt")
    return ToolSpec(
        finalizer_interrupts=allow_interrupt and draw(st.integers(0, 9)) == 0,
        name=name,
        classifier=draw(
            st.sampled_from(("parallel", "parallel", "exclusive", "raises", "by_argument"))
        ),
        body=draw(st.sampled_from(bodies)),
        delay=draw(st.sampled_from(DELAYS)),
        contexts=draw(st.integers(0, 2)),
        concludes=draw(st.booleans()),
    )


def hook_specs(
    tool_names: Sequence[str], *, allow_interrupt: bool = True
) -> st.SearchStrategy[HookSpec]:
    """A generated hook targeting one of ``tool_names`` (an observer that raises
    :class:`FuzzInterrupt` only with ``allow_interrupt``)."""
    pre = st.sampled_from(("deny", "ask", "raise", "sleep", "flip"))
    post = st.sampled_from(("block", "raise", "sleep", "flip"))
    tools = st.sampled_from(tuple(tool_names))
    delays = st.sampled_from(DELAYS)
    return st.one_of(
        st.builds(HookSpec, stage=st.just("pre"), action=pre, tool=tools, delay=delays),
        st.builds(HookSpec, stage=st.just("post"), action=post, tool=tools, delay=delays),
        st.builds(
            HookSpec,
            stage=st.just("observer"),
            action=st.sampled_from(("flip", "flip", "interrupt") if allow_interrupt else ("flip",)),
            tool=tools,
            delay=delays,
        ),
    )


def _arguments() -> st.SearchStrategy[str | dict[str, Any]]:
    return st.one_of(
        st.just(""),
        st.just("{bad"),
        st.just("NaN"),
        st.just('{"parallel": true}'),
        st.just('{"parallel": false}'),
        st.just("[1, 2]"),
        st.fixed_dictionaries({"parallel": st.booleans()}),
        st.fixed_dictionaries({}, optional={"text": st.text(max_size=3)}),
    )


def model_tool_calls(
    tool_names: Sequence[str], *, max_size: int = 8, unknown: bool = True
) -> st.SearchStrategy[tuple[ModelToolCall, ...]]:
    """A batch of calls to ``tool_names`` (and, if ``unknown``, to a missing tool).

    Arguments are drawn from a small set of raw texts (empty, malformed, ``NaN``, arrays,
    objects with ``"parallel"``) and mappings. Call ids are ``c0``, ``c1``, ...
    """
    names = list(tool_names) + (["missing"] if unknown else [])

    def build(items: list[tuple[str, str | dict[str, Any]]]) -> tuple[ModelToolCall, ...]:
        return tuple(
            ModelToolCall(call_id=f"c{i}", name=name, arguments=arguments)
            for i, (name, arguments) in enumerate(items)
        )

    return st.lists(st.tuples(st.sampled_from(names), _arguments()), max_size=max_size).map(build)


@st.composite
def scenarios(
    draw: st.DrawFn,
    *,
    max_tools: int = 4,
    max_calls: int = 8,
    max_hooks: int = 3,
    allow_interrupt: bool = True,
) -> Scenario:
    """A whole fuzzed batch: tools, hooks, calls, limits, aborts, cancellations, failures.

    Args:
        draw: Supplied by Hypothesis.
        max_tools: The most tools in the tool set.
        max_calls: The most calls in the batch.
        max_hooks: The most generated hooks.
        allow_interrupt: Whether native interruptions (:class:`FuzzInterrupt`) may occur.
    """
    count = draw(st.integers(1, max_tools))
    names = [f"t{i}" for i in range(count)]
    tools = tuple(draw(tool_specs(name, allow_interrupt=allow_interrupt)) for name in names)
    hooks = tuple(
        draw(st.lists(hook_specs(names, allow_interrupt=allow_interrupt), max_size=max_hooks))
    )
    calls = draw(model_tool_calls(names, max_size=max_calls))
    use_open_batch = draw(st.booleans())
    return Scenario(
        tools=tools,
        hooks=hooks,
        calls=calls,
        max_parallel=draw(st.integers(1, 4)),
        abort_at=draw(moments(phase=ABORT_PHASE)),
        cancel_at=draw(moments(phase=CANCEL_PHASE)),
        block_raises_at=draw(moments(phase=BLOCK_PHASE)) if use_open_batch else None,
        sink_fails_at=draw(st.one_of(st.none(), st.integers(0, 2 * max_calls + 2))),
        iterate=draw(st.booleans()) if use_open_batch else False,
        keep_results=draw(st.booleans()),
        use_open_batch=use_open_batch,
        close_scope_at=draw(moments(phase=CLOSE_PHASE)),
    )
