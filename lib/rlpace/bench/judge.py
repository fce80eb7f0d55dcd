"""One judge: the single owner of how head and base runs become verdicts.

``rlpace-bench compare``, ``rlpace-bench pr`` and ``rlpace-bench aa`` all build a
:class:`Judge` and call it, so the same runs always get the same verdicts. A judge is
a frozen value holding every setting a verdict depends on:

- the comparator's ``threshold``, ``paired_threshold`` and ``alpha``
  (:func:`rlpace.bench.compare.compare_runs`);
- the **noise model** of an A/A calibration (:class:`~rlpace.bench.gates.NoiseModel`): per benchmark the
  gate a change must beat, the run spreads the confirmation's gates and the process
  priors come from;
- the **control floor** policy: whether the negative controls (the torchrl twins,
  :mod:`rlpace.bench.controls`) raise the gates by this run's common-mode noise, and
  whether base and head run the same packages (then the controls are never flagged);
- the **confirmation**: how many fresh runs a side re-run what the first comparison
  flagged (:meth:`Judge.confirm`), and the calibration whose figures the report cites.

The judge never runs anything: it takes results tables (one per side, runs already
merged with :func:`rlpace.bench.results.merge_runs`) and returns a
:class:`~rlpace.bench.comparison.Comparison`. The pipeline decides what to run.

Example:
    >>> from rlpace.bench.results import results_from_records
    >>> base = results_from_records([{"fullname": "a", "data": [1.0, 1.01, 0.99] * 5}])
    >>> head = results_from_records([{"fullname": "a", "data": [1.5, 1.51, 1.49] * 5}])
    >>> judge = Judge(threshold=5.0)
    >>> first = judge.judge(head, base)
    >>> first.rows[0].verdict.value, judge.flagged(first)
    ('worsened', ['a'])
    >>> judge.confirm(first, head, base).rows[0].confirmed
    True
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from rlpace.bench.compare import compare_runs, confirm_verdicts
from rlpace.bench.comparison import Comparison, Verdict
from rlpace.bench.controls import noise_floor_from_controls
from rlpace.bench.errors import BenchInputError
from rlpace.bench.gates import NoiseModel
from rlpace.bench.thresholds import COUNTED_THRESHOLD, PAIRED_THRESHOLD, SINGLE_RUN_NOISE
from rlpace.bench.work_counts.join import apply_work_counts
from rlpace.bench.work_counts.verdict import DECIDING

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from rlpace.bench.calibration._duets import DuetCalibration
    from rlpace.bench.calibration._records import Calibration

__all__ = ["Judge"]


_FLAGS = (Verdict.IMPROVED, Verdict.WORSENED)


@dataclass(frozen=True)
class Judge:
    """Every setting a verdict depends on, and the one way runs become verdicts.

    Example:
        >>> Judge(threshold=3.0).threshold, Judge().paired_threshold, Judge().confirm_runs
        (3.0, 2.0, 2)
        >>> Judge(alpha=2.0)
        Traceback (most recent call last):
        ...
        rlpace.bench.errors.BenchInputError: Judge.alpha: expected a false discovery rate in (0, 1), got 2.0; fix: e.g. --alpha 0.05
    """

    threshold: float = 5.0
    """Effect threshold, percent: a smaller change is never flagged (rows judged pair by
    pair: :attr:`paired_threshold`)."""
    paired_threshold: float = PAIRED_THRESHOLD
    """Effect threshold, percent, of a row judged pair by pair (:attr:`paired`): the
    load both sides of a duet met cancels in each pair, and the paired test's gate holds
    what is left, so a duet is asked for less than runs one after another."""
    alpha: float = 0.05
    """False discovery rate of the comparator's tests (and family error rate of its
    process-level gates)."""
    count_threshold: float = COUNTED_THRESHOLD
    """Effect threshold, percent, of a row whose unit counts work (an asv ``track_*``
    of instructions, aten ops ...): the floor of its count gate
    (:func:`rlpace.bench.counted_rows.count_verdict`); a count does not follow the
    load, so neither :attr:`threshold` nor the assumed process noise applies to it."""
    noise: NoiseModel | None = None
    """The calibrated noise model (None: the comparator's own gates alone)."""
    control_floor: bool = True
    """Whether the negative controls (torchrl twins) raise the gates by this run's
    common-mode noise (the control floor)."""
    same_packages: bool = True
    """Whether base and head run the same pinned packages: then the negative controls
    are the same code on both sides and never flagged themselves. False when the base
    pins other requirements, where the controls are judged like any benchmark."""
    single_run_noise: float = SINGLE_RUN_NOISE
    """Process noise (a fraction) assumed for a benchmark with one run a side and no
    calibrated noise, which its rounds alone cannot show (0: judge it on its rounds)."""
    confirm_runs: int = 2
    """Fresh runs a side that re-run what a first comparison flagged (0: none); the
    pipeline runs them, :meth:`confirm` judges them."""
    paired: bool = False
    """The runs were duets (base and head run ``k`` at the same time, one per core):
    benchmarks with as many runs on both sides are judged pair by pair, without the
    calibrated gates of sequential runs (:func:`~rlpace.bench.compare.compare_runs`'s
    ``paired``). ``pr`` times its wall-clock cases so when the count tier is on;
    ``rlpace-bench compare --paired`` judges the same files the same way."""
    paired_priors: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    """``fullname → (variance, degrees of freedom)`` of a duet pair's log ratio from a
    pool of A/A duets (:meth:`rlpace.bench.calibration.DuetCalibration.paired_priors`):
    the prior of each benchmark judged pair by pair, in place of the one fitted on the
    other benchmarks of the run."""
    calibration: Calibration | None = field(default=None, compare=False, repr=False)
    """The calibration the noise model came from, cited in the report (None: none)."""
    calibration_source: str = ""
    """Where :attr:`calibration` was read from, as the reader should see it."""
    duets: DuetCalibration | None = field(default=None, compare=False, repr=False)
    """The A/A duet pool :attr:`paired_priors` came from, cited in the report."""
    duets_source: str = ""
    """Where :attr:`duets` was read from, as the reader should see it."""

    def __post_init__(self) -> None:
        for name, value, flag in (
            ("threshold", self.threshold, "--threshold 5"),
            ("paired_threshold", self.paired_threshold, "--paired-threshold 2"),
            ("count_threshold", self.count_threshold, "--count-threshold 1"),
        ):
            if not (isinstance(value, int | float) and 0 <= value < math.inf):
                raise BenchInputError(
                    f"Judge.{name}: expected a percentage >= 0, got {value!r}; fix: e.g. {flag}"
                )
        if not (isinstance(self.alpha, int | float) and 0 < self.alpha < 1):
            raise BenchInputError(
                f"Judge.alpha: expected a false discovery rate in (0, 1), got {self.alpha!r}; "
                "fix: e.g. --alpha 0.05"
            )
        if not (isinstance(self.confirm_runs, int) and self.confirm_runs >= 0):
            raise BenchInputError(
                f"Judge.confirm_runs: expected runs per side >= 0 (0: no confirmation), got "
                f"{self.confirm_runs!r}; fix: e.g. --confirm 2"
            )

    @classmethod
    def from_calibration(
        cls,
        calibration: Calibration | None,
        *,
        source: str = "",
        duets: DuetCalibration | None = None,
        duets_source: str = "",
        **settings: Any,
    ) -> Judge:
        """A judge whose noise model is ``calibration``'s (None: no calibration) and
        whose paired tests borrow ``duets``' pair spreads (None: none).

        Example:
            >>> from rlpace.bench.calibration import BenchmarkNoise, Calibration
            >>> b = BenchmarkNoise("a", 2, (1.0,), 0, 2.0, 8.0, 12.0, 2.0,
            ...                    run_spread_pct=2.0, runs=12)
            >>> cal = Calibration("cpu", 2, 2, 12, 5.0, 0.05, 0.05, 0.0, 0.0, (b,))
            >>> Judge.from_calibration(cal, source="cpu.json").noise.gates
            {'a': 0.076884}
        """
        if duets is not None:
            settings.update(
                paired_priors=duets.paired_priors(),
                duets=duets,
                duets_source=str(duets_source),
            )
        if calibration is None:
            return cls(**settings)
        return cls(
            noise=calibration.noise_model(),
            calibration=calibration,
            calibration_source=str(source),
            **settings,
        )

    def judge(self, head: pd.DataFrame, base: pd.DataFrame | None) -> Comparison:
        """Compare merged head and base runs: the first stage of a verdict.

        The calibrated gates are scaled to the runs a side these tables merged; the
        control floor is measured on their negative controls; the calibration is cited.

        Example:
            >>> from rlpace.bench.results import results_from_records
            >>> run = results_from_records([{"fullname": "a", "data": [1.0, 1.01, 0.99] * 5}])
            >>> Judge().judge(run, run).rows[0].verdict.value
            'unchanged'
        """
        if base is None:
            return compare_runs(
                head,
                None,
                threshold=self.threshold,
                alpha=self.alpha,
                single_run_noise=self.single_run_noise,
                count_threshold=self.count_threshold,
            )
        comparison = apply_work_counts(self._compare(head, base), head, base)
        return self._cite(comparison, head)

    def flagged(self, comparison: Comparison) -> list[str]:
        """The benchmarks ``comparison`` flagged (improved or worsened), in row order:
        what a confirmation re-runs.

        Example:
            >>> from rlpace.bench.comparison import BenchmarkChange
            >>> Judge().flagged(Comparison(rows=(BenchmarkChange("a", "a", Verdict.UNCHANGED),
            ...                                  BenchmarkChange("b", "b", Verdict.WORSENED))))
            ['b']
        """
        return [r.fullname for r in comparison.rows if r.verdict in _FLAGS]

    def to_confirm(self, comparison: Comparison) -> list[str]:
        """The flagged benchmarks a confirmation would run again: all but those whose
        work counts decided the flag (exact counts: fresh runs would count the same).

        Example:
            >>> from rlpace.bench.comparison import BenchmarkChange
            >>> rows = (BenchmarkChange("a", "a", Verdict.WORSENED, work_verdict="regression"),
            ...         BenchmarkChange("b", "b", Verdict.WORSENED, work_verdict="same"))
            >>> Judge().to_confirm(Comparison(rows=rows))
            ['b']
        """
        return [
            r.fullname
            for r in comparison.rows
            if r.verdict in _FLAGS and r.work_verdict not in DECIDING
        ]

    def confirm(
        self,
        first: Comparison,
        head: pd.DataFrame,
        base: pd.DataFrame,
        names: Sequence[str] | None = None,
    ) -> Comparison:
        """Judge fresh runs of what ``first`` flagged, and keep only the flags they repeat.

        The flagged benchmarks are compared on ``head`` and ``base`` alone (the
        confirmation runs; other benchmarks in them are ignored), with the
        process-level gates shared over just those benchmarks, the variance prior
        and the stretch of the duet pool's priors that ``first`` fitted on the whole
        set (:attr:`~rlpace.bench.comparison.Comparison.prior_stretch`) and, with a
        noise model, the confirmation's
        own gates; :func:`rlpace.bench.compare.confirm_verdicts` then clears the flags
        that did not repeat. Rows the confirmation runs lack are not confirmed.
        ``names`` (default: every flagged benchmark) limits what is put to the
        confirmation; flags outside it are left as they are (``pr`` leaves out the
        cases its count tier judges); so are flags a moved work count decided.

        Example:
            >>> from rlpace.bench.results import results_from_records
            >>> base = results_from_records([{"fullname": "a", "data": [1.0, 1.01, 0.99] * 5}])
            >>> same = Judge().confirm(Judge().judge(base, base), base, base)
            >>> same.confirm_repeats
            0
        """
        flagged = self.to_confirm(first)
        asked = set(flagged if names is None else names)
        names = [n for n in flagged if n in asked]
        if not names:
            return first

        def only(frame: pd.DataFrame) -> pd.DataFrame:
            kept = frame[frame["fullname"].isin(names)].reset_index(drop=True)
            kept.attrs = dict(frame.attrs)
            return kept

        head, base = only(head), only(base)
        repeats = _runs_per_side(head, base)
        gates = (
            self.noise.confirmation_gates(repeats=repeats, family_size=len(names))
            if self.noise is not None
            else None
        )
        second = self._compare(
            head,
            base,
            gates=gates,
            family_size=len(names),
            variance_prior=first.variance_prior,
            prior_stretch=first.prior_stretch,
        )
        confirmed = confirm_verdicts(first, second, repeats=repeats)
        # flags left out keep their first verdict: those outside ``names`` and those a
        # moved work count decided (they are not in ``flagged``; the confirmation runs
        # lack them, and confirm_verdicts would clear them for want of a result)
        asked = set(names)
        rows = tuple(
            new if new.fullname in asked else old
            for old, new in zip(first.rows, confirmed.rows, strict=True)
        )
        return replace(confirmed, rows=rows)

    def _compare(
        self,
        head: pd.DataFrame,
        base: pd.DataFrame,
        *,
        gates: Mapping[str, float] | None = None,
        family_size: int | None = None,
        variance_prior: tuple[float, float] | None = None,
        prior_stretch: tuple[float, float] | None = None,
    ) -> Comparison:
        if gates is None and self.noise is not None:
            # each benchmark's gate for the runs it has (pr times the CPU-clock cases,
            # which the count tier judges, once a side and the others every repeat)
            gates = self.noise.gate_fractions(_runs_by_benchmark(head, base))
        floor = noise_floor_from_controls(head, base) if self.control_floor else None
        return compare_runs(
            head,
            base,
            threshold=self.threshold,
            paired_threshold=self.paired_threshold,
            alpha=self.alpha,
            noise=gates,
            floor=floor,
            process_priors=self.noise.priors() if self.noise is not None else None,
            fixed_impl=floor.impl if floor is not None and self.same_packages else None,
            family_size=family_size,
            variance_prior=variance_prior,
            prior_stretch=prior_stretch,
            single_run_noise=self.single_run_noise,
            paired=self.paired,
            paired_priors=self.paired_priors if self.paired else None,
            count_threshold=self.count_threshold,
        )

    def _cite(self, comparison: Comparison, head: pd.DataFrame) -> Comparison:
        if self.duets is not None and comparison.paired:
            pool = self.duets.note(self.duets_source, head.attrs.get("machine_info"))
            comparison = replace(comparison, duet_calibration=pool)
        if self.calibration is None:
            return comparison
        note = self.calibration.note(
            self.calibration_source,
            head.attrs.get("machine_info"),
            confirm=self.confirm_runs,
        )
        return replace(comparison, calibration=note.to_dict())


def _runs_by_benchmark(head: pd.DataFrame, base: pd.DataFrame) -> dict[str, int]:
    """``fullname → runs`` merged into the side with fewer of them (at least 1)."""

    def runs(frame: pd.DataFrame) -> dict[str, int]:
        return {
            name: len(m) if m is not None else 1
            for name, m in zip(frame["fullname"], frame["run_medians"], strict=True)
        }

    h, b = runs(head), runs(base)
    return {name: max(min(n, b.get(name, n)), 1) for name, n in h.items()}


def _runs_per_side(head: pd.DataFrame, base: pd.DataFrame) -> int:
    """Runs (processes) merged into each side: the most any row of a side holds, the
    fewer of the two sides (at least 1)."""

    def runs(frame: pd.DataFrame) -> int:
        counts = [len(m) for m in frame["run_medians"] if m is not None]
        return max(counts, default=1)

    return max(min(runs(head), runs(base)), 1)
