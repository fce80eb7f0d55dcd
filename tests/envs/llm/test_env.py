import pytest
import torch
from tensordict import NonTensorStack

from rlpace.envs.llm import (
    ArithmeticDataset,
    ExactMatchReward,
    History,
    TextCodec,
    as_transformers_tokenizer,
    render_chat,
)


def make_env(tok=None, **kwargs):
    from rlpace.envs.llm import LLMEnv

    kwargs.setdefault("batch_size", 4)
    kwargs.setdefault("shuffle", False)
    source = kwargs.pop("source", ArithmeticDataset(size=16, seed=1))
    return LLMEnv(source, tokenizer=tok, **kwargs)


def ragged(td, key):
    return [t.tolist() for t in td.get(key, as_list=True)]


def test_reset_renders_prompts_and_tokens_round_trip(tok):
    env = make_env(tok, system_prompt="Answer after ####.")
    td = env.reset()
    ds = ArithmeticDataset(size=16, seed=1)
    codec = TextCodec(tok)
    for i in range(4):
        h = td["history"][i]
        assert isinstance(h, History)
        assert [m.role for m in h.messages] == ["system", "user"]
        assert h.messages[1].content == ds[i]["prompt"]
        assert td["text"][i] == render_chat(h)
    ids = ragged(td, "tokens")
    assert codec.decode_batch(ids) == list(td["text"])
    assert [len(x) for x in ids] == [int(m.sum()) for m in td.get("attention_mask", as_list=True)]
    assert not td["done"].any() and not td["prompt_truncated"].any()


def test_text_only_env_runs_without_a_tokenizer():
    env = make_env(None, reward_fn=ExactMatchReward())
    td = env.reset()
    assert "tokens" not in td
    td["text_response"] = ["#### 0"] * 4
    out = env.step(td)
    assert out["next", "done"].all()
    assert out["next", "history"][0].messages[-1].content == "#### 0"


def test_ragged_and_padded_layouts_hold_the_same_tokens(tok):
    r_env, p_env = make_env(tok), make_env(tok, padded=True)
    r, p = r_env.reset(), p_env.reset()
    assert p["tokens"].shape[0] == 4 and p["attention_mask"].dtype == torch.bool
    assert [row[m].tolist() for row, m in zip(p["tokens"], p["attention_mask"])] == ragged(
        r, "tokens"
    )
    # left padding with the pad id
    assert (p["tokens"][~p["attention_mask"]] == 0).all()
    assert p["attention_mask"][:, -1].all()
    responses = ["#### 3<eos>", "#### 4", "x", "#### 22"]
    r["text_response"] = responses
    p["text_response"] = responses
    ro, po = r_env.step(r)["next"], p_env.step(p)["next"]
    assert list(ro["text"]) == list(po["text"])
    assert torch.equal(ro["done"], po["done"]) and torch.equal(ro["reward"], po["reward"])
    assert [row[m].tolist() for row, m in zip(po["tokens"], po["attention_mask"])] == ragged(
        ro, "tokens"
    )


def test_text_and_token_actions_are_equivalent(tok):
    codec = TextCodec(tok)
    responses = ["#### 3", "#### 4<eos>", "hello", "#### 22"]
    ids = [torch.tensor(x) for x in codec.encode_batch(responses)]
    a, b = make_env(tok, max_turns=2), make_env(tok, max_turns=2, from_text=False)
    ta, tb = a.reset(), b.reset()
    ta["text_response"] = responses
    for sub, row in zip(tb.tensordicts, ids):
        sub["tokens_response"] = row
    oa, ob = a.step(ta)["next"], b.step(tb)["next"]
    assert list(oa["text"]) == list(ob["text"])
    assert ragged(oa, "tokens") == ragged(ob, "tokens")
    assert oa["done"].flatten().tolist() == [False, True, False, False]  # only element 1 hit EOS


def test_padded_token_actions_with_and_without_mask(tok):
    env = make_env(tok, padded=True, from_text=False, batch_size=2, max_turns=3)
    td = env.reset()
    td["tokens_response"] = torch.tensor([[40, 41, 0, 0], [42, 1, 0, 0]])
    out = env.step(td)["next"]
    assert out["done"].flatten().tolist() == [False, True]
    assert out["history"][0].messages[-1].content == TextCodec(tok).decode_batch([[40, 41]])[0]
    td = env.reset()
    td["tokens_response"] = torch.tensor([[40, 0, 41], [42, 43, 44]])
    td["response_mask"] = torch.tensor([[True, True, True], [True, False, False]])
    out = env.step(td)["next"]
    assert out["history"][0].messages[-1].content == TextCodec(tok).decode_batch([[40, 0, 41]])[0]
    assert out["history"][1].messages[-1].content == TextCodec(tok).decode_batch([[42]])[0]


def test_done_on_eos_on_max_turns_and_on_max_length(tok):
    env = make_env(tok, max_turns=3, max_length=40, batch_size=3)
    td = env.reset()
    td["text_response"] = ["#### 1<eos> ignored", "a", "b"]
    td = env.step(td)
    nxt = td["next"]
    assert nxt["terminated"].flatten().tolist() == [True, False, False]
    # the EOS ends the response: what follows it is dropped from the history
    assert nxt["history"][0].messages[-1].content == "#### 1"
    from torchrl.envs.utils import step_mdp

    td = step_mdp(td)
    td["text_response"] = ["c", "d", "a very long reply " * 3]
    nxt = env.step(td)["next"]
    assert nxt["truncated"].flatten().tolist() == [False, False, True]
    assert nxt["prompt_truncated"].flatten().tolist() == [False, False, True]
    assert nxt["done"].flatten().tolist() == [False, False, True]
    assert max(len(x) for x in ragged(nxt, "tokens")) <= 40
    td = step_mdp(env.step(td))
    td["text_response"] = ["e", "f", "g"]
    nxt = env.step(td)["next"]
    assert nxt["terminated"][:2].all()  # third turn reached max_turns=3


def test_overlong_prompts_truncate_with_a_flag_or_raise(tok):
    long_prompt = "word " * 50
    env = make_env(tok, source=["short", long_prompt], batch_size=2, max_length=16)
    td = env.reset()
    assert td["prompt_truncated"].flatten().tolist() == [False, True]
    ids = ragged(td, "tokens")
    assert len(ids[1]) == 16 and ids[1][-1] == tok.token_to_id("<|assistant|>")
    assert td["text"][1] == TextCodec(tok).decode_batch([ids[1]])[0]
    env = make_env(
        tok, source=["short", long_prompt], batch_size=2, max_length=16, on_overflow="error"
    )
    with pytest.raises(ValueError, match="over max_length=16"):
        env.reset()


def test_partial_reset_keeps_the_other_elements(tok):
    env = make_env(tok, max_turns=2, batch_size=3)
    from torchrl.envs.utils import step_mdp

    td = env.reset()
    td["text_response"] = ["#### 1<eos>", "x", "y"]
    td = step_mdp(env.step(td))
    before = list(td["text"])
    td["_reset"] = td["done"].clone()
    td = env.reset(td)
    after = list(td["text"])
    assert after[1:] == before[1:]
    assert after[0] != before[0] and after[0].endswith("<|assistant|>")
    assert not td["done"].any()


def test_seed_controls_the_prompt_order(tok):
    from rlpace.envs.llm import LLMEnv

    def first_prompts(seed):
        env = LLMEnv(ArithmeticDataset(size=64), tokenizer=tok, batch_size=4)
        env.set_seed(seed)
        return list(env.reset()["text"])

    assert first_prompts(1) == first_prompts(1)
    assert first_prompts(1) != first_prompts(2)


def test_transformers_tokenizer_chat_template_is_used():
    hf = as_transformers_tokenizer()
    hf.chat_template = "{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }} {% endfor %}"
    env = make_env(hf, batch_size=1, source=["Hi there"])
    td = env.reset()
    assert td["text"][0] == "[user] Hi there "
    assert ragged(td, "tokens")[0] == hf("[user] Hi there ", add_special_tokens=False)["input_ids"]


def test_rewards_are_computed_per_element(tok):
    env = make_env(tok, reward_fn=ExactMatchReward())
    td = env.reset()
    answers = [s["answer"] for s in ArithmeticDataset(size=16, seed=1)[:4]]
    td["text_response"] = [
        f"#### {answers[0]}",
        "#### nope",
        f"{answers[2]}",
        f"x #### {answers[3]}",
    ]
    out = env.step(td)["next"]
    assert out["reward"].flatten().tolist() == [1.0, 0.0, 0.0, 1.0]
    assert out["reward"].dtype == torch.float32


def test_rollout_with_a_scripted_policy(tok):
    env = make_env(tok, reward_fn=ExactMatchReward(), max_turns=2)

    def policy(td):
        td["text_response"] = NonTensorStack(*["#### 0"] * 4)
        return td

    ro = env.rollout(3, policy, break_when_any_done=False)
    assert ro.batch_size == (4, 3)
    assert ro["next", "done"][:, 1].all()  # two turns per episode
    assert not ro["done"][:, 2].any()  # ...then a fresh episode after the automatic reset


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"source": "a prompt"}, TypeError, "prompt strings or samples"),
        ({"source": 3}, TypeError, "an iterable"),
        ({"source": []}, ValueError, "empty source"),
        ({"batch_size": 0}, ValueError, "batch_size"),
        ({"repeats": 0}, ValueError, "repeats must be an int >= 1"),
        ({"batch_size": 3, "repeats": 2}, ValueError, "multiple of repeats"),
        ({"batch_size": (2, 2)}, ValueError, "one number"),
        ({"max_length": 0}, ValueError, "max_length"),
        ({"on_overflow": "ignore"}, ValueError, "on_overflow"),
        ({"reward_fn": "exact"}, TypeError, "callable"),
        ({"tok": None, "from_text": False}, ValueError, "text-only"),
        ({"tok": None, "padded": True}, ValueError, "text-only"),
    ],
)
def test_bad_constructor_arguments(tok, kwargs, error, match):
    kwargs.setdefault("tok", tok)
    with pytest.raises(error, match=match):
        make_env(**kwargs)


def test_padded_needs_a_pad_token(bare_tok):
    with pytest.raises(ValueError, match="pad token"):
        make_env(bare_tok, padded=True)
    env = make_env(bare_tok, source=["a b"], batch_size=1)  # ragged is fine without pad
    td = env.reset()
    td["text_response"] = ["b a"]
    assert env.step(td)["next", "done"].all()  # max_turns ends it; no EOS to find


@pytest.mark.parametrize("source", [[""], ["   "], [{"prompt": ""}]])
def test_empty_prompts_are_refused(tok, source):
    env = make_env(tok, source=source, batch_size=1)
    with pytest.raises(ValueError, match="empty prompt"):
        env.reset()


def test_malformed_samples_are_refused(tok):
    env = make_env(tok, source=[{"question": "x"}], batch_size=1)
    with pytest.raises(TypeError, match="'prompt' string"):
        env.reset()


@pytest.mark.parametrize(
    ("action", "error", "match"),
    [
        ({}, KeyError, "expects the action under 'text_response'"),
        ({"text_response": ("a", "b")}, ValueError, "batch size is 4"),
        ({"text_response": NonTensorStack(1, 2, 3, 4)}, TypeError, "must be 4 strings"),
        ({"tokens_response": torch.ones(4, 3)}, TypeError, "integer ids"),
        ({"tokens_response": (torch.ones(3, dtype=torch.long),)}, ValueError, "batch size is 4"),
        ({"tokens_response": torch.tensor([0, 1, 2, 3])}, TypeError, "tokens_response must be"),
        ({"tokens_response": torch.full((4, 2), 600)}, ValueError, "outside the tokenizer"),
    ],
)
def test_bad_actions_are_explained(tok, action, error, match):
    env = make_env(tok, padded=True)
    td = env.reset()
    for key, value in action.items():
        if isinstance(value, tuple):  # a single non-tensor value, as a foreign producer may write
            td.set_non_tensor(key, list(value))
        else:
            td.set(key, value)
    with pytest.raises(error, match=match):
        env.step(td)


def test_tokens_action_on_a_text_only_env_is_explained():
    env = make_env(None, batch_size=1)
    td = env.reset()
    td["tokens_response"] = torch.tensor([[1, 2]])
    with pytest.raises(ValueError, match="no tokenizer"):
        env.step(td)


@pytest.mark.parametrize(
    ("value", "error"), [("1.0", TypeError), (None, TypeError), (float("nan"), ValueError)]
)
def test_reward_fn_must_return_a_number(tok, value, error):
    env = make_env(tok, reward_fn=lambda p, r, s: value, batch_size=1)
    td = env.reset()
    td["text_response"] = ["x"]
    with pytest.raises(error, match="reward_fn"):
        env.step(td)


@pytest.mark.parametrize("layout", ["padded", "text-only"])
def test_torchrl_check_env_specs_passes(tok, layout):
    from torchrl.envs.utils import check_env_specs

    env = make_env(tok, padded=True, max_length=32) if layout == "padded" else make_env(None)
    check_env_specs(env)  # random actions: one text for the whole batch
    assert env.action_keys == ["text_response"]
    assert set(env.done_keys) == {"done", "terminated", "truncated"}


def test_one_text_action_stands_for_the_whole_batch(tok):
    env = make_env(tok, reward_fn=ExactMatchReward())
    td = env.reset()
    td.set_non_tensor("text_response", "#### 99")
    out = env.step(td)["next"]
    assert [h.messages[-1].content for h in out["history"]] == ["#### 99"] * 4
