"""Hot-path construction of the runtime's frozen, slotted values.

A frozen attrs class refuses assignment in a Python ``__setattr__``, so whatever writes one
of its fields goes through the slot's descriptor or ``object.__setattr__``: a C call that
packs its arguments into a tuple, several layers deep, for every field. The runtime builds
several such values per call (the call, its execution, its steps, its result and the
result's text); written that way, those fields cost about a tenth of a no-op call.

So each of those classes takes its slots from a private, plain base class that declares
them: attrs reuses a base's slots instead of adding its own, so the frozen class adds none
and has exactly the base's layout. The runtime's factories build a value as an instance of
the base, assign its fields as plain attributes (the store CPython specializes best), then
assign the frozen class to its ``__class__``, which CPython allows between two classes of
the same layout. From then on the object *is* an instance of the frozen class: ``type()``
is that class, its ``__setattr__`` refuses writes, and it equals the value its constructor
builds from the same fields (the tests show it for every class).

:func:`sealable` checks, as the class is defined, that attrs did reuse every slot: a class
with slots of its own would read its fields from other slots than the factories write.
A factory that only stores the fields is compiled by :func:`sealed_factory` from a typed,
documented signature (as attrs compiles its ``__init__``); one that computes something
first fills the base itself. A public ``__init__`` (the instance exists already, as the
frozen class) writes with :func:`slot_setter`.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["sealable", "sealed_factory", "slot_setter"]

_T = TypeVar("_T", bound=type)
_F = TypeVar("_F", bound="Callable[..., Any]")


def sealable(cls: _T) -> _T:
    """Check that the attrs class ``cls`` adds no slot to those of its base (see above).

    Apply it to the class attrs built (listed above the attrs decorator).

    Raises:
        TypeError: ``cls`` has slots of its own: its base does not declare them all.
    """
    own = vars(cls).get("__slots__")
    if own != ():
        raise TypeError(f"{cls.__name__} must take all its slots from its base, not {own!r}")
    return cls


def sealed_factory(cls: type) -> Callable[[_F], _F]:
    """Compile the decorated signature into a factory of ``cls`` (see above).

    The decorated function's parameters name every field of ``cls`` once, in any order;
    its body is never run (it only raises). The factory takes the values by position or
    keyword, checks nothing (its callers pass checked, frozen values), fills an instance
    of ``cls``'s base with them and seals it. It keeps the signature's name, docstring
    and annotations.

    Raises:
        TypeError: ``cls`` has slots of its own, or the parameters are not its fields.
    """
    sealable(cls)

    def compile_factory(signature: _F) -> _F:
        fields = list(inspect.signature(signature).parameters)
        if sorted(fields) != sorted(a.name for a in attrs.fields(cls)):
            raise TypeError(
                f"{signature.__name__}() must take exactly the fields of {cls.__name__}"
            )
        lines = [f"def {signature.__name__}({', '.join(fields)}):", "    self = _Base()"]
        lines.extend(f"    self.{name} = {name}" for name in fields)
        lines.extend(["    self.__class__ = _Sealed", "    return self", ""])
        namespace: dict[str, Any] = {"_Base": cls.__base__, "_Sealed": cls}
        filename = f"<dsh_tools sealed factory of {cls.__qualname__}>"
        exec(compile("\n".join(lines), filename, "exec"), namespace)  # our own source, built above
        factory = namespace[signature.__name__]
        for attribute in ("__module__", "__qualname__", "__doc__", "__annotations__"):
            setattr(factory, attribute, getattr(signature, attribute))
        return factory  # type: ignore[no-any-return]

    return compile_factory


def slot_setter(cls: type, name: str) -> Callable[[object, object], None]:
    """The setter of a slotted attribute, bypassing a frozen class's ``__setattr__``.

    For a hand-written ``__init__`` of a value whose fields are already checked.
    """
    descriptor: Any = next(vars(k)[name] for k in cls.__mro__ if name in vars(k))
    setter: Callable[[object, object], None] = descriptor.__set__
    return setter
