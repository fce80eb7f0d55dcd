"""Files written whole or not at all, so a killed process leaves no half file behind."""

from __future__ import annotations

from pathlib import Path

__all__ = ["write_whole"]


def write_whole(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` through a ``.partial`` file and a rename: a reader (or
    a later run reading the file it is replacing) sees the old file or the new one.

    Example:
        >>> import tempfile
        >>> p = Path(tempfile.mkdtemp()) / "a" / "g.json"
        >>> write_whole(p, "{}").read_text()
        '{}'
        >>> sorted(x.name for x in p.parent.iterdir())
        ['g.json']
        >>> import shutil; shutil.rmtree(p.parent.parent)
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)
    return path
