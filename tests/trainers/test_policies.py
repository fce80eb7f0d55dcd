"""The collection fast path samples exactly what the actor it stands in for samples."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from tensordict.nn import NormalParamExtractor, TensorDictModule
from torch import nn
from torchrl.envs.utils import ExplorationType, set_exploration_type

from rlpace.trainers._envs import make_actor, make_env
from rlpace.trainers._policies import (
    DirectChain,
    OneHotCategoricalPolicy,
    TanhNormalPolicy,
    collection_policy,
)


@pytest.fixture
def cartpole():
    env = make_env("CartPole-v1", seed=3, num_envs=4)
    yield env
    env.close()


def test_same_seed_gives_the_actors_actions_logits_and_log_probs(cartpole):
    actor = make_actor(cartpole, (16, 16), nn.Tanh)
    lean = collection_policy(actor)
    assert isinstance(lean, OneHotCategoricalPolicy)
    td = cartpole.reset()
    with torch.no_grad():
        for seed in range(5):
            torch.manual_seed(seed)
            want = actor(td.clone())
            torch.manual_seed(seed)
            got = lean(td.clone())
            assert torch.equal(got["action"], want["action"])
            assert got["action"].dtype == want["action"].dtype
            assert torch.equal(got["logits"], want["logits"])
            torch.testing.assert_close(got["action_log_prob"], want["action_log_prob"])


def test_deterministic_exploration_takes_the_actors_mode(cartpole):
    actor = make_actor(cartpole, (16,), nn.Tanh)
    lean = collection_policy(actor)
    td = cartpole.reset()
    with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
        assert torch.equal(lean(td.clone())["action"], actor(td.clone())["action"])


def test_unbatched_env_gives_one_action_and_a_scalar_log_prob():
    env = make_env("CartPole-v1", seed=0)
    try:
        lean = collection_policy(make_actor(env, (8,), nn.Tanh))
        out = lean(env.reset())
    finally:
        env.close()
    assert out["action"].shape == (2,) and int(out["action"].sum()) == 1
    assert out["action_log_prob"].shape == ()


def test_shares_the_actors_parameters(cartpole):
    actor = make_actor(cartpole, (8,), nn.Tanh)
    lean = collection_policy(actor)
    with torch.no_grad():
        for p in actor.parameters():
            p.add_(1.0)
    td = cartpole.reset()
    with torch.no_grad():
        assert torch.equal(lean(td.clone())["logits"], actor(td.clone())["logits"])


@pytest.mark.parametrize("num_envs", [1, 3])
def test_tanh_normal_same_seed_gives_the_actors_actions_and_log_probs(num_envs):
    env = make_env("Pendulum-v1", seed=2, num_envs=num_envs)
    try:
        actor = make_actor(env, (32, 32), nn.ReLU)
        td = env.reset()
    finally:
        env.close()
    lean = collection_policy(actor)
    assert isinstance(lean, TanhNormalPolicy)
    with torch.no_grad():
        for seed, stretch in [(0, 1.0), (1, 1.0), (2, 1.0), (3, 40.0), (4, 40.0)]:
            inp = td.clone()
            inp["observation"] = inp["observation"] * stretch  # 40x saturates the tanh
            torch.manual_seed(seed)
            want = actor(inp.clone())
            torch.manual_seed(seed)
            got = lean(inp.clone())
            assert torch.equal(got["action"], want["action"])
            assert got["action"].abs().max() < 2.0  # inside Pendulum's [-2, 2]
            for key in ("loc", "scale"):
                assert torch.equal(got[key], want[key])
            assert got["action_log_prob"].shape == want["action_log_prob"].shape
            torch.testing.assert_close(
                got["action_log_prob"], want["action_log_prob"], rtol=1e-3, atol=1e-5
            )


def test_tanh_normal_outside_random_exploration_is_the_actor():
    env = make_env("Pendulum-v1", seed=0)
    try:
        actor = make_actor(env, (8,), nn.ReLU)
        td = env.reset()
    finally:
        env.close()
    lean = collection_policy(actor)
    with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
        assert torch.equal(lean(td.clone())["action"], actor(td.clone())["action"])


def test_other_actors_are_returned_as_they_are():
    plain = TensorDictModule(nn.Linear(4, 2), ["observation"], ["logits"])
    assert collection_policy(plain) is plain
    env = make_env("Pendulum-v1", seed=0)
    try:
        from torchrl.modules import ProbabilisticActor, TanhNormal

        upscaled = ProbabilisticActor(
            TensorDictModule(
                nn.Sequential(nn.Linear(3, 2), NormalParamExtractor()),
                ["observation"],
                ["loc", "scale"],
            ),
            in_keys=["loc", "scale"],
            spec=env.action_spec,
            distribution_class=TanhNormal,
            distribution_kwargs={"low": -2.0, "high": 2.0, "tanh_loc": True},
            return_log_prob=True,
        )
    finally:
        env.close()
    assert collection_policy(upscaled) is upscaled  # tanh_loc changes the law: no fast path


def test_trainers_collect_with_the_fast_path_and_evaluate_with_the_actor(tiny_ppo, tiny_sac):
    from rlpace.trainers import PPOTrainer, SACTrainer

    ppo = PPOTrainer(tiny_ppo(), run_dir="unused")
    assert isinstance(ppo.collection_policy, OneHotCategoricalPolicy)
    assert ppo.policy is ppo.actor
    sac = SACTrainer(tiny_sac(), run_dir="unused")
    assert isinstance(sac.collection_policy, TanhNormalPolicy)
    assert sac.policy is sac.actor


@pytest.mark.parametrize("env_name", ["CartPole-v1", "Pendulum-v1"])
def test_ppo_first_step_sees_the_collected_log_probs_as_its_own(tiny_ppo, tmp_path, env_name):
    # before any update the new policy is the collecting one: a ratio of 1 everywhere,
    # so no clipping and a zero KL estimate, iff the fast path scored its actions right
    from rlpace.trainers import EnvConfig, PPOTrainer

    cfg = dataclasses.replace(
        tiny_ppo(trainer={"total_frames": 256}), env=EnvConfig(env_name, num_envs=2)
    )
    trainer = PPOTrainer(cfg, run_dir=tmp_path / "r")
    steps = []
    trainer.register_hook("post_optim", lambda t, scalars: steps.append(scalars))
    trainer.train()
    first = steps[0]
    assert first["clip_fraction"] == 0.0
    assert abs(first["approx_kl"]) < 1e-5, first


def test_direct_chain_runs_a_torchrl_mlp_and_follows_its_live_parameters():
    import pickle

    from torchrl.modules import MLP

    net = nn.Sequential(
        MLP(in_features=3, out_features=4, num_cells=[16, 16], activation_class=nn.Tanh),
        NormalParamExtractor(),
    )
    chain = DirectChain.plan(net)
    assert [kind for kind, _ in chain.steps][:2] == ["linear", torch.tanh]
    x = torch.randn(5, 3)
    with torch.no_grad():
        for got, want in zip(chain(x), net(x), strict=True):
            assert torch.equal(got, want)
        net[0][0].weight.add_(1.0)  # an in-place weight update, as the collectors push them
        assert torch.equal(chain(x)[0], net(x)[0])
    clone = pickle.loads(pickle.dumps((net, chain)))  # as sent to a worker process
    assert clone[1].steps[0] == ("linear", clone[0][0][0])  # the copy's own layer, still direct
    with torch.no_grad():
        assert torch.equal(clone[1](x)[0], net(x)[0])


def test_direct_chain_refuses_what_it_cannot_run_as_is():
    class Custom(nn.Module):
        def forward(self, x):
            return x

    assert DirectChain.plan(Custom()) is None  # not a chain at all
    hooked = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    hooked[0].register_forward_pre_hook(lambda *a: None)
    assert DirectChain.plan(hooked) is None  # a hook would be skipped
    mixed = nn.Sequential(nn.Linear(2, 2), Custom())
    assert DirectChain.plan(mixed).steps[1] == (None, mixed[1])  # called as a module


def test_a_network_without_a_chain_is_registered_once():
    net = nn.Sequential(nn.Linear(3, 2))
    net[0].register_forward_hook(lambda *a: None)  # no direct chain: the module is called
    policy = OneHotCategoricalPolicy(net)
    assert policy._chain is None
    assert list(policy.state_dict()) == ["net.0.weight", "net.0.bias"]
    from tensordict import TensorDict

    out = policy(TensorDict({"observation": torch.zeros(4, 3)}, [4]))
    assert out["action"].shape == (4, 2)


def test_a_global_module_hook_turns_the_direct_chain_off():
    from torch.nn.modules.module import register_module_forward_hook

    handle = register_module_forward_hook(lambda *a: None)
    try:
        assert DirectChain.plan(nn.Sequential(nn.Linear(2, 2))) is None
    finally:
        handle.remove()
    assert DirectChain.plan(nn.Sequential(nn.Linear(2, 2))) is not None
