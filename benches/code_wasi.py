"""Code Mode under the WASI sandbox (code-mode §10: P1–P4 and P6), scenario ``code-wasi``.

Every figure is the wall time of one whole run (a fresh engine, store and guest per run, as
``WasiCodeRuntime`` does), median over interleaved repeats: each repeat runs every measure
once, in an order rotated from repeat to repeat, so load on the machine spreads evenly.

- ``bare``: the floor of P1 — the interpreter alone, ``python -I -S -c pass``, instantiated
  from the same cached compiled module with the same engine and store settings.
- ``warm``: ``run_code`` with ``return 1`` through ``ToolRuntime.execute`` (cache present).
- ``cold``: a new runtime with an empty cache folder, ``prepare`` plus its first run.
- ``wasi-0`` / ``wasi-N``: a program making 0 / N sequential calls of a no-op tool; the same
  for ``TrustedCodeRuntime`` (``trusted-0`` / ``trusted-N``).
- ``gather`` / ``sequential``: N calls of a tool sleeping 10 ms, gathered / one by one.
- ``asyncio`` / ``plain``: ``import asyncio`` then ``return 1`` / ``return 1``.
"""

from __future__ import annotations

import importlib.metadata
import math
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import attrs
import trio

from dsh_tools import RUN_CODE_NAME, ToolCall, ToolRuntime
from dsh_tools.code import (
    PYTHON_WASM_SHA256,
    CodeRunLimits,
    CodeRuntime,
    TrustedCodeRuntime,
    WasiCodeRuntime,
)

from ._harness import fmt_ratio, markdown_table

if TYPE_CHECKING:
    from dsh_tools.code import CodeRunOutcome

__all__ = ["WasiBench", "measure", "report"]

Progress = Callable[[str], None]

_LIMITS: Final = CodeRunLimits()
_SLEEP: Final = 0.01

#: (key, what it is) of every measure, in the table's order.
MEASURES: Final = (
    ("bare", "bare interpreter `python -I -S -c pass`, same cached module and settings"),
    ("warm", "`run_code` with `return 1` through `ToolRuntime.execute`, warm cache"),
    ("cold", "`return 1`, empty cache, new runtime (compile + first run)"),
    ("wasi-0", "WASI, 0 calls"),
    ("wasi-N", "WASI, N sequential no-op calls"),
    ("trusted-0", "`TrustedCodeRuntime`, 0 calls"),
    ("trusted-N", "`TrustedCodeRuntime`, N sequential no-op calls"),
    ("gather", "WASI, N gathered calls of a tool sleeping 10 ms"),
    ("sequential", "WASI, N sequential calls of a tool sleeping 10 ms"),
    ("asyncio", "WASI, `import asyncio` then `return 1`"),
    ("plain", "WASI, `return 1`"),
)


@attrs.define
class WasiBench:
    """Seconds per run of each measure, one sample per repeat."""

    calls: int
    repeats: int
    samples: dict[str, list[float]] = attrs.field(factory=dict)

    def median(self, key: str) -> float | None:
        """The median of ``key``'s samples, ``None`` when it was not measured."""
        values = self.samples.get(key)
        return statistics.median(values) if values else None


def cache_file(cache_dir: Path) -> Path:
    """The compiled-module file ``WasiCodeRuntime(cache_dir=cache_dir)`` keeps."""
    version = importlib.metadata.version("wasmtime")
    name = f"python-3.12.0-{PYTHON_WASM_SHA256[:16]}-wasmtime-{version}-fuel-epoch.cwasm"
    return cache_dir / "wasi" / name


def bare_interpreter(compiled: Path, limits: CodeRunLimits = _LIMITS) -> None:
    """Run ``python -I -S -c pass`` from ``compiled`` with the runtime's engine and store
    settings (fuel, epoch interruption, memory limit, no environment, no preopens)."""
    import wasmtime

    config = wasmtime.Config()
    config.consume_fuel = True
    config.epoch_interruption = True
    engine = wasmtime.Engine(config)
    module = wasmtime.Module.deserialize_file(engine, str(compiled))
    store = wasmtime.Store(engine)
    store.set_limits(memory_size=limits.memory_bytes)
    store.set_fuel(5_000_000_000 + math.ceil(limits.cpu_seconds * 5_000_000_000))
    store.set_epoch_deadline(1)
    wasi = wasmtime.WasiConfig()
    wasi.argv = ["python", "-I", "-S", "-c", "pass"]
    store.set_wasi(wasi)
    linker = wasmtime.Linker(engine)
    linker.define_wasi()
    instance = linker.instantiate(store, module)
    start = instance.exports(store)["_start"]
    assert isinstance(start, wasmtime.Func)
    try:
        start(store)
    except wasmtime.ExitTrap as exit_:
        if exit_.code != 0:
            raise
    store.close()


async def _noop(name: str, args: object) -> Any:
    return None


async def _sleepy(name: str, args: object) -> Any:
    await trio.sleep(_SLEEP)
    return None


def _warm_runner(runtime: WasiCodeRuntime) -> Callable[[], Awaitable[object]]:
    """``run_code`` with ``return 1`` through ``ToolRuntime.execute``."""
    tools = ToolRuntime(mode="code", code_runtime=runtime)
    count = iter(range(1 << 62))

    async def through_run_code() -> object:
        call = ToolCall(
            call_id=f"bench-{next(count)}",
            name=RUN_CODE_NAME,
            arguments={"code": "return 1", "description": "bench"},
        )
        result = await tools.execute(call)
        if result.is_error:
            raise AssertionError(f"run_code failed: {result}")
        return result

    return through_run_code


def _program(calls: int, *, gather: bool = False) -> str:
    if gather:
        return (
            f"import asyncio\nawait asyncio.gather(*(tools.t() for _ in range({calls})))\nreturn 1"
        )
    return f"for _ in range({calls}):\n    await tools.t()\nreturn 1"


def _checked(outcome: CodeRunOutcome) -> None:
    if outcome.result != 1:
        raise AssertionError(f"unexpected outcome {outcome}")


def measure(
    *,
    calls: int = 100,
    repeats: int = 9,
    cold_repeats: int = 1,
    cache_dir: Path | None = None,
    progress: Progress,
) -> WasiBench:
    """Run every measure ``repeats`` times (``cold`` only ``cold_repeats`` times).

    The warm measures use the compiled module in ``cache_dir`` (a fresh temporary folder,
    compiled once here, when ``None``); the cold ones always start from an empty folder.
    """
    with tempfile.TemporaryDirectory(prefix="dsh-bench-wasi-") as folder:
        cache = cache_dir if cache_dir is not None else Path(folder) / "cache"
        return trio.run(_measure, Path(folder), cache, calls, repeats, cold_repeats, progress)


async def _measure(
    folder: Path, cache: Path, calls: int, repeats: int, cold_repeats: int, progress: Progress
) -> WasiBench:
    runtime = WasiCodeRuntime(cache_dir=cache)
    await runtime.prepare()
    compiled = cache_file(cache)
    trusted = TrustedCodeRuntime()
    warm = _warm_runner(runtime)

    async def wasi(code: str, dispatch: Callable[[str, object], Awaitable[Any]]) -> None:
        _checked(await runtime.run(code, tools=("t",), dispatch=dispatch, limits=_LIMITS))

    async def cold_run(index: int) -> None:
        fresh = WasiCodeRuntime(cache_dir=folder / f"cold-{index}")
        _checked(await fresh.run("return 1", tools=(), dispatch=_noop, limits=_LIMITS))

    measures: dict[str, Callable[[], Awaitable[object]]] = {
        "bare": lambda: trio.to_thread.run_sync(bare_interpreter, compiled),
        "warm": warm,
        "wasi-0": lambda: wasi(_program(0), _noop),
        "wasi-N": lambda: wasi(_program(calls), _noop),
        "gather": lambda: wasi(_program(calls, gather=True), _sleepy),
        "sequential": lambda: wasi(_program(calls), _sleepy),
        "asyncio": lambda: wasi("import asyncio\nreturn 1", _noop),
        "plain": lambda: wasi("return 1", _noop),
    }
    measures["trusted-0"] = lambda: _run_trusted(trusted, _program(0))
    measures["trusted-N"] = lambda: _run_trusted(trusted, _program(calls))
    bench = WasiBench(calls=calls, repeats=repeats)
    for key in measures:  # one untimed run of each: imports, thread cache, first-use costs
        await measures[key]()
    keys = list(measures)
    for repeat in range(repeats):
        progress(f"code-wasi: repeat {repeat + 1} of {repeats}")
        shift = repeat % len(keys)
        for key in keys[shift:] + keys[:shift]:
            start = time.perf_counter()
            await measures[key]()
            bench.samples.setdefault(key, []).append(time.perf_counter() - start)
    for index in range(cold_repeats):
        progress(f"code-wasi: cold start {index + 1} of {cold_repeats} (a full compile)")
        start = time.perf_counter()
        await cold_run(index)
        bench.samples.setdefault("cold", []).append(time.perf_counter() - start)
    return bench


async def _run_trusted(runtime: CodeRuntime, code: str) -> None:
    _checked(await runtime.run(code, tools=("t",), dispatch=_noop, limits=_LIMITS))


def _ms(seconds: float | None) -> str:
    return "not measured" if seconds is None else f"{seconds * 1e3:.1f}"


#: (name, what, target, "le" for at most / "ge" for at least), in §10's order.
_TARGETS: Final = (
    ("P1", "warm start / bare interpreter", 3.0, "le"),
    ("P2", "cold start / warm start", 20.0, "ge"),
    ("P3", "per-call cost, WASI / `TrustedCodeRuntime`", 5.0, "le"),
    ("P4", "N gathered 10 ms calls / N sequential", 0.25, "le"),
    ("P6", "`import asyncio` then `return 1` / `return 1`", 2.5, "le"),
)
_QUOTIENTS: Final = {
    "P1": ("warm", "bare"),
    "P2": ("cold", "warm"),
    "P4": ("gather", "sequential"),
    "P6": ("asyncio", "plain"),
}


def _verdict(value: float | None, target: float, sense: str) -> str:
    if value is None:
        return "not measured"
    met = value <= target if sense == "le" else value >= target
    return "met" if met else "**not met**"


def _per_call(bench: WasiBench, system: str) -> float | None:
    many, none = bench.median(f"{system}-N"), bench.median(f"{system}-0")
    return None if many is None or none is None else (many - none) / bench.calls


def ratios(bench: WasiBench) -> dict[str, float | None]:
    """P1–P4 and P6 from the medians (``None`` where a measure was not taken)."""
    out: dict[str, float | None] = {}
    for name, (top, bottom) in _QUOTIENTS.items():
        a, b = bench.median(top), bench.median(bottom)
        out[name] = a / b if a is not None and b is not None else None
    wasi, trusted = _per_call(bench, "wasi"), _per_call(bench, "trusted")
    out["P3"] = wasi / trusted if wasi is not None and trusted else None
    return out


def report(bench: WasiBench) -> str:
    """The per-measure medians and the P1–P4, P6 verdicts, as Markdown."""
    rows = []
    for key, what in MEASURES:
        found = bench.samples.get(key, [])
        spread = f"{_ms(min(found))}–{_ms(max(found))}" if found else ""
        label = what.replace("N ", f"{bench.calls} ")
        rows.append([f"`{key}`: {label}", _ms(bench.median(key)), spread, str(len(found))])
    values = ratios(bench)
    verdicts = [
        [
            name,
            what.replace("N ", f"{bench.calls} "),
            "–" if values[name] is None else fmt_ratio(values[name] or 0.0),
            ("≤ " if sense == "le" else "≥ ") + str(target),
            _verdict(values[name], target, sense),
        ]
        for name, what, target, sense in _TARGETS
    ]
    notes = [
        f"{label} per call: {seconds * 1e6:.0f} µs."
        for label, seconds in (
            ("WASI", _per_call(bench, "wasi")),
            ("Trusted", _per_call(bench, "trusted")),
        )
        if seconds is not None
    ]
    parts = [bench.median(k) for k in ("gather", "asyncio", "plain", "sequential")]
    if all(p is not None for p in parts):
        gather, with_asyncio, plain, sequential = (p or 0.0 for p in parts)
        net = (gather - (with_asyncio - plain)) / sequential
        notes.append(
            "The gathering program imports asyncio and the sequential one does not; without "
            f"that import's cost (`asyncio` − `plain`), P4 would be {fmt_ratio(net)}."
        )
    return "\n".join(
        [
            f"Wall time per run in ms, median (min–max) of {bench.repeats} interleaved repeats "
            f"(`cold`: its own count); N = {bench.calls}.",
            "",
            markdown_table(["measure", "median, ms", "min–max", "samples"], rows),
            "",
            markdown_table(["", "measure", "median", "target", "verdict"], verdicts),
            "",
            " ".join(notes),
        ]
    )
