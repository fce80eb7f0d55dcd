"""rlpace/torchrl median ratios: pairing by parameters, intervals, the command."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rlpace.bench.cli import main
from rlpace.bench.peers import peer_ratios, peers_frame
from rlpace.bench.results import load_results, results_from_records


def test_pairs_from_a_real_result_file(pb_head):
    df = load_results(pb_head)
    ratios = peer_ratios(df)
    assert [(r.case, r.params) for r in ratios] == [
        ("fixture_benchmarks.py::test_sum_range", {"n": 100}),
        ("fixture_benchmarks.py::test_sum_range", {"n": 1000}),
    ]
    for r in ratios:
        ours = df[df["fullname"] == r.rlpace_fullname].iloc[0]
        theirs = df[df["fullname"] == r.torchrl_fullname].iloc[0]
        assert ours["impl"] == "rlpace" and theirs["impl"] == "torchrl"
        expected = np.median(ours["data"]) / np.median(theirs["data"])
        assert r.ratio == pytest.approx(expected)
        assert r.low <= r.ratio <= r.high
        assert r.confidence == 0.95


def _rec(name, impl, data, **params):
    return {"fullname": f"t.py::{name}[{impl}]", "params": {"impl": impl, **params}, "data": data}


def test_only_rows_equal_except_impl_are_paired():
    rng = np.random.default_rng(0)
    fast, slow = 1 + 0.01 * rng.random(30), 2 + 0.01 * rng.random(30)
    df = results_from_records(
        [
            _rec("test_a", "rlpace", fast, n=1),
            _rec("test_a", "torchrl", slow, n=2),  # other n: no pair
            _rec("test_b", "rlpace", slow, n=1),
            _rec("test_b", "torchrl", fast, n=1),
            _rec("test_c", "rlpace", fast),  # no twin
            {"fullname": "t.py::test_d", "params": None, "data": fast},  # no impl at all
        ]
    )
    (pair,) = peer_ratios(df)
    assert pair.case == "t.py::test_b" and pair.params == {"n": 1}
    assert pair.ratio == pytest.approx(2.0, rel=0.02)
    assert pair.low > 1 and pair.verdict == "slower"


def test_a_failed_side_is_not_paired():
    df = results_from_records(
        [
            _rec("test_a", "rlpace", [1.0, 1.0, 1.0]),
            {**_rec("test_a", "torchrl", None), "status": "failed"},
        ]
    )
    assert peer_ratios(df) == []


def test_identical_samples_tie_and_no_samples_give_no_interval():
    same = [1.0, 1.1, 0.9, 1.0, 1.05, 0.95]
    df = results_from_records([_rec("test_a", "rlpace", same), _rec("test_a", "torchrl", same)])
    (tie,) = peer_ratios(df)
    assert tie.ratio == 1.0 and tie.low <= 1 <= tie.high and tie.verdict == "tie"

    medians = results_from_records(
        [
            {**_rec("test_m", "rlpace", None), "median": 3.0, "mean": 3.0, "rounds": 5},
            {**_rec("test_m", "torchrl", None), "median": 6.0, "mean": 6.0, "rounds": 5},
        ]
    )
    (m,) = peer_ratios(medians)
    assert m.ratio == 0.5 and math.isnan(m.low) and m.verdict == "unknown"


def test_confidence_must_be_a_coverage():
    with pytest.raises(ValueError, match=r"confidence: expected a coverage in \(0, 1\)"):
        peer_ratios(results_from_records([]), confidence=95)


def test_wider_confidence_gives_a_wider_interval(pb_head):
    df = load_results(pb_head)
    narrow = peer_ratios(df, confidence=0.5)[1]
    wide = peer_ratios(df, confidence=0.99)[1]
    assert wide.low <= narrow.low and narrow.high <= wide.high
    assert list(peers_frame([narrow])["verdict"]) == [narrow.verdict]


def test_peers_command_prints_one_line_per_pair(pb_head, capsys):
    assert main(["peers", str(pb_head)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("median time ratio rlpace/torchrl, 95% bootstrap interval")
    assert lines[1].startswith("fixture_benchmarks.py::test_sum_range[n=100]  speedup ")
    assert len(lines) == 3


def test_peers_command_on_a_file_without_twins(pb_base, write_json, capsys):
    df_path = write_json(
        {
            "version": "5.1.0",
            "machine_info": {},
            "commit_info": {},
            "benchmarks": [
                {
                    "name": "test_x",
                    "fullname": "t.py::test_x",
                    "params": None,
                    "stats": {"data": [1.0]},
                }
            ],
        }
    )
    assert main(["peers", str(df_path)]) == 0
    assert "no case has both impl=rlpace and impl=torchrl" in capsys.readouterr().out
    assert main(["peers", str(pb_base), "--confidence", "1.5"]) == 2


def test_pairs_from_an_asv_result_file(asv_head):
    ratios = peer_ratios(load_results(asv_head))
    # n=1000 has no torchrl result (skipped in that run), so only n=100 pairs
    assert [(r.case, r.params) for r in ratios] == [("bench_work.TimeSum.time_sum", {"n": 100})]
    assert ratios[0].ratio > 0
