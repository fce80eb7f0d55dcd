"""``PPOTrainer``: on-policy PPO over torchrl's ClipPPOLoss and GAE."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDictBase
from torch import nn
from torchrl.modules import ValueOperator
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value import GAE

from rlpace.trainers._config import PPOConfig, config_from_dict
from rlpace.trainers._envs import make_actor, make_env, mlp
from rlpace.trainers._policies import collection_policy
from rlpace.trainers._timing import timeit
from rlpace.trainers._trainer import Trainer, seed_everything

__all__ = ["PPOTrainer"]

_LOSS_TERMS = ("loss_objective", "loss_critic", "loss_entropy")
# logged as losses/<name>: ``entropy`` is the policy's entropy, ``entropy_loss`` the
# bonus term added to the loss (-entropy_coeff * entropy)
_SCALARS = ("objective", "critic", "entropy", "entropy_loss", "approx_kl", "clip_fraction")


class PPOTrainer(Trainer):
    """PPO: GAE advantages, ``epochs`` passes of shuffled mini-batches, ratio clipping,
    entropy bonus, gradient-norm clipping and an optionally annealed learning rate.

    Logged per batch (means over its gradient steps): ``losses/objective``,
    ``losses/critic``, ``losses/entropy`` (the policy's entropy),
    ``losses/entropy_loss`` (the bonus term, ``-entropy_coeff * entropy``),
    ``losses/approx_kl``, ``losses/clip_fraction`` and ``charts/lr``.

    Args:
        config: a :class:`PPOConfig`.
        run_dir: the run's directory (see :class:`Trainer`).

    Example:
        >>> import tempfile
        >>> from rlpace.trainers import PPOConfig, TrainerConfig
        >>> cfg = PPOConfig(trainer=TrainerConfig(total_frames=128, frames_per_batch=128,
        ...                 plot=False, progress=False), mini_batch_size=64, epochs=2)
        >>> with tempfile.TemporaryDirectory() as d:
        ...     scalars = PPOTrainer.from_config(cfg, run_dir=d).train()
        >>> sorted(k for k in scalars if k.startswith("losses/"))
        ['losses/approx_kl', 'losses/clip_fraction', 'losses/critic', 'losses/entropy', 'losses/entropy_loss', 'losses/objective']
    """

    def __init__(self, config: PPOConfig, *, run_dir: str | Path | None = None) -> None:
        if not isinstance(config, PPOConfig):
            raise TypeError(
                f"PPOTrainer expects a PPOConfig, got {type(config).__name__}; "
                "build one with PPOConfig(...) or load_config(['algo=ppo'])"
            )
        seed_everything(config.seed)
        probe = make_env(config.env.name, config.seed)
        try:
            actor = make_actor(probe, config.hidden_sizes, nn.Tanh)
            n_obs = probe.observation_spec["observation"].shape[-1]
        finally:
            probe.close()
        critic = ValueOperator(mlp(n_obs, 1, config.hidden_sizes, nn.Tanh), in_keys=["observation"])
        self.loss_module = ClipPPOLoss(
            actor,
            critic,
            clip_epsilon=config.clip_epsilon,
            # always computed, so the logged entropy is the policy's even with coeff 0
            entropy_bonus=True,
            entropy_coeff=config.entropy_coeff,
            critic_coeff=config.critic_coeff,
            loss_critic_type="l2",
            normalize_advantage=config.normalize_advantage,
        )
        self.advantage = GAE(
            gamma=config.gamma, lmbda=config.gae_lambda, value_network=critic, average_gae=False
        )
        # fused: one kernel for every parameter instead of a Python loop over them
        self.optimizer = torch.optim.Adam(
            self.loss_module.parameters(), lr=config.lr, eps=1e-5, fused=True
        )
        super().__init__(
            config,
            policy=actor,
            collection_policy=collection_policy(actor),
            modules={"loss": self.loss_module},
            optimizers={"adam": self.optimizer},
            run_dir=run_dir,
        )
        self.actor, self.critic = actor, critic

    @classmethod
    def from_config(
        cls, config: PPOConfig | dict[str, Any], *, run_dir: str | Path | None = None
    ) -> PPOTrainer:
        """Build from a :class:`PPOConfig` or a plain dict (checked like the YAML presets).

        Example:
            >>> PPOTrainer.from_config({"algo": "ppo", "lr": -1.0})
            Traceback (most recent call last):
            ...
            rlpace.trainers._config.ConfigError: lr: expected a positive finite float, got -1.0; set lr > 0
        """
        if isinstance(config, dict):
            config = config_from_dict({"algo": "ppo", **config})
        return cls(config, run_dir=run_dir)

    def _set_lr(self) -> float:
        cfg = self.config
        lr = cfg.lr
        if cfg.anneal_lr:
            done = (self.frames - cfg.trainer.frames_per_batch) / cfg.trainer.total_frames
            lr = cfg.lr * max(0.0, 1.0 - done)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        return lr

    def optimize(self, batch: TensorDictBase) -> dict[str, float]:
        """GAE on the batch, then ``epochs`` × shuffled mini-batches of clipped-PPO steps."""
        cfg = self.config
        lr = self._set_lr()
        with torch.no_grad(), timeit("ppo/gae"):
            self.advantage(batch)
        flat = batch.reshape(-1)
        n = flat.numel()
        mb = cfg.mini_batch_size
        sums = dict.fromkeys(_SCALARS, 0.0)
        steps = 0
        for _ in range(cfg.epochs):
            perm = torch.randperm(n)
            for start in range(0, n - mb + 1, mb):
                sub = flat[perm[start : start + mb]]
                self.fire("pre_optim", sub)
                with timeit("ppo/step"):
                    losses = self.loss_module(sub)
                    self.fire("post_loss", losses)
                    total = sum(losses[k] for k in _LOSS_TERMS if losses.get(k, None) is not None)
                    self.optimizer.zero_grad(set_to_none=True)
                    total.backward()
                    nn.utils.clip_grad_norm_(self.loss_module.parameters(), cfg.max_grad_norm)
                    self.optimizer.step()
                step = {
                    "objective": losses["loss_objective"].item(),
                    "critic": losses["loss_critic"].item(),
                    "entropy": losses["entropy"].item(),
                    "entropy_loss": losses["loss_entropy"].item(),
                    "approx_kl": _item(losses, "kl_approx"),
                    "clip_fraction": _item(losses, "clip_fraction"),
                }
                self.optim_steps += 1
                self.fire("post_optim", step)
                for k, v in step.items():
                    sums[k] += v
                steps += 1
        out = {f"losses/{k}": v / max(steps, 1) for k, v in sums.items()}
        out["charts/lr"] = lr
        return out


def _item(losses: TensorDictBase, key: str) -> float:
    value = losses.get(key, None)
    return value.item() if value is not None else 0.0
