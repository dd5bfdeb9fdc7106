"""``thaw_json``: a fresh plain copy of a frozen JSON value (the way back from ``freeze_json``).

Iterative, so that a nesting depth of 5000 (or far more) never touches Python's recursion
limit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["thaw_json"]

if TYPE_CHECKING:
    from collections.abc import Iterator


def thaw_json(value: Any) -> Any:
    """Return a fresh plain copy (``dict``/``list``) of a JSON value, iteratively.

    Tuples become lists and every ``dict`` (frozen or not) a new ``dict``; scalars are
    returned as they are.

    Raises:
        TypeError: ``value`` contains itself (only plain, mutable input can).
    """
    if not isinstance(value, (dict, list, tuple)):
        return value
    root: Any = {} if isinstance(value, dict) else []
    # The containers being copied, outermost first: one met again inside itself is a cycle.
    on_path: set[int] = {id(value)}
    stack: list[tuple[Iterator[Any], Any, int]] = [(_iter_children(value), root, id(value))]
    while stack:
        it, out, _ = stack[-1]
        for key, child in it:
            if isinstance(child, (dict, list, tuple)):
                if id(child) in on_path:
                    raise TypeError("thaw_json: the value contains itself, which JSON cannot")
                new: Any = {} if isinstance(child, dict) else []
                _put(out, key, new)
                on_path.add(id(child))
                stack.append((_iter_children(child), new, id(child)))
                break
            _put(out, key, child)
        else:
            on_path.discard(stack.pop()[2])
    return root


def _iter_children(node: Any) -> Iterator[tuple[Any, Any]]:
    if isinstance(node, dict):
        return iter(node.items())
    return ((None, item) for item in node)


def _put(out: Any, key: Any, child: Any) -> None:
    if type(out) is dict:
        out[key] = child
    else:
        out.append(child)
