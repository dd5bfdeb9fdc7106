"""Checking the scheduler's invariants I1, I2 and I4–I12 on one batch's trace (§12, §14).

The checker is pure: it reads the events a :class:`~dsh_sched.testing.TraceRecorder`
recorded and reports every violated invariant at once.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Final, final

from dsh_tools import (
    ABORTED,
    ABORTED_BEFORE_DISPATCH,
    ExecutionMode,
    ExecutionToken,
    ToolResult,
)

from ._sinks import CallCommitted, CallStarted, ContextAccepted
from ._trace_recorder import SINK_KINDS, SUB_CALL_KINDS

if TYPE_CHECKING:
    from collections.abc import Collection, Sequence

    from ._outcome import BatchOutcome
    from ._trace_recorder import TraceEvent

__all__ = ["check_trace"]


_Span = tuple[int, int]  # positions in the event list; an open span ends at len(events)


def _code(result: ToolResult) -> str | None:
    error = result.error
    if error is None or error.info is None:
        return None
    return error.info.code


def _overlap(a: _Span, b: _Span) -> bool:
    return a[0] < b[1] and b[0] < a[1]


#: The invariants :func:`check_trace` checks (I3 is read_session_log's).
_CHECKED: Final = frozenset(f"I{n}" for n in (1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12))


@final
class _Checker:
    """One pass over a trace; every violation is collected, then reported together."""

    def __init__(
        self,
        events: Sequence[TraceEvent],
        max_parallel: int,
        outcome: BatchOutcome | None,
        failure: BaseException | None,
    ) -> None:
        self.events = events
        self.end = len(events)
        self.max_parallel = max_parallel
        self.outcome = outcome
        self.failure = failure
        self.violations: list[str] = []
        self.calls: dict[int, list[tuple[int, CallStarted]]] = {}
        self.results: dict[int, list[tuple[int, CallCommitted]]] = {}
        self.call_order: list[tuple[int, CallStarted]] = []
        self.result_order: list[tuple[int, CallCommitted]] = []
        self.contexts: list[tuple[int, ContextAccepted]] = []
        self.token_index: dict[ExecutionToken, int] = {}
        self.spans: dict[str, dict[int, list[_Span]]] = {"pre": {}, "post": {}, "body": {}}
        self.observed: dict[int, list[tuple[int, ToolResult]]] = {}

    def bad(self, invariant: str, text: str) -> None:
        self.violations.append(f"{invariant}: {text}")

    # -- indexing ---------------------------------------------------------------------

    def index_events(self) -> None:
        batches = {e.batch for e in self.events if e.kind in SINK_KINDS}
        if len(batches) > 1:
            raise ValueError(
                f"check_trace checks one batch; these events come from batches "
                f"{sorted(b for b in batches if b is not None)}: filter them first"
            )
        for pos, e in enumerate(self.events):
            detail = e.detail
            if e.kind == "call" and isinstance(detail, CallStarted):
                self.calls.setdefault(detail.index, []).append((pos, detail))
                self.call_order.append((pos, detail))
                if detail.token is not None:
                    self.token_index[detail.token] = detail.index
            elif e.kind == "result" and isinstance(detail, CallCommitted):
                self.results.setdefault(detail.index, []).append((pos, detail))
                self.result_order.append((pos, detail))
            elif e.kind == "context" and isinstance(detail, ContextAccepted):
                self.contexts.append((pos, detail))
        # Hook and body spans of this batch's executions; events of other executions
        # (nested batches, direct execute() calls inside bodies) are not this batch's.
        open_spans: dict[tuple[str, ExecutionToken], list[int]] = {}
        for pos, e in enumerate(self.events):
            if e.token is None or e.kind in SINK_KINDS or e.kind in SUB_CALL_KINDS:
                continue
            index = self.token_index.get(e.token)
            if index is None:
                continue
            if e.kind == "observed" and isinstance(e.detail, ToolResult):
                self.observed.setdefault(index, []).append((pos, e.detail))
                continue
            what, _, edge = e.kind.partition("_")
            if edge == "start":
                open_spans.setdefault((what, e.token), []).append(pos)
            else:  # "end": the other kinds with a token were handled above
                starts = open_spans.get((what, e.token))
                if starts:
                    self.spans[what].setdefault(index, []).append((starts.pop(), pos))
        for (what, token), starts in open_spans.items():
            for start in starts:
                self.spans[what].setdefault(self.token_index[token], []).append((start, self.end))

    def call_count(self) -> int:
        if self.outcome is not None and self.outcome.results:
            return len(self.outcome.results)
        seen = [*self.calls, *self.results]
        return max(seen) + 1 if seen else 0

    # -- invariants -------------------------------------------------------------------

    def check_i1(self, n: int) -> None:
        for index, items in sorted(self.calls.items()):
            if len(items) > 1:
                self.bad("I1", f"call {index} has {len(items)} on_call events")
        for index, answers in sorted(self.results.items()):
            if len(answers) > 1:
                self.bad("I1", f"call {index} has {len(answers)} on_result events")
            calls = self.calls.get(index)
            if not calls or calls[0][0] > answers[0][0]:
                self.bad("I1", f"call {index} has an on_result without a preceding on_call")
        if self.failure is None:
            for index in range(n):
                if index not in self.calls:
                    self.bad("I1", f"call {index} has no on_call")
                if index not in self.results:
                    self.bad("I1", f"call {index} has no on_result")
        elif sorted(self.calls) != list(range(len(self.calls))):
            self.bad("I1", f"the calls with an on_call {sorted(self.calls)} are not a prefix")

    def check_i2(self) -> None:
        sequences = (
            ("on_call", [event.index for _, event in self.call_order]),
            ("on_result", [event.index for _, event in self.result_order]),
        )
        for name, indexes in sequences:
            if any(b <= a for a, b in itertools.pairwise(indexes)):
                self.bad("I2", f"{name} events are not in model order: {indexes}")
        if self.outcome is not None:
            indexes = [c.index for c in self.outcome.results]
            if indexes != list(range(len(indexes))):
                self.bad("I2", f"outcome results are not in model order: {indexes}")

    def body_interval(self, index: int) -> _Span | None:
        spans = self.spans["body"].get(index)
        if not spans:
            return None
        return (min(s for s, _ in spans), max(e for _, e in spans))

    def check_i4(self) -> None:
        bodies = self.spans["body"]
        for index, items in sorted(self.calls.items()):
            started = items[0][1]
            if started.mode is not ExecutionMode.EXCLUSIVE:
                continue
            interval = self.body_interval(index)
            if interval is not None:
                for other, spans in sorted(bodies.items()):
                    if other != index and any(_overlap(interval, span) for span in spans):
                        self.bad("I4", f"body of call {other} overlaps exclusive call {index}")
            results = self.results.get(index)
            until = results[0][0] if results else self.end
            for pos, event in self.call_order:
                if items[0][0] < pos < until and event.index != index:
                    self.bad(
                        "I4", f"on_call {event.index} occurs while exclusive call {index} runs"
                    )

    def check_i5(self) -> None:
        edges: list[tuple[int, int]] = []
        for spans in self.spans["body"].values():
            for start, end in spans:
                edges.append((start, 1))
                edges.append((end, -1))
        running = peak = 0
        # Ends sort before starts at the same position (an open span ends at len(events)).
        for _, delta in sorted(edges, key=lambda edge: (edge[0], edge[1])):
            running += delta
            peak = max(peak, running)
        if peak > self.max_parallel:
            self.bad("I5", f"{peak} bodies ran at once (max_parallel={self.max_parallel})")

    def check_i6(self) -> None:
        for _, event in self.result_order:
            code = _code(event.result)
            if code not in (ABORTED, ABORTED_BEFORE_DISPATCH):
                continue
            body_started = bool(self.spans["body"].get(event.index))
            if (code == ABORTED_BEFORE_DISPATCH) == body_started:
                self.bad(
                    "I6",
                    f"call {event.index} got {code} but its body "
                    f"{'started' if body_started else 'never started'}",
                )

    def check_i7(self) -> None:
        synthetic = sorted(index for index, items in self.calls.items() if items[0][1].synthetic)
        started = sorted(index for index, items in self.calls.items() if not items[0][1].synthetic)
        if not synthetic:
            return
        if self.outcome is not None and not self.outcome.aborted:
            self.bad("I7", f"synthetic calls {synthetic} in a batch that was not aborted")
        if started and started[-1] > synthetic[0]:
            self.bad("I7", f"synthetic call {synthetic[0]} precedes started call {started[-1]}")
        for index in synthetic:
            call = self.calls[index][0][1]
            if call.mode is not None or call.token is not None:
                self.bad("I7", f"synthetic call {index} carries a mode or a token")
            for _, event in self.results.get(index, ()):
                info = event.result.error.info if event.result.error else None
                if (
                    not event.synthetic
                    or info is None
                    or (info.name, info.code) != ("AbortError", ABORTED_BEFORE_DISPATCH)
                ):
                    self.bad("I7", f"synthetic call {index} has a non-synthetic-abort result")
        for _, event in self.result_order:
            if event.synthetic and event.index not in synthetic:
                self.bad("I7", f"call {event.index} started but got a synthetic result")

    def check_i8(self) -> None:
        for pos, event in self.result_order:
            if event.synthetic:
                continue
            seen = [result for at, result in self.observed.get(event.index, ()) if at < pos]
            if not seen and self.outcome is None:
                # A batch stopped by a KeyboardInterrupt-like exception out of stage 4 (a
                # finalizer or an observer that raised it): the call was finished and
                # committed, but the observers after that point were never told (decision
                # 38). A finished batch has no such call.
                continue
            if not seen or seen[-1] is not event.result:
                self.bad(
                    "I8",
                    f"committed result of call {event.index} is not the object the "
                    "result observers received",
                )

    def check_i9(self) -> None:
        if self.failure is None:
            return
        # Nothing is fabricated after an internal failure, so a failed batch's trace is a
        # prefix of a complete one: synthetic results only once every started call has its
        # result (the synthetic phase follows the last group), contexts only once every
        # reported call has its result (they follow the last on_result). Events recorded
        # before the failure (e.g. a sink that fails on the third synthetic pair) stay.
        missing = sorted(
            index
            for index, items in self.calls.items()
            if not items[0][1].synthetic and index not in self.results
        )
        for _, event in self.result_order:
            if event.synthetic and missing:
                self.bad(
                    "I9",
                    f"synthetic result for call {event.index} while started calls "
                    f"{missing} have no result",
                )
                break
        unanswered = sorted(index for index in self.calls if index not in self.results)
        if self.contexts and unanswered:
            self.bad("I9", f"on_context while calls {unanswered} have no result")

    def committed_contexts(self) -> list[object]:
        return [m for _, event in self.result_order for m in event.result.additional_contexts]

    def check_i10(self) -> None:
        pre = self.spans["pre"]
        post = self.spans["post"]
        # A commit runs from its first post-execute start (or, without post-execute, its
        # finish, seen as the observer notification) to its on_result.
        commits: dict[int, _Span] = {}
        for index in set(self.observed) | set(post):
            marks = [s for s, _ in post.get(index, ())] + [
                p for p, _ in self.observed.get(index, ())
            ]
            marks += [e for _, e in post.get(index, ())]
            results = self.results.get(index)
            commits[index] = (min(marks), results[0][0] if results else max(marks))
        for what, table in (("pre-execute", pre), ("post-execute", post)):
            flat = sorted((span, index) for index, items in table.items() for span in items)
            order = [index for _, index in flat]
            if any(b < a for a, b in itertools.pairwise(order)):
                self.bad("I10", f"{what} spans do not start in model order: {order}")
            for (a, ia), (b, ib) in itertools.pairwise(flat):
                if _overlap(a, b):
                    self.bad("I10", f"{what} spans of calls {ia} and {ib} overlap")
        for index, spans in sorted(pre.items()):
            for span in spans:
                for other, commit in sorted(commits.items()):
                    if other != index and _overlap(span, commit):
                        self.bad(
                            "I10", f"pre-execute of call {index} overlaps the commit of {other}"
                        )

    def check_i11(self) -> None:
        if self.failure is not None:
            return
        expected = self.committed_contexts()
        delivered = [context.message for _, context in self.contexts]
        if delivered != expected:
            self.bad("I11", "on_context events differ from the committed results' contexts")
        if self.contexts and self.result_order and self.contexts[0][0] < self.result_order[-1][0]:
            self.bad("I11", "an on_context precedes the batch's last on_result")
        if self.outcome is not None and list(self.outcome.additional_contexts) != expected:
            self.bad("I11", "outcome.additional_contexts differ from the committed contexts")

    def check_i12(self) -> None:
        outcome = self.outcome
        if outcome is None:
            return
        concluded = any(event.result.concludes_turn for _, event in self.result_order)
        if outcome.concludes_turn != concluded:
            self.bad("I12", f"outcome.concludes_turn is {outcome.concludes_turn}, not {concluded}")
        if not outcome.results and self.result_order:
            return  # keep_results=False
        got = [(c.index, c.call, c.result, c.synthetic) for c in outcome.results]
        want = [(e.index, e.call, e.result, e.synthetic) for _, e in self.result_order]
        same = len(got) == len(want) and all(
            g[0] == w[0] and g[1] is w[1] and g[2] is w[2] and g[3] == w[3]
            for g, w in zip(got, want, strict=True)
        )
        if not same:
            self.bad("I12", "outcome.results differ from the on_result events")


def check_trace(
    events: Sequence[TraceEvent],
    *,
    max_parallel: int,
    outcome: BatchOutcome | None = None,
    failure: BaseException | None = None,
    ignore: Collection[str] = (),
) -> None:
    """Check the scheduler invariants I1, I2 and I4–I12 on one batch's trace.

    The trace is what a :class:`TraceRecorder` recorded for one batch, with every tool
    definition instrumented (body spans are what I4–I6 look at). Pass the batch's
    ``outcome`` when it returned one, and the internal ``failure`` when it raised one; with
    neither, the batch is taken to have been cancelled. I3 is checked by
    :func:`~dsh_sched.read_session_log`.

    Args:
        events: The recorded events, in the order they happened.
        max_parallel: The batch's ``max_parallel`` (for I5).
        outcome: The batch's outcome, if it finished.
        failure: The internal failure the batch raised, if any.
        ignore: Invariant IDs not to report. I6 exempts ``ABORTED`` and
            ``ABORTED_BEFORE_DISPATCH`` results that user code authored (a hook, wrapper or
            body raising ``AbortError``), which a trace cannot tell from the runtime's: a tool
            set that authors them passes ``ignore={"I6"}``.

    Raises:
        AssertionError: Listing every violated invariant by ID, one per line.
        ValueError: The sink events come from more than one batch, or ``ignore`` names an
            invariant this function does not check.
    """
    unknown = sorted(set(ignore) - _CHECKED)
    if unknown:
        raise ValueError(
            f"ignore names invariants that check_trace does not check: {unknown}; "
            f"it checks {sorted(_CHECKED, key=lambda i: int(i[1:]))}"
        )
    checker = _Checker(events, max_parallel, outcome, failure)
    checker.index_events()
    n = checker.call_count()
    checker.check_i1(n)
    checker.check_i2()
    checker.check_i4()
    checker.check_i5()
    checker.check_i6()
    checker.check_i7()
    checker.check_i8()
    checker.check_i9()
    checker.check_i10()
    checker.check_i11()
    checker.check_i12()
    violations = [v for v in checker.violations if v.split(":", 1)[0] not in ignore]
    if violations:
        raise AssertionError("trace violates the scheduler invariants:\n" + "\n".join(violations))
