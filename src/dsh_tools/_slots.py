"""Hot-path construction of frozen, slotted classes whose fields are already checked."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["slot_setter"]


def slot_setter(cls: type, name: str) -> Callable[[object, object], None]:
    """The setter of a slotted attribute, bypassing a frozen class's ``__setattr__``.

    For the runtime's own hot-path constructors of values whose fields are already checked.
    """
    descriptor: Any = vars(cls)[name]
    setter: Callable[[object, object], None] = descriptor.__set__
    return setter
