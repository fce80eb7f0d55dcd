"""The gate maths: pure numbers in, pure numbers out."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rlpace.bench.errors import BenchInputError
from rlpace.bench.gates import (
    gate_fraction,
    log_pct_from_time_pct,
    paired_change,
    scale_gate_fraction,
)


def test_a_gate_fraction_is_the_same_log_change_and_scales_with_runs_a_side():
    assert gate_fraction(0.0) == 0.0 and gate_fraction(-3.0) == 0.0
    assert math.isclose(-math.log1p(-gate_fraction(7.0)) * 100, 7.0)
    four = scale_gate_fraction(0.1, calibrated_repeats=1, repeats=4)
    assert math.isclose(math.log1p(-four), math.log1p(-0.1) / 2, rel_tol=1e-5)
    assert scale_gate_fraction(1.0, calibrated_repeats=2, repeats=8) == 1.0
    with pytest.raises(BenchInputError, match="repeats: expected an integer >= 1"):
        scale_gate_fraction(0.1, calibrated_repeats=2, repeats=0)


def test_pairing_removes_load_both_sides_of_a_duet_met():
    rng = np.random.default_rng(0)
    load = np.exp(rng.normal(0, 0.3, 8))  # each pair's shared load: ±30 %
    base = 1e-3 * load * np.exp(rng.normal(0, 0.01, 8))
    head = 1.05e-3 * load * np.exp(rng.normal(0, 0.01, 8))  # 5 % slower
    change, gate, detectable = paired_change(head.tolist(), base.tolist())
    assert math.isclose(change, math.log(1.05) * 100, abs_tol=1.5)
    assert gate < change < 10 and detectable < 5  # the 30 % load does not hide 5 %
    # a side that ran alone holds no pair: refused, and fewer than two pairs is NaN
    with pytest.raises(BenchInputError, match="expected one base run per head run"):
        paired_change([1.0, 2.0], [1.0])
    assert all(math.isnan(x) for x in paired_change([1.0], [1.0]))
    assert math.isclose(log_pct_from_time_pct(5.0), math.log(1.05) * 100)
