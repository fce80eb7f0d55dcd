"""Build and check the documentation the way CI does (``make docs``).

Three checks, each failing the build:

1. the HTML build with warnings as errors (``-W --keep-going``) and nitpicky
   cross-references (``-n``): a reference into rlpace that does not resolve, a broken
   ``{doc}``/``{ref}`` or Markdown link between pages, a docstring that does not parse;
2. the doctest builder, which runs every ``{doctest}``/``{testcode}`` example in the
   pages;
3. an internal link check over the built HTML: every relative ``href`` and ``src``
   must point to a file that exists, and every ``#fragment`` to an element id in it.
   External links are not fetched (the build must work offline).

Usage::

    python docs/build.py [--out DIR] [--skip-doctest]

The exit status is 0 when all checks pass, 1 otherwise.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

DOCS = Path(__file__).resolve().parent


class _LinkCollector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if name in ("id", "name") and (name == "id" or tag == "a"):
                self.ids.add(value)
            elif (name == "href" and tag in ("a", "link")) or (
                name == "src" and tag in ("img", "script")
            ):
                self.links.append(value)


def _parse(path: Path) -> _LinkCollector:
    collector = _LinkCollector()
    collector.feed(path.read_text(encoding="utf-8"))
    return collector


def check_internal_links(html_dir: Path) -> list[str]:
    """Return one line per broken internal link in the HTML files under ``html_dir``.

    A link is internal when it has no scheme and no host. It is broken when the file it
    names does not exist, or when its ``#fragment`` is not an id in that file.

    Example:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp())
        >>> _ = (root / "a.html").write_text('<h1 id="top"></h1><a href="b.html#x">b</a>')
        >>> _ = (root / "b.html").write_text('<p id="y"></p><a href="a.html#top">a</a>')
        >>> check_internal_links(root)
        ['a.html: link to b.html#x: no element with id "x" in b.html']
        >>> shutil.rmtree(root)
    """
    html_dir = Path(html_dir)
    parsed: dict[Path, _LinkCollector] = {}

    def page(path: Path) -> _LinkCollector:
        if path not in parsed:
            parsed[path] = _parse(path)
        return parsed[path]

    broken: list[str] = []
    for source in sorted(html_dir.rglob("*.html")):
        rel_source = source.relative_to(html_dir).as_posix()
        for link in page(source).links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith("//"):
                continue  # external: not fetched offline
            target = source if not parts.path else (source.parent / unquote(parts.path))
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{rel_source}: link to {link}: {parts.path} does not exist")
                continue
            fragment = unquote(parts.fragment)
            if fragment and target.suffix == ".html" and fragment not in page(target).ids:
                name = target.resolve().relative_to(html_dir.resolve()).as_posix()
                broken.append(
                    f'{rel_source}: link to {link}: no element with id "{fragment}" in {name}'
                )
    return broken


def build(out: Path, *, doctest: bool = True) -> int:
    """Build HTML (and run the page examples) into ``out``; return the exit status."""
    from sphinx.cmd.build import build_main

    if out.exists():
        shutil.rmtree(out)  # a fresh build: an incremental one hides old warnings
    doctrees = out / "doctrees"
    common = ["-W", "--keep-going", "-n", "-q", "-d", str(doctrees)]
    failed = []
    start = time.perf_counter()
    if build_main([*common, "-b", "html", str(DOCS), str(out / "html")]) != 0:
        failed.append("html build (warnings are errors; see above)")
    print(f"[docs] html built in {time.perf_counter() - start:.1f} s", flush=True)
    if doctest:
        start = time.perf_counter()
        if build_main([*common, "-b", "doctest", str(DOCS), str(out / "doctest")]) != 0:
            failed.append(f"doctest: page examples failed (see {out / 'doctest' / 'output.txt'})")
        print(f"[docs] page examples run in {time.perf_counter() - start:.1f} s", flush=True)
    if (out / "html").exists():
        broken = check_internal_links(out / "html")
        for line in broken:
            print(f"[docs] broken internal link: {line}", file=sys.stderr)
        if broken:
            failed.append(f"{len(broken)} broken internal link(s)")
    for reason in failed:
        print(f"[docs] FAILED: {reason}", file=sys.stderr)
    if not failed:
        print(f"[docs] OK: {out / 'html' / 'index.html'}")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DOCS / "_build", help="output directory")
    parser.add_argument(
        "--skip-doctest", action="store_true", help="build HTML only, without the examples"
    )
    args = parser.parse_args(argv)
    return build(args.out, doctest=not args.skip_doctest)


if __name__ == "__main__":
    sys.exit(main())
