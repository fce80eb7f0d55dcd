"""Configs: built from Python or YAML presets; every bad value fails before work, naming the key."""

from __future__ import annotations

import dataclasses

import pytest

from rlpace.trainers import (
    ConfigError,
    EnvConfig,
    PPOConfig,
    SACConfig,
    TrainerConfig,
    config_from_dict,
    config_to_dict,
    load_config,
)


def test_presets_compose_with_overrides():
    cfg = load_config(["algo=ppo", "env=CartPole-v1", "trainer.total_frames=200000", "seed=1"])
    assert isinstance(cfg, PPOConfig)
    assert (cfg.env.name, cfg.trainer.total_frames, cfg.seed) == ("CartPole-v1", 200_000, 1)
    sac = load_config(["algo=sac", "env=Pendulum-v1", "batch_size=64", "hidden_sizes=[32,32]"])
    assert isinstance(sac, SACConfig)
    assert (sac.env.name, sac.batch_size, sac.hidden_sizes) == ("Pendulum-v1", 64, (32, 32))


def test_default_preset_is_ppo_and_matches_the_python_defaults():
    # the YAML preset and the dataclass defaults describe the same run (the preset adds a target)
    from_yaml = dataclasses.replace(load_config([]), trainer=TrainerConfig())
    from_python = dataclasses.replace(PPOConfig(), trainer=TrainerConfig())
    assert from_yaml == from_python


def test_configs_are_frozen():
    cfg = PPOConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.lr = 1.0  # type: ignore[misc]


def test_dict_round_trip():
    cfg = SACConfig(seed=3, hidden_sizes=(16, 8))
    assert config_from_dict(config_to_dict(cfg)) == cfg


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (["trainer.total_framez=10"], "trainer.total_framez"),
        (["lr=fast"], "lr"),
        (["hidden_sizes=[a]"], "hidden_sizes"),
        (["env.name=???"], "env.name"),
        (["lr=-0.1"], "lr"),
        (["mini_batch_size=4096"], "mini_batch_size"),
        (["trainer.frames_per_batch=2047"], "trainer.frames_per_batch"),
        (["algo=sac", "epochs=3"], "epochs"),
        (["algo=sac", "batch_size=1000", "buffer_size=10"], "batch_size"),
        (["gamma=1.5"], "gamma"),
        (["trainer.total_frames=0"], "trainer.total_frames"),
    ],
)
def test_bad_overrides_fail_naming_the_key(overrides, key):
    with pytest.raises(ConfigError) as info:
        load_config(overrides)
    assert info.value.key == key
    assert str(info.value).startswith(f"{key}: expected ")


def test_unknown_preset_is_a_config_error():
    with pytest.raises(ConfigError, match="Could not find 'env/NoSuchEnv-v0'"):
        load_config(["env=NoSuchEnv-v0"])


@pytest.mark.parametrize(
    ("build", "key"),
    [
        (lambda: PPOConfig(lr=-1e-3), "lr"),
        (lambda: PPOConfig(mini_batch_size=10_000), "mini_batch_size"),
        (lambda: PPOConfig(epochs=0), "epochs"),
        (lambda: SACConfig(tau=2.0), "tau"),
        (lambda: SACConfig(utd_ratio=0.0), "utd_ratio"),
        (lambda: TrainerConfig(total_frames=10, frames_per_batch=20), "trainer.frames_per_batch"),
        (lambda: EnvConfig(""), "env.name"),
        (lambda: EnvConfig("CartPole-v1", num_envs=0), "env.num_envs"),
        (lambda: PPOConfig(hidden_sizes=()), "hidden_sizes"),
    ],
)
def test_impossible_values_fail_when_built_from_python(build, key):
    with pytest.raises(ConfigError) as info:
        build()
    assert info.value.key == key


def test_from_dict_rejects_unknown_and_missing_algo():
    with pytest.raises(ConfigError, match="expected a key of TrainerConfig"):
        config_from_dict({"algo": "ppo", "trainer": {"epochz": 1}})
    with pytest.raises(ConfigError, match="algo: expected one of"):
        config_from_dict({"lr": 1.0})
    with pytest.raises(ConfigError, match="lr: expected a value of the declared type"):
        config_from_dict({"algo": "ppo", "lr": "fast"})


def test_schemas_are_registered_with_hydra():
    from hydra.core.config_store import ConfigStore

    from rlpace.trainers import register_configs

    register_configs()
    assert {"ppo.yaml", "sac.yaml"} <= set(ConfigStore.instance().repo["schema"])
