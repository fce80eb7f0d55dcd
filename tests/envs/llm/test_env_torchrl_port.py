"""torchrl's LLM-env tests, ported to rlpace's spelling, and the bugs they found.

Ported from torchrl's ``TestLLMEnv`` (``test_llm_from_dataloader``,
``test_llm_from_dataloader_repeats``): ``check_env_specs(break_when_any_done="both")``
for every layout and batch shape (unbatched, 1, 4), a rollout whose prompts grow by the
response, prompts from a DataLoader, and ``repeats``. Deliberate differences from
torchrl, documented in the guide's "Coming from torchrl": the next prompt is the chat
re-rendered through the template (so the text grows by the response *and* the new
assistant header), the unbatched env is ``batch_size=()`` (not ``0``), and a DataLoader
is passed as ``source`` (no ``from_dataloader``/``DataLoadingPrimer``).
"""

from __future__ import annotations

import pytest
import torch
from tensordict import NonTensorStack

from rlpace.envs.llm import ArithmeticDataset, ExactMatchReward, LLMEnv

LAYOUTS = {
    "text": {"from_text": True},
    "text-padded": {"from_text": True, "padded": True, "max_length": 64},
    "tokens-ragged": {"from_text": False},
    "tokens-padded": {"from_text": False, "padded": True, "max_length": 64},
}


def _policy(env: LLMEnv, tok):
    """Writes the response " ok" (no EOS, so episodes run to max_turns)."""
    ids = torch.tensor(tok.encode(" ok").ids)

    def act(td):
        n = td.batch_size[0] if td.batch_size else None
        if env.from_text:
            td["text_response"] = " ok" if n is None else NonTensorStack(*[" ok"] * n)
        elif n is None:
            td["tokens_response"] = ids
        else:
            td["tokens_response"] = ids.expand(n, -1).clone()
        return td

    return act


# ---------------------------------------------------------------- regressions
def test_from_text_false_action_spec_is_bounded_to_the_vocabulary(tok):
    env = LLMEnv(["What is 1 + 1?"], tokenizer=tok, from_text=False, batch_size=2)
    spec = env.full_action_spec["tokens_response"]
    assert spec.dtype == torch.long
    assert spec.space.n == tok.get_vocab_size(with_added_tokens=True)
    for _ in range(20):
        action = env.full_action_spec.rand()["tokens_response"]
        assert int(action.min()) >= 0 and int(action.max()) < tok.get_vocab_size()
    out = env.rand_step(env.reset())  # decoding these ids used to raise "outside the vocabulary"
    assert out["next", "reward"].shape == (2, 1)
    assert env.rollout(3).batch_size[0] == 2  # a rollout without a policy draws random actions
    env.check_env_specs()


def test_default_ragged_env_with_batch_above_one_passes_check_env_specs(tok):
    prompts = ["a b c", "hello there my good friend, how are you?"]  # two lengths
    env = LLMEnv(prompts, tokenizer=tok, batch_size=2, shuffle=False, max_turns=3)
    td = env.reset()
    assert [t.numel() for t in td.get("tokens", as_list=True)] != [td[0]["tokens"].numel()] * 2
    env.check_env_specs(break_when_any_done="both")  # raised "Failed to stack tensors"
    # the spec describes each element, so it holds the real (ragged) data
    assert env.observation_spec.contains(td.select(*env.observation_spec.keys()))


# ------------------------------------------------------ ported: specs, rollouts
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("batch_size", [(), 1, 4])
def test_check_env_specs_and_rollout_every_layout(tok, layout, batch_size):
    env = LLMEnv(
        ArithmeticDataset(size=8, seed=1),
        tokenizer=tok,
        batch_size=batch_size,
        max_turns=3,
        **LAYOUTS[layout],
    )
    assert env.batch_size == (torch.Size([]) if batch_size == () else torch.Size([batch_size]))
    env.check_env_specs(break_when_any_done="both")
    r = env.rollout(6, _policy(env, tok), break_when_any_done=False)
    if not env.batch_size:
        assert r.ndim == 1
        r = r.unsqueeze(0)
    assert r.shape[-1] == 6
    # within an episode the next prompt is the previous one, the response, a new turn
    for t in (0, 1):
        before, after = r[0, t]["text"], r[0, t + 1]["text"]
        assert isinstance(before, str) and after.startswith(before + " ok")
    # after max_turns responses the episode ends and a fresh prompt starts
    assert bool(r[0, 2]["next", "done"].all()) and not bool(r[0, 3]["done"].any())
    assert "ok" not in r[0, 3]["text"]


def test_unbatched_env_reads_and_writes_single_values(tok):
    env = LLMEnv(
        ArithmeticDataset(size=4, seed=0),
        tokenizer=tok,
        batch_size=(),
        reward_fn=ExactMatchReward(),
        shuffle=False,
    )
    td = env.reset()
    assert td.batch_size == () and td["text"] == "<|user|>What is 12 + 13?\n<|assistant|>"
    assert td["tokens"].ndim == 1 and td["prompt_truncated"].shape == (1,)
    td["text_response"] = "12 + 13 = 25 #### 25"
    out = env.step(td)
    assert out["next", "reward"].tolist() == [1.0] and out["next", "done"].tolist() == [True]
    assert [m.role for m in out["next", "history"].messages] == ["user", "assistant"]
    with pytest.raises(ValueError, match="batch_size must be one number or"):
        LLMEnv(["x"], batch_size=(2, 2))


# ------------------------------------------------------ ported: data loading
def test_prompts_from_a_dataloader_of_collated_samples(tok):
    from torch.utils.data import DataLoader

    dataset = ArithmeticDataset(size=6, seed=0)
    loader = DataLoader(dataset, batch_size=4, shuffle=False)  # yields dicts of lists
    env = LLMEnv(loader, tokenizer=tok, batch_size=2, reward_fn=ExactMatchReward())
    seen = []
    for _ in range(4):  # 8 prompts from a 6-sample loader: the loader restarts
        td = env.reset()
        seen += [h.messages[-1].content for h in td["history"]]
    assert seen == [dataset[i]["prompt"] for i in (0, 1, 2, 3, 4, 5, 0, 1)]
    td = env.reset()
    td["text_response"] = [f"#### {dataset[2]['answer']}", "#### -1"]  # the sample travels
    assert env.step(td)["next", "reward"].squeeze(-1).tolist() == [1.0, 0.0]


def test_prompts_from_a_dataloader_of_strings_and_from_a_generator(tok):
    from torch.utils.data import DataLoader

    loader = DataLoader(["p0", "p1", "p2"], batch_size=2)  # yields lists of strings
    env = LLMEnv(loader, batch_size=1, max_length=100)
    assert [env.reset()["history"][0].messages[-1].content for _ in range(4)] == [
        "p0",
        "p1",
        "p2",
        "p0",
    ]
    once = LLMEnv((p for p in ["g0", "g1"]), batch_size=2)
    once.reset()
    with pytest.raises(ValueError, match="cannot be restarted"):
        once.reset()
    with pytest.raises(ValueError, match="yielded no prompts"):
        LLMEnv(iter([]), batch_size=1).reset()
    with pytest.raises(TypeError, match="must be a str or a mapping"):
        LLMEnv([[1, 2]], batch_size=1).reset()


# ------------------------------------------------------------ ported: repeats
@pytest.mark.parametrize("batch_size", [3, 6])
def test_repeats_give_each_prompt_to_a_group_of_consecutive_elements(tok, batch_size):
    from torch.utils.data import DataLoader

    repeats, max_turns = 3, 2
    loader = DataLoader([f"question {i}" for i in range(10)], batch_size=4)
    env = LLMEnv(loader, tokenizer=tok, batch_size=batch_size, repeats=repeats, max_turns=max_turns)
    r = env.rollout(6, _policy(env, tok), break_when_any_done=False)
    column_major = [r[i, t]["text"] for t in range(0, 6, max_turns) for i in range(batch_size)]
    groups = [column_major[k : k + repeats] for k in range(0, len(column_major), repeats)]
    assert all(len(set(g)) == 1 for g in groups)  # a group shares its prompt
    assert len({g[0] for g in groups}) == len(groups)  # and groups differ
    for s in set(column_major):  # each prompt was asked exactly `repeats` times
        assert column_major.count(s) == repeats


def test_torchrl_transforms_run_on_every_layout_and_dense_ones_pass_the_checker(tok):
    """A ragged batched env passes ``check_env_specs`` on its own (above); wrapped in a
    ``TransformedEnv``, torchrl 0.14.1 builds a dense fake tensordict that ragged data
    cannot match, a limit the guide's "Coming from torchrl" states."""
    from torchrl.envs import StepCounter, TransformedEnv

    for kwargs in ({}, {"padded": True, "max_length": 64}, {"batch_size": ()}):
        kwargs.setdefault("batch_size", 3)
        base = LLMEnv(ArithmeticDataset(size=8), tokenizer=tok, max_turns=5, **kwargs)
        env = TransformedEnv(base, StepCounter(max_steps=2))
        r = env.rollout(4, break_when_any_done=False)
        steps = r["next", "step_count"].reshape(-1, 4)
        assert steps.tolist() == [[1, 2, 1, 2]] * steps.shape[0]  # StepCounter truncates
        if kwargs.get("padded") or kwargs["batch_size"] == ():
            env.check_env_specs(break_when_any_done="both")
