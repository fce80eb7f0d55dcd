import pytest

from rlpace.envs.llm import ArithmeticDataset, ExactMatchReward


def test_samples_are_deterministic_and_correct():
    ds = ArithmeticDataset(size=50, low=0, high=9, ops=("+", "-", "*"), seed=3)
    assert list(ds) == list(ArithmeticDataset(size=50, low=0, high=9, ops=("+", "-", "*"), seed=3))
    assert list(ds) != list(ArithmeticDataset(size=50, low=0, high=9, ops=("+", "-", "*"), seed=4))
    reward = ExactMatchReward()
    for s in ds:
        a, op, b = s["prompt"].removeprefix("What is ").removesuffix("?").split()
        assert int(s["answer"]) == eval(f"{int(a)} {op} {int(b)}")  # noqa: S307 - digits only
        assert reward(s["prompt"], s["solution"], s) == 1.0
    assert len(ds[2:5]) == 3


def test_samples_are_copies():
    ds = ArithmeticDataset(size=2)
    ds[0]["answer"] = "tampered"
    assert ds[0]["answer"] != "tampered"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"size": 0}, "size"),
        ({"low": 5, "high": 1}, "low <= high"),
        ({"ops": ("/",)}, "ops"),
    ],
)
def test_bad_configuration(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ArithmeticDataset(**kwargs)
