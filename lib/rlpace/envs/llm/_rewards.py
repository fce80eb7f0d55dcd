"""Reward functions: ``reward_fn(prompt, response, sample) -> float``."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ExactMatchReward", "FormatReward", "extract_final_answer"]

_MARKER = "####"
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def extract_final_answer(text: str, require_marker: bool = True) -> str | None:
    """The final answer of a response: what follows the last ``####``, stripped.

    Numbers are normalised (``"1,000"`` → ``"1000"``, ``"7.0"`` → ``"7"``). Without a
    ``####`` marker the answer is ``None``, unless ``require_marker=False``, in which
    case the last number in the text is taken.

    Example:
        >>> extract_final_answer("3 + 4 = 7 #### 7")
        '7'
        >>> extract_final_answer("it is 7") is None
        True
        >>> extract_final_answer("it is 7", require_marker=False)
        '7'
    """
    if _MARKER in text:
        tail = text.rsplit(_MARKER, 1)[1].strip()
        numbers = _NUMBER.findall(tail.replace(",", ""))
        if numbers:
            return _normalise_number(numbers[0])
        return tail or None
    if require_marker:
        return None
    numbers = _NUMBER.findall(text.replace(",", ""))
    return _normalise_number(numbers[-1]) if numbers else None


def _normalise_number(s: str) -> str:
    if "." in s:
        f = float(s)
        return str(int(f)) if f.is_integer() else repr(f)
    return str(int(s))


@dataclass(frozen=True)
class ExactMatchReward:
    """1.0 when the response's final answer equals the sample's answer, else 0.0.

    The expected answer is ``sample[answer_key]``, or, when the sample has no such
    key, the part of ``sample["solution"]`` after ``####``.

    Attributes:
        answer_key: the key of the expected answer in the dataset sample.
        require_marker: only accept answers written after ``####``; when ``False``,
            a bare last number also counts.

    Example:
        >>> reward = ExactMatchReward()
        >>> reward("What is 3 + 4?", "3 + 4 = 7 #### 7", {"answer": "7"})
        1.0
        >>> reward("What is 3 + 4?", "#### 8", {"answer": "7"})
        0.0
    """

    answer_key: str = "answer"
    require_marker: bool = True

    def __call__(self, prompt: str, response: str, sample: Mapping[str, Any]) -> float:
        expected = self._expected(sample)
        got = extract_final_answer(response, require_marker=self.require_marker)
        return float(got is not None and got == expected)

    def _expected(self, sample: Mapping[str, Any]) -> str:
        if isinstance(sample, Mapping) and self.answer_key in sample:
            value = str(sample[self.answer_key])
            return extract_final_answer(value, require_marker=False) or value.strip()
        if isinstance(sample, Mapping) and "solution" in sample:
            answer = extract_final_answer(str(sample["solution"]))
            if answer is not None:
                return answer
        raise KeyError(
            f"ExactMatchReward needs the expected answer in sample[{self.answer_key!r}] "
            f"(or a 'solution' with '#### answer'); the sample has keys "
            f"{sorted(sample) if isinstance(sample, Mapping) else type(sample).__name__}. "
            "Use a dataset of mappings such as ArithmeticDataset, or set answer_key."
        )


@dataclass(frozen=True)
class FormatReward:
    """Rewards the answer format and a short response, independent of correctness.

    ``format_weight`` if the response contains ``#### <number>``, plus
    ``length_weight`` scaled down linearly from ``max_chars // 2`` characters to 0 at
    ``max_chars`` (full credit at or below half the budget).

    Attributes:
        max_chars: the response length that earns no length credit.
        format_weight: reward for a ``#### <number>`` final answer.
        length_weight: reward for brevity.

    Example:
        >>> reward = FormatReward(max_chars=40)
        >>> reward("q", "#### 12", {})
        1.0
        >>> reward("q", "no marker here", {})
        0.5
        >>> reward("q", "x" * 40, {})
        0.0
    """

    max_chars: int = 200
    format_weight: float = 0.5
    length_weight: float = 0.5

    def __post_init__(self) -> None:
        if self.max_chars < 2:
            raise ValueError(f"FormatReward.max_chars must be >= 2, got {self.max_chars}")

    def __call__(self, prompt: str, response: str, sample: Mapping[str, Any]) -> float:
        has_format = extract_final_answer(response) is not None and bool(
            _NUMBER.search(response.rsplit(_MARKER, 1)[1])
        )
        half = self.max_chars // 2
        n = len(response)
        brevity = 1.0 if n <= half else max(0.0, (self.max_chars - n) / (self.max_chars - half))
        return self.format_weight * float(has_format) + self.length_weight * brevity
