"""The realistic scenario's tool for the peers: parameters as pydantic models.

Imported only when a peer runs (it needs pydantic, from the ``peers`` extra). No
``from __future__ import annotations`` here: the peers read these annotations at run time.
"""

import asyncio
from typing import Literal

import pydantic

__all__ = ["PFilter", "POptions", "search"]


class PFilter(pydantic.BaseModel):
    """One search filter."""

    field: str
    op: Literal["eq", "lt", "gt", "contains"]
    value: str


class POptions(pydantic.BaseModel):
    """Search options."""

    limit: int
    offset: int
    sort: str
    descending: bool
    include: list[str]


async def search(
    query: str,
    filters: list[PFilter],
    options: POptions,
    tags: list[str],
    note: str,
    sleep_ms: int,
) -> str:
    """Pretend to search: sleep ``sleep_ms`` milliseconds."""
    await asyncio.sleep(sleep_ms / 1000)
    return f"{len(filters)} filters, limit {options.limit}"
