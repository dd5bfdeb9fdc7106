"""Anthropic Messages: tools, ``tool_use`` in, ``tool_result`` blocks out (integrations §2.7)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from dsh_tools import FrozenDict, ImageContent, TextContent

from .._calls import ModelToolCall
from ._export import checked_schemas
from ._read import EMPTY_ECHO, TurnBuilder, plain, type_name
from ._turn import IMAGE_MIME_TYPES, ProviderFormatError, ToolTurn
from ._write import Committed, contexts_of, echoed, results_in_order

if TYPE_CHECKING:
    from collections.abc import Iterable

    from dsh_tools import ContentBlock, ToolSchema, UserMessage

__all__ = ["context_messages", "read_calls", "tools", "write_results"]

PROVIDER: Final = "anthropic_messages"


def tools(schemas: Iterable[ToolSchema], *, strict: bool = False) -> list[dict[str, object]]:
    """The Messages ``tools`` entries for ``schemas``, in order.

    Each entry is ``{"name", "description", "input_schema"}`` (``description`` left out when
    empty), plus ``"strict": true`` only when ``strict=True``.

    Args:
        schemas: What ``runtime.schemas(scope)`` returned.
        strict: Ask for strict tool use (closed schemas listing every property in
            ``required``, no ``oneOf``).

    Returns:
        One fresh entry per schema.

    Raises:
        TypeError: an item is not a ``ToolSchema``.
        ValueError: a name outside ``^[a-zA-Z0-9_-]{1,64}$``; parameters that are not a
            ``"type": "object"`` schema; with ``strict=True``, the first strict problem.
    """
    entries: list[dict[str, object]] = []
    for schema in checked_schemas(PROVIDER, schemas, strict=strict):
        entry: dict[str, object]
        if schema.description:
            entry = {
                "name": schema.name,
                "description": schema.description,
                "input_schema": schema.parameters,
            }
        else:
            entry = {"name": schema.name, "input_schema": schema.parameters}
        if strict:
            entry["strict"] = True
        entries.append(entry)
    return entries


def read_calls(message: object) -> ToolTurn:
    """The ``tool_use`` blocks of an assistant message, in order.

    ``input`` becomes the call's arguments as a mapping (already parsed by the provider, so
    nothing is re-serialized). A block's ``toolset_name`` is kept in ``turn.echo`` and copied
    into its ``tool_result``. Other blocks (text, thinking, server tools) are ignored.

    Args:
        message: The assistant message (a mapping or a ``Message``), or its ``content``
            list directly.

    Returns:
        The turn; ``turn.calls`` go to ``run_tool_calls``.

    Raises:
        ProviderFormatError: at the first malformed field, e.g.
            ``anthropic_messages: content[0].input must be a JSON object, got str``.
    """
    root = plain(message)
    if isinstance(root, Mapping):
        if root.get("role") != "assistant":
            raise ProviderFormatError(PROVIDER, "role", 'must be "assistant"')
        content = plain(root.get("content"))
        if isinstance(content, str):
            content = ()  # a text-only reply
        elif not isinstance(content, list | tuple):
            raise ProviderFormatError(
                PROVIDER, "content", f"must be a string or a list, got {type_name(content)}"
            )
    elif isinstance(root, list | tuple):
        content = root
    else:
        raise ProviderFormatError(
            PROVIDER, "message", f"must be a JSON object, got {type_name(root)}"
        )
    builder = TurnBuilder(PROVIDER, "content", has_echo=True)
    calls, echoes, seen = builder.calls, builder.echo, builder.seen
    # Checks inlined for the well-formed case; the builder's methods raise the exact errors.
    for index, item in enumerate(content):
        block = item if type(item) is dict else builder.entry(index, item)
        if block.get("type") != "tool_use":
            continue
        call_id = block.get("id")
        if type(call_id) is not str or not call_id or call_id in seen:
            builder.bad_call_id(index, call_id, ".id")  # raises
        seen[call_id] = index
        name = block.get("name")
        if type(name) is not str or not name:
            name = builder.text(index, name, ".name")  # raises
        toolset = block.get("toolset_name")
        echo = EMPTY_ECHO
        if toolset is not None:
            # Copied back unchanged into the call's tool_result.
            echo = FrozenDict(toolset_name=builder.text(index, toolset, ".toolset_name"))
        arguments = block.get("input")
        if type(arguments) is dict:
            try:
                calls.append(ModelToolCall(call_id=call_id, name=name, arguments=arguments))
            except TypeError:
                pass  # not lossless JSON: the builder passes it on as text, or raises
            else:
                echoes.append(echo)
                continue
        builder.add(index, call_id, name, arguments, ".input", text_ok=False, echo=echo)
    return builder.turn()


def _blocks(content: Iterable[ContentBlock]) -> list[dict[str, object]]:
    blocks: list[dict[str, object]] = []
    for block in content:
        if type(block) is TextContent:
            if block.text:  # the API rejects empty text blocks
                blocks.append({"type": "text", "text": block.text})
            continue
        assert type(block) is ImageContent
        mime_type = block.mime_type
        if mime_type in IMAGE_MIME_TYPES:
            source = {"type": "base64", "media_type": mime_type, "data": block.data}
            blocks.append({"type": "image", "source": source})
        else:
            text = f"[image omitted: unsupported type {mime_type}]"
            blocks.append({"type": "text", "text": text})
    return blocks


def write_results(
    turn: ToolTurn, committed: Committed, *, contexts: bool = True
) -> list[dict[str, object]]:
    """The user message that answers every call of ``turn``.

    One ``{"role": "user", "content": [...]}`` message: every ``tool_result`` block first, in
    model order (``content`` left out when the result has no block, ``"is_error": true`` only
    for failed results, then the echoed ``toolset_name``), then, with ``contexts=True``, the
    additional contexts' blocks in commit order. ``[]`` for a turn with nothing to say.

    Args:
        turn: The turn :func:`read_calls` returned.
        committed: The batch's ``BatchOutcome``, or an iterable of ``CommittedCall`` /
            ``CallCommitted``.
        contexts: Render the additional contexts too.

    Returns:
        ``[message]`` or ``[]``, fresh plain JSON.

    Raises:
        TypeError: ``turn`` or ``committed`` (or an item) has the wrong type.
        ValueError: the turn is another adapter's; a result does not belong to the turn, or
            a call has two results or none.
    """
    results = results_in_order(PROVIDER, turn, committed)
    echo = turn.echo
    blocks: list[dict[str, object]] = []
    for index, (call, result) in enumerate(zip(turn.calls, results, strict=True)):
        block: dict[str, object] = {"type": "tool_result", "tool_use_id": call.call_id}
        content = result.content
        if len(content) == 1 and type(content[0]) is TextContent and content[0].text:
            block["content"] = [{"type": "text", "text": content[0].text}]  # the usual case
        elif rendered := _blocks(content):
            block["content"] = rendered
        if result.is_error:
            block["is_error"] = True
        if echo and echo[index]:
            block.update(echoed(echo[index]))
        blocks.append(block)
    if contexts:
        for message in contexts_of(results):
            blocks.extend(_blocks(message.content))
    return [{"role": "user", "content": blocks}] if blocks else []


def context_messages(messages: Iterable[UserMessage]) -> list[dict[str, object]]:
    """The contexts' blocks in one ``{"role": "user", "content": [...]}`` message.

    Text blocks become ``text`` blocks (empty ones left out), images ``image`` blocks with a
    base64 source.

    Args:
        messages: Contexts, e.g. ``outcome.additional_contexts``.

    Returns:
        ``[message]``, or ``[]`` when no block remains.
    """
    blocks = [block for message in messages for block in _blocks(message.content)]
    return [{"role": "user", "content": blocks}] if blocks else []
