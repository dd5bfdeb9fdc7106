"""The OpenAI Chat Completions adapter: tools, calls in, results out (integrations §2.5).

Pure functions over plain JSON values; no SDK is imported. A typical turn::

    tools = openai_chat.tools(runtime.schemas(scope))
    turn = openai_chat.read_calls(...)        # the model's output, a dict or an SDK object
    outcome = await run_tool_calls(runtime, turn.calls, scope=scope)
    history += openai_chat.write_results(turn, outcome)
"""

from ._chat import context_messages, read_calls, tools, write_results

__all__ = ["context_messages", "read_calls", "tools", "write_results"]
