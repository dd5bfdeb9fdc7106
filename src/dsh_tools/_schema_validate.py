"""Validation against the supported JSON Schema subset (runtime.md §12.2).

A schema is checked and compiled once into a graph of nodes (``_schema_compile``); validating
a value is then a walk over that graph and the data with an explicit stack, so neither a
5000-deep schema nor 5000-deep data touches Python's recursion limit, and no keyword is
looked up per call.

Violations are reported in the specification's order: a node's own problems first, then,
for an object, missing required names, declared properties (in ``properties`` order) and
undeclared keys (in value order); for an array, items in index order. The stack is LIFO, so
work is pushed in reverse of that order.
"""

from __future__ import annotations

from typing import Any, Final, TypeAlias, final

from ._json import FrozenDict, JsonValue
from ._json_text import describe_value
from ._schema_check import assert_supported_json_schema
from ._schema_compile import (
    ANY,
    ARRAY,
    FLOAT,
    NONJSON,
    OBJECT,
    SCALAR_TYPES,
    Node,
    compile_nodes,
    kind_of,
    scalar_key,
)
from ._schema_quick import quick_predicate

__all__ = ["CompiledSchema", "compile_schema", "validate_args", "validate_json_value"]

_LOSSLESS: Final = "must be a lossless JSON value"
_FINITE: Final = "must be a finite JSON number"
_OBJECT: Final = "must be an object"

# A data path is built lazily as a chain ``(parent, step)`` ending in the caller's root
# string; only a reported violation renders it. Steps are ``str`` keys or ``int`` indexes.
_Path: TypeAlias = "str | tuple[_Path, str | int]"


def _render_path(path: _Path) -> str:
    steps: list[str | int] = []
    while isinstance(path, tuple):
        path, step = path
        steps.append(step)
    text = path
    for step in reversed(steps):
        if isinstance(step, int):
            text = f"{text}[{step}]"
        elif text:
            text = f"{text}.{step}"
        else:
            text = step
    return text or "arguments"


@final
class _Sink:
    """Where violations go: a list (report mode) or just a flag (match mode, for oneOf)."""

    __slots__ = ("failed", "out")

    def __init__(self, out: list[str] | None) -> None:
        self.out = out
        self.failed = False

    def emit(self, path: _Path, suffix: str) -> None:
        if self.out is None:
            self.failed = True
        else:
            self.out.append(f'"{_render_path(path)}" {suffix}')


# Stack operations.
_VALIDATE: Final = 0  # (op, node, value, path, sink, frozen)
_EMIT: Final = 1  # (op, messages, sink): violations that come after a node's children
_ONE_OF: Final = 2  # (op, branch sinks, path, sink, memo key, value): count the matches
_LEAVE: Final = 3  # (op, id): a container's free walk is done; it is off the path again

_Task: TypeAlias = tuple[Any, ...]


# How many branches of a ``oneOf`` node matched a value, keyed by the ids of the node and
# the value (the value is kept too, so that its id stays its own while the walk runs).
_Matches: TypeAlias = dict[tuple[int, int], tuple[int, object]]


def _run(root: Node, value: object, path: str, sink: _Sink) -> None:
    stack: list[_Task] = [(_VALIDATE, root, value, path, sink, False)]
    # Ids of the unfrozen containers on the current free-walk path: a container met again
    # there contains itself, which is not JSON. Frozen data cannot be cyclic.
    on_path: set[int] = set()
    # A oneOf node's branches are tried on one value once per walk. A schema built in
    # Python can share one sub-schema among the branches of many nested oneOf nodes; without
    # this, each level would try the shared part again per branch: exponential work.
    # Whether a branch matches depends only on the branch and the value (not on the path,
    # nor on the sink), so the count found once holds wherever they meet again.
    matches: _Matches = {}
    while stack:
        task = stack.pop()
        op = task[0]
        if op == _VALIDATE:
            _, node, v, p, s, frozen = task
            if s.failed:
                continue
            _validate_one(node, v, p, s, frozen, stack, on_path, matches)
        elif op == _EMIT:
            _, messages, s = task
            if s.out is not None:
                s.out.extend(messages)
            else:
                s.failed = True
        elif op == _ONE_OF:
            # ``s`` cannot have failed since this task was pushed: only the branches, with
            # sinks of their own, ran in between.
            _, branches, p, s, key, v = task
            matched = sum(1 for b in branches if not b.failed)
            matches[key] = (matched, v)
            if matched != 1:
                s.emit(p, f"must match exactly one oneOf branch (matched {matched})")
        else:
            # Always runs, even for a failed sink: the id must leave the path either way.
            on_path.discard(task[1])


def _validate_one(
    node: Node,
    v: Any,
    p: _Path,
    s: _Sink,
    frozen: bool,
    stack: list[_Task],
    on_path: set[int],
    matches: _Matches,
) -> None:
    kind = kind_of(v, frozen)
    if kind < 0:
        s.emit(p, _LOSSLESS if kind == NONJSON else _FINITE)
        return
    if type(v) is FrozenDict:
        frozen = True
    kinds = node.kinds
    if (
        kinds is not None
        and kind not in kinds
        and not (node.integer and kind == FLOAT and v.is_integer())
    ):
        message = node.type_message
        if p == "" and message == _OBJECT and s.out is not None:
            # At the top level only, say what arrived, so a model can correct itself.
            message = f"{message}, got {describe_value(v)}"
        s.emit(p, message)
        return
    if node.enum_keys is not None or node.const_message is not None:
        key = scalar_key(v, kind)
        if node.enum_keys is not None and key not in node.enum_keys:
            s.emit(p, node.enum_message)
        if node.const_message is not None and key != node.const_key:
            s.emit(p, node.const_message)
    if node.one_of is not None:
        if node.scalar_branches:
            matched = 0
            for b in node.one_of:
                if kind in b.kinds or (b.integer and kind == FLOAT and v.is_integer()):  # type: ignore[operator]
                    matched += 1
            if matched != 1:
                s.emit(p, f"must match exactly one oneOf branch (matched {matched})")
            return
        key = (id(node), id(v))
        known = matches.get(key)
        if known is not None:
            if known[0] != 1:
                s.emit(p, f"must match exactly one oneOf branch (matched {known[0]})")
            return
        # Each branch validates the same value into its own flag-only sink; the count is
        # taken once all of them are done (they sit above the _ONE_OF task on the stack).
        branches = [_Sink(None) for _ in node.one_of]
        stack.append((_ONE_OF, branches, p, s, key, v))
        for branch, bs in zip(reversed(node.one_of), reversed(branches), strict=True):
            stack.append((_VALIDATE, branch, v, p, bs, frozen))
        return
    if kind == OBJECT:
        if node.declared:
            _push_object(node, v, p, s, frozen, stack, on_path, matches)
        elif not frozen:
            _push_free(v.items(), v, p, s, stack, on_path)
    elif kind == ARRAY:
        if node.items is not None:
            _push_children(
                [(i, node.items, x) for i, x in enumerate(v)],
                p,
                s,
                frozen,
                stack,
                on_path,
                matches,
            )
        elif not frozen:
            _push_free(enumerate(v), v, p, s, stack, on_path)


def _push_object(
    node: Node,
    v: Any,
    p: _Path,
    s: _Sink,
    frozen: bool,
    stack: list[_Task],
    on_path: set[int],
    matches: _Matches,
) -> None:
    for name in node.required:
        if name not in v:
            if s.out is None:
                s.failed = True
                return
            s.out.append(f'missing required property "{_render_path((p, name))}"')
    names = node.property_names
    if not names.issuperset(v):
        undeclared = [(k, x) for k, x in v.items() if k not in names]
        if node.closed:
            if s.out is None:
                s.failed = True
                return
            stack.append(
                (
                    _EMIT,
                    [
                        f'"{_render_path((p, k))}" is not a declared property '
                        "(additionalProperties: false)"
                        for k, _ in undeclared
                    ],
                    s,
                )
            )
        elif not frozen:
            _push_free(undeclared, v, p, s, stack, on_path)
    _push_children(
        [(name, child, v[name]) for name, child in node.properties if name in v],
        p,
        s,
        frozen,
        stack,
        on_path,
        matches,
    )


def _push_children(
    children: list[tuple[str | int, Node, Any]],
    p: _Path,
    s: _Sink,
    frozen: bool,
    stack: list[_Task],
    on_path: set[int],
    matches: _Matches,
) -> None:
    """Validate ``(step, node, value)`` children in order.

    A leading run of scalar values is validated in place (a scalar check pushes nothing, so
    order is kept and the common flat-arguments case needs no stack traffic); the rest is
    pushed, last child first.
    """
    n = len(children)
    i = 0
    while i < n:
        step, child, x = children[i]
        t = type(x)
        fast = child.fast
        if fast is not None and t in fast and (frozen or t is bool or x is None):
            i += 1  # accepted outright: the type is right and the value is lossless
            continue
        if t not in SCALAR_TYPES or (child.one_of is not None and not child.scalar_branches):
            break
        _validate_one(child, x, (p, step), s, frozen, stack, on_path, matches)
        if s.failed:
            return
        i += 1
    for j in range(n - 1, i - 1, -1):
        step, child, x = children[j]
        stack.append((_VALIDATE, child, x, (p, step), s, frozen))


def _push_free(
    children: Any,
    container: object,
    p: _Path,
    s: _Sink,
    stack: list[_Task],
    on_path: set[int],
) -> None:
    """Check the children of an unfrozen container against ``{}`` (lossless JSON only)."""
    pairs = list(children)
    if not pairs:
        return
    key = id(container)
    on_path.add(key)
    stack.append((_LEAVE, key))
    for step, child in reversed(pairs):
        if id(child) in on_path:
            stack.append((_EMIT, [f'"{_render_path((p, step))}" {_LOSSLESS}'], s))
        else:
            stack.append((_VALIDATE, ANY, child, (p, step), s, False))


@final
class CompiledSchema:
    """A checked schema compiled for fast, repeated validation.

    Build one with :func:`compile_schema`. Validation never raises for bad data.
    """

    __slots__ = ("_quick", "_root", "schema")

    def __init__(self, schema: object) -> None:
        assert_supported_json_schema(schema)
        #: The schema it was compiled from (kept alive, so its identity stays unique).
        self.schema = schema
        self._root = compile_nodes(schema)
        self._quick = quick_predicate(schema)

    def validate_frozen(self, value: JsonValue, path: str = "") -> list[str]:
        """:meth:`validate` for a value that ``freeze_json`` returned (the per-call path).

        The commonest schemas (no constraint, a bare ``type``, or a flat object such as
        ``@tool`` derives from scalar parameters) accept a valid frozen value with type tests
        alone; anything else, and every invalid value, takes the full walk, so the violations
        are always the full walk's.
        """
        quick = self._quick
        if quick is not None:
            try:
                if quick(value):
                    return []
            except RecursionError:
                pass  # nested acceptors recurse; with little recursion left, the walk decides
        return self.validate(value, path)

    def validate(self, value: object, path: str = "") -> list[str]:
        """Return every violation of ``value``, in the specification's order (§12.2).

        Args:
            value: Any object; plain or frozen JSON validates as it is.
            path: The path of ``value`` in messages; ``""`` is rendered ``arguments``.

        Returns:
            The violations; empty when ``value`` is valid.
        """
        out: list[str] = []
        _run(self._root, value, path, _Sink(out))
        return out

    def is_valid(self, value: object) -> bool:
        """Return whether ``value`` has no violation (stops at the first one)."""
        sink = _Sink(None)
        _run(self._root, value, "", sink)
        return not sink.failed


# Compiled frozen schemas, keyed by identity. A FrozenDict is immutable all the way down, so
# its compilation can never go stale; the entry keeps the schema alive, so its id cannot be
# reused while cached. Plain (mutable) schemas are compiled afresh on every call instead.
_CACHE_SIZE: Final = 512
_cache: dict[int, CompiledSchema] = {}


def compile_schema(schema: object) -> CompiledSchema:
    """Check and compile ``schema``; a frozen schema is compiled once and cached.

    Args:
        schema: A schema of the supported subset, plain or frozen.

    Returns:
        The compiled schema.

    Raises:
        JsonSchemaError: ``schema`` is outside the supported subset (§12.1).
    """
    if type(schema) is not FrozenDict:
        return CompiledSchema(schema)
    compiled = _cache.get(id(schema))
    if compiled is None:
        compiled = CompiledSchema(schema)
        if len(_cache) >= _CACHE_SIZE:
            # Evict the oldest entry: insertion order is kept by dict.
            del _cache[next(iter(_cache))]
        _cache[id(schema)] = compiled
    return compiled


def validate_json_value(schema: JsonValue, value: object, *, path: str = "") -> list[str]:
    """Validate ``value`` against ``schema`` and return every violation (§12.2).

    Total over data: any object is accepted and a bad value only yields violations. A
    ``dict``/``FrozenDict`` is an object and a ``list``/``tuple`` an array, in the schema and
    in the data. Defaults are never applied.

    Args:
        schema: A schema of the supported subset (§12.1).
        value: The value to validate.
        path: The path of ``value`` in messages (``""`` is rendered ``arguments``).

    Returns:
        The violations in order, e.g. ``['"value.n" must be a number']``; empty if valid.

    Raises:
        JsonSchemaError: ``schema`` is outside the supported subset.

    Example:
        >>> schema = {"type": "array", "items": {"type": "string"}}
        >>> validate_json_value(schema, ["a", 1], path="tags")
        ['"tags[1]" must be a string']
    """
    return compile_schema(schema).validate(value, path)


def validate_args(parameters: JsonValue, args: object) -> list[str]:
    """Validate a call's arguments against a tool's ``parameters`` schema.

    The same as ``validate_json_value(parameters, args, path="")``: paths start at the
    argument names and the root is called ``arguments``.

    Example:
        >>> validate_args({"type": "object", "required": ["path"]}, {})
        ['missing required property "path"']
        >>> validate_args({"type": "object"}, None)
        ['"arguments" must be an object, got null']
        >>> validate_args({"type": "object"}, "nope")[0].removeprefix('"arguments" must be ')
        'an object, got text that is not valid JSON (Expecting value: line 1 column 1)'
    """
    return compile_schema(parameters).validate(args, "")
