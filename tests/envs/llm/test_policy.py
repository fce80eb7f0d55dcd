import pytest
import torch

from rlpace.envs.llm import ArithmeticDataset, ExactMatchReward, TextCodec


def make(tok, model, padded=False, batch_size=4, **policy_kwargs):
    from rlpace.envs.llm import LLMEnv, TransformersPolicy

    env = LLMEnv(
        ArithmeticDataset(size=32, seed=0),
        tokenizer=tok,
        batch_size=batch_size,
        padded=padded,
        reward_fn=ExactMatchReward(),
    )
    policy_kwargs.setdefault("generate_kwargs", {"max_new_tokens": 6})
    return env, TransformersPolicy(model, tok, **policy_kwargs)


@pytest.mark.parametrize("padded", [False, True])
def test_rollout_through_env_rollout(tok, tiny_model, padded):
    torch.manual_seed(0)
    env, policy = make(tok, tiny_model, padded=padded)
    ro = env.rollout(2, policy, break_when_any_done=False)
    assert ro.batch_size == (4, 2)
    assert ro["next", "done"].all()  # single-turn episodes
    assert ro["next", "reward"].shape == (4, 2, 1)
    step = ro[:, 0]
    codec = TextCodec(tok)
    if padded:
        tokens, mask, lp = step["tokens_response"], step["response_mask"], step["log_probs"]
        rows = [t[m] for t, m in zip(tokens, mask)]
        assert (lp[~mask] == 0).all() and (lp[mask] < 0).all()
        assert (tokens[~mask] == tok.token_to_id("<pad>")).all()
    else:
        rows = step.get("tokens_response", as_list=True)
        lps = step.get("log_probs", as_list=True)
        assert [r.shape for r in rows] == [x.shape for x in lps]
    eos = tok.token_to_id("<eos>")
    for row, text in zip(rows, step["text_response"]):
        assert 1 <= row.numel() <= 6
        assert (row[:-1] != eos).all()  # EOS, if any, only at the end
        body = row[:-1] if row[-1] == eos else row
        assert codec.decode_batch([body])[0] == text


def test_padded_log_probs_are_exactly_zero_on_padding(tok, tiny_model):
    torch.manual_seed(1)
    # make EOS likely so responses end at different lengths
    with torch.no_grad():
        tiny_model.lm_head.weight[tok.token_to_id("<eos>")] *= 0
        tiny_model.transformer.wte.weight[tok.token_to_id("<eos>")] += 0.0
    env, policy = make(tok, tiny_model, padded=True, batch_size=8, allowed_token_ids=range(20, 24))
    td = policy(env.reset())
    mask, lp = td["response_mask"], td["log_probs"]
    assert mask.sum(1).unique().numel() > 1, "responses of different lengths expected"
    assert torch.equal(lp[~mask], torch.zeros_like(lp[~mask]))
    assert lp.dtype == torch.float32


@pytest.mark.parametrize("padded", [False, True])
def test_log_prob_recomputation_matches_and_has_grad(tok, tiny_model, padded):
    torch.manual_seed(2)
    env, policy = make(tok, tiny_model, padded=padded)
    td = policy(env.reset())
    lp, mask = policy.log_prob(td)
    assert lp.requires_grad
    if padded:
        stored = td["log_probs"]
    else:
        stored = torch.nn.utils.rnn.pad_sequence(
            td.get("log_probs", as_list=True), batch_first=True
        )
    torch.testing.assert_close(lp.detach(), stored, atol=1e-4, rtol=1e-4)
    assert (lp[~mask] == 0).all()
    (-(lp.sum())).backward()
    assert tiny_model.lm_head.weight.grad is not None


def test_allowed_token_ids_restrict_generation(tok, tiny_model):
    torch.manual_seed(3)
    digits = [tok.token_to_id(str(d)) for d in range(10)]
    env, policy = make(tok, tiny_model, allowed_token_ids=digits)
    td = policy(env.reset())
    allowed = set(digits) | {tok.token_to_id("<eos>")}
    for row in td.get("tokens_response", as_list=True):
        assert set(row.tolist()) <= allowed
    assert all(t.isdigit() or t == "" for t in td["text_response"])
    # log-probs are over the allowed set, so they are far above log(1/512)
    lps = torch.cat(td.get("log_probs", as_list=True))
    assert (lps > torch.log(torch.tensor(1 / 20))).all()


def test_policy_refuses_names_and_bad_tokenizers(tok, bare_tok, tiny_model):
    from rlpace.envs.llm import TransformersPolicy

    with pytest.raises(TypeError, match="never downloads"):
        TransformersPolicy("gpt2", tok)
    with pytest.raises(TypeError, match="never downloads"):
        TransformersPolicy(tiny_model, "gpt2")
    with pytest.raises(TypeError, match="generate"):
        TransformersPolicy(torch.nn.Linear(2, 2), tok)
    with pytest.raises(ValueError, match="pad and EOS"):
        TransformersPolicy(tiny_model, bare_tok)
    with pytest.raises(ValueError, match="allowed_token_ids is empty"):
        TransformersPolicy(tiny_model, tok, allowed_token_ids=[])


def test_policy_refuses_a_model_smaller_than_the_vocabulary(tok):
    from transformers import GPT2Config, GPT2LMHeadModel

    from rlpace.envs.llm import TransformersPolicy

    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=100))
    with pytest.raises(ValueError, match="vocab_size=512"):
        TransformersPolicy(model, tok)


def test_policy_needs_prompt_tokens(tok, tiny_model):
    from rlpace.envs.llm import LLMEnv, TransformersPolicy

    td = LLMEnv(["hi"], batch_size=1).reset()  # text-only env: no tokens
    with pytest.raises(KeyError, match="build the LLMEnv with a tokenizer"):
        TransformersPolicy(tiny_model, tok)(td)
