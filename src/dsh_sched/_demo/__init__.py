"""The ``python -m dsh_sched demo`` batch: script, live console, timeline renderer.

Private to ``dsh_sched``; ``dsh_sched.__main__`` is its command line and the tests use
these names. ``rich`` (the ``demo`` extra) is imported only by the rich console, and only
when it is installed.
"""

from ._console import DemoConsole, DemoSettings, PlainConsole, open_console
from ._paths import SESSION_LOG_NAME, TIMELINE_NAME, DemoPathError, check_paths
from ._run import DemoReport, run_demo
from ._script import LATENCY, PAGES, demo_calls, demo_tools, protect_secrets, seed_workspace
from ._timeline import Status, TimelineRow, render_timeline, result_status, timeline_rows

__all__ = [
    "LATENCY",
    "PAGES",
    "SESSION_LOG_NAME",
    "TIMELINE_NAME",
    "DemoConsole",
    "DemoPathError",
    "DemoReport",
    "DemoSettings",
    "PlainConsole",
    "Status",
    "TimelineRow",
    "check_paths",
    "demo_calls",
    "demo_tools",
    "open_console",
    "protect_secrets",
    "render_timeline",
    "result_status",
    "run_demo",
    "seed_workspace",
    "timeline_rows",
]
