"""The documentation site: it builds with warnings as errors, its reference names every public
name, its timelines are drawn from real runs, and its pages render in a real browser.

The site is built once per session into a temporary folder with the command the README gives
(``python -m sphinx -W -b html docs <out>``). The browser checks use Chromium from the
distribution's packages through its own command line (``--dump-dom`` and ``--screenshot``),
with console messages logged to stderr. They skip only when Chromium is missing and ``CI``
is not set: under ``CI=true`` a missing browser fails.
"""

from __future__ import annotations

import html
import importlib
import os
import pkgutil
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

import pytest

import dsh_sched
import dsh_tools

if TYPE_CHECKING:
    from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
ID = re.compile(r'\bid="([^"]+)"')
LOCAL_REF = re.compile(r'\b(?:href|src)="([^"#?]+)[^"]*"')
CONSOLE = re.compile(r":CONSOLE[:(]\d*\)?\]? ?(.*)")


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", str(DOCS), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return out


def public_modules() -> list[ModuleType]:
    """Both packages and every submodule whose dotted path has no ``_`` component."""
    modules: list[ModuleType] = [dsh_tools, dsh_sched]
    for package in (dsh_tools, dsh_sched):
        for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            if any(part.startswith("_") for part in info.name.split(".")):
                continue
            modules.append(importlib.import_module(info.name))
    return modules


def test_the_reference_names_every_public_name(site: Path) -> None:
    """Every name of ``__all__``, in both packages and their public submodules, has an entry
    in the reference: under its own module, or under a module that re-exports the same object
    (``dsh_tools.examples`` for ``dsh_tools.examples.file_tools``)."""
    ids: set[str] = set()
    for page in (site / "reference").glob("*.html"):
        ids.update(ID.findall(page.read_text(encoding="utf-8")))
    modules = public_modules()
    names = {m.__name__ for m in modules}
    assert {"dsh_tools.lowlevel", "dsh_sched.aio", "dsh_sched.adapters.openai_chat"} <= names
    missing: list[str] = []
    checked = 0
    for module in modules:
        for name in getattr(module, "__all__", ()):
            checked += 1
            obj = getattr(module, name)
            homes = [m.__name__ for m in modules if getattr(m, name, None) is obj]
            if not any(f"{home}.{name}" in ids for home in homes):
                missing.append(f"{module.__name__}.{name}")
    assert checked > 130
    assert missing == [], missing


def test_the_reference_cites_nothing_readers_cannot_open(site: Path) -> None:
    """Docstrings cite sections and items of the project's internal specification; the
    build drops those citations from the reference (readers of the site do not have it)."""
    citation = re.compile(
        r"§|\b[A-Z]{1,2}-\d{3}\b|\(I\d{1,2}\)|\b(?:runtime|scheduler|integrations|conformance)\.md\b"
    )
    found: list[str] = []
    for page in sorted(site.glob("**/*.html")):
        if page.parent.name == "_modules" or page.name in {"design.html", "decisions.html"}:
            continue
        text = html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))
        found.extend(f"{page.name}: {m.group(0)}" for m in citation.finditer(text))
    assert found == [], found


def test_the_fuzzing_kit_is_in_the_reference_too(site: Path) -> None:
    """The lazily loaded names of ``dsh_sched.testing`` (outside its ``__all__``) as well."""
    from dsh_sched import testing

    page = (site / "reference" / "dsh_sched.html").read_text(encoding="utf-8")
    ids = set(ID.findall(page))
    assert [n for n in testing._FUZZ_NAMES if f"dsh_sched.testing.{n}" not in ids] == []


def test_the_timelines_are_drawn_by_the_build(site: Path) -> None:
    """The concepts page embeds the two SVG timelines the build drew from real batches."""
    page = (site / "concepts.html").read_text(encoding="utf-8")
    images = re.findall(r'<img[^>]+src="(_images/timeline-[a-z]+\.svg)"', page)
    assert sorted(images) == ["_images/timeline-pool.svg", "_images/timeline-timeout.svg"]
    pool = (site / images[0]).read_text(encoding="utf-8")
    timeout = (site / images[1]).read_text(encoding="utf-8")
    # Five calls, one of them exclusive; four calls, one interrupted and two never started.
    assert pool.count('<g class="row ') == 5
    assert pool.count('data-mode="exclusive"') == 1
    assert timeout.count('<g class="row ') == 4
    assert timeout.count('data-status="aborted"') == 1
    assert timeout.count('data-status="aborted_before_dispatch"') == 2


def test_the_generated_outputs_are_the_librarys_own(site: Path) -> None:
    """The hook events and the CLI help on the reference page are printed at build time."""
    page = html.unescape((site / "reference" / "errors-events-cli.html").read_text("utf-8"))
    for event in ("tools/pre-execute", "tools/execute", "tools/post-execute", "tools/result"):
        assert event in page
    assert "usage: python -m dsh_sched demo" in page


# -- the browser ------------------------------------------------------------------------------


def chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is missing under CI=true: .ci/run installs it")
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    return path


def run_chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / "profile"
    command = [
        chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
        *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def console_messages(stderr: str) -> list[str]:
    return [m.group(1) for m in map(CONSOLE.search, stderr.splitlines()) if m]


def render(tmp_path: Path, page: Path) -> tuple[str, list[str]]:
    """The DOM after scripts ran, and every console message the page logged."""
    done = run_chromium(tmp_path, "--dump-dom", page.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, console_messages(done.stderr)


def broken_local_references(page: Path, dom: str) -> list[str]:
    broken = []
    for ref in LOCAL_REF.findall(dom):
        parts = urlsplit(ref)
        if parts.scheme or parts.netloc or not parts.path:
            continue
        if not (page.parent / unquote(parts.path)).exists():
            broken.append(ref)
    return broken


def test_the_console_check_sees_errors(tmp_path: Path) -> None:
    """The console check itself: a page whose script throws is reported."""
    page = tmp_path / "bad.html"
    page.write_text(
        '<html><body><script>undefinedFunction()</script><img src="missing.png"></body></html>'
    )
    dom, messages = render(tmp_path, page)
    assert any("undefinedFunction" in m for m in messages)
    assert broken_local_references(page, dom) == ["missing.png"]


@pytest.mark.parametrize(
    ("page", "heading"),
    [
        ("index.html", "dsh-trio"),
        ("tutorial/first-tools.html", "Your first tools"),
        ("reference/dsh_tools.html", "dsh_tools"),
    ],
)
def test_pages_render_with_navigation_and_no_console_errors(
    site: Path, tmp_path: Path, page: str, heading: str
) -> None:
    path = site / page
    dom, messages = render(tmp_path, path)
    assert messages == []
    assert broken_local_references(path, dom) == []
    assert re.search(rf"<h1>(<code[^>]*><span[^>]*>)?{re.escape(heading)}", dom)
    # furo's navigation: the sidebar tree with every section of the site.
    assert 'class="sidebar-tree"' in dom
    for caption in ("Tutorial", "How-to guides", "Concepts", "Reference", "Performance"):
        assert f'<span class="caption-text">{caption}</span>' in dom
    assert 'class="sidebar-search"' in dom


def test_a_screenshot_of_the_landing_page(site: Path, tmp_path: Path) -> None:
    """Written to the test's own output folder (never committed)."""
    shot = tmp_path / "landing.png"
    done = run_chromium(
        tmp_path, f"--screenshot={shot}", "--window-size=1280,900", (site / "index.html").as_uri()
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert console_messages(done.stderr) == []
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    assert len(data) > 10_000


def test_the_reference_shows_no_private_base_class(site: Path) -> None:
    """A public class's "Bases:" line names only classes a reader can look up: a private
    base (the slot holders of the per-call values, decision 116) is an implementation
    detail, and the reference has no entry for it."""
    bases = re.compile(r"Bases: (.*)")
    private: list[str] = []
    shown: list[str] = []
    for page in sorted((site / "reference").glob("*.html")):
        text = html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))
        for line in bases.findall(text):
            names = [n.strip() for n in line.split(",")]
            shown.extend(names)
            private.extend(f"{page.name}: {n}" for n in names if n.rsplit(".", 1)[-1][:1] == "_")
    assert private == [], private
    assert "object" in shown  # a sealed value's line names its private base's own base
