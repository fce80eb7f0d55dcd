"""Counting the Python-level calls of a call: names and totals from ``cProfile``.

The work counts' ``py_calls`` metric (:mod:`rlpace.bench.work_counts`):
:func:`~rlpace.bench.work_counts.measure.measure_work_counts` runs each measured call
under a ``cProfile.Profile`` of its own, and :func:`python_calls` reads it: how many
Python functions and builtins the calling thread called, in all and per function.
Functions are named by :func:`python_label`, alike wherever the tree is checked out
and whatever their line numbers; calls made inside the standard library's waits are
left out, since their number follows the clock.

Example:
    >>> import cProfile
    >>> counter = cProfile.Profile()
    >>> counter.enable(); keys = sorted({"b": 1, "a": 2}); counter.disable()
    >>> python_calls(counter)
    (1, {'<built-in method builtins.sorted>': 1})
"""

from __future__ import annotations

import re
import sysconfig
from typing import Any

__all__ = [
    "calls_made",
    "is_own_code",
    "is_python_label",
    "is_wait_code",
    "python_calls",
    "python_label",
]


def is_python_label(name: str) -> bool:
    """Whether a counted name is a Python function's or builtin's (:func:`python_label`).

    Example:
        >>> is_python_label("rlpace/data/_storage.py:TensorStorage.get"), is_python_label("aten::add")
        (True, False)
    """
    return name.startswith("<") or ".py:" in name


def python_label(code: Any) -> str | None:
    """A ``cProfile`` entry's code as a name that does not depend on where the tree was
    checked out or on line numbers: ``<package path>:<qualified name>`` for Python code,
    the builtin's own description otherwise; None for the counter's own ``disable``.

    Example:
        >>> def sample(): ...
        >>> python_label(sample.__code__).rpartition(":")[2]
        'sample'
        >>> python_label("<built-in method builtins.len>")
        '<built-in method builtins.len>'
        >>> python_label("<built-in method __new__ of type object at 0x7fdb0385ea00>")
        '<built-in method __new__ of type object>'
        >>> python_label("<method 'disable' of '_lsprof.Profiler' objects>") is None
        True
    """
    if isinstance(code, str):  # a builtin; a type's address differs between processes
        return None if "_lsprof.Profiler" in code else _ADDRESS.sub("", code)[:_LABEL_MAX]
    name = getattr(code, "co_qualname", None) or code.co_name
    return f"{_short_path(code.co_filename)}:{name}"[:_LABEL_MAX]


def _short_path(filename: str) -> str:
    """``/x/lib/rlpace/data/a.py`` → ``rlpace/data/a.py``; ``/usr/lib/python3.11/queue.py``
    → ``queue.py``; a file under no ``lib`` or ``site-packages``: its last two parts.

    Example:
        >>> _short_path("/tmp/w/lib/python3.11/site-packages/torch/nn/modules/module.py")
        'torch/nn/modules/module.py'
        >>> _short_path("/usr/lib/python3.11/queue.py"), _short_path("/c/tests/benchmarks/t.py")
        ('queue.py', 'benchmarks/t.py')
    """
    if filename.startswith("<"):
        return filename
    parts = filename.replace("\\", "/").split("/")
    cuts = [i for i, part in enumerate(parts) if part in _PATH_CUTS]
    if not cuts:
        return "/".join(parts[-2:])
    rest = parts[cuts[-1] + 1 :]
    if len(rest) > 1 and rest[0].startswith("python3"):
        rest = rest[1:]
    return "/".join(rest)


_LABEL_MAX = 160
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_WAIT_FILES = frozenset({"threading.py", "queue.py", "selectors.py", "socket.py", "subprocess.py"})
_WAIT_PACKAGES = ("multiprocessing/", "concurrent/futures/", "asyncio/")
_STDLIB = sysconfig.get_paths()["stdlib"]
_PATH_CUTS = frozenset({"lib", "Lib", "site-packages", "dist-packages"})
_PACKAGE_FOLDERS = frozenset({"site-packages", "dist-packages"})


def is_wait_code(code: Any) -> bool:
    """Whether ``code`` is the standard library's waiting machinery (threads, queues,
    processes, sockets), whose inner calls follow the clock, not the work.

    Example:
        >>> import threading
        >>> is_wait_code(threading.Event.wait.__code__), is_wait_code(is_wait_code.__code__)
        (True, False)
    """
    if isinstance(code, str) or not code.co_filename.startswith(_STDLIB):
        return False
    short = _short_path(code.co_filename)
    return short in _WAIT_FILES or short.startswith(_WAIT_PACKAGES)


def python_calls(profiler: Any) -> tuple[int, dict[str, int]]:
    """The calls a ``cProfile.Profile`` counted, in all and per :func:`python_label`,
    leaving out the calls made from inside the standard library's waits (``threading``,
    ``queue``, ``multiprocessing``, ``selectors``, ...): how many rounds a
    ``Condition.wait`` takes depends on how soon another thread answers. The call to
    the wait itself is counted.

    Example:
        >>> import cProfile
        >>> counter = cProfile.Profile()
        >>> counter.enable(); n = len([1, 2]); counter.disable()
        >>> python_calls(counter)
        (1, {'<built-in method builtins.len>': 1})
    """
    entries = profiler.getstats()
    per: dict[str, int] = {}
    for entry in entries:
        label = python_label(entry.code)
        if label is not None:
            per[label] = per.get(label, 0) + entry.callcount
    for entry in entries:
        if is_wait_code(entry.code):
            for callee in entry.calls or ():
                label = python_label(callee.code)
                if label in per:
                    per[label] -= callee.callcount
    per = {label: n for label, n in per.items() if n > 0}
    return sum(per.values()), per


def calls_made(profiler: Any, own: set[str] | None = None) -> dict[str, int]:
    """Per Python function (:func:`python_label`), the calls it made itself, to its
    direct callees; the standard library's waits make none (see :func:`python_calls`).
    A function called as often as before that makes more calls is where a change
    went in, or where the data took another branch. ``own``, when given, receives the
    labels of the functions whose code is neither the standard library's nor an
    installed package's (:func:`is_own_code`): the code under test.

    Example:
        >>> import cProfile
        >>> def check(keys):
        ...     return sorted(set(keys)) == sorted(keys)
        >>> counter = cProfile.Profile()
        >>> counter.enable(); ok = check(["a"]); counter.disable()
        >>> {label.rpartition(":")[2]: n for label, n in calls_made(counter).items()}
        {'check': 2}
    """
    made: dict[str, int] = {}
    for entry in profiler.getstats():
        label = python_label(entry.code)
        if label is None or isinstance(entry.code, str) or is_wait_code(entry.code):
            continue
        n = sum(callee.callcount for callee in entry.calls or ())
        if n:
            made[label] = made.get(label, 0) + n
            if own is not None and is_own_code(entry.code):
                own.add(label)
    return made


def is_own_code(code: Any) -> bool:
    """Whether ``code`` (a ``cProfile`` entry's) is the code under test: Python code
    from a file outside the standard library and every ``site-packages`` or
    ``dist-packages`` folder (a checkout on ``PYTHONPATH``, an editable install).

    Example:
        >>> import json
        >>> mine = compile("pass", "/home/me/rlpace/lib/rlpace/collectors/x.py", "exec")
        >>> is_own_code(mine), is_own_code(json.dumps.__code__)
        (True, False)
        >>> is_own_code("<built-in method builtins.len>")
        False
    """
    if isinstance(code, str):
        return False
    filename = code.co_filename
    if filename.startswith(("<", _STDLIB)):
        return False
    return not _PACKAGE_FOLDERS & set(filename.replace("\\", "/").split("/"))
