"""A small offline task: generated arithmetic questions with answers."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["ArithmeticDataset"]

_OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


@dataclass(frozen=True)
class ArithmeticDataset(Sequence):
    """Arithmetic questions, generated deterministically from a seed (nothing downloaded).

    Each sample is a dict with ``prompt`` (``"What is 3 + 4?"``), ``answer`` (``"7"``)
    and ``solution`` (``"3 + 4 = 7 #### 7"``, the GSM8K convention of a final answer
    after ``####``).

    Attributes:
        size: number of samples.
        low: smallest operand.
        high: largest operand (inclusive).
        ops: operators drawn from, among ``+``, ``-``, ``*``.
        template: the question, formatted with ``a``, ``op`` and ``b``.
        seed: the generator seed; same seed, same samples.

    Example:
        >>> ds = ArithmeticDataset(size=3, seed=0)
        >>> len(ds), sorted(ds[0])
        (3, ['answer', 'prompt', 'solution'])
        >>> ArithmeticDataset(size=1, low=2, high=2, ops=("+",))[0]
        {'prompt': 'What is 2 + 2?', 'answer': '4', 'solution': '2 + 2 = 4 #### 4'}
    """

    size: int = 1000
    low: int = 0
    high: int = 20
    ops: tuple[str, ...] = ("+", "-")
    template: str = "What is {a} {op} {b}?"
    seed: int = 0

    def __post_init__(self) -> None:
        if self.size < 1:
            raise ValueError(f"ArithmeticDataset.size must be >= 1, got {self.size}")
        if self.low > self.high:
            raise ValueError(
                f"ArithmeticDataset needs low <= high, got low={self.low}, high={self.high}"
            )
        bad = [op for op in self.ops if op not in _OPS]
        if bad or not self.ops:
            raise ValueError(
                f"ArithmeticDataset.ops must be a non-empty subset of +, -, *; got {self.ops}"
            )
        rng = random.Random(self.seed)
        samples = []
        for _ in range(self.size):
            a, b = rng.randint(self.low, self.high), rng.randint(self.low, self.high)
            op = rng.choice(self.ops)
            value = _OPS[op](a, b)
            samples.append(
                {
                    "prompt": self.template.format(a=a, op=op, b=b),
                    "answer": str(value),
                    "solution": f"{a} {op} {b} = {value} #### {value}",
                }
            )
        object.__setattr__(self, "_samples", tuple(samples))

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return [dict(s) for s in self._samples[index]]
        return dict(self._samples[index])
