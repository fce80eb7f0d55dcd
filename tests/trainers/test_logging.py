"""RunLogger: CSV per run, widening header, append on resume."""

from __future__ import annotations

import math

import pytest

from rlpace.trainers import RunLogger, read_log


def test_rows_round_trip_and_a_new_column_widens_the_header(tmp_path):
    log = RunLogger(tmp_path)
    log.log(10, {"losses/a": 1.0})
    log.log(20, {"losses/a": 2.0, "eval/return": 5.0})
    log.log(30, {"losses/a": 3.0})
    log.close()
    rows = read_log(tmp_path)
    assert [r["frames"] for r in rows] == [10.0, 20.0, 30.0]
    assert [r["losses/a"] for r in rows] == [1.0, 2.0, 3.0]
    assert math.isnan(rows[0]["eval/return"]) and rows[1]["eval/return"] == 5.0
    header = (tmp_path / "log.csv").read_text().splitlines()[0]
    assert header == "frames,losses/a,eval/return"


def test_append_keeps_earlier_rows(tmp_path):
    first = RunLogger(tmp_path)
    first.log(1, {"x": 1})
    first.close()
    second = RunLogger(tmp_path, append=True)
    second.log(2, {"x": 2})
    second.close()
    assert [r["x"] for r in read_log(tmp_path)] == [1.0, 2.0]


def test_without_append_a_new_logger_starts_over(tmp_path):
    old = RunLogger(tmp_path)
    old.log(1, {"x": 1})
    old.close()
    fresh = RunLogger(tmp_path)
    fresh.close()
    assert read_log(tmp_path) == []


def test_reading_a_directory_without_a_log_says_what_to_pass(tmp_path):
    with pytest.raises(FileNotFoundError, match="pass the run's directory"):
        read_log(tmp_path)
