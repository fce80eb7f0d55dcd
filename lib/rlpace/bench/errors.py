"""Typed errors of the harness.

Every message says what was expected, what arrived, and how to fix it.

Example:
    >>> raise BenchInputError("head.json: expected a JSON object, got a list")
    Traceback (most recent call last):
    ...
    rlpace.bench.errors.BenchInputError: head.json: expected a JSON object, got a list
"""


class BenchInputError(ValueError):
    """A result file, option or environment the harness cannot use (the CLI exits 2).

    Example:
        >>> try:
        ...     raise BenchInputError("--threshold: expected a number > 0, got -1")
        ... except ValueError as exc:  # a ValueError, for callers that catch those
        ...     print(exc)
        --threshold: expected a number > 0, got -1
    """


class EnvironmentMismatchError(BenchInputError):
    """Two result files were measured in environments that must not be compared.

    Example:
        >>> issubclass(EnvironmentMismatchError, BenchInputError)  # the CLI exits 2 too
        True
    """
