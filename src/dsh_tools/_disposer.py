"""``Disposer``: the handle every registration returns."""

from __future__ import annotations

from typing import TYPE_CHECKING, final

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import TracebackType

__all__ = ["Disposer"]


@final
class Disposer:
    """Undo one registration: the first call undoes it, later calls do nothing.

    It is also a context manager (``__exit__`` disposes and never suppresses exceptions),
    so ``with runtime.register(tool): ...`` and ``contextlib.ExitStack`` tear registrations
    down last-in, first-out. A registration made through a scope is owned by it:
    ``Scope.close()`` disposes what is still active.

    Example:
        >>> with runtime.register(echo):  # doctest: +SKIP
        ...     await runtime.execute(call)
    """

    __slots__ = ("_owned_by", "_undo")
    _undo: Callable[[], None] | None
    _owned_by: dict[Disposer, None] | None

    def __init__(self) -> None:
        raise TypeError("Disposer is returned by registration methods; it is not created directly")

    @classmethod
    def _make(cls, undo: Callable[[], None], owned_by: dict[Disposer, None] | None) -> Disposer:
        self = object.__new__(cls)
        self._undo = undo
        self._owned_by = owned_by
        if owned_by is not None:
            owned_by[self] = None
        return self

    def __call__(self) -> None:
        """Undo the registration (idempotent)."""
        undo = self._undo
        if undo is None:
            return
        self._undo = None
        if self._owned_by is not None:
            self._owned_by.pop(self, None)
            self._owned_by = None
        undo()

    @property
    def disposed(self) -> bool:
        """Whether the registration has been undone."""
        return self._undo is None

    def __enter__(self) -> Disposer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self()

    def __repr__(self) -> str:
        return f"<Disposer {'disposed' if self.disposed else 'active'}>"
