"""dsh_sched.adapters: OpenAI Chat Completions, OpenAI Responses and Anthropic Messages codecs.

Each provider module (``openai_chat``, ``openai_responses``, ``anthropic_messages``) turns tool
schemas into the provider's tool format (``tools``), the model's output into a
:class:`ToolTurn` (``read_calls``) and a batch's results back into messages
(``write_results``, ``context_messages``). They are pure, synchronous functions over plain
JSON values and never import an SDK; SDK objects are read through their JSON dump.
"""

from ._turn import IMAGE_MIME_TYPES, ProviderFormatError, ToolTurn

__all__ = ["IMAGE_MIME_TYPES", "ProviderFormatError", "ToolTurn"]
