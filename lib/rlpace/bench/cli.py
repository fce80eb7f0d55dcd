"""The ``rlpace-bench`` entry point: one program, one subcommand per module.

Exit codes: 0 success, 1 a requested failure condition (e.g. ``--fail-on-regression``
when something worsened), 2 bad input or usage.

Example:
    >>> from rlpace.bench.cli import main
    >>> main(["--version"])  # doctest: +SKIP
    rlpace-bench 0.1.0
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import pkgutil
import signal
import sys
import threading
from collections.abc import Iterator, Sequence

from rlpace import __version__
from rlpace.bench import commands
from rlpace.bench.errors import BenchInputError


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser with every subcommand found in :mod:`rlpace.bench.commands`.

    Example:
        >>> parser = build_parser()
        >>> parser.prog
        'rlpace-bench'
    """
    parser = argparse.ArgumentParser(
        prog="rlpace-bench",
        description="Run rlpace's benchmark suite, compare runs and render PR comments.",
    )
    parser.add_argument("--version", action="version", version=f"rlpace-bench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        command = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        module.add_arguments(command)
        command.set_defaults(_main=module.main)
    return parser


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C's ``KeyboardInterrupt`` would be: a cancelled CI job
    or ``kill`` then stops the benchmark and counting processes and removes their
    scratch directories on the way out, as Ctrl-C does, instead of dying mid-write.

    Example:
        >>> isinstance(Terminated(), KeyboardInterrupt)
        True
    """


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """While the command runs, SIGTERM raises :class:`Terminated` in the main thread
    (only the main thread may set a handler: elsewhere, e.g. under a test runner's
    thread, the default stays)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: object) -> None:
        raise Terminated

    before = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run the chosen subcommand; return the process exit code.

    Example:
        >>> main(["compare", "--head", "missing.json"])  # doctest: +SKIP
        rlpace-bench: error: ...
        2
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "_main", None) is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        with _sigterm_as_interrupt():
            return int(args._main(args) or 0)
    except BenchInputError as exc:
        print(f"rlpace-bench: error: {exc}", file=sys.stderr)
        return 2
    except Terminated:
        # a CI job cancelled (SIGTERM): stopped on the way out as for Ctrl-C
        print("rlpace-bench: terminated; nothing more was written", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        # Ctrl-C: the benchmark and counting processes were stopped on the way out
        print("rlpace-bench: interrupted; nothing more was written", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (`rlpace-bench show f.json | head`): stop quietly, as
        # any CLI does; point stdout at devnull so the interpreter's final flush is silent
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except OSError as exc:
        if exc.filename is None:  # not a path's fault: a bug to see whole
            raise
        # a path the command could not make, read or write (a full disk, a file where
        # a folder was expected, no permission): say which, not a traceback
        print(
            f"rlpace-bench: error: {exc.filename}: expected a path this command can read "
            f"or write, got the system's refusal ({exc.strerror or exc}). Fix: choose "
            "another path, free space or change its permissions, and run the command again",
            file=sys.stderr,
        )
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
