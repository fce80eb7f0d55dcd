"""Small pure-torch environments for tests and benchmarks of collectors.

:class:`CountingEnv` follows torchrl's ``EnvBase`` API and needs nothing but torch:
it counts steps, ends each episode after ``max_steps`` (staggered across the batch
so resets do not happen in lock-step), can sleep per step to stand in for a slow
simulator, and can raise at a given step to exercise fault handling.

Example:
    >>> import torch
    >>> env = CountingEnv(num_envs=2, max_steps=3)
    >>> td = env.reset()
    >>> td["observation"].shape
    torch.Size([2, 4])
    >>> td = env.rand_step(td)
    >>> td["next", "step_count"].squeeze(-1).tolist()
    [1, 1]
"""

from __future__ import annotations

import time

import torch
from tensordict import TensorDict, TensorDictBase
from torchrl.data import Bounded, Composite, Unbounded
from torchrl.envs import EnvBase

__all__ = ["CountingEnv", "OneHotArgmax", "make_mlp_policy"]


class CountingEnv(EnvBase):
    """A batched pure-torch env: observations drift with the action, episodes count steps.

    Each sub-env ``i`` ends its episode after ``max_steps + i % 3`` steps (``done`` and
    ``terminated`` set), so trajectories of a batch end at different times.

    Args:
        num_envs: batch size; ``None`` gives an unbatched env (``batch_size=[]``).
        obs_dim: size of ``"observation"``.
        act_dim: size of ``"action"`` (bounded in ``[-1, 1]``).
        max_steps: base episode length.
        step_sleep: seconds to sleep in every ``step`` (a slow simulator stand-in).
        fail_at_step: when set, ``step`` raises ``RuntimeError`` once any step count
            reaches this value (to test fault handling).

    Example:
        >>> env = CountingEnv(max_steps=2)
        >>> td = env.rollout(5, break_when_any_done=False)
        >>> td["next", "done"].squeeze(-1).tolist()
        [False, True, False, True, False]
    """

    def __init__(
        self,
        num_envs: int | None = None,
        obs_dim: int = 4,
        act_dim: int = 1,
        max_steps: int = 10,
        step_sleep: float = 0.0,
        fail_at_step: int | None = None,
    ) -> None:
        batch = torch.Size([] if num_envs is None else [num_envs])
        super().__init__(batch_size=batch)
        self.obs_dim = obs_dim
        self.act_dim = act_dim
        self.max_steps = max_steps
        self.step_sleep = step_sleep
        self.fail_at_step = fail_at_step
        self.observation_spec = Composite(
            observation=Unbounded((*batch, obs_dim)),
            step_count=Unbounded((*batch, 1), dtype=torch.int64),
            shape=batch,
        )
        self.action_spec = Bounded(-1.0, 1.0, (*batch, act_dim))
        self.reward_spec = Unbounded((*batch, 1))
        n = 1 if num_envs is None else num_envs
        self._limit = (max_steps + torch.arange(n) % 3).reshape(*batch, 1)
        self._count = torch.zeros(*batch, 1, dtype=torch.int64)
        self._obs = torch.zeros(*batch, obs_dim)

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        mask = None if tensordict is None else tensordict.get("_reset", None)
        if mask is None:
            self._count.zero_()
            self._obs.zero_()
        else:
            mask = mask.reshape(self._count.shape)
            self._count.masked_fill_(mask, 0)
            self._obs.masked_fill_(mask, 0.0)
        return TensorDict(
            {"observation": self._obs.clone(), "step_count": self._count.clone()},
            batch_size=self.batch_size,
        )

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        if self.step_sleep:
            time.sleep(self.step_sleep)
        self._count += 1
        if self.fail_at_step is not None and bool((self._count >= self.fail_at_step).any()):
            raise RuntimeError(f"CountingEnv failed on purpose at step {self.fail_at_step}")
        action = tensordict.get("action")
        self._obs += action.sum(-1, keepdim=True)
        done = self._count >= self._limit
        return TensorDict(
            {
                "observation": self._obs.clone(),
                "step_count": self._count.clone(),
                "reward": torch.ones(*self.batch_size, 1),
                "done": done,
                "terminated": done.clone(),
            },
            batch_size=self.batch_size,
        )

    def _set_seed(self, seed: int | None) -> None:
        if seed is not None:
            torch.manual_seed(seed)


class OneHotArgmax(torch.nn.Module):
    """Turns logits into a one-hot action (greedy), e.g. for gymnasium's CartPole.

    Example:
        >>> OneHotArgmax()(torch.tensor([[0.1, 0.9]]))
        tensor([[0, 1]])
    """

    def forward(self, logits: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1])


def make_mlp_policy(
    obs_dim: int = 4, act_dim: int = 1, hidden: int = 64, seed: int = 0, one_hot: bool = False
):
    """A deterministic tanh MLP policy ``"observation"`` → ``"action"`` as a TensorDictModule.

    Args:
        obs_dim: input size.
        act_dim: output size (number of actions when ``one_hot``).
        hidden: width of the two hidden layers.
        seed: seed for the initial weights (same seed, same weights).
        one_hot: output a greedy one-hot action over ``act_dim`` actions (discrete
            envs such as CartPole) instead of a continuous one in ``[-1, 1]``.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> policy = make_mlp_policy()
        >>> out = policy(TensorDict({"observation": torch.zeros(3, 4)}, batch_size=[3]))
        >>> out["action"].shape
        torch.Size([3, 1])
    """
    from tensordict.nn import TensorDictModule

    gen = torch.Generator().manual_seed(seed)
    net = torch.nn.Sequential(
        torch.nn.Linear(obs_dim, hidden),
        torch.nn.Tanh(),
        torch.nn.Linear(hidden, hidden),
        torch.nn.Tanh(),
        torch.nn.Linear(hidden, act_dim),
        OneHotArgmax() if one_hot else torch.nn.Tanh(),
    )
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
    return TensorDictModule(net, in_keys=["observation"], out_keys=["action"])
