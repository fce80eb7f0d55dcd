"""Shared fixtures for the LLM environment tests: the default tokenizer and a tiny GPT-2."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing in these tests may reach the hub
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture
def tok():
    from rlpace.envs.llm import default_tokenizer

    return default_tokenizer()


@pytest.fixture
def bare_tok():
    """A tokenizer with neither pad nor EOS token."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    t = Tokenizer(models.WordLevel({"a": 0, "b": 1, "[UNK]": 2}, unk_token="[UNK]"))
    t.pre_tokenizer = pre_tokenizers.Whitespace()
    return t


@pytest.fixture
def tiny_model():
    """A randomly initialised 2-layer GPT-2 over the default tokenizer's 512 tokens."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(
        n_layer=2, n_embd=64, n_head=2, vocab_size=512, bos_token_id=1, eos_token_id=1
    )
    return GPT2LMHeadModel(config).eval()
