"""The fuzzing kit's data: generated tools, hooks and scenarios, a run's record, and timing.

The values :mod:`dsh_sched._fuzz_strategies` draws and the harness and runners
(:mod:`dsh_sched._fuzz_harness`, :mod:`dsh_sched._fuzz_runners`) consume. Nothing here needs
``hypothesis``.

Run each example under ``trio.testing.MockClock(autojump_threshold=0)``: every run of a
:class:`Scenario` from ``scenarios`` is then deterministic (the same trace and the same
outcome every time), and the moments below are virtual seconds.


Timing. trio runs the tasks that are ready in one scheduling round in a random order, and
tasks whose waits end at the same virtual time are ready together; so a generated scenario
keeps apart every two tasks whose order would show in the trace or the outcome:

- The driver's waits end on the half-second grid: ``sleep`` hooks wait until a half
  second, and a pacing pre-execute hook, the innermost, waits for the next one before
  every dispatch. So the driver dispatches at most one body per instant, and each body's
  first steps run alone.
- Each body's waits end on its own lane: the grid shifted by an odd number of 64ths of a
  second (128ths beyond 16 calls, and so on), one lane per dispatched call. Bodies start
  on the grid, so a body waits its ``delay`` plus its lane. A body cancelled together with
  others waits, shielded, for its lane's next point before it ends: each reacts at its own
  time.
- Injected moments are odd multiples of 1/8 s, off the grid and every lane, with one phase
  per kind so that two never coincide: the batch ``Abort`` fires at ``k/2 + 1/4``, the
  scope is cancelled at ``k/2 + 1/8`` and the block raises at ``k/2 + 3/8`` (``k`` from 0
  to 7). A moment of ``0.0`` means "before the batch starts": it is applied before the
  batch is entered, not raced against it.

What else is ready at one of these instants (the driver reacting to a cancellation, the
block reading the iteration, trio's own tasks) records nothing or is the only task that
records. ``run_checked`` with your own tools is as deterministic as your tools are.

One thing is not part of the deterministic record: the instant at which something ends
the batch early (an interruption, an internal failure, a cancellation, the block's
exception). The tasks ready at that instant race with the exception: a body dispatched just
before may or may not take its first step, and the block's reader may or may not take the
last commits (``ScenarioRun.iterated`` is then only a prefix of the committed calls, which
``check_scenario_run`` checks). Everything before that instant repeats; every run's trace
satisfies the invariants either way.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias, final

import attrs

from ._calls import ModelToolCall
from ._outcome import BatchOutcome, CommittedCall

__all__ = [
    "ABORT_PHASE",
    "BLOCK_PHASE",
    "CANCEL_PHASE",
    "DELAYS",
    "STEP",
    "BlockError",
    "BodyKind",
    "Classifier",
    "FuzzInterrupt",
    "HookAction",
    "HookSpec",
    "HookStage",
    "Scenario",
    "ScenarioRun",
    "SinkFailure",
    "ToolSpec",
]

Classifier: TypeAlias = Literal["parallel", "exclusive", "raises", "by_argument"]
BodyKind: TypeAlias = Literal[
    "instant", "sleep", "raise", "swallow_cancel", "shielded", "abort_batch", "interrupt"
]
HookStage: TypeAlias = Literal["pre", "post", "observer"]
HookAction: TypeAlias = Literal["deny", "ask", "raise", "sleep", "block", "flip", "interrupt"]

#: Body and hook delays: whole numbers of grid steps.
DELAYS = (0.0, 0.5, 1.0, 2.0, 3.0)
#: The grid the driver's waits end on (virtual seconds); lanes and phases are fractions of it.
STEP = 0.5
#: Where in each half second the injected moments of each kind fall: multiples of 1/8, so
#: never on the grid (0) nor on a lane (an odd number of 64ths, or finer).
ABORT_PHASE = 0.25
CANCEL_PHASE = 0.125
BLOCK_PHASE = 0.375
#: Scope closings fall on sixteenths (an even number of 64ths): no lane, no other phase.
CLOSE_PHASE = 0.0625


class FuzzInterrupt(BaseException):
    """A ``KeyboardInterrupt`` stand-in raised by ``interrupt`` bodies.

    Not an ``Exception`` and not ``Cancelled``: the batch treats it as native cancellation
    (scheduler.md §9), without disturbing the test runner the way a real
    ``KeyboardInterrupt`` would.
    """


class SinkFailure(Exception):
    """Raised by the scenario's failing sink: an internal failure of the batch (§8)."""


class BlockError(Exception):
    """Raised by the ``async with open_batch`` block of a scenario (scheduler.md §9)."""


@final
@attrs.frozen(kw_only=True)
class ToolSpec:
    """One generated tool.

    Attributes:
        name: Its name.
        classifier: ``parallel`` / ``exclusive`` (a ``bool``), ``raises`` (a classifier
            that raises, so ``EXCLUSIVE``) or ``by_argument`` (``PARALLEL`` exactly when the
            arguments are an object with ``"parallel": true``).
        body: ``instant``, ``sleep`` (``delay`` seconds), ``raise`` (after ``delay``),
            ``swallow_cancel`` (catches ``Cancelled`` and returns), ``shielded`` (sleeps in
            a shielded scope), ``abort_batch`` (fires the batch ``Abort`` and returns),
            ``interrupt`` (raises :class:`FuzzInterrupt` after ``delay``).
        delay: Virtual seconds the body waits, at least: the wait ends on the call's lane
            (see the module docstring), and a cancelled wait ends at its next lane point.
        contexts: How many contexts the body defers (0–2).
        concludes: Whether the body concludes the turn.
        finalizer_interrupts: Whether its ``finalize_content`` raises
            :class:`FuzzInterrupt` (a ``BaseException`` out of stage 4).
    """

    name: str
    classifier: Classifier
    body: BodyKind
    delay: float
    contexts: int
    concludes: bool
    finalizer_interrupts: bool = False


@final
@attrs.frozen(kw_only=True)
class HookSpec:
    """One generated hook, acting only on calls of ``tool``.

    ``flip`` (any stage) re-registers ``tool`` with the opposite fixed classification: a
    registry change that live reclassification must see. ``interrupt`` (observers) raises
    :class:`FuzzInterrupt` out of a result observer, a ``BaseException`` out of stage 4.
    ``sleep`` makes the stage slow.
    ``deny``/``ask``/``raise`` are pre-execute decisions (``ask`` with no approval service
    is a denial); ``block``/``raise`` are post-execute decisions. A ``sleep`` waits at least
    ``delay`` virtual seconds, until a half second (the driver's grid).
    """

    stage: HookStage
    action: HookAction
    tool: str
    delay: float


@final
@attrs.frozen(kw_only=True)
class Scenario:
    """Everything one fuzzed batch needs.

    Attributes:
        tools: The tool set.
        hooks: Hooks installed after the recorder's.
        calls: The batch.
        max_parallel: The batch's ``max_parallel``.
        abort_at: When the batch ``Abort`` fires (virtual seconds after the start), or
            never; ``0.0`` fires it before the batch starts.
        cancel_at: When the scope around the batch is cancelled, or never; ``0.0``
            cancels it before the batch starts.
        block_raises_at: With ``open_batch``, when the block raises :class:`BlockError`
            (at once if its iteration ended later; ``0.0``: on entering the block).
        sink_fails_at: The sink event (0-based) whose forwarding raises
            :class:`SinkFailure`, or never.
        iterate: Whether the block iterates the batch (with ``open_batch``).
        keep_results: The batch's ``keep_results``.
        use_open_batch: ``open_batch`` in a block, rather than ``run_tool_calls``.
        close_scope_at: When the batch's scope is closed (the batch then runs in a scope
            of its own), or never; ``0.0`` closes it before the batch starts.

    Runs are deterministic when no two moments are equal and none falls on the half-second
    grid or on a lane (see the module docstring), as :func:`scenarios` draws them; ``0.0``
    is always safe.
    """

    tools: tuple[ToolSpec, ...]
    hooks: tuple[HookSpec, ...]
    calls: tuple[ModelToolCall, ...]
    max_parallel: int
    abort_at: float | None
    cancel_at: float | None
    block_raises_at: float | None
    sink_fails_at: int | None
    iterate: bool
    keep_results: bool
    use_open_batch: bool
    close_scope_at: float | None = None


@final
@attrs.frozen(kw_only=True)
class ScenarioRun:
    """What running one batch produced.

    Attributes:
        events: The recorder's trace.
        outcome: The batch's outcome (``None`` unless it finished).
        failure: The internal failure it raised (:class:`SinkFailure`), if any.
        interrupted: The native exception it raised (:class:`FuzzInterrupt`), if any.
        block_error: The :class:`BlockError` it raised, if any.
        cancelled: Whether the enclosing scope absorbed a cancellation.
        iterated: What the block's iteration yielded, or ``None`` if it did not iterate.
        max_parallel: The batch's ``max_parallel``.
        problems: What the run's monitor saw go wrong at ``on_call`` time: a call started
            after the batch ``Abort`` fired (§6), or under a mode other than the one it
            classifies as at that moment (§4.2).
        aborted_at: When the batch ``Abort`` fired (``trio.current_time()``), or ``None``.
    """

    events: tuple[Any, ...]
    outcome: BatchOutcome | None
    failure: SinkFailure | None
    interrupted: FuzzInterrupt | None
    block_error: BlockError | None
    cancelled: bool
    iterated: tuple[CommittedCall, ...] | None
    max_parallel: int
    problems: tuple[str, ...] = ()
    aborted_at: float | None = None
