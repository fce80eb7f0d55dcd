"""The documentation site builds offline with warnings as errors, its examples pass,
its internal links resolve, and the API reference covers every public name.

One build (``docs/build.py``, what ``make docs`` runs) into a temporary directory is
shared by the tests of this module.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

# Modules documented elsewhere than in the API reference: the subcommand modules are
# the CLI, documented from the parser on the "Command line" page.
NOT_IN_API = re.compile(r"^rlpace\.bench\.commands\..+")


# Public names whose docstrings lack a runnable ``>>>`` example (house style asks for
# one on every public class and function). A ratchet, now empty: a new name without an
# example fails the test, and so would a listed name once it gained one.
KNOWN_WITHOUT_EXAMPLE: set[str] = set()


def _load_build_module():
    spec = importlib.util.spec_from_file_location("rlpace_docs_build", DOCS / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("docs")
    proc = subprocess.run(
        [sys.executable, str(DOCS / "build.py"), "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=280,
    )
    if proc.returncode != 0:
        pytest.fail(
            "the docs build failed (run `make docs` to reproduce):\n"
            + (proc.stdout + proc.stderr)[-6000:],
            pytrace=False,
        )
    return out


def _public_modules() -> list[str]:
    import rlpace

    names = ["rlpace"]
    for info in pkgutil.walk_packages(rlpace.__path__, prefix="rlpace."):
        parts = info.name.split(".")
        if any(p.startswith("_") for p in parts) or NOT_IN_API.match(info.name):
            continue  # private modules, __main__, the CLI's subcommand modules
        names.append(info.name)
    return names


def _public_names(modname: str) -> list[str]:
    module = importlib.import_module(modname)
    if hasattr(module, "__all__"):
        return [n for n in module.__all__ if not n.startswith("__")]
    return [
        name
        for name, obj in vars(module).items()
        if not name.startswith("_")
        and callable(obj)
        and getattr(obj, "__module__", None) == modname
    ]


def _inventory(html: Path) -> dict[str, dict]:
    from sphinx.util.inventory import InventoryFile

    with open(html / "objects.inv", "rb") as f:
        inv = InventoryFile.load(f, "", lambda base, uri: uri)
    return {key: dict(entries) for key, entries in getattr(inv, "data", inv).items()}


def test_build_passes_with_warnings_as_errors_and_examples_run(built):
    assert (built / "html" / "index.html").is_file()
    summary = (built / "doctest" / "output.txt").read_text()
    counts = re.search(
        r"Doctest summary\n=+\n\s*(\d+) tests?\n\s*(\d+) failures? in tests", summary
    )
    assert counts, f"no doctest summary in output.txt:\n{summary[-2000:]}"
    ran, failed = int(counts.group(1)), int(counts.group(2))
    assert failed == 0
    assert ran >= 10, f"only {ran} page examples ran; the guides' examples are missing"


@pytest.mark.parametrize(
    "page",
    [
        "getting-started",
        "architecture",
        "developing",
        "guides/replay-buffers",
        "guides/collectors",
        "guides/llm-env",
        "guides/trainers",
        "guides/collect-replay-loss",
        "handbook/index",
        "handbook/writing-cases",
        "handbook/running",
        "handbook/pr-comment",
        "handbook/noise",
        "handbook/work-counts",
        "handbook/asv-history",
        "handbook/github",
        "api/index",
        "api/cli",
    ],
)
def test_every_page_is_built_and_linked_from_the_navigation(built, page):
    html = built / "html"
    assert (html / f"{page}.html").is_file()
    assert f'href="{page}.html"' in (html / "index.html").read_text()


def test_api_reference_documents_every_public_name(built):
    inv = _inventory(built / "html")
    modules, objects = inv.get("py:module", {}), {}
    for key, entries in inv.items():
        if key.startswith("py:"):
            objects.update(entries)
    index = (DOCS / "api" / "index.md").read_text()
    missing = []
    for modname in _public_modules():
        if not re.search(rf"^\s+{re.escape(modname)}$", index, flags=re.M):
            missing.append(f"module {modname}: list it in a table of docs/api/index.md")
        if modname not in modules:
            missing.append(f"module {modname}: has no page in the API reference")
            continue
        for name in _public_names(modname):
            if f"{modname}.{name}" not in objects:
                missing.append(f"{modname}.{name}: public but not in the API reference")
    assert not missing, "\n".join(missing)


def test_every_public_class_and_function_has_a_docstring_with_an_example():
    import inspect

    no_doc, no_example = [], set()
    for modname in _public_modules():
        module = importlib.import_module(modname)
        for name in _public_names(modname):
            obj = getattr(module, name)
            if not (inspect.isclass(obj) or callable(obj)):
                continue  # constants document themselves by a comment
            doc = inspect.getdoc(obj) or ""
            if not doc:
                no_doc.append(f"{modname}.{name}")
            elif ">>>" not in doc:
                no_example.add(f"{modname}.{name}")
    assert not no_doc, "public names without a docstring:\n" + "\n".join(no_doc)
    new = sorted(no_example - KNOWN_WITHOUT_EXAMPLE)
    assert not new, "public names without a >>> example in their docstring:\n" + "\n".join(new)
    fixed = sorted(KNOWN_WITHOUT_EXAMPLE - no_example)
    assert not fixed, "these now have an example; remove them from KNOWN_WITHOUT_EXAMPLE:\n" + (
        "\n".join(fixed)
    )


def test_cli_page_shows_every_subcommand(built):
    from rlpace.bench.cli import build_parser

    parser = build_parser()
    (sub,) = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    text = (built / "html" / "api" / "cli.html").read_text()
    for name in sub.choices:
        assert f"rlpace-bench {name}" in text


def test_link_check_reports_missing_files_and_anchors(tmp_path):
    build = _load_build_module()
    (tmp_path / "sub").mkdir()
    (tmp_path / "index.html").write_text(
        '<h1 id="top">x</h1>'
        '<a href="#top">self</a><a href="sub/page.html#here">ok</a>'
        '<a href="https://example.org/missing.html">external</a>'
        '<a href="gone.html">missing file</a><a href="sub/page.html#nowhere">bad anchor</a>'
        '<img src="_static/logo.png">'
    )
    (tmp_path / "sub" / "page.html").write_text(
        '<p id="here"></p><a href="../index.html#top">back</a><a href="#absent">x</a>'
    )
    assert sorted(build.check_internal_links(tmp_path)) == [
        "index.html: link to _static/logo.png: _static/logo.png does not exist",
        "index.html: link to gone.html: gone.html does not exist",
        'index.html: link to sub/page.html#nowhere: no element with id "nowhere" in sub/page.html',
        'sub/page.html: link to #absent: no element with id "absent" in sub/page.html',
    ]
