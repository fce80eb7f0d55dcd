"""Sphinx extension for rlpace's docs: the ``rlpace-cli`` directive.

``rlpace-cli`` renders the help text of ``rlpace-bench`` and of every subcommand it
discovers, straight from the argument parser, so the CLI reference cannot drift from
the program::

    ```{rlpace-cli}
    ```
"""

from __future__ import annotations

import argparse

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps subparsers only here
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


class RlpaceCliDirective(SphinxDirective):
    """Insert ``rlpace-bench --help`` and one section per subcommand with its help."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        from rlpace.bench.cli import build_parser

        parser = build_parser()
        parser.formatter_class = _wide_formatter
        out: list[nodes.Node] = [nodes.literal_block(text=parser.format_help().rstrip())]
        for name, sub in sorted(_subcommands(parser).items()):
            sub.formatter_class = _wide_formatter
            section = nodes.section(ids=[nodes.make_id(f"rlpace-bench-{name}")])
            section += nodes.title(text=f"rlpace-bench {name}")
            section += nodes.paragraph(text=sub.description or "")
            section += nodes.literal_block(text=sub.format_help().rstrip(), language="text")
            out.append(section)
        return out


def _wide_formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.HelpFormatter(prog, width=88, max_help_position=32)


def setup(app: Sphinx) -> dict[str, object]:
    app.add_directive("rlpace-cli", RlpaceCliDirective)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
