"""Sphinx extension for rlpace's docs: the generated API pages and the CLI reference.

API pages
    When the builder starts, one page per public module is written under
    ``api/generated/`` (ignored by git): the module's docstring, a summary table and
    every public name with its docstring. A module's public names are its ``__all__``
    or, without one, the classes and functions it defines whose names have no
    leading underscore. Public modules are every module under ``rlpace`` with no
    underscore in its dotted name, except ``__main__`` and the ``rlpace-bench``
    subcommand modules (``rlpace.bench.commands.*``), which the CLI page documents.

``rlpace-cli`` directive
    Renders the help text of ``rlpace-bench`` and of every subcommand it discovers,
    straight from the argument parser, so the CLI reference cannot drift from the
    program.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

#: Modules documented elsewhere than in the API reference.
NOT_IN_API = re.compile(r"^rlpace\.bench\.commands\..+")


def public_modules(package: str = "rlpace") -> list[str]:
    """Dotted names of the public modules under ``package`` (the package included)."""
    root = importlib.import_module(package)
    names = [package]
    for info in pkgutil.walk_packages(root.__path__, prefix=f"{package}."):
        parts = info.name.split(".")
        if any(p.startswith("_") for p in parts) or NOT_IN_API.match(info.name):
            continue
        names.append(info.name)
    return sorted(names)


def public_names(module) -> list[str]:
    """The public names of ``module``: its ``__all__``, or what it defines."""
    declared = getattr(module, "__all__", None)
    if declared is not None:
        return [n for n in declared if not n.startswith("_")]
    return [
        name
        for name, obj in vars(module).items()
        if not name.startswith("_")
        and (inspect.isclass(obj) or inspect.isfunction(obj))
        and getattr(obj, "__module__", None) == module.__name__
    ]


def _kind(obj: object) -> str:
    if inspect.isclass(obj):
        return "exception" if issubclass(obj, BaseException) else "class"
    if callable(obj):
        return "function"
    return "data"


def module_page(modname: str) -> str:
    """The reStructuredText of one module's API page."""
    module = importlib.import_module(modname)
    groups: dict[str, list[str]] = {"class": [], "function": [], "exception": [], "data": []}
    for name in public_names(module):
        groups[_kind(getattr(module, name))].append(name)
    lines = [modname, "=" * len(modname), "", f".. automodule:: {modname}", ""]
    everything = groups["class"] + groups["function"] + groups["exception"] + groups["data"]
    if everything:
        lines += [".. rubric:: Summary", "", ".. autosummary::", "   :nosignatures:", ""]
        lines += [f"   {name}" for name in everything] + [""]
    sections = [
        ("class", "Classes", "autoclass", ["   :members:", "   :show-inheritance:"]),
        ("function", "Functions", "autofunction", []),
        ("exception", "Exceptions", "autoexception", ["   :show-inheritance:"]),
        ("data", "Constants", "autodata", []),
    ]
    for kind, title, directive, options in sections:
        if groups[kind]:
            lines += [f".. rubric:: {title}", ""]
            for name in groups[kind]:
                lines += [f".. {directive}:: {name}", *options, ""]
    return "\n".join(lines)


def write_api_pages(app: Sphinx) -> None:
    """Write ``api/generated/<module>.rst`` for every public module (only when changed)."""
    out = Path(app.srcdir) / "api" / "generated"
    out.mkdir(parents=True, exist_ok=True)
    wanted = {f"{m}.rst": module_page(m) for m in public_modules()}
    for stale in out.glob("*.rst"):
        if stale.name not in wanted:
            stale.unlink()
    for filename, text in wanted.items():
        path = out / filename
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")


def drop_builtin_type_docstrings(app, what, name, obj, options, lines) -> None:
    """A constant documents itself by its ``#:`` comment, never by ``str``'s docstring."""
    if what in ("data", "attribute") and not inspect.isclass(obj) and not callable(obj):
        builtin_doc = type(obj).__doc__ or ""
        if lines and "\n".join(lines).strip() == inspect.cleandoc(builtin_doc).strip():
            lines.clear()


def resolve_private_paths(app: Sphinx, env, node, contnode):
    """Resolve references that type hints and base classes make through private modules.

    ``rlpace.data._storage.TensorStorage`` links to ``rlpace.data.TensorStorage``, where
    it is documented; a private class (``_Storage``) has no page and stays plain text.
    Anything else is left to Sphinx (and reported under ``-n`` when it does not resolve).
    """
    if node.get("refdomain") != "py":
        return None
    parts = node.get("reftarget", "").split(".")
    if parts[0] != "rlpace" or not any(p.startswith("_") for p in parts):
        return None
    name = parts[-1]
    if name.startswith("_"):
        return contnode
    domain = env.get_domain("py")
    package = ".".join(p for p in parts[:-1] if not p.startswith("_"))
    candidates = sorted(
        full
        for full in domain.objects
        if full.rsplit(".", 1)[-1] == name
        and not any(p.startswith("_") for p in full.split("."))
        and full.startswith(package + ".")
    )
    if not candidates:
        return None
    return domain.resolve_xref(
        env,
        node["refdoc"],
        app.builder,
        node.get("reftype") or "obj",
        candidates[0],
        node,
        contnode,
    )


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps subparsers only here
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _wide_formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.HelpFormatter(prog, width=88, max_help_position=32)


class RlpaceCliDirective(SphinxDirective):
    """Insert ``rlpace-bench --help`` and one section per subcommand with its help."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        from rlpace.bench.cli import build_parser

        parser = build_parser()
        parser.formatter_class = _wide_formatter
        out: list[nodes.Node] = [
            nodes.literal_block(text=parser.format_help().rstrip(), language="text")
        ]
        for name, sub in sorted(_subcommands(parser).items()):
            sub.formatter_class = _wide_formatter
            section = nodes.section(ids=[nodes.make_id(f"rlpace-bench-{name}")])
            section += nodes.title(text=f"rlpace-bench {name}")
            section += nodes.paragraph(text=sub.description or "")
            section += nodes.literal_block(text=sub.format_help().rstrip(), language="text")
            out.append(section)
        return out


def setup(app: Sphinx) -> dict[str, object]:
    app.connect("builder-inited", write_api_pages)
    app.connect("autodoc-process-docstring", drop_builtin_type_docstrings)
    app.connect("missing-reference", resolve_private_paths)
    app.add_directive("rlpace-cli", RlpaceCliDirective)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
