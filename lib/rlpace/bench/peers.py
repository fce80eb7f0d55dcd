"""rlpace against its torchrl twin, within one run: median time ratios with intervals.

Every case with a torchrl twin is parametrized with ``impl`` = ``rlpace`` / ``torchrl``
first, so both run side by side in the same process and the same conditions. For each
pair of rows of a results table (:func:`rlpace.bench.results.load_results`) whose
parameters are equal except ``impl``, :func:`peer_ratios` gives
``median(rlpace) / median(torchrl)`` with a percentile-bootstrap interval
(:func:`rlpace.bench.stats.bootstrap_ratio_ci`). Below 1 rlpace is faster.

Example:
    >>> from rlpace.bench.results import results_from_records
    >>> df = results_from_records([
    ...     {"fullname": "t.py::test_rb[rlpace-64]", "params": {"impl": "rlpace", "n": 64},
    ...      "data": [1.0, 1.1, 0.9, 1.0, 1.05]},
    ...     {"fullname": "t.py::test_rb[torchrl-64]", "params": {"impl": "torchrl", "n": 64},
    ...      "data": [2.0, 2.1, 1.9, 2.0, 2.05]}])
    >>> (p,) = peer_ratios(df)
    >>> p.case, p.params, p.ratio, p.verdict
    ('t.py::test_rb', {'n': 64}, 0.5, 'faster')
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from rlpace.bench.stats import bootstrap_ratio_ci

__all__ = ["IMPLS", "PeerRatio", "peer_ratios", "peers_frame"]

IMPLS = ("rlpace", "torchrl")
"""The two values of ``impl`` that are paired: ours first, the peer second."""

_PARAM_SUFFIX = re.compile(r"[\[(].*$")


@dataclass(frozen=True)
class PeerRatio:
    """One rlpace/torchrl pair: the median ratio and its confidence interval.

    Example:
        >>> PeerRatio("test_rb", {"n": 1}, "a", "b", 1.0, 2.0, 0.5, 0.45, 0.56, 0.95).verdict
        'faster'
    """

    case: str
    """The case, without its parameter suffix (``tests/x.py::test_rb``)."""
    params: dict[str, Any]
    """The shared parameters, ``impl`` removed."""
    rlpace_fullname: str
    """The rlpace row's ``fullname``."""
    torchrl_fullname: str
    """The torchrl row's ``fullname``."""
    rlpace_median: float
    """Median seconds per call of rlpace."""
    torchrl_median: float
    """Median seconds per call of torchrl."""
    ratio: float
    """``rlpace_median / torchrl_median``; below 1 rlpace is faster."""
    low: float
    """Lower bound of the interval (NaN without raw samples)."""
    high: float
    """Upper bound of the interval (NaN without raw samples)."""
    confidence: float
    """Two-sided coverage of ``[low, high]``."""

    @property
    def speedup(self) -> tuple[float, float, float]:
        """The ops ratio rlpace/torchrl and its interval: ``(1/ratio, 1/high, 1/low)``.

        Above 1 rlpace is faster; this is the figure speed targets are stated in.

        Example:
            >>> PeerRatio("t", {}, "a", "b", 1.0, 2.0, 0.5, 0.4, 0.625, 0.95).speedup
            (2.0, 1.6, 2.5)
        """

        def inv(x: float) -> float:
            return 1.0 / x if x > 0 else math.nan

        return inv(self.ratio), inv(self.high), inv(self.low)

    @property
    def verdict(self) -> str:
        """``faster`` / ``slower`` when the interval excludes 1, else ``tie``;
        ``unknown`` without an interval."""
        if math.isnan(self.low) or math.isnan(self.high):
            return "unknown"
        if self.high < 1:
            return "faster"
        if self.low > 1:
            return "slower"
        return "tie"


def _key(row: pd.Series) -> tuple[str, tuple[tuple[str, str], ...]]:
    params = {k: v for k, v in (row["params"] or {}).items() if k != "impl"}
    return _PARAM_SUFFIX.sub("", str(row["fullname"])), tuple(
        sorted((k, repr(v)) for k, v in params.items())
    )


def _samples(row: pd.Series) -> np.ndarray:
    data = row["data"]
    if data is None or (isinstance(data, float) and math.isnan(data)):
        return np.array([], dtype=float)
    arr = np.asarray(data, dtype=float)
    return arr[np.isfinite(arr)]


def peer_ratios(
    df: pd.DataFrame, *, confidence: float = 0.95, n_resamples: int = 2_000, seed: int = 0
) -> list[PeerRatio]:
    """Pair every rlpace row with its torchrl twin and measure the median ratio.

    Args:
        df: a results table with ``fullname``, ``params``, ``impl``, ``median``,
            ``data`` and ``status`` columns.
        confidence: two-sided coverage of the bootstrap interval.
        n_resamples: bootstrap replicates.
        seed: seed of the resampling, for reproducible intervals.

    Returns:
        One :class:`PeerRatio` per pair whose rows both succeeded, in table order. A
        row without raw samples gets its median ratio and a NaN interval.

    Raises:
        ValueError: when ``confidence`` is not in (0, 1).

    Example:
        >>> from rlpace.bench.results import results_from_records
        >>> df = results_from_records([
        ...     {"fullname": "a[rlpace]", "params": {"impl": "rlpace"}, "data": [1.0, 1.0]}])
        >>> peer_ratios(df)  # no twin: nothing to pair
        []
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence: expected a coverage in (0, 1), got {confidence!r}")
    sides: dict[Any, dict[str, pd.Series]] = {}
    for _, row in df.iterrows():
        if row.get("impl") not in IMPLS or row.get("status") != "ok":
            continue
        sides.setdefault(_key(row), {})[row["impl"]] = row
    out = []
    for (case, _), pair in sides.items():
        if set(pair) != set(IMPLS):
            continue
        ours, theirs = pair["rlpace"], pair["torchrl"]
        a, b = _samples(ours), _samples(theirs)
        if a.size and b.size:
            ratio, low, high = bootstrap_ratio_ci(
                a, b, confidence=confidence, n_resamples=n_resamples, seed=seed
            )
            med_a, med_b = float(np.median(a)), float(np.median(b))
        else:
            med_a, med_b = float(ours["median"]), float(theirs["median"])
            ratio = med_a / med_b if med_b > 0 else math.nan
            low = high = math.nan
        out.append(
            PeerRatio(
                case=case,
                params={k: v for k, v in (ours["params"] or {}).items() if k != "impl"},
                rlpace_fullname=str(ours["fullname"]),
                torchrl_fullname=str(theirs["fullname"]),
                rlpace_median=med_a,
                torchrl_median=med_b,
                ratio=float(ratio),
                low=float(low),
                high=float(high),
                confidence=confidence,
            )
        )
    return out


def peers_frame(ratios: list[PeerRatio]) -> pd.DataFrame:
    """The ratios as a table (one row per pair), for printing or saving.

    Example:
        >>> df = peers_frame([PeerRatio("c", {"n": 1}, "a", "b", 1.0, 2.0, 0.5, 0.4, 0.6, 0.95)])
        >>> df.loc[0, "params"], float(df.loc[0, "ratio"]), df.loc[0, "verdict"]
        ('n=1', 0.5, 'faster')
    """
    rows: list[Mapping[str, Any]] = [
        {
            "case": r.case,
            "params": ", ".join(f"{k}={v}" for k, v in r.params.items()),
            "rlpace_median": r.rlpace_median,
            "torchrl_median": r.torchrl_median,
            "ratio": r.ratio,
            "low": r.low,
            "high": r.high,
            "speedup": r.speedup[0],
            "verdict": r.verdict,
        }
        for r in ratios
    ]
    columns = ["case", "params", "rlpace_median", "torchrl_median", "ratio", "low", "high"]
    return pd.DataFrame(rows, columns=[*columns, "speedup", "verdict"])
