"""Smoke test of the end-to-end example, run through its real entry point with a tiny budget."""

import importlib.util
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[3] / "docs" / "examples" / "llm_arithmetic.py"


def test_llm_arithmetic_example_runs_a_few_updates(capsys, monkeypatch):
    spec = importlib.util.spec_from_file_location("llm_arithmetic_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    cfg = module.parse_args(["--steps", "2", "--batch-size", "16", "--log-every", "1"])
    rewards = module.main(cfg)
    assert len(rewards) == 2
    assert all(0.0 <= r <= 1.0 for r in rewards)
    out = capsys.readouterr().out
    assert "step    2  charts/mean_reward" in out
