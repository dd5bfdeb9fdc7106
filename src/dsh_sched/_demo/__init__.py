"""The ``python -m dsh_sched demo`` batch: script, live console, files it writes.

Private to ``dsh_sched``; ``dsh_sched.__main__`` is its command line and the tests use
these names. The timeline it draws is public (``dsh_sched.testing.render_timeline``).
``rich`` (the ``demo`` extra) is imported only by the rich console, and only when it is
installed.
"""

from ._console import DemoConsole, DemoSettings, PlainConsole, open_console
from ._paths import SESSION_LOG_NAME, TIMELINE_NAME, DemoPathError, check_paths
from ._run import DemoReport, run_demo
from ._script import LATENCY, PAGES, demo_calls, demo_tools, protect_secrets, seed_workspace

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
    "check_paths",
    "demo_calls",
    "demo_tools",
    "open_console",
    "protect_secrets",
    "run_demo",
    "seed_workspace",
]
