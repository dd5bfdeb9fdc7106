"""The lossless JSON boundary: ``freeze_json``, ``thaw_json`` and ``FrozenDict``.

Everything that crosses into the runtime (arguments, values, meta, schemas, context sources)
goes through :func:`freeze_json`. A shallow value is frozen recursively (the fast path);
anything deeper goes through an iterative walk, so that a nesting depth of 5000 (or far
more) never touches Python's recursion limit. :func:`thaw_json` lives in ``_json_thaw``.
"""

from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING, Any, Final, NoReturn, TypeAlias, final

from ._json_thaw import thaw_json

__all__ = [
    "FrozenDict",
    "JsonValue",
    "freeze_json",
    "is_lossless_str",
    "thaw_json",
]

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Self

#: A frozen JSON value: ``None``, ``bool``, ``int``, ``float``, ``str``, a ``tuple`` of frozen
#: values, or a :class:`FrozenDict`. Mutable ``list``/``dict`` inputs are accepted by
#: :func:`freeze_json` and come out as tuples and ``FrozenDict`` instances.
JsonValue: TypeAlias = Any

_LOG2_10 = math.log2(10)
# The digit limit is 0 (none) or at least 640 (sys.set_int_max_str_digits refuses less), and
# 2000 bits make at most 603 digits: such an int is lossless whatever the limit.
_ALWAYS_OK_BITS = 2000


def is_lossless_str(s: str) -> bool:
    """Return whether ``s`` encodes as UTF-8, i.e. holds no unpaired surrogate."""
    if s.isascii():
        return True
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _type_name(t: type) -> str:
    if t.__module__ == "builtins":
        return t.__qualname__
    return f"{t.__module__}.{t.__qualname__}"


class _NotLossless(Exception):
    """Internal: carries a reason; the caller adds the path."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _int_ok(value: int) -> bool:
    if value.bit_length() <= _ALWAYS_OK_BITS:
        return True
    limit = sys.get_int_max_str_digits()
    if limit == 0:
        return True
    bits = value.bit_length()
    # A number of b bits has at most floor(b * log10(2)) + 1 digits: cheap, exact enough to
    # accept every ordinary int without formatting it.
    if bits <= (limit - 1) * _LOG2_10:
        return True
    try:
        str(value)
    except ValueError:
        return False
    return True


def _check_scalar(value: object, t: type) -> bool:
    """Check a scalar leaf. Return ``True`` for a scalar, ``False`` for a container/other.

    Raises ``_NotLossless`` for a scalar that is not lossless.
    """
    if t is str:
        if not is_lossless_str(value):  # type: ignore[arg-type]
            raise _NotLossless("unpaired surrogate")
        return True
    if t is int:
        if not _int_ok(value):  # type: ignore[arg-type]
            raise _NotLossless("integer too large")
        return True
    if t is float:
        f: float = value  # type: ignore[assignment]
        if f != f or f in (math.inf, -math.inf):
            raise _NotLossless("non-finite float")
        if f == 0.0 and math.copysign(1.0, f) < 0:
            raise _NotLossless("negative zero")
        return True
    return value is None or t is bool


@final
class FrozenDict(dict[str, Any]):
    """A read-only, deeply frozen, hashable ``dict``.

    The constructor takes what ``dict`` takes, requires ``str`` keys and passes every value
    through :func:`freeze_json`. Every mutating method raises ``TypeError``. Being a ``dict``,
    it goes through ``json.dumps``, cattrs and any code that accepts a ``dict`` with no copy.

    Example:
        >>> fd = FrozenDict({"tags": ["a"]})
        >>> fd["tags"]
        ('a',)
    """

    __slots__ = ("_hash",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        try:
            self._hash  # noqa: B018 - set once an instance is built
        except AttributeError:
            pass
        else:
            raise TypeError("FrozenDict is read-only")  # __init__ called again
        dict.update(self, freeze_json(dict(*args, **kwargs)))
        self._hash: int | None = None

    @classmethod
    def _from_frozen(cls, pairs: Iterable[tuple[str, Any]] | Mapping[str, Any]) -> Self:
        """Build from already-frozen pairs without re-checking them (internal fast path)."""
        self = dict.__new__(cls)
        dict.update(self, pairs)
        self._hash = None
        return self

    def _readonly(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError("FrozenDict is read-only")

    __setitem__ = _readonly
    __delitem__ = _readonly
    __ior__ = _readonly
    clear = _readonly
    pop = _readonly
    popitem = _readonly
    setdefault = _readonly
    update = _readonly

    def __hash__(self) -> int:  # type: ignore[override]
        h = self._hash
        if h is None:
            h = _deep_hash(self)
        return h

    def __reduce__(self) -> tuple[type[FrozenDict], tuple[dict[str, Any]]]:
        return (FrozenDict, (dict(self),))

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, memo: dict[int, object]) -> FrozenDict:
        return self

    def __repr__(self) -> str:
        return f"FrozenDict({dict.__repr__(self)})"

    def __or__(self, other: object) -> FrozenDict:  # type: ignore[override]
        if not isinstance(other, dict):
            return NotImplemented
        merged = dict(self)
        merged.update(other)
        return FrozenDict(merged)


def _deep_hash(root: FrozenDict) -> int:
    """Hash ``root`` and every ``FrozenDict`` nested in it, innermost first, iteratively.

    Python hashes a tuple by hashing its items, in C and with no depth limit: a frozen array
    nested a few hundred thousand deep would overflow the C stack. So a value is hashed here
    from hashes already known: a scalar as Python does, a ``FrozenDict`` as the frozenset of
    its ``(key, hash of value)`` pairs (cached on it), a tuple as the tuple of its items'
    hashes. Equal values get equal hashes: equal scalars hash equal in Python (``1``,
    ``1.0``, ``True``), and equal containers hold equal items in the same places. A
    depth-first walk with an explicit stack hashes each container once all it holds is
    hashed (frozen data has no cycles), once even if several parents share it.
    """
    tuple_hashes: dict[int, int] = {}

    def hash_of(value: Any) -> int:
        kind = type(value)
        if kind is FrozenDict:
            h: int = value._hash
            return h
        if kind is tuple:
            return tuple_hashes[id(value)]
        return hash(value)

    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        value, children_done = stack.pop()
        if children_done:
            if type(value) is FrozenDict:
                value._hash = hash(frozenset([(k, hash_of(v)) for k, v in value.items()]))
            else:
                tuple_hashes[id(value)] = hash(tuple([hash_of(v) for v in value]))
            continue
        kind = type(value)
        if kind is FrozenDict:
            if value._hash is not None:
                continue
            children = value.values()
        else:  # a tuple: only FrozenDicts and tuples are ever pushed
            if id(value) in tuple_hashes:
                continue
            children = value
        stack.append((value, True))
        stack.extend((child, False) for child in children if type(child) in _NESTED_HASHED)
    done = root._hash
    assert done is not None  # the walk ends with the root
    return done


_NESTED_HASHED: Final = (FrozenDict, tuple)


_dict_new = dict.__new__
_dict_update = dict.update

#: The frozen empty object: immutable, so one instance serves every ``{}``.
_EMPTY: Final = FrozenDict._from_frozen(())


def _path_str(parts: Iterable[object]) -> str:
    out: list[str] = []
    for p in parts:
        if p == "$" and not out:
            out.append("$")
        elif isinstance(p, int):
            out.append(f"[{p}]")
        else:
            out.append(f".{p}")
    return "".join(out)


class _Frame:
    __slots__ = ("changed", "items", "keys", "n", "out", "pos", "src")

    def __init__(self, src: Any, keys: list[Any] | None, items: list[Any]) -> None:
        self.src = src
        self.keys = keys
        self.items = items
        self.n = len(items)
        self.pos = 0
        self.out: list[Any] = []
        self.changed = type(src) is not tuple


def _open_frame(node: Any, t: type) -> _Frame:
    if t is dict:
        keys = list(node)
        return _Frame(node, keys, [node[k] for k in keys])
    if t is list:
        return _Frame(node, None, list(node))
    return _Frame(node, None, node)  # tuple: already immutable, index it directly


def _fail(frames: list[_Frame], reason: str, *, at_container: bool = False) -> NoReturn:
    """Raise with the path of the item being processed (or of its container, for keys)."""
    parts: list[object] = ["$"]
    for f in frames[:-1] if at_container else frames:
        i = f.pos - 1
        parts.append(f.keys[i] if f.keys is not None else i)
    raise TypeError(f"not lossless JSON: {reason} at {_path_str(parts)}")


def freeze_json(value: object) -> JsonValue:
    """Return a deeply immutable copy of a lossless JSON value (iteratively).

    ``list`` becomes ``tuple``, ``dict`` becomes :class:`FrozenDict`; scalars, frozen dicts
    and tuples whose items are already frozen are returned as they are, so
    ``freeze_json(x) is x`` for every frozen ``x``.

    Raises:
        TypeError: ``not lossless JSON: <reason> at <path>`` for NaN/±inf, ``-0.0``, an int
            over the digit limit, a non-``str`` key, a cycle, an unpaired surrogate or any
            other type (subclasses of ``dict``/``list`` included).

    Example:
        >>> freeze_json({"a": [1, 2]})
        FrozenDict({'a': (1, 2)})
    """
    t = type(value)
    if t is str and value.isascii():  # type: ignore[attr-defined]
        return value
    if t is FrozenDict:  # a snapshot already (the scheduler parses texts into one)
        return value
    if t is dict:  # most tool arguments: a flat object
        flat = _freeze_flat(value, t)
        return flat if flat is not None else _freeze_nested(value, t)
    try:
        if _check_scalar(value, t):
            return value
    except _NotLossless as exc:
        raise TypeError(f"not lossless JSON: {exc.reason} at $") from None
    if t is not dict and t is not list and t is not tuple:
        raise TypeError(f"not lossless JSON: unsupported type {_type_name(t)} at $")
    flat = _freeze_flat(value, t)
    if flat is not None:
        return flat
    return _freeze_nested(value, t)


def _freeze_flat(root: Any, t: type) -> JsonValue | None:
    """The fast path for a container of scalars only (most tool arguments).

    Returns ``None`` when the general walk is needed: a nested container, or anything that
    is not lossless (the walk then reports it with its path).
    """
    try:
        if t is dict:
            if not root:
                return _EMPTY
            for key, item in root.items():
                if type(key) is not str or not (key.isascii() or is_lossless_str(key)):
                    return None
                kind = type(item)
                # The commonest scalars inline; everything else through _check_scalar.
                if kind is str:
                    if not item.isascii() and not is_lossless_str(item):
                        return None
                elif kind is int:
                    if item.bit_length() > _ALWAYS_OK_BITS and not _int_ok(item):
                        return None
                elif not (kind is bool or item is None) and not _check_scalar(item, kind):
                    return None
            # FrozenDict._from_frozen(root), inlined: this is every call's arguments.
            frozen = _dict_new(FrozenDict)
            _dict_update(frozen, root)
            frozen._hash = None
            return frozen
        for item in root:
            if not _check_scalar(item, type(item)):
                return None
    except _NotLossless:
        return None
    return root if t is tuple else tuple(root)


#: How deep and how many containers the recursive fast path goes before it hands the
#: value to the iterative walk: far below the recursion limit, and a bound on the work a
#: value that shares containers (which the recursion copies once per place) can waste.
_FAST_DEPTH: Final = 40
_FAST_CONTAINERS: Final = 5000


class _Fallback(Exception):
    """Internal: the recursive fast path gives up; the iterative walk decides."""


_FALLBACK: Final = _Fallback()


def _freeze_nested(root: Any, t: type) -> JsonValue:
    """Freeze a value with nested containers: recursively while it is shallow, small and
    lossless (most nested arguments), otherwise with the iterative walk, which also reports
    what is not lossless, and where."""
    budget = _FAST_CONTAINERS

    def walk(node: Any, t: type, depth: int) -> Any:
        # Returns the frozen copy of a dict, list or tuple; raises _FALLBACK to give up.
        nonlocal budget
        budget -= 1
        if depth > _FAST_DEPTH or budget < 0:
            raise _FALLBACK
        if t is dict:
            out: dict[str, Any] = {}
            for key, item in node.items():
                if type(key) is not str or not (key.isascii() or is_lossless_str(key)):
                    raise _FALLBACK
                kind = type(item)
                if kind is str:
                    if not item.isascii() and not is_lossless_str(item):
                        raise _FALLBACK
                elif kind is dict or kind is list or kind is tuple:
                    item = walk(item, kind, depth + 1)
                elif not _leaf_ok(item, kind):
                    raise _FALLBACK
                out[key] = item
            frozen = _dict_new(FrozenDict)
            _dict_update(frozen, out)
            frozen._hash = None
            return frozen
        items: list[Any] = []
        changed = t is list
        for item in node:
            kind = type(item)
            if kind is str:
                if not item.isascii() and not is_lossless_str(item):
                    raise _FALLBACK
            elif kind is dict or kind is list or kind is tuple:
                frozen_item = walk(item, kind, depth + 1)
                if frozen_item is not item:
                    changed = True
                item = frozen_item
            elif not _leaf_ok(item, kind):
                raise _FALLBACK
            items.append(item)
        return tuple(items) if changed else node

    try:
        return walk(root, t, 0)
    except (_Fallback, RecursionError):  # the caller may itself be deep in recursion
        return _freeze_container(root, t)


def _leaf_ok(item: Any, kind: type) -> bool:
    """Whether the fast path keeps a leaf that is not a ``str`` as it is."""
    if kind is int:
        return item.bit_length() <= _ALWAYS_OK_BITS or _int_ok(item)
    if kind is float:
        finite = item == item and item not in (math.inf, -math.inf)
        return finite and (item != 0.0 or math.copysign(1.0, item) > 0)
    return kind is bool or item is None or kind is FrozenDict


_NOT_DONE: Final = object()


def _freeze_container(root: Any, root_type: type) -> JsonValue:
    on_path = {id(root)}
    # The frozen copy of each container already done, by id: a container the value holds at
    # several places (a sub-schema shared by many levels, say) is copied once, and its copy
    # serves every place. Copying it again per place could take exponential time. The input
    # is alive for the whole walk, so its ids stay its own.
    done: dict[int, Any] = {}
    frames = [_open_frame(root, root_type)]
    if frames[0].keys is not None:
        _check_keys(frames, frames[0])
    while True:
        f = frames[-1]
        if f.pos < f.n:
            child = f.items[f.pos]
            f.pos += 1
            ct = type(child)
            try:
                if _check_scalar(child, ct):
                    f.out.append(child)
                    continue
            except _NotLossless as exc:
                _fail(frames, exc.reason)
            if ct is FrozenDict:
                f.out.append(child)
                continue
            if ct is not dict and ct is not list and ct is not tuple:
                _fail(frames, f"unsupported type {_type_name(ct)}")
            copy = done.get(id(child), _NOT_DONE)
            if copy is not _NOT_DONE:
                f.out.append(copy)
                if copy is not child:
                    f.changed = True
                continue
            if id(child) in on_path:
                _fail(frames, "cycle")
            on_path.add(id(child))
            nf = _open_frame(child, ct)
            frames.append(nf)
            if nf.keys is not None:
                _check_keys(frames, nf)
            continue
        # Every item is done: build this container and hand it to the parent.
        frames.pop()
        on_path.discard(id(f.src))
        result: Any
        if f.keys is not None:
            result = FrozenDict._from_frozen(zip(f.keys, f.out, strict=True))
        elif f.changed:
            result = tuple(f.out)
        else:
            result = f.src
        if not frames:
            return result
        done[id(f.src)] = result
        parent = frames[-1]
        parent.out.append(result)
        if result is not f.src:
            parent.changed = True


def _check_keys(frames: list[_Frame], f: _Frame) -> None:
    assert f.keys is not None
    for key in f.keys:
        if type(key) is not str:
            _fail(frames, "non-str key", at_container=True)
        if not is_lossless_str(key):
            _fail(frames, "unpaired surrogate", at_container=True)
