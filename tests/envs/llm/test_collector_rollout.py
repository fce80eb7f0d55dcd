import torch

from rlpace.envs.llm import ArithmeticDataset, ExactMatchReward


def test_rollout_through_an_rlpace_collector(tok, tiny_model):
    from rlpace.collectors import Collector
    from rlpace.envs.llm import LLMEnv, TransformersPolicy

    torch.manual_seed(0)
    env = LLMEnv(
        ArithmeticDataset(size=32, seed=0),
        tokenizer=tok,
        batch_size=4,
        padded=True,
        max_length=32,
        reward_fn=ExactMatchReward(require_marker=False),
    )
    digits = [tok.token_to_id(str(d)) for d in range(10)]
    policy = TransformersPolicy(tiny_model, tok, {"max_new_tokens": 3}, allowed_token_ids=digits)
    with Collector(env, policy, frames_per_batch=8, total_frames=16) as collector:
        batches = list(collector)
    assert [b.batch_size for b in batches] == [torch.Size([8])] * 2
    for batch in batches:
        assert batch["tokens"].shape == (8, 32)  # fixed padded width: stackable
        assert batch["tokens_response"].shape == (8, 3)
        mask = batch["response_mask"]
        assert (batch["log_probs"][~mask] == 0).all() and (batch["log_probs"][mask] < 0).all()
        assert batch["next", "done"].all()  # one-turn episodes
        # the reward is the exact match of each response against its own sample
        for text, hist, reward in zip(
            batch["text_response"], batch["next", "history"], batch["next", "reward"]
        ):
            question = hist.messages[0].content
            a, op, b = question.removeprefix("What is ").removesuffix("?").split()
            truth = int(a) + int(b) if op == "+" else int(a) - int(b)
            digits_only = text.strip()
            assert reward.item() == float(digits_only.isdigit() and int(digits_only) == truth)
    traj = torch.cat([b["collector", "traj_ids"] for b in batches])
    assert traj.unique().numel() == 16  # every frame is its own episode


def test_padded_outputs_have_fixed_widths(tok, tiny_model):
    from rlpace.envs.llm import LLMEnv, TransformersPolicy

    env = LLMEnv(
        ["a", "a much longer prompt than the first"],
        tokenizer=tok,
        batch_size=2,
        padded=True,
        max_length=24,
    )
    td = env.reset()
    assert td["tokens"].shape == td["attention_mask"].shape == (2, 24)
    assert env.observation_spec["tokens"].shape == (2, 24)
    td = TransformersPolicy(tiny_model, tok, {"max_new_tokens": 5})(td)
    assert td["tokens_response"].shape == td["log_probs"].shape == (2, 5)


def test_ragged_rollout_through_an_rlpace_collector_keeps_each_length(tok, tiny_model):
    from tensordict import LazyStackedTensorDict

    from rlpace.collectors import Collector
    from rlpace.envs.llm import LLMEnv, TransformersPolicy

    torch.manual_seed(0)
    env = LLMEnv(ArithmeticDataset(size=32, seed=0), tokenizer=tok, batch_size=4, max_length=32)
    policy = TransformersPolicy(tiny_model, tok, {"max_new_tokens": 3})
    with Collector(env, policy, frames_per_batch=8, total_frames=16) as collector:
        batches = list(collector)
    assert [b.batch_size for b in batches] == [torch.Size([8])] * 2
    for batch in batches:
        assert isinstance(batch, LazyStackedTensorDict)  # ragged: not padded to one width
        tokens = batch.get("tokens", as_list=True)
        masks = batch.get("attention_mask", as_list=True)
        assert len(tokens) == 8
        assert [t.shape for t in tokens] == [m.shape for m in masks]
        assert all(m.all() for m in masks)  # no padding anywhere
        for text, toks in zip(batch["text"], tokens, strict=True):
            assert tok.decode(toks.tolist(), skip_special_tokens=False).endswith(text[-3:])
    traj = torch.cat([b["collector", "traj_ids"] for b in batches])
    assert traj.unique().numel() == 16
