"""Every Python block of the tutorial and how-to pages runs, in order, in one namespace per page.

The pages are parsed with sybil's MyST parser; a page whose blocks need a model gets one of the
fake provider servers (``tests/fake_providers.py``) on 127.0.0.1, and the environment variables
the official SDK clients read, for the duration of the page.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from sybil import Sybil
from sybil.parsers.myst import PythonCodeBlockParser

from tests.fake_providers import Call, Step, serve

if TYPE_CHECKING:
    from collections.abc import Iterator


DOCS = Path(__file__).resolve().parent.parent / "docs"
PAGES = sorted(
    str(path.relative_to(DOCS)) for d in ("tutorial", "howto") for path in (DOCS / d).glob("*.md")
)
FENCE = re.compile(r"^```python\s*$", re.MULTILINE)

#: Pages that talk to a model: the provider to fake and the scripted turns.
MODELS: dict[str, tuple[str, list[Step]]] = {
    "tutorial/with-a-model.md": (
        "openai_chat",
        [
            [Call("add", '{"a": 2, "b": 3}'), Call("add", '{"a": 4, "b": 5}')],
            "2 + 3 = 5, 4 + 5 = 9",
        ],
    ),
    "howto/agent-loop.md": (
        "anthropic_messages",
        [[Call("add", '{"a": 1, "b": 1}')], "1 + 1 = 2"],
    ),
}


@contextlib.contextmanager
def _model_for(page: str) -> Iterator[None]:
    if page not in MODELS:
        yield
        return
    provider, script = MODELS[page]
    saved = dict(os.environ)
    with serve(provider, script, max_requests=len(script), max_seconds=30) as server:
        os.environ.update(
            OPENAI_BASE_URL=f"{server.url}/v1",
            OPENAI_API_KEY="test-key",
            ANTHROPIC_BASE_URL=server.url,
            ANTHROPIC_API_KEY="test-key",
        )
        try:
            yield
        finally:
            os.environ.clear()
            os.environ.update(saved)
        assert server.rejections == []
        assert len(server.requests) == len(script)


def test_the_pages_have_python_blocks() -> None:
    """The tutorial and every how-to page are collected, and each shows runnable Python."""
    assert "tutorial/first-tools.md" in PAGES
    assert len([p for p in PAGES if p.startswith("howto/")]) >= 9
    for page in PAGES:
        assert FENCE.search((DOCS / page).read_text(encoding="utf-8")), page


#: Pages that run programs in the WebAssembly sandbox: they load the session's compiled module.
SANDBOX_PAGES = {"howto/code-mode.md"}


@pytest.mark.parametrize("page", PAGES)
def test_every_python_block_runs(
    page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """Each ```python block of the page runs, in order; none is left out of the count."""
    monkeypatch.chdir(tmp_path)
    if page in SANDBOX_PAGES:
        monkeypatch.setenv("DSH_TRIO_CACHE_DIR", str(request.getfixturevalue("wasi_cache_dir")))
    parser = Sybil(parsers=[PythonCodeBlockParser()], path=str(DOCS))
    document = parser.parse(DOCS / page)
    examples = list(document)
    text = (DOCS / page).read_text(encoding="utf-8")
    assert len(examples) == len(FENCE.findall(text))
    with _model_for(page):
        for example in examples:
            example.evaluate()
