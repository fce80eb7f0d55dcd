"""Build ``tokenizer.json``, the offline default tokenizer of :mod:`rlpace.envs.llm`.

A byte-level BPE (every string round-trips, nothing maps to ``<unk>``) with digits
split one per token, trained on ``corpus.txt`` next to this file plus generated
arithmetic questions. Run it again after editing the corpus:

    .venv/bin/python lib/rlpace/envs/llm/assets/build_tokenizer.py

The output is deterministic for a given corpus and ``tokenizers`` version.
"""

from __future__ import annotations

import random
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

HERE = Path(__file__).resolve().parent
VOCAB_SIZE = 512
SPECIAL_TOKENS = ["<pad>", "<eos>", "<|system|>", "<|user|>", "<|assistant|>"]


def arithmetic_lines(n: int, seed: int = 0) -> list[str]:
    """Question/answer lines in the format of ``rlpace.envs.llm.ArithmeticDataset``."""
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        a, b = rng.randint(0, 99), rng.randint(0, 99)
        op = rng.choice("+-*")
        value = {"+": a + b, "-": a - b, "*": a * b}[op]
        lines.append(f"What is {a} {op} {b}? {a} {op} {b} = {value} #### {value}")
        lines.append(f"Tom has {a} apples and gets {b} more. How many apples? #### {a + b}")
    return lines


def build() -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    corpus = (HERE / "corpus.txt").read_text(encoding="utf-8").splitlines()
    tok.train_from_iterator(corpus + arithmetic_lines(2000), trainer=trainer)
    return tok


if __name__ == "__main__":
    out = HERE / "tokenizer.json"
    build().save(str(out))
    print(f"wrote {out} ({out.stat().st_size} bytes)")
