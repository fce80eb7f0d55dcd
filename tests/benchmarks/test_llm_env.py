"""LLM environment benchmarks: reset + step throughput in tokens/s, and the policy forward.

``test_llm_env_reset_step`` runs one reset and one step of a batch of mixed-length
prompts (text in, text response in, tokens out). The torchrl twin is
``torchrl.envs.llm.ChatEnv`` in history mode with ``IncrementalTokenizer``, driven
offline with the same tokenizer and chat template; ``padded`` asks torchrl for
padded tensors with ``as_padded_tensor``. Items are the prompt tokens observed at
reset plus those observed after the step (the same for both implementations).
"""

from __future__ import annotations

import os

import torch

from rlpace.bench.suite import SkipCase, Timed, case

os.environ.setdefault("HF_HUB_OFFLINE", "1")

_FILLER = " Show your work and keep it short."


def _prompts(n: int) -> list[str]:
    from rlpace.envs.llm import ArithmeticDataset

    ds = ArithmeticDataset(size=max(n, 8), seed=0)
    return [ds[i]["prompt"] + _FILLER * (i % 6) for i in range(n)]


def _responses(n: int) -> list[str]:
    return [f"#### {i}" + " because I added them." * (i % 4) for i in range(n)]


def _rlpace_reset_step(batch: int, padded: bool) -> Timed:
    from rlpace.envs.llm import LLMEnv, default_tokenizer

    env = LLMEnv(
        _prompts(batch),
        tokenizer=default_tokenizer(),
        batch_size=batch,
        padded=padded,
        max_length=256,
        shuffle=False,
    )
    responses = _responses(batch)

    def run():
        td = env.reset()
        td["text_response"] = responses
        return env.step(td)

    out = run()
    if padded:
        tokens = int(out["attention_mask"].sum() + out["next", "attention_mask"].sum())
    else:
        tokens = sum(t.numel() for t in out.get("tokens", as_list=True)) + sum(
            t.numel() for t in out["next"].get("tokens", as_list=True)
        )
    return Timed(run, items=tokens, unit="tokens", extra_info={"batch": batch})


def _torchrl_reset_step(batch: int, padded: bool) -> Timed:
    try:
        from tensordict import NonTensorStack, TensorDict
        from torchrl.data.llm import History
        from torchrl.envs import TransformedEnv
        from torchrl.envs.llm import ChatEnv
        from torchrl.envs.llm.transforms import IncrementalTokenizer
    except ImportError as exc:  # pragma: no cover - depends on the torchrl build
        raise SkipCase(f"torchrl's LLM env cannot load: {exc}") from exc
    from rlpace.envs.llm import DEFAULT_CHAT_TEMPLATE, as_transformers_tokenizer

    hf = as_transformers_tokenizer()
    base = ChatEnv(
        batch_size=(batch,),
        input_mode="history",
        tokenizer=hf,
        template_kwargs={"chat_template": DEFAULT_CHAT_TEMPLATE},
    )
    env = TransformedEnv(base, IncrementalTokenizer(hf, chat_template=DEFAULT_CHAT_TEMPLATE))
    query = TensorDict({"query": NonTensorStack(*_prompts(batch))}, batch_size=[batch])
    responses = _responses(batch)
    reply = History(role=["assistant"] * batch, content=responses, batch_size=(batch,)).unsqueeze(
        -1
    )
    key = ("tokens", "prompt")

    def run():
        td = env.reset(query.clone(False))
        if padded:
            td.get(key, as_padded_tensor=True, padding_value=hf.pad_token_id)
        td["history"].full = td["history"].prompt.extend(reply, inplace=False, dim=-1)
        out = env.step(td)
        if padded:
            out["next"].get(key, as_padded_tensor=True, padding_value=hf.pad_token_id)
        return out

    out = run()
    tokens = sum(t.numel() for t in out.get(key, as_list=True)) + sum(
        t.numel() for t in out["next"].get(key, as_list=True)
    )
    return Timed(run, items=tokens, unit="tokens", extra_info={"batch": batch})


@case(
    params={
        "impl": ["rlpace", "torchrl"],
        "mode": ["from_text"],
        "batch": [1, 16, 128],
        "layout": ["ragged", "padded"],
    },
    timer="cpu",
)
def test_llm_env_reset_step(impl, mode, batch, layout):
    padded = layout == "padded"
    if impl == "rlpace":
        return _rlpace_reset_step(batch, padded)
    return _torchrl_reset_step(batch, padded)


@case(
    params={"batch": [8]},
    gpu=True,
    timer="cpu",
    # importing transformers and generating cost ~15 s a side under Valgrind, out of
    # the PR check's budget; the generation is transformers' and torch's code, the
    # rlpace part (the policy wrapper) is timed here
    count=False,
)
def test_llm_policy_forward(batch, device):
    """Generation of 16 tokens by a tiny random GPT-2 through ``TransformersPolicy``."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from rlpace.envs.llm import LLMEnv, TransformersPolicy, default_tokenizer

    tok = default_tokenizer()
    torch.manual_seed(0)
    config = GPT2Config(
        n_layer=2, n_embd=64, n_head=2, vocab_size=512, bos_token_id=1, eos_token_id=1
    )
    model = GPT2LMHeadModel(config).eval().to(device)
    policy = TransformersPolicy(
        model, tok, {"max_new_tokens": 16, "min_new_tokens": 16}, return_log_probs=True
    )
    td = LLMEnv(_prompts(batch), tokenizer=tok, batch_size=batch, shuffle=False).reset()
    return Timed(lambda: policy(td), items=16 * batch, unit="tokens", extra_info={"batch": batch})
