import pytest

from rlpace.envs.llm import ExactMatchReward, FormatReward, extract_final_answer


@pytest.mark.parametrize(
    ("text", "marker", "expected"),
    [
        ("3 + 4 = 7 #### 7", True, "7"),
        ("#### 1,000 apples", True, "1000"),
        ("#### -3", True, "-3"),
        ("#### 7.0", True, "7"),
        ("#### 2.5", True, "2.5"),
        ("first #### 1 then #### 2", True, "2"),
        ("#### seven", True, "seven"),
        ("####", True, None),
        ("the answer is 7", True, None),
        ("the answer is 7, not 8", False, "8"),
        ("no numbers", False, None),
    ],
)
def test_extract_final_answer(text, marker, expected):
    assert extract_final_answer(text, require_marker=marker) == expected


def test_exact_match_reward():
    r = ExactMatchReward()
    sample = {"prompt": "What is 3 + 4?", "answer": "7"}
    assert r("q", "#### 7", sample) == 1.0
    assert r("q", "3+4 = 7 ####7<extra>", sample) == 1.0
    assert r("q", "#### 8", sample) == 0.0
    assert r("q", "7", sample) == 0.0  # marker required by default
    assert ExactMatchReward(require_marker=False)("q", "it is 7", sample) == 1.0
    assert r("q", "#### 7", {"solution": "3 + 4 = 7 #### 7"}) == 1.0
    with pytest.raises(KeyError, match="expected answer"):
        r("q", "#### 7", {"prompt": "no answer here"})


def test_format_reward():
    r = FormatReward(max_chars=20)
    assert r("q", "#### 5", {}) == 1.0
    assert r("q", "5", {}) == 0.5
    assert r("q", "#### x", {}) == 0.5  # marker without a number earns no format credit
    assert r("q", "a" * 15 + "#### 5", {}) == 0.5  # 21 chars: over budget, format only
    assert r("q", "#### 5" + "a" * 9, {}) == pytest.approx(0.5 + 0.5 * (20 - 15) / 10)
    with pytest.raises(ValueError, match="max_chars"):
        FormatReward(max_chars=1)
