"""The OpenAI Responses adapter: tool export, reading calls, writing results (integrations §2.6).

Pure functions over plain JSON values; no SDK is imported. A typical turn::

    tools = openai_responses.tools(runtime.schemas(scope))
    turn = openai_responses.read_calls(...)        # the model's output, a dict or an SDK object
    outcome = await run_tool_calls(runtime, turn.calls, scope=scope)
    history += openai_responses.write_results(turn, outcome)
"""

from ._responses import context_messages, read_calls, tools, write_results

__all__ = ["context_messages", "read_calls", "tools", "write_results"]
