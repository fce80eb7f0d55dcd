"""The collectors' exceptions, and how an exception crosses a process boundary intact.

Pickling an exception keeps its type and arguments but drops ``__cause__`` and the
traceback. An error raised in a worker process is therefore sent as
``(exception, traceback text)``: :func:`capture_remote` makes the exception portable
(:class:`RemoteError` stands in for one that cannot be pickled) and keeps the text,
and :func:`chain_remote` rebuilds the chain on the receiving side: the exception's
``__cause__`` is a :class:`RemoteTraceback` whose text is the remote traceback, so
a printed traceback shows where the error really happened.
"""

from __future__ import annotations

import pickle
import traceback
from typing import Any


class RemoteTraceback(Exception):
    """The traceback text of an exception raised in another process.

    Set as the ``__cause__`` of a rebuilt exception, so printing the exception shows
    the remote frames too (as :mod:`concurrent.futures` does).

    Example:
        >>> err = RemoteTraceback('  File "env.py", line 3, in _step')
        >>> err.text
        '  File "env.py", line 3, in _step'
    """

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return f'\n"""\n{self.text}\n"""'


class RemoteError(RuntimeError):
    """Stands in for an exception from another process that could not be pickled.

    Attributes:
        type_name: qualified name of the original exception's type.
        message: ``str()`` of the original exception.

    Example:
        >>> err = RemoteError("mylib.WeirdError", "the socket broke")
        >>> str(err)
        'mylib.WeirdError: the socket broke'
        >>> err.type_name
        'mylib.WeirdError'
    """

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(f"{type_name}: {message}")
        self.type_name = type_name
        self.message = message

    def __reduce__(self):
        return (RemoteError, (self.type_name, self.message))


def traceback_text(exc: BaseException) -> str:
    """The formatted traceback of ``exc`` (with its own causes), as a string.

    Example:
        >>> try:
        ...     1 / 0
        ... except ZeroDivisionError as exc:
        ...     text = traceback_text(exc)
        >>> text.splitlines()[-1]
        'ZeroDivisionError: division by zero'
    """
    return "".join(traceback.format_exception(exc)).rstrip()


def portable(exc: BaseException) -> BaseException:
    """``exc`` itself when it survives a pickle round trip, else a :class:`RemoteError`.

    Example:
        >>> portable(ValueError("x"))
        ValueError('x')
        >>> class Strict(Exception):  # unpickling calls Strict("y"): b is missing
        ...     def __init__(self, a, b):
        ...         super().__init__(a)
        >>> stand_in = portable(Strict("y", 2))
        >>> type(stand_in).__name__, stand_in.message
        ('RemoteError', 'y')
    """
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:  # noqa: BLE001 - whatever fails, the stand-in carries type and text
        cls = type(exc)
        return RemoteError(f"{cls.__module__}.{cls.__qualname__}", str(exc))
    return exc


def capture_remote(exc: BaseException) -> tuple[BaseException, str]:
    """``(portable exception, traceback text)``: what a worker sends about an error."""
    return portable(exc), traceback_text(exc)


def chain_remote(exc: BaseException, text: str | None) -> BaseException:
    """Set ``exc.__cause__`` to the remote traceback ``text`` (when there is one)."""
    if text and exc.__cause__ is None:
        exc.__cause__ = RemoteTraceback(text)
    return exc


class EnvStepError(RuntimeError):
    """An environment raised while collecting; names the env index, chains the original.

    ``__cause__`` is the env's exception, in the main process too: an error from a
    worker process arrives as its own type (or as a :class:`RemoteError` when it
    cannot be pickled) whose ``__cause__`` in turn holds the worker's traceback text
    (also in :attr:`remote_traceback`).

    Attributes:
        env_index: index of the failing env in the collector's list of envs.
        original: the exception the env raised (the same object as ``__cause__``).
        remote_traceback: the traceback text from the worker process, or ``None``
            when the env ran in this process.

    Example:
        >>> import pickle
        >>> err = EnvStepError(3, ValueError("bad action"))
        >>> str(err)
        "env 3 raised ValueError('bad action') while stepping; every worker was stopped"
        >>> again = pickle.loads(pickle.dumps(err))  # as if sent by a worker process
        >>> again.__cause__
        ValueError('bad action')
    """

    def __init__(
        self, env_index: int, original: BaseException | str, remote_traceback: str | None = None
    ) -> None:
        if isinstance(original, str):  # the text-only form older workers sent
            original = RemoteError("unknown", original)
        self.env_index = env_index
        self.original = original
        self.remote_traceback = remote_traceback
        super().__init__(
            f"env {env_index} raised {original!r} while stepping; every worker was stopped"
        )
        self.__cause__ = chain_remote(original, remote_traceback)

    def __reduce__(self):
        text = self.remote_traceback or traceback_text(self.original)
        return (EnvStepError, (self.env_index, portable(self.original), text))


class PolicyError(RuntimeError):
    """The served policy raised on a batch holding this request; chains the original.

    The inference server hands the error to every request of the failed batch and
    keeps serving; a client re-raises it as a ``PolicyError`` whose ``__cause__`` is
    the policy's exception.

    Attributes:
        original: the exception the policy (or the batch's read or write) raised.
        remote_traceback: the server's traceback text when the error crossed a
            process boundary, else ``None``.

    Example:
        >>> err = PolicyError(ValueError("NaN in logits"))
        >>> str(err)
        "the inference server's policy raised ValueError('NaN in logits') on the batch holding this request"
        >>> err.__cause__
        ValueError('NaN in logits')
    """

    def __init__(self, original: BaseException, remote_traceback: str | None = None) -> None:
        self.original = original
        self.remote_traceback = remote_traceback
        super().__init__(
            f"the inference server's policy raised {original!r} on the batch holding this request"
        )
        self.__cause__ = chain_remote(original, remote_traceback)

    def __reduce__(self):
        text = self.remote_traceback or traceback_text(self.original)
        return (PolicyError, (portable(self.original), text))


class WorkerDiedError(RuntimeError):
    """A worker process ended without saying why (killed, crashed in C code).

    Example:
        >>> str(WorkerDiedError(1, -9))
        'worker 1 died with exit code -9 (-9 = SIGKILL); every other worker was stopped'
    """

    def __init__(self, worker_index: int, exitcode: int | None) -> None:
        self.worker_index = worker_index
        self.exitcode = exitcode
        hint = " (-9 = SIGKILL)" if exitcode == -9 else ""
        super().__init__(
            f"worker {worker_index} died with exit code {exitcode}{hint}; "
            "every other worker was stopped"
        )

    def __reduce__(self):
        return (WorkerDiedError, (self.worker_index, self.exitcode))


def rebuild_remote(payload: Any) -> BaseException:
    """The exception a worker sent as ``(exception, traceback text)``, chained.

    Example:
        >>> err = rebuild_remote(capture_remote(KeyError("obs")))
        >>> err, type(err.__cause__).__name__
        (KeyError('obs'), 'RemoteTraceback')
    """
    exc, text = payload
    if isinstance(exc, (EnvStepError, PolicyError)):
        return exc  # they carry their own remote traceback
    return chain_remote(exc, text)
