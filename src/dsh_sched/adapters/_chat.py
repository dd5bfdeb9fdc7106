"""OpenAI Chat Completions: tools, ``tool_calls`` in, tool messages out (integrations §2.5)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Literal

from dsh_tools import ImageContent, TextContent

from .._calls import ModelToolCall
from ._export import checked_schemas
from ._read import TurnBuilder, as_list, as_object
from ._turn import IMAGE_MIME_TYPES, ProviderFormatError, ToolTurn
from ._write import Committed, contexts_of, results_in_order

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from dsh_tools import ContentBlock, ToolSchema, UserMessage

__all__ = ["context_messages", "read_calls", "tools", "write_results"]

PROVIDER: Final = "openai_chat"
ImageMode = Literal["follow_up", "placeholder"]


def tools(schemas: Iterable[ToolSchema], *, strict: bool = False) -> list[dict[str, object]]:
    """The Chat Completions ``tools`` entries for ``schemas``, in order.

    Each entry is ``{"type": "function", "function": {"name", "description", "parameters",
    "strict"}}``; ``description`` is left out when empty and ``parameters`` is the schema's
    own (already detached) object. ``strict`` is always written: non-strict is the default
    because dsh schemas may have optional properties and the runtime validates arguments.

    Args:
        schemas: What ``runtime.schemas(scope)`` returned.
        strict: Ask for OpenAI's strict mode; each schema must then be closed
            (``additionalProperties: false``), list every property in ``required`` and use
            no ``oneOf``.

    Returns:
        One fresh entry per schema.

    Raises:
        TypeError: an item is not a ``ToolSchema``.
        ValueError: a name outside ``^[a-zA-Z0-9_-]{1,64}$``; parameters that are not a
            ``"type": "object"`` schema; with ``strict=True``, the first strict problem.

    Example:
        >>> tools(runtime.schemas())  # doctest: +SKIP
        [{'type': 'function', 'function': {'name': 'echo', ..., 'strict': False}}]
    """
    entries: list[dict[str, object]] = []
    for schema in checked_schemas(PROVIDER, schemas, strict=strict):
        function: dict[str, object]
        if schema.description:
            function = {
                "name": schema.name,
                "description": schema.description,
                "parameters": schema.parameters,
                "strict": strict,
            }
        else:
            function = {"name": schema.name, "parameters": schema.parameters, "strict": strict}
        entries.append({"type": "function", "function": function})
    return entries


def read_calls(message: object) -> ToolTurn:
    """The function calls of an assistant message (``choices[0].message``).

    Entries of ``tool_calls`` whose ``type`` is absent or ``"function"`` are calls, in order;
    other kinds (``"custom"``) are ignored. ``arguments`` is kept exactly as received (a
    ``str``), or passed on as a mapping when a compatible server sends an object. The
    argument is never modified and the turn keeps no reference into it.

    Args:
        message: The assistant message, as a mapping or a ``ChatCompletionMessage`` (read
            through its JSON dump).

    Returns:
        The turn; ``turn.calls`` go to ``run_tool_calls``.

    Raises:
        ProviderFormatError: at the first malformed field, e.g.
            ``openai_chat: tool_calls[0].id must be a non-empty string``.

    Example:
        >>> read_calls({"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
        ...     "function": {"name": "echo", "arguments": "{}"}}]}).calls[0].call_id
        'c1'
    """
    root = as_object(PROVIDER, message, "message")
    if root.get("role") != "assistant":
        raise ProviderFormatError(PROVIDER, "role", 'must be "assistant"')
    builder = TurnBuilder(PROVIDER, "tool_calls", has_echo=False)
    tool_calls = root.get("tool_calls")
    if tool_calls is None:
        return builder.turn()
    entries = as_list(PROVIDER, tool_calls, "tool_calls")
    well_formed = _well_formed_calls(entries)
    if well_formed is not None:
        return ToolTurn._trusted(PROVIDER, well_formed, ())
    calls, seen = builder.calls, builder.seen
    # The checked path: each field in document order; the builder's methods only run to
    # raise the exact error (or to pass on an arguments object).
    for index, item in enumerate(entries):
        entry = item if type(item) is dict else builder.entry(index, item)
        kind = entry.get("type")
        if kind is not None and kind != "function":
            continue  # a custom tool call: not one of ours
        call_id = entry.get("id")
        if type(call_id) is not str or not call_id or call_id in seen:
            builder.bad_call_id(index, call_id, ".id")  # raises
        seen[call_id] = index
        function = entry.get("function")
        if type(function) is not dict:
            function = builder.entry(index, function, ".function")
        name = function.get("name")
        if type(name) is not str or not name:
            name = builder.text(index, name, ".function.name")  # raises
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            calls.append(ModelToolCall(call_id=call_id, name=name, arguments=arguments))
        else:
            builder.add(index, call_id, name, arguments, ".function.arguments", text_ok=True)
    return builder.turn()


def _well_formed_calls(entries: Sequence[Any]) -> tuple[ModelToolCall, ...] | None:
    # One optimistic pass for what the API sends: plain dicts of "type": "function" with
    # ids and names that ModelToolCall accepts (exact str) and that are not empty, and no
    # repeated id. Anything else (SDK objects, custom or typeless entries, a problem to
    # report) gives None, and read_calls reads the list again on the checked path, which
    # builds the same calls or raises the exact error.
    calls = []
    try:
        for entry in entries:
            if type(entry) is not dict or entry["type"] != "function":
                return None
            function = entry["function"]
            call_id = entry["id"]
            name = function["name"]
            if not (call_id and name):
                return None
            calls.append(ModelToolCall(call_id=call_id, name=name, arguments=function["arguments"]))
    except (KeyError, TypeError):
        return None
    if len({call.call_id for call in calls}) != len(calls):
        return None
    return tuple(calls)


def _check_images(images: object) -> None:
    if images != "follow_up" and images != "placeholder":
        raise ValueError('images must be "follow_up" or "placeholder"')


def _image_url(block: ImageContent) -> dict[str, object]:
    return {
        "type": "image_url",
        "image_url": {"url": f"data:{block.mime_type};base64,{block.data}"},
    }


def write_results(
    turn: ToolTurn,
    committed: Committed,
    *,
    contexts: bool = True,
    images: ImageMode = "follow_up",
) -> list[dict[str, object]]:
    """The messages that answer every call of ``turn``, to append after the assistant message.

    First one ``{"role": "tool", "tool_call_id", "content"}`` message per call, in model
    order; tool messages carry text only, so a result's supported image becomes the text
    ``[image <k>: sent in the next user message]`` and, with ``images="follow_up"``, one user
    message after all tool messages carries the images. With ``images="placeholder"`` (for
    text-only models) an image is the text ``[image omitted: <mime type>]``. Then, with
    ``contexts=True``, the results' additional contexts as :func:`context_messages` renders
    them. Error and cancellation results are answered like any other result.

    Args:
        turn: The turn :func:`read_calls` returned.
        committed: The batch's ``BatchOutcome``, or an iterable of ``CommittedCall`` /
            ``CallCommitted`` (for example a ``RecordingSink``'s after a cancellation).
        contexts: Render the additional contexts too.
        images: ``"follow_up"`` or ``"placeholder"``.

    Returns:
        Fresh plain JSON messages.

    Raises:
        TypeError: ``turn`` or ``committed`` (or an item) has the wrong type.
        ValueError: a bad ``images``; the turn is another adapter's; a result does not
            belong to the turn, or a call has two results or none.
    """
    _check_images(images)
    results = results_in_order(PROVIDER, turn, committed)
    follow_up = images == "follow_up"
    messages: list[dict[str, object]] = []
    image_parts: list[dict[str, object]] = []
    for call, result in zip(turn.calls, results, strict=True):
        blocks = result.content
        if len(blocks) == 1 and type(blocks[0]) is TextContent:  # the usual, text-only result
            messages.append(
                {"role": "tool", "tool_call_id": call.call_id, "content": blocks[0].text}
            )
            continue
        parts: list[str] = []
        shown: list[dict[str, object]] = []
        for block in blocks:
            if type(block) is TextContent:
                parts.append(block.text)
            elif block.mime_type not in IMAGE_MIME_TYPES:
                parts.append(f"[image omitted: unsupported type {block.mime_type}]")
            elif follow_up:
                shown.append(_image_url(block))
                parts.append(f"[image {len(shown)}: sent in the next user message]")
            else:
                parts.append(f"[image omitted: {block.mime_type}]")
        content: object
        if len(parts) == 1:
            content = parts[0]
        elif parts:
            content = [{"type": "text", "text": part} for part in parts]
        else:
            content = ""
        messages.append({"role": "tool", "tool_call_id": call.call_id, "content": content})
        if shown:
            text = f"Images from tool call {call.call_id}, in order:"
            image_parts.append({"type": "text", "text": text})
            image_parts.extend(shown)
    if image_parts:
        # After every tool message: a user message between them would leave later calls
        # unanswered right after the assistant message, which the API rejects.
        messages.append({"role": "user", "content": image_parts})
    if contexts:
        messages.extend(context_messages(contexts_of(results), images=images))
    return messages


def _context_part(block: ContentBlock, follow_up: bool) -> dict[str, object]:
    if type(block) is TextContent:
        return {"type": "text", "text": block.text}
    assert type(block) is ImageContent
    if block.mime_type not in IMAGE_MIME_TYPES:
        return {"type": "text", "text": f"[image omitted: unsupported type {block.mime_type}]"}
    if follow_up:
        return _image_url(block)
    return {"type": "text", "text": f"[image omitted: {block.mime_type}]"}


def context_messages(
    messages: Iterable[UserMessage], *, images: ImageMode = "follow_up"
) -> list[dict[str, object]]:
    """One ``{"role": "user", "content": [...]}`` message per additional context.

    Text blocks become ``text`` parts; supported images ``image_url`` parts (or the
    ``[image omitted: <mime type>]`` text with ``images="placeholder"``). A context with no
    block is left out; its ``id`` and ``source`` have no place in the format.

    Args:
        messages: Contexts, e.g. ``outcome.additional_contexts``.
        images: ``"follow_up"`` or ``"placeholder"``, as for :func:`write_results`.

    Returns:
        Fresh plain JSON messages.

    Raises:
        ValueError: a bad ``images``.
    """
    _check_images(images)
    follow_up = images == "follow_up"
    rendered: list[dict[str, object]] = []
    for message in messages:
        parts = [_context_part(block, follow_up) for block in message.content]
        if parts:
            rendered.append({"role": "user", "content": parts})
    return rendered
