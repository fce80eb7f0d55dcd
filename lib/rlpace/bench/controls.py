"""Negative controls: a run-level noise floor from benchmarks no change can move.

The CPU set times torchrl's replay buffers next to rlpace's (``impl == "torchrl"``,
the *twins*). Base and head run the same pinned torchrl, so a twin's base → head
change is pure measurement: drift common to one side (a slower process, a busier
machine) plus its own noise. Their median tells the run's common-mode shift, their
robust spread its benchmark-to-benchmark noise; a benchmark must move by more than
the floor, ``|median(control changes)| + z × 1.4826 × MAD(control changes)``, to be
flagged (:func:`rlpace.bench.compare.compare_runs` takes it as noise, the
larger of it and the calibrated A/A noise). Requiring ``|change| > |location| + z·σ``
implies ``|change − location| > z·σ``: the floor never flags a change that is within
``z`` control sigmas of the common-mode shift, whichever its sign. With fewer than
``min_controls`` usable controls the spread means little, and there is no floor.

That floor is for benchmarks the run knows nothing else about. A benchmark with a
calibrated A/A noise of its own (``rlpace-bench aa``) is judged by that, which is
sharper than the spread of *other* benchmarks; for it only the common-mode shift
counts, beyond doubt: the :attr:`NoiseFloor.shift_floor_pct`, ``|median| + z × σ_median``
with ``σ_median = 1.2533 × spread / √controls`` (the standard error of a median).

Example:
    >>> from rlpace.bench.results import results_from_records
    >>> def run(factor):
    ...     return results_from_records(
    ...         [{"fullname": f"t{i}", "params": {"impl": "torchrl"},
    ...           "data": [factor * (1 + i / 100)] * 5} for i in range(6)])
    >>> floor = noise_floor_from_controls(run(1.0), run(1.03))   # base 3% slower
    >>> floor.controls, round(floor.location_pct, 2), round(floor.floor_pct, 2)
    (6, 3.0, 3.0)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import pandas as pd

from rlpace.bench.stats import better_pct, robust_location_spread

__all__ = [
    "CONTROL_IMPL",
    "NoiseFloor",
    "control_changes",
    "noise_floor_from_controls",
    "noise_with_floor",
]

CONTROL_IMPL = "torchrl"
"""The ``impl`` of the negative controls: pinned third-party code, alike on both sides."""
_NAN = float("nan")


@dataclass(frozen=True)
class NoiseFloor:
    """The run-level noise floor measured on the negative controls.

    Example:
        >>> NoiseFloor(controls=3, min_controls=5).active
        False
        >>> NoiseFloor(controls=8, location_pct=-2.0, spread_pct=1.0, z=3.0).floor_pct
        5.0
    """

    controls: int
    """Control benchmarks with a usable change on both sides."""
    location_pct: float = _NAN
    """Median of the control changes in % (positive = head faster): the common-mode shift."""
    spread_pct: float = _NAN
    """``1.4826 × MAD`` of the control changes in %: one benchmark's noise in this run."""
    z: float = 3.0
    """Control sigmas a change must exceed beyond the common-mode shift."""
    min_controls: int = 5
    """Fewer usable controls than this and there is no floor."""
    impl: str = CONTROL_IMPL
    """The ``impl`` that marks a control."""

    @property
    def active(self) -> bool:
        """Whether there were enough controls (and finite figures) to set a floor."""
        return (
            self.controls >= self.min_controls
            and math.isfinite(self.location_pct)
            and math.isfinite(self.spread_pct)
        )

    @property
    def floor_pct(self) -> float:
        """``|location| + z × spread`` in %, NaN when not :attr:`active`: the floor of a
        benchmark without calibrated noise."""
        if not self.active:
            return _NAN
        return abs(self.location_pct) + self.z * self.spread_pct

    @property
    def shift_floor_pct(self) -> float:
        """``|location| + z × 1.2533 × spread / √controls`` in %, NaN when not
        :attr:`active`: the common-mode shift beyond doubt, the floor of a benchmark
        with calibrated noise of its own.

        Example:
            >>> round(NoiseFloor(controls=36, location_pct=-2.0, spread_pct=3.0).shift_floor_pct, 2)
            3.88
        """
        if not self.active:
            return _NAN
        return abs(self.location_pct) + self.z * 1.2533 * self.spread_pct / math.sqrt(self.controls)

    def to_dict(self) -> dict[str, object]:
        """JSON-able form (NaN becomes ``None``).

        Example:
            >>> NoiseFloor(controls=0).to_dict()["floor_pct"] is None
            True
        """

        def num(x: float) -> float | None:
            return float(x) if math.isfinite(x) else None

        return {
            "impl": self.impl,
            "controls": self.controls,
            "min_controls": self.min_controls,
            "z": self.z,
            "location_pct": num(self.location_pct),
            "spread_pct": num(self.spread_pct),
            "floor_pct": num(self.floor_pct),
            "shift_floor_pct": num(self.shift_floor_pct),
            "active": self.active,
        }


def control_changes(
    head: pd.DataFrame, base: pd.DataFrame, *, impl: str = CONTROL_IMPL
) -> dict[str, float]:
    """Per control benchmark, the change of its median in % (positive = better).

    Only rows with ``impl == impl``, in both tables, ``ok`` on both sides and with a
    positive median count.

    Example:
        >>> from rlpace.bench.results import results_from_records
        >>> h = results_from_records([{"fullname": "c", "params": {"impl": "torchrl"},
        ...                            "data": [1.0] * 3}])
        >>> b = results_from_records([{"fullname": "c", "params": {"impl": "torchrl"},
        ...                            "data": [1.25] * 3}])
        >>> control_changes(h, b)
        {'c': 25.0}
    """
    base_rows = {row["fullname"]: row for _, row in base.iterrows() if row["impl"] == impl}
    out: dict[str, float] = {}
    for _, h in head.iterrows():
        b = base_rows.get(h["fullname"])
        if h["impl"] != impl or b is None or h["status"] != "ok" or b["status"] != "ok":
            continue
        hm, bm = float(h["median"]), float(b["median"])
        if not (math.isfinite(hm) and math.isfinite(bm) and hm > 0 and bm > 0):
            continue
        out[h["fullname"]] = better_pct(hm / bm, bool(h["higher_is_better"]))
    return out


def noise_floor_from_controls(
    head: pd.DataFrame,
    base: pd.DataFrame,
    *,
    impl: str = CONTROL_IMPL,
    min_controls: int = 5,
    z: float = 3.0,
) -> NoiseFloor:
    """The run's noise floor from its negative controls (see the module docstring).

    Args:
        head: merged results of the head runs.
        base: merged results of the base runs.
        impl: the ``impl`` of the control rows.
        min_controls: fewest usable controls for a floor.
        z: control sigmas beyond the common-mode shift.

    Example:
        >>> from rlpace.bench.results import results_from_records
        >>> t = results_from_records([{"fullname": "a", "data": [1.0] * 3}])
        >>> noise_floor_from_controls(t, t).active   # no controls at all
        False
    """
    changes = list(control_changes(head, base, impl=impl).values())
    location, spread = robust_location_spread(changes)
    return NoiseFloor(
        controls=len(changes),
        location_pct=location,
        spread_pct=spread,
        z=z,
        min_controls=min_controls,
        impl=impl,
    )


def noise_with_floor(
    calibrated: Mapping[str, float] | None, fullnames: Iterable[str], floor: NoiseFloor
) -> dict[str, float]:
    """Per benchmark, the larger of its calibrated noise and the floor (fractions): the
    shift floor for a calibrated benchmark, the full floor for any other.

    Without an active floor this is ``calibrated`` unchanged. Capped at 1 (100%),
    the largest noise :func:`~rlpace.bench.compare.compare_runs` accepts.

    Example:
        >>> floor = NoiseFloor(controls=9, location_pct=1.0, spread_pct=1.0)
        >>> {k: round(v, 4) for k, v in noise_with_floor({"a": 0.01}, ["a", "b"], floor).items()}
        {'a': 0.0225, 'b': 0.04}
    """
    out = dict(calibrated or {})
    if not floor.active:
        return out
    full = min(floor.floor_pct / 100, 1.0)
    shift = min(floor.shift_floor_pct / 100, 1.0)
    for name in fullnames:
        out[name] = max(out[name], shift) if name in out else full
    return out
