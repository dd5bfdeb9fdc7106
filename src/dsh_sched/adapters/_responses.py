"""OpenAI Responses: tools, ``function_call`` items in, their outputs out (integrations §2.6)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from dsh_tools import FrozenDict, ImageContent, TextContent

from .._calls import ModelToolCall
from ._export import checked_schemas
from ._read import EMPTY_ECHO, TurnBuilder, as_list, plain
from ._turn import IMAGE_MIME_TYPES, ToolTurn
from ._write import Committed, contexts_of, echoed, results_in_order

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from dsh_tools import ContentBlock, ToolSchema, UserMessage

__all__ = ["context_messages", "read_calls", "tools", "write_results"]

PROVIDER: Final = "openai_responses"


def tools(schemas: Iterable[ToolSchema], *, strict: bool = False) -> list[dict[str, object]]:
    """The Responses ``tools`` entries for ``schemas``, in order.

    Each entry is the flat ``{"type": "function", "name", "description", "parameters",
    "strict"}``; ``description`` is left out when empty. ``strict`` is always written: the
    Responses API would otherwise normalize schemas to strict mode, making every property
    required.

    Args:
        schemas: What ``runtime.schemas(scope)`` returned.
        strict: Ask for strict mode (closed schemas listing every property in ``required``,
            no ``oneOf``).

    Returns:
        One fresh entry per schema.

    Raises:
        TypeError: an item is not a ``ToolSchema``.
        ValueError: a name outside ``^[a-zA-Z0-9_-]{1,64}$``; parameters that are not a
            ``"type": "object"`` schema; with ``strict=True``, the first strict problem.
    """
    entries: list[dict[str, object]] = []
    for schema in checked_schemas(PROVIDER, schemas, strict=strict):
        if schema.description:
            entries.append(
                {
                    "type": "function",
                    "name": schema.name,
                    "description": schema.description,
                    "parameters": schema.parameters,
                    "strict": strict,
                }
            )
        else:
            entries.append(
                {
                    "type": "function",
                    "name": schema.name,
                    "parameters": schema.parameters,
                    "strict": strict,
                }
            )
    return entries


def read_calls(output: object) -> ToolTurn:
    """The ``function_call`` items of a response's output, in order.

    Results are paired by ``call_id`` (not the item's ``id``). A call made by
    provider-hosted code keeps its ``caller`` in ``turn.echo``, and its output item carries
    it back. Every other item (messages, reasoning, programs, custom tool calls) is ignored.

    Args:
        output: The response's ``output`` list (items as mappings or SDK objects), or the
            whole response (a mapping or a ``Response``).

    Returns:
        The turn; ``turn.calls`` go to ``run_tool_calls``.

    Raises:
        ProviderFormatError: at the first malformed field, e.g.
            ``openai_responses: output[1].call_id must be a non-empty string``.
    """
    items = plain(output)
    if isinstance(items, Mapping):
        items = items.get("output")  # a whole response
    builder = TurnBuilder(PROVIDER, "output", has_echo=True)
    entries = as_list(PROVIDER, items, "output")
    well_formed = _well_formed_calls(entries)
    if well_formed is not None:
        return ToolTurn._trusted(PROVIDER, well_formed, (EMPTY_ECHO,) * len(well_formed))
    calls, echoes, seen = builder.calls, builder.echo, builder.seen
    # The checked path: each field in document order; the builder raises the exact errors.
    for index, item in enumerate(entries):
        entry = item if type(item) is dict else builder.entry(index, item)
        if entry.get("type") != "function_call":
            continue
        call_id = entry.get("call_id")
        if type(call_id) is not str or not call_id or call_id in seen:
            builder.bad_call_id(index, call_id, ".call_id")  # raises
        seen[call_id] = index
        name = entry.get("name")
        if type(name) is not str or not name:
            name = builder.text(index, name, ".name")  # raises
        caller = entry.get("caller")
        echo = EMPTY_ECHO
        if caller is not None:
            # Copied back unchanged into the call's output item.
            echo = FrozenDict(caller=builder.frozen(index, caller, ".caller"))
        arguments = entry.get("arguments")
        if isinstance(arguments, str):
            calls.append(ModelToolCall(call_id=call_id, name=name, arguments=arguments))
            echoes.append(echo)
        else:
            builder.add(index, call_id, name, arguments, ".arguments", text_ok=True, echo=echo)
    return builder.turn()


def _well_formed_calls(entries: Sequence[Any]) -> tuple[ModelToolCall, ...] | None:
    # One optimistic pass for what the API sends: plain dict items whose function calls have
    # call ids and names that ModelToolCall accepts (exact str) and that are not empty, no
    # caller key and no repeated call id. Anything else gives None, and read_calls reads the
    # list again on the checked path, which builds the same calls or raises the exact error.
    calls = []
    try:
        for entry in entries:
            if type(entry) is not dict:
                return None
            if entry["type"] != "function_call":
                continue
            call_id = entry["call_id"]
            name = entry["name"]
            if not (call_id and name) or "caller" in entry:
                return None
            calls.append(ModelToolCall(call_id=call_id, name=name, arguments=entry["arguments"]))
    except (KeyError, TypeError):
        return None
    if len({call.call_id for call in calls}) != len(calls):
        return None
    return tuple(calls)


def _part(block: ContentBlock) -> dict[str, object]:
    if type(block) is TextContent:
        return {"type": "input_text", "text": block.text}
    assert type(block) is ImageContent
    if block.mime_type not in IMAGE_MIME_TYPES:
        return {
            "type": "input_text",
            "text": f"[image omitted: unsupported type {block.mime_type}]",
        }
    return {
        "type": "input_image",
        "image_url": f"data:{block.mime_type};base64,{block.data}",
        "detail": "auto",
    }


def write_results(
    turn: ToolTurn, committed: Committed, *, contexts: bool = True
) -> list[dict[str, object]]:
    """The input items that answer every call of ``turn``.

    One ``{"type": "function_call_output", "call_id", "output"}`` item per call, in model
    order, followed by the call's echoed keys (``caller``). ``output`` is the text when the
    result renders to exactly one text part, ``""`` when to none, otherwise the list of
    ``input_text`` / ``input_image`` parts. Then, with ``contexts=True``, one user message
    item per additional context. Send them after the response's own output items, or alone
    with ``previous_response_id``.

    Args:
        turn: The turn :func:`read_calls` returned.
        committed: The batch's ``BatchOutcome``, or an iterable of ``CommittedCall`` /
            ``CallCommitted``.
        contexts: Render the additional contexts too.

    Returns:
        Fresh plain JSON items.

    Raises:
        TypeError: ``turn`` or ``committed`` (or an item) has the wrong type.
        ValueError: the turn is another adapter's; a result does not belong to the turn, or
            a call has two results or none.
    """
    results = results_in_order(PROVIDER, turn, committed)
    echo = turn.echo
    items: list[dict[str, object]] = []
    for index, (call, result) in enumerate(zip(turn.calls, results, strict=True)):
        blocks = result.content
        output: object
        if len(blocks) == 1 and type(blocks[0]) is TextContent:  # the usual, text-only result
            output = blocks[0].text
        else:
            parts = [_part(block) for block in blocks]
            if len(parts) == 1 and parts[0]["type"] == "input_text":
                output = parts[0]["text"]  # an unsupported image's placeholder text
            else:
                output = parts or ""
        item: dict[str, object] = {
            "type": "function_call_output",
            "call_id": call.call_id,
            "output": output,
        }
        if echo and echo[index]:
            item.update(echoed(echo[index]))
        items.append(item)
    if contexts:
        items.extend(context_messages(contexts_of(results)))
    return items


def context_messages(messages: Iterable[UserMessage]) -> list[dict[str, object]]:
    """One ``{"type": "message", "role": "user", "content": [...]}`` item per context.

    Text blocks become ``input_text`` parts and images ``input_image`` parts (with
    ``"detail": "auto"``); a context with no block is left out.

    Args:
        messages: Contexts, e.g. ``outcome.additional_contexts``.

    Returns:
        Fresh plain JSON items.
    """
    rendered: list[dict[str, object]] = []
    for message in messages:
        parts = [_part(block) for block in message.content]
        if parts:
            rendered.append({"type": "message", "role": "user", "content": parts})
    return rendered
