"""Smoke tests of ``benches/``: every scenario runs at a tiny size so the benches cannot rot.

No timing is asserted here (benchmarks live in ``benches/``, never as timed assertions).
Each test checks that a scenario ran every system and produced a well-formed report. The
peer frameworks are skipped only when the ``peers`` extra is not installed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import attrs
import pytest
from benches import (
    abort,
    adapters,
    aio,
    code,
    makespan,
    memory,
    overhead,
    realistic,
    run,
    streaming,
)
from benches.ab import PAIRS, measure_ab, report
from benches.profile import profile_system

import dsh_tools


def _quiet(message: str) -> None:
    pass


def test_overhead_core_systems_report_every_cell() -> None:
    m = overhead.measure(
        overhead.core_systems(),
        [1, 3],
        repeats=2,
        repeats_large=1,
        target_calls=4,
        heap="freeze",
        progress=_quiet,
    )
    assert set(m.samples) == set(overhead.CORE_KEYS)
    for key in overhead.CORE_KEYS:
        assert [len(m.samples[key][n]) for n in (1, 3)] == [2, 2]
        assert all(v > 0 for n in (1, 3) for v in m.samples[key][n])
    text = overhead.report(m)
    assert "| `a` ÷ `F1` |" in text
    assert "| `d` ÷ `D0` |" in text
    # The targets are stated at N=1000, which this tiny run does not measure.
    assert "(a) ≤ 2.0× F1 per call at N=1000 | not measured" in text


def test_overhead_alone_runs_each_system_in_its_own_process() -> None:
    m = overhead.measure_alone(
        ["F1", "a"], [2], repeats=1, repeats_large=1, target_calls=2, progress=_quiet, clock="cpu"
    )
    assert sorted(m.samples) == ["F1", "a"]
    assert m.heap == "alone"
    assert m.clock == "cpu"
    assert m.labels == {
        "F1": "trio nursery, one task + one CancelScope per call",
        "a": "run_tool_calls, raw ToolDefinition, no hooks",
    }
    assert m.ratio("a", "F1", 2) is not None


@pytest.mark.parametrize(
    ("key", "module"),
    [
        ("langgraph", "langgraph"),
        ("langchain", "langchain_core"),
        ("pydantic-ai", "pydantic_ai"),
        ("openai-agents", "agents"),
    ],
)
def test_peer_runs_the_batch(key: str, module: str) -> None:
    pytest.importorskip(module)
    from benches import peers

    systems = {s.key: s for s in peers.available_systems()}
    assert key in systems
    m = overhead.measure(
        [systems[key], *overhead.core_systems()[:2]],
        [2],
        repeats=1,
        repeats_large=1,
        target_calls=2,
        heap="freeze",
        progress=_quiet,
    )
    # The batch's own check (every tool result present and "ok") ran inside measure().
    assert len(m.samples[key][2]) == 1
    assert f"| `{key}` ÷ `F1` |" in overhead.report(m)


def test_gc_figures_for_every_core_system() -> None:
    systems = overhead.core_systems()
    figures = memory.measure_gc(systems, 5, progress=_quiet)
    assert set(figures) == set(overhead.CORE_KEYS)
    assert all(f.seconds_per_call > 0 for f in figures.values())
    text = memory.report_gc(figures, {s.key: s.label for s in systems}, 5)
    assert "cyclic garbage / call" in text


def test_inflight_memory_parks_every_call() -> None:
    result = memory.measure_inflight(10, repeats=1, progress=_quiet)
    assert set(result.traced) == set(result.objects) == set(result.rss)
    assert set(result.traced) == {"task", "task+scope", "dsh"}
    assert all(v > 0 for values in result.traced.values() for v in values)
    # Every parked call holds at least its task and coroutine.
    assert all(v >= 2 for values in result.objects.values() for v in values)
    assert "Target: memory per in-flight call ≤ 2× a raw trio task" in memory.report_inflight(
        result
    )


def test_makespan_uniform_and_mixed() -> None:
    result = makespan.measure([1, 3], [10], repeats=1, progress=_quiet, timeline_n=3)
    for system in ("floor", "dsh"):
        [moments] = result.timelines[system]
        assert len(moments) == len(makespan.TIMELINE_MARKS)
        # In order: no body wakes before one slept, the batch ends after the last wake.
        assert list(moments) == sorted(moments)
    assert "Timeline of the uniform batch at N=3" in makespan.report(result, [1, 3], [10])
    for shape, n in (("uniform", 1), ("uniform", 3), ("mixed", 10)):
        for system in ("floor", "dsh"):
            stats = result.stats(shape, system, n)
            assert stats is not None
            # Nothing finishes before its lower bound.
            assert stats.median >= 1.0
    assert "Mixed" in makespan.report(result, [1, 3], [10])
    with pytest.raises(ValueError, match="multiple of 10"):
        makespan.measure([], [15], repeats=1, progress=_quiet)


def test_abort_latency_commits_every_call() -> None:
    result = abort.measure([5], repeats=1, progress=_quiet)
    assert result.stats("floor", 5) is not None
    assert result.stats("dsh", 5) is not None
    assert "dsh-trio: fire the batch Abort" in abort.report(result, [5])


def test_l102_code_scenario_measures_every_ratio() -> None:
    """L-102: the ``code`` scenario runs at a tiny size: both sides of every measure are
    sampled and the table has one row per measure (no timing assertion)."""
    result = code.measure(n=3, repeats=2, inner=1, progress=_quiet)
    for m in code.MEASURES:
        for side in ("numerator", "denominator"):
            stats = result.stats(m.key, side)
            assert stats is not None
            assert stats.count == 2
    text = code.report(result)
    assert "| P5 | lane overhead |" in text
    assert "not measured" in code.report(code.CodeResult(n=3))


def test_adapters_compares_every_provider_and_target() -> None:
    """A-P1, A-P2, A-P3: each adapter is timed against a baseline that builds the same value."""
    result = adapters.measure(4, repeats=1, inner=1, progress=_quiet)
    for target in ("A-P1", "A-P2", "A-P3"):
        for provider in adapters.PROVIDERS:
            assert result.stats(target, provider, "adapter") is not None
            assert result.stats(target, provider, "hand") is not None
    text = adapters.report(result)
    assert text.count("| A-P") == 9
    assert "| A-P1 | openai_chat |" in text
    assert "not measured" in adapters.report(adapters.AdapterResult(n=4))


def test_aio_bridge_measures_every_host() -> None:
    result = aio.measure(
        inner=2, n=3, callers=2, repeats=1, hosts=aio.available_hosts(), progress=_quiet
    )
    assert set(result.fixed) == {"native", *aio.available_hosts()}
    assert all(len(samples) == 1 for samples in result.concurrent.values())
    text = aio.report(result)
    assert "Y-P1 on asyncio" in text
    assert "Y-P3 on asyncio" in text


def test_realistic_runs_every_system_and_states_the_targets() -> None:
    """With the ``peers`` extra, pydantic-ai and LangGraph run the calls too."""
    systems = realistic.available(peers=True)
    result = realistic.measure(batches=2, calls=3, repeats=2, systems=systems, progress=_quiet)
    assert set(result.samples) == set(systems)
    assert {"trio", "asyncio", "dsh", "dsh+log"} <= set(systems)
    assert all(len(v) == 2 for v in result.samples.values())
    assert all(wall > 0 and cpu > 0 for v in result.samples.values() for wall, cpu in v)
    text = realistic.report(result)
    assert "| dsh-trio CPU ≤ 1.5× raw trio's |" in text
    assert "| with the log ≤ 1.3× without |" in text
    for peer in ("pydantic-ai", "langgraph"):
        assert (f"| {peer} CPU ≥ 3× dsh-trio's |" in text) == (peer in systems)


def test_realistic_arguments_are_about_two_kilobytes() -> None:
    sizes = [len(realistic.arguments(i)) for i in range(0, 10_000, 97)]
    assert min(sizes) >= 1800
    assert max(sizes) <= 2200


def test_streaming_samples_rss() -> None:
    result = streaming.measure(
        120, batch_size=50, sample_every=40, max_parallel=10, progress=_quiet
    )
    assert [calls for calls, _, _ in result.samples] == [40, 80, 120]
    assert "Target: RSS growth" in streaming.report(result)


def test_streaming_in_a_child_process() -> None:
    result = streaming.measure_in_child(30, batch_size=10, sample_every=15, max_parallel=3)
    assert (result.total, result.batch_size, result.max_parallel) == (30, 10, 3)
    assert [calls for calls, _, _ in result.samples] == [15, 30]
    assert result.start_rss > 0


def test_run_every_scenario_with_a_tiny_plan(wasi_cache_dir: Path) -> None:
    tiny = attrs.evolve(
        run.QUICK,
        ns=(2,),
        repeats=1,
        repeats_large=1,
        target_calls=2,
        gc_n=3,
        memory_n=4,
        makespan_ns=(2,),
        mixed_ns=(10,),
        makespan_repeats=1,
        abort_ns=(3,),
        abort_repeats=1,
        stream_total=20,
        stream_batch=10,
        stream_every=10,
        adapters_n=3,
        adapters_repeats=1,
        adapters_inner=1,
        mcp_repeats=1,
        aio_inner=2,
        aio_n=3,
        aio_callers=2,
        aio_repeats=1,
        code_n=3,
        code_repeats=1,
        code_inner=1,
        wasi_calls=2,
        wasi_repeats=1,
        wasi_cold_repeats=0,
        wasi_cache_dir=wasi_cache_dir,
        realistic_batches=2,
        realistic_calls=3,
        realistic_repeats=1,
    )
    sections = run.run_scenarios(
        run.SCENARIOS,
        tiny,
        heap="freeze",
        systems=["F0", "F1", "a", "d", "D0"],
        peers=False,
        json_path=None,
        progress=_quiet,
    )
    assert [s.split("\n", 1)[0] for s in sections] == [
        "## Per-call overhead (scenarios a–d, floors, peers)",
        "## Garbage-collector pressure per call",
        "## Memory per in-flight call",
        "## Makespan against the lower bound",
        "## Abort latency",
        "## Streaming through open_batch",
        "## Provider adapters against hand-written code",
        "## MCP tool sources (integrations §4.7)",
        "## The asyncio bridge (dsh_sched.aio)",
        "## Code Mode (code-mode §10)",
        "## Code Mode in the WASI sandbox (code-mode §10 P1–P4, P6)",
        "## Realistic calls: ~2 KB arguments, typed parameters, 1–5 ms bodies",
    ]


def test_command_line_writes_markdown_and_json(tmp_path: Path) -> None:
    report = tmp_path / "report.md"
    samples = tmp_path / "samples.json"
    status = run.main(
        [
            "overhead",
            "--n",
            "2",
            "--repeats",
            "1",
            "--target-calls",
            "2",
            "--system",
            "F1",
            "--system",
            "a",
            "--markdown",
            str(report),
            "--json",
            str(samples),
            "--clock",
            "cpu",
            "--quiet",
        ]
    )
    assert status == 0
    assert "µs of CPU time" in report.read_text(encoding="utf-8")
    assert '"clock": "cpu"' in samples.read_text(encoding="utf-8")


def test_command_line_rejects_an_unknown_scenario() -> None:
    with pytest.raises(SystemExit):
        run.main(["nonsense"])


def test_profile_lists_the_pipeline() -> None:
    text = profile_system("d", n=5, calls=10, top=5)
    assert text.startswith("# d: 2 batches of 5 calls (10 calls)")
    assert "tottime" in text


def test_ab_interleaves_two_checkouts_and_restores_the_modules() -> None:
    """``benches.ab`` imports each checkout under its own modules and puts ours back."""
    root = Path(__file__).resolve().parent.parent
    samples = measure_ab(root, root, 5, repeats=2, target_calls=5)
    assert sys.modules["dsh_tools"] is dsh_tools
    assert set(samples) == {"before", "after"}
    assert all(len(v) == 2 and min(v) > 0 for side in samples.values() for v in side.values())
    text = report(5, samples)
    assert all(f"| `{key}` ÷ `{floor}` |" in text for key, floor in PAIRS.items())


def test_l102_code_wasi_scenario_at_a_tiny_size(wasi_cache_dir: Path) -> None:
    """L-102: the WASI half of the ``code`` scenario (code-mode §10 P1–P4, P6) runs every
    measure at a tiny size and reports every target; no timing is asserted, and the cold
    start (a full compile) is left out."""
    from benches import code_wasi

    bench = code_wasi.measure(
        calls=3, repeats=2, cold_repeats=0, cache_dir=wasi_cache_dir, progress=_quiet
    )
    measured = {"bare", "warm", "wasi-0", "wasi-N", "trusted-0", "trusted-N"}
    measured |= {"gather", "sequential", "asyncio", "plain"}
    assert measured <= set(bench.samples)
    assert all(len(bench.samples[key]) == 2 for key in measured)
    assert all(v > 0 for values in bench.samples.values() for v in values)
    assert "cold" not in bench.samples
    values = code_wasi.ratios(bench)
    assert values["P2"] is None
    assert all(values[name] is not None for name in ("P1", "P3", "P4", "P6"))
    text = code_wasi.report(bench)
    for name in ("P1", "P2", "P3", "P4", "P6"):
        assert f"| {name} |" in text
    assert "| P2 | cold start / warm start | – | ≥ 20.0 | not measured |" in text
    assert "3 gathered 10 ms calls / 3 sequential" in text


def test_the_instruction_count_workload_runs_every_mode() -> None:
    # In a child process, as valgrind runs it (modes s and S sleep for real).
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "-m", "benches.instructions", "40", "acdFwWgfrRsS"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
