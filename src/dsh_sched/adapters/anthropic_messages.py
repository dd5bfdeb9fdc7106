"""The Anthropic Messages adapter: tool export, reading calls, writing results (integrations §2.7).

Pure functions over plain JSON values; no SDK is imported. A typical turn::

    tools = anthropic_messages.tools(runtime.schemas(scope))
    turn = anthropic_messages.read_calls(...)        # the model's output, a dict or an SDK object
    outcome = await run_tool_calls(runtime, turn.calls, scope=scope)
    history += anthropic_messages.write_results(turn, outcome)
"""

from ._anthropic import context_messages, read_calls, tools, write_results

__all__ = ["context_messages", "read_calls", "tools", "write_results"]
