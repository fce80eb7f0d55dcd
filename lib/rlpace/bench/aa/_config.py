"""What ``rlpace-bench aa`` runs: the calibration's settings.

Example:
    >>> CalibrationConfig(runs=5, repeats=2).effective_pool
    20
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlpace.bench.errors import BenchInputError

__all__ = ["CalibrationConfig"]


@dataclass(frozen=True)
class CalibrationConfig:
    """What ``rlpace-bench aa`` runs.

    Example:
        >>> CalibrationConfig(runs=5, repeats=2).effective_pool
        20
    """

    runs: int = 10
    """A/A comparisons to form (N)."""
    repeats: int = 4
    """Suite runs per side of one comparison (K, as in ``pr``)."""
    pool: int | None = None
    """Suite runs to execute; default ``2 × repeats × runs`` (every comparison has runs
    of its own). A smaller pool reuses runs across comparisons (cheaper, less independent)."""
    set_name: str = "cpu"
    """The benchmark set."""
    keyword: str | None = None
    """pytest ``-k`` expression choosing cases."""
    threshold: float = 5.0
    """The comparator's effect threshold, in percent."""
    alpha: float = 0.05
    """The comparator's false-discovery rate."""
    family_alpha: float = 0.05
    """Target chance that an A/A PR run flags anything (sets the noise gates)."""
    inject: str | None = None
    """An ``RLPACE_BENCH_SLOWDOWN`` spec for the detection-power runs, e.g. ``'test_=0.1'``."""
    out_dir: Path = Path("reports/aa")
    """Where ``<set>.json`` and ``<set>.md`` go."""
    repo: Path = Path(".")
    """The repository whose suite runs."""
    settings: Any = None
    """:class:`~rlpace.bench.runner.RunSettings`; default ones when None."""
    seed: int = 0
    """Seed of the random assignment of pool runs to comparisons."""
    reuse_runs: bool = False
    """Recompute the figures from the pool files of an earlier run instead of running."""
    slow_pool: int | None = None
    """Slowed suite runs (with ``inject``); default ``repeats × runs``. Each detection
    comparison draws ``repeats`` of them (``repeats + confirm`` with a confirmation),
    so fewer than that are reused."""
    confirm: int = 2
    """Runs per side of the confirmation stage, as ``pr --confirm`` (0: none). Each
    comparison that flags something is confirmed on other pool runs than its own,
    which its held-out calibration does not see either."""

    def __post_init__(self) -> None:
        if self.runs < 1 or self.repeats < 1:
            raise BenchInputError(
                f"--runs and --repeats: expected integers >= 1, got {self.runs} and {self.repeats}"
            )
        if not (isinstance(self.family_alpha, int | float) and 0 < self.family_alpha < 1):
            raise BenchInputError(
                f"--family-alpha: expected a probability in (0, 1) (0.05 = one A/A run in "
                f"20 may flag something), got {self.family_alpha!r}"
            )
        if not (isinstance(self.confirm, int) and self.confirm >= 0):
            raise BenchInputError(
                f"--confirm: expected the confirmation's runs per side, an integer >= 0 "
                f"(0: no confirmation), got {self.confirm!r}"
            )
        side = self.repeats + self.confirm
        if self.slow_pool is not None and self.slow_pool < side:
            raise BenchInputError(
                f"--slow-pool: expected at least repeats + confirm = {side} runs (one "
                f"side's worth, confirmation included), got {self.slow_pool}. Fix: a "
                "larger --slow-pool or --confirm 0"
            )
        if self.pool is not None and self.pool < 2 * side:
            raise BenchInputError(
                f"--pool: expected at least 2 x (repeats + confirm) = {2 * side} runs (one "
                f"comparison's worth, confirmation included), got {self.pool}. Fix: a "
                "larger --pool or --confirm 0"
            )
        if self.inject is not None:
            from rlpace.bench.suite import parse_slowdown

            try:
                if not parse_slowdown(self.inject):
                    raise ValueError(f"--inject: expected PATTERN=FRACTION, got {self.inject!r}")
            except ValueError as exc:
                raise BenchInputError(str(exc)) from None

    @property
    def effective_pool(self) -> int:
        """Suite runs of the clean pool."""
        return self.pool if self.pool is not None else 2 * self.repeats * self.runs

    @property
    def effective_slow_pool(self) -> int:
        """Suite runs of the slowed pool (0 without ``inject``)."""
        if not self.inject:
            return 0
        return self.slow_pool if self.slow_pool is not None else self.repeats * self.runs
