"""Benchmark cases, defined once and run by both pytest-benchmark and asv.

A case is a *setup* function decorated with :func:`case`. It receives one value per
parameter, builds everything the measurement needs, and returns the zero-argument
callable to time (or a :class:`Timed` carrying it with a teardown and a throughput
unit). Nothing in this module imports pytest or asv: ``tests/benchmarks/conftest.py``
turns cases into parametrized pytest-benchmark tests and ``asv_bench/benchmarks``
turns the same cases into asv benchmark classes.

Conventions:

- a case with a torchrl twin has ``impl`` = ``("rlpace", "torchrl")`` as its *first*
  parameter, so both run side by side in one run;
- ``gpu=True`` puts the case in the GPU set too: it gets a trailing ``device``
  parameter, ``"cpu"`` in the CPU set and ``"cuda"`` in the GPU set;
- a setup that cannot run here raises :class:`SkipCase` with the reason.

Example:
    >>> from rlpace.bench.suite import case, Timed
    >>> @case(params={"impl": ["rlpace"], "n": [10, 100]})
    ... def test_sum(impl, n):
    ...     data = list(range(n))
    ...     return Timed(lambda: sum(data), items=n, unit="numbers")
    >>> test_sum.__rlpace_case__.param_names
    ('impl', 'n')
    >>> test_sum.__rlpace_case__.make(impl="rlpace", n=10).fn()
    45
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Case", "SkipCase", "Timed", "case", "registered_cases"]

SETS = ("cpu", "gpu")
DEVICE_OF_SET = {"cpu": "cpu", "gpu": "cuda"}


class SkipCase(Exception):  # noqa: N818 - reads as a statement: "skip case: <reason>"
    """Raised by a case's setup when it cannot run here; the message is the reason.

    Example:
        >>> raise SkipCase("torchrl's prioritized sampler needs its C++ extension")
        Traceback (most recent call last):
        ...
        rlpace.bench.suite.SkipCase: torchrl's prioritized sampler needs its C++ extension
    """


@dataclass
class Timed:
    """What a case's setup returns: the callable to time and how to read one call.

    Attributes:
        fn: the zero-argument callable that is timed.
        teardown: called once after timing (close processes, delete files).
        items: work items done by one call of ``fn`` (frames, tokens, samples); when
            set, reports show a throughput of ``items / time`` in ``unit``/s.
        unit: the name of one item, e.g. ``"frames"``.
        extra_info: stored with the result (pytest-benchmark's ``extra_info``).

    Example:
        >>> t = Timed(lambda: None, items=128, unit="frames")
        >>> t.items, t.unit
        (128, 'frames')
    """

    fn: Callable[[], Any]
    teardown: Callable[[], None] | None = None
    items: int | None = None
    unit: str = "calls"
    extra_info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Case:
    """One benchmark case: a name, its parameter grid, its sets and its setup.

    Attributes:
        name: the test name, ``test_...``, as it appears in result files.
        setup: called with one keyword per parameter; returns a callable or a
            :class:`Timed`, or raises :class:`SkipCase`.
        params: parameter name → values, in id order (``impl`` first when present).
        gpu: whether the case is also in the GPU set (adds the ``device`` parameter).
        module: the module that defined the case.

    Example:
        >>> c = Case("test_noop", lambda impl: (lambda: None), {"impl": ("rlpace",)})
        >>> list(c.grid("cpu"))
        [{'impl': 'rlpace'}]
    """

    name: str
    setup: Callable[..., Any]
    params: Mapping[str, Sequence[Any]]
    gpu: bool = False
    module: str = ""

    def __post_init__(self) -> None:
        if not self.name.startswith("test_"):
            raise ValueError(
                f"benchmark case names start with 'test_' so pytest collects them; got {self.name!r}"
            )
        if "device" in self.params:
            raise ValueError(
                f"case {self.name!r}: 'device' is added by gpu=True; remove it from params"
            )
        for key, values in self.params.items():
            if len(values) == 0:
                raise ValueError(f"case {self.name!r}: parameter {key!r} has no values")

    @property
    def param_names(self) -> tuple[str, ...]:
        """Parameter names in id order, ``device`` last for GPU-capable cases."""
        names = tuple(self.params)
        return names + ("device",) if self.gpu else names

    def values(self, set_name: str) -> list[tuple[Any, ...]]:
        """Per-parameter value lists for one set (``cpu`` or ``gpu``)."""
        if set_name not in SETS:
            raise ValueError(f"unknown benchmark set {set_name!r}; expected one of {SETS}")
        vals = [tuple(v) for v in self.params.values()]
        if self.gpu:
            vals.append((DEVICE_OF_SET[set_name],))
        return vals

    def in_set(self, set_name: str) -> bool:
        """Whether this case belongs to ``set_name`` (every case is in ``cpu``)."""
        return set_name == "cpu" or (set_name == "gpu" and self.gpu)

    def grid(self, set_name: str) -> Iterator[dict[str, Any]]:
        """Every parameter combination of the set, as keyword dicts."""
        if not self.in_set(set_name):
            return
        for combo in itertools.product(*self.values(set_name)):
            yield dict(zip(self.param_names, combo, strict=True))

    def make(self, **params: Any) -> Timed:
        """Run the setup for one combination and return its :class:`Timed`."""
        out = self.setup(**params)
        if isinstance(out, Timed):
            return out
        if callable(out):
            return Timed(out)
        raise TypeError(
            f"case {self.name!r}: setup must return a callable or a Timed, got {type(out).__name__}"
        )


_REGISTRY: dict[str, Case] = {}


def case(
    params: Mapping[str, Sequence[Any]] | None = None, *, gpu: bool = False, name: str | None = None
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare a benchmark case; the decorated setup function stays callable as before.

    The returned function carries the :class:`Case` as ``__rlpace_case__``; the
    pytest plugin and the asv adapter read it from there.

    Example:
        >>> @case(params={"impl": ["rlpace", "torchrl"]}, gpu=True)
        ... def test_example(impl, device):
        ...     return lambda: None
        >>> test_example.__rlpace_case__.param_names
        ('impl', 'device')
    """

    def decorate(setup: Callable[..., Any]) -> Callable[..., Any]:
        c = Case(
            name=name or setup.__name__,
            setup=setup,
            params=dict(params or {}),
            gpu=gpu,
            module=setup.__module__,
        )
        _REGISTRY[f"{c.module}:{c.name}"] = c
        setup.__rlpace_case__ = c  # type: ignore[attr-defined]
        return setup

    return decorate


def registered_cases() -> list[Case]:
    """Every case declared so far (import the case modules first), in declaration order.

    Example:
        >>> isinstance(registered_cases(), list)
        True
    """
    return list(_REGISTRY.values())
