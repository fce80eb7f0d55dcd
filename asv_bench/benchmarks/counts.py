"""Instruction counts of the CPU set as asv ``track_*`` series: history without noise.

asv runs each benchmark in its own process, and ``import torch`` under Valgrind costs
about half a minute, so counting case by case would cost hours per commit. Instead,
one class's ``setup_cache`` counts every claimed case of the CPU set in a single
Callgrind process (:func:`rlpace.bench.counts.count_tree`), and asv hands its result
to the ``track_instructions`` / ``track_estimated_cycles`` of every case: one
Valgrind pass per commit (about as long as ``rlpace-bench count run`` on one side, see
``docs/handbook/counts.md``), then a fraction of a second per tracked value: asv starts
a process for each, which reads the parameter list kept for the commit
(:func:`~benchmarks._adapter.per_commit_ids`) instead of loading the suite and torch.

The counted rlpace is the one asv installed for the commit (``PYTHONPATH`` is not
pointed at this tree); a commit whose rlpace has no count tier, or a machine without
Valgrind, skips these benchmarks (asv's ``NotImplementedError``) and says why.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from benchmarks._adapter import cases, claimed_by_count_tier, per_commit_ids, suite_dir


def _claimed() -> list[str]:
    """Test ids of the CPU set the count tier claims (``count`` flag, else ``timer``)."""
    ids = []
    for c in cases():
        if not c.in_set("cpu"):
            continue
        for params in c.grid("cpu"):
            if claimed_by_count_tier(c, params):
                ids.append(c.test_id(**params))
    return ids


class Counts:
    """Instructions and estimated cycles per call of every counted case."""

    params = [per_commit_ids("counts", _claimed) or ["none"]]
    param_names = ["case"]
    timeout = 7200  # the whole set under Callgrind, in setup_cache

    def setup_cache(self):
        try:
            from rlpace.bench.counts.session import CountSettings, count_tree
            from rlpace.bench.counts.toolchain import CountUnavailable
        except ImportError:
            return {"unavailable": "this commit's rlpace has no count tier"}
        suite = suite_dir()
        try:
            with tempfile.TemporaryDirectory() as tmp:
                run = count_tree(
                    suite.parents[1],
                    Path(tmp) / "counts.json",
                    suite_dir=suite,
                    environ={"PYTHONPATH": os.environ.get("PYTHONPATH", "")},
                    settings=CountSettings(python_calls=0),
                )
        except CountUnavailable as exc:
            return {"unavailable": str(exc)}
        return {
            "counts": {c.test_id: (c.instructions, c.cycles) for c in run.cases if c.counted},
            "not_counted": {
                c.test_id: f"{c.status}: {c.reason}" for c in run.cases if not c.counted
            },
        }

    def setup(self, data, case):
        if "unavailable" in data:
            raise NotImplementedError(data["unavailable"])
        if case not in data["counts"]:
            raise NotImplementedError(data["not_counted"].get(case, "not in this commit's suite"))

    def track_instructions(self, data, case):
        return data["counts"][case][0]

    track_instructions.unit = "instructions"

    def track_estimated_cycles(self, data, case):
        return data["counts"][case][1]

    track_estimated_cycles.unit = "cycles"
