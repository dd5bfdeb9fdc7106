"""A small Sphinx extension for the dsh-trio docs: pictures and outputs made by the build.

- ``{dsh-timeline} <scenario>`` runs a real batch (under trio's ``MockClock``, so the
  picture is the same on every build), records it with ``dsh_sched.testing.TraceRecorder``
  and embeds the SVG that ``render_timeline`` draws.
- ``{dsh-command} <args>`` runs ``python -m <args>`` and shows what it printed.
- Docstrings lose their citations of the project's internal specification (section signs
  and item identifiers, which readers of the site cannot look up) on their way into the
  reference; the sentences around them are kept.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import timeline_scenarios
from docutils import nodes
from sphinx.util.docutils import SphinxDirective

_SECTION = r"(?:(?:[a-z_-]+\.md|integrations|runtime|scheduler|code-mode)\s+)?§[\d.]*\d"
_ITEM = r"(?:[A-Z]{1,2}-\d{3}|I\d{1,2})\b"
_REF = rf"(?:{_SECTION}|{_ITEM})"
_REFS = rf"{_REF}(?:,\s*{_REF})*"
#: (pattern, replacement), applied in order to the whole docstring.
_CITATIONS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(rf"\({_REFS};\s*"), "("),  # "(§8.3; native ...)" -> "(native ...)"
    (re.compile(rf"\s*\({_REFS}\)"), ""),  # " (§9)", " (S-014, S-016)"
    (re.compile(rf",\s*{_REFS}\)"), ")"),  # "(..., §8.4)" -> "(...)"
    (re.compile(rf"\s*See {_REFS} for [^.]*\."), ""),  # "See §12.4 for the mapping."
    (re.compile(rf"\s*\({_REFS}\s[^)]*\)"), ""),  # "(§7.4 allows this ...)"
]


def strip_citations(text: str) -> str:
    """``text`` without citations of the internal specification."""
    for pattern, replacement in _CITATIONS:
        text = pattern.sub(replacement, text)
    return text


def _process_docstring(
    app: Any, what: str, name: str, obj: object, options: Any, lines: list[str]
) -> None:
    lines[:] = strip_citations("\n".join(lines)).split("\n")


class TimelineDirective(SphinxDirective):
    """Embed the timeline of one scenario of ``timeline_scenarios``."""

    required_arguments = 1
    has_content = False

    def run(self) -> list[nodes.Node]:
        name = self.arguments[0]
        svg = timeline_scenarios.draw(name)
        out = Path(self.env.srcdir) / "_generated"
        out.mkdir(exist_ok=True)
        path = out / f"timeline-{name}.svg"
        if not path.exists() or path.read_text(encoding="utf-8") != svg:
            path.write_text(svg, encoding="utf-8")
        self.env.note_dependency(timeline_scenarios.__file__)
        image = nodes.image(uri=f"/_generated/timeline-{name}.svg", alt=f"timeline: {name}")
        return [image]


class CommandDirective(SphinxDirective):
    """Show the output of ``python -m <arguments>``."""

    required_arguments = 1
    final_argument_whitespace = True
    has_content = False

    def run(self) -> list[nodes.Node]:
        args = shlex.split(self.arguments[0])
        done = subprocess.run(
            [sys.executable, "-m", *args], capture_output=True, text=True, timeout=60, check=True
        )
        text = f"$ python -m {self.arguments[0]}\n{done.stdout.rstrip()}"
        block = nodes.literal_block(text, text)
        block["language"] = "text"
        return [block]


def _public_bases(app: Any, name: str, obj: object, options: Any, bases: list[type]) -> None:
    """Name only public classes on a class's "Bases:" line: a private base (the slots of
    the values the runtime builds per call, decision 116) gives way to its own bases."""
    public: list[type] = []
    pending = list(bases)
    while pending:
        base = pending.pop(0)
        if base.__name__.startswith("_"):
            pending[:0] = base.__bases__
        elif base not in public:
            public.append(base)
    bases[:] = public


def setup(app: Any) -> dict[str, Any]:
    app.add_directive("dsh-timeline", TimelineDirective)
    app.add_directive("dsh-command", CommandDirective)
    app.connect("autodoc-process-docstring", _process_docstring)
    app.connect("autodoc-process-bases", _public_bases)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
