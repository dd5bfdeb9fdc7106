"""The asyncio bridge: asyncio applications run their tool calls through dsh-trio.

One trio *guest run* lives inside each running asyncio event loop (its portal), started
the first time it is needed and ended when ``asyncio.run`` shuts the loop down. From
asyncio, await :func:`run_tool_calls` (the same arguments as
``dsh_sched.run_tool_calls``) or hand any trio function to :meth:`Portal.run`; from a
tool body or hook running in the portal, await asyncio code with :func:`run_on_asyncio`,
or write the whole body for asyncio with :func:`aio_tool`. Cancellation crosses both ways
and always drains: the ``await`` ends only after the other side has ended.

Importing this module starts nothing::

    import asyncio
    from dsh_sched import aio

    async def main():
        outcome = await aio.run_tool_calls(runtime, calls)

    asyncio.run(main())
"""

from ._aio_calls import aio_tool, run_on_asyncio, run_tool_calls
from ._aio_portal import Portal, portal

__all__ = ["Portal", "aio_tool", "portal", "run_on_asyncio", "run_tool_calls"]
