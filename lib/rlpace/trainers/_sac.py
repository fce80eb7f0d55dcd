"""``SACTrainer``: off-policy SAC over torchrl's SACLoss and SoftUpdate, with a replay buffer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDictBase
from torch import nn
from torchrl.modules import ValueOperator
from torchrl.objectives import SACLoss, SoftUpdate

from rlpace.data import RandomSampler
from rlpace.trainers._config import SACConfig, config_from_dict
from rlpace.trainers._envs import action_kind, make_actor, make_env, mlp
from rlpace.trainers._policies import collection_policy
from rlpace.trainers._timing import timeit
from rlpace.trainers._trainer import Trainer, seed_everything
from rlpace.trainers._wiring import make_replay_buffer

__all__ = ["SACTrainer"]

_LOSS_TERMS = ("loss_actor", "loss_qvalue", "loss_alpha")
# the per-step scalars (post_optim payload, logged as losses/<name>) and their loss keys
_SCALARS = ("actor", "qvalue", "alpha", "temperature", "entropy")
_SCALAR_KEYS = (*_LOSS_TERMS, "alpha", "entropy")


class SACTrainer(Trainer):
    """SAC: a replay buffer, ``utd_ratio`` gradient steps per collected frame after
    ``init_random_frames``, twin Q networks with soft target updates, learned temperature.

    With ``prioritized=True`` the buffer samples with ``rlpace.data.PrioritizedSampler``:
    after each gradient step the sampled transitions' priorities become their TD errors
    (``|Q - target|``, the larger of the two Q networks'), and the sample's importance
    weights (``weight``) weight the Q and temperature losses.

    Args:
        config: a :class:`SACConfig` (its env must have continuous actions).
        run_dir: the run's directory (see :class:`Trainer`).

    Raises:
        ValueError: the env's actions are not continuous, before any training.

    Example:
        >>> import tempfile
        >>> from rlpace.trainers import EnvConfig, SACConfig, TrainerConfig
        >>> cfg = SACConfig(trainer=TrainerConfig(total_frames=64, frames_per_batch=32,
        ...                 plot=False, progress=False), batch_size=16, init_random_frames=32,
        ...                 hidden_sizes=(32, 32))
        >>> with tempfile.TemporaryDirectory() as d:
        ...     scalars = SACTrainer.from_config(cfg, run_dir=d).train()
        >>> sorted(k for k in scalars if k.startswith("losses/"))
        ['losses/actor', 'losses/alpha', 'losses/entropy', 'losses/qvalue', 'losses/temperature']
        >>> SACTrainer(SACConfig(env=EnvConfig("CartPole-v1")), run_dir="unused")
        Traceback (most recent call last):
        ...
        ValueError: SAC on CartPole-v1: expected an env with continuous (Box) actions, got discrete ones; use PPO (algo=ppo) or a continuous env such as Pendulum-v1
    """

    def __init__(self, config: SACConfig, *, run_dir: str | Path | None = None) -> None:
        if not isinstance(config, SACConfig):
            raise TypeError(
                f"SACTrainer expects a SACConfig, got {type(config).__name__}; "
                "build one with SACConfig(...) or load_config(['algo=sac'])"
            )
        seed_everything(config.seed)
        probe = make_env(config.env.name, config.seed)
        try:
            kind = action_kind(probe)
            if kind != "continuous":
                raise ValueError(
                    f"SAC on {config.env.name}: expected an env with continuous (Box) actions, "
                    f"got {kind} ones; use PPO (algo=ppo) or a continuous env such as Pendulum-v1"
                )
            actor = make_actor(probe, config.hidden_sizes, nn.ReLU)
            n_obs = probe.observation_spec["observation"].shape[-1]
            n_act = probe.action_spec.shape[-1]
            action_spec = probe.action_spec
        finally:
            probe.close()
        qvalue = ValueOperator(
            mlp(n_obs + n_act, 1, config.hidden_sizes, nn.ReLU),
            in_keys=["observation", "action"],
        )
        self.loss_module = SACLoss(
            actor,
            qvalue,
            num_qvalue_nets=2,
            loss_function="l2",
            alpha_init=config.alpha_init,
            action_spec=action_spec,
            delay_actor=False,
            delay_qvalue=True,
        )
        self.loss_module.make_value_estimator(gamma=config.gamma)
        # prioritized samples carry their importance weights under "weight"
        self.loss_module.set_keys(priority_weight="weight")
        self.target_updater = SoftUpdate(self.loss_module, tau=config.tau)
        # fused: one kernel for every parameter instead of a Python loop over them
        self.optimizer = torch.optim.Adam(self.loss_module.parameters(), lr=config.lr, fused=True)
        buffer = make_replay_buffer(
            config.buffer_size,
            config.batch_size,
            prioritized=config.prioritized,
            alpha=config.priority_alpha,
            beta=config.priority_beta,
        )
        super().__init__(
            config,
            policy=actor,
            collection_policy=collection_policy(actor),
            modules={"loss": self.loss_module},
            optimizers={"adam": self.optimizer},
            buffer=buffer,
            run_dir=run_dir,
        )
        self.actor, self.qvalue = actor, qvalue

    @classmethod
    def from_config(
        cls, config: SACConfig | dict[str, Any], *, run_dir: str | Path | None = None
    ) -> SACTrainer:
        """Build from a :class:`SACConfig` or a plain dict (checked like the YAML presets).

        Example:
            >>> SACTrainer.from_config({"batch_size": 512, "buffer_size": 100})
            Traceback (most recent call last):
            ...
            rlpace.trainers._config.ConfigError: batch_size: expected at most buffer_size (100), got 512; lower batch_size or raise buffer_size
        """
        if isinstance(config, dict):
            config = config_from_dict({"algo": "sac", **config})
        return cls(config, run_dir=run_dir)

    def optimize(self, batch: TensorDictBase) -> dict[str, float]:
        """Store the batch, then (after ``init_random_frames``) ``updates_per_batch`` SAC steps.

        With the uniform sampler the buffer does not change between the steps, so the
        mini-batches of all steps are drawn in one call and split: the same law as one
        draw per step, without a storage gather per step.
        """
        cfg = self.config
        with timeit("sac/extend"):
            self.buffer.extend(batch.reshape(-1))
        if self.frames < cfg.init_random_frames:
            return {}
        steps = cfg.updates_per_batch
        with timeit("sac/sample"):
            if isinstance(self.buffer.sampler, RandomSampler):
                samples = self.buffer.sample(steps * cfg.batch_size).split(cfg.batch_size)
            else:
                samples = [self.buffer.sample() for _ in range(steps)]
        sums = torch.zeros(len(_SCALARS), dtype=torch.float64)
        for sample in samples:
            self.fire("pre_optim", sample)
            with timeit("sac/step"):
                losses = self.loss_module(sample)
                self.fire("post_loss", losses)
                total = sum(losses[k] for k in _LOSS_TERMS)
                self.optimizer.zero_grad(set_to_none=True)
                total.backward()
                self.optimizer.step()
                self.target_updater.step()
            if cfg.prioritized:
                with timeit("sac/priority"):  # the loss wrote |TD error| into the sample
                    self.buffer.update_priority(sample["index"], sample["td_error"])
            values = torch.stack([losses[k].detach() for k in _SCALAR_KEYS])
            sums += values
            self.optim_steps += 1
            self.fire("post_optim", dict(zip(_SCALARS, values.tolist())))
        return {f"losses/{k}": v / steps for k, v in zip(_SCALARS, sums.tolist())}
