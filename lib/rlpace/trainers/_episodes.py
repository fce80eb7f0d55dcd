"""Episode returns from collected batches, summed per batch rather than per step."""

from __future__ import annotations

import torch

__all__ = ["EpisodeReturns"]


class EpisodeReturns:
    """The returns of the episodes that end in each batch, per env, across batches.

    A batch's rewards and done flags are ``[envs, time]`` (or ``[time]`` for one env),
    time-major per env as the collectors deliver them. An episode's return sums its
    rewards from the step after the env's previous end -- in this batch or an earlier
    one, whose unfinished sums are carried over -- to the step whose done flag is set.
    One cumulative sum per batch replaces a running-sum transform on every env step.
    Call :meth:`reset` when the envs are reset outside the batches (a new collector).

    Example:
        >>> tracker = EpisodeReturns()
        >>> reward = torch.tensor([[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]])
        >>> done = torch.tensor([[False, True, False], [False, False, False]])
        >>> tracker.update(reward, done)  # env 0 ends at t=1 with 1 + 1
        [(1, 2.0)]
        >>> tracker.update(reward, torch.tensor([[True, False, False], [False, True, False]]))
        [(0, 2.0), (1, 10.0)]
    """

    def __init__(self) -> None:
        self._carry: torch.Tensor | None = None

    def reset(self) -> None:
        """Forget the running sums (the envs start new episodes)."""
        self._carry = None

    def update(self, reward: torch.Tensor, done: torch.Tensor) -> list[tuple[int, float]]:
        """``(time index, return)`` of every episode ending in this batch, by time.

        Args:
            reward: ``[envs, time]`` or ``[time]`` rewards.
            done: done flags of the same shape.

        Raises:
            ValueError: the shapes differ or are not 1-d / 2-d, or the number of envs
                changed since the last batch without a :meth:`reset`.
        """
        if reward.shape != done.shape or reward.ndim not in (1, 2):
            raise ValueError(
                f"EpisodeReturns.update: expected reward and done of one [envs, time] or "
                f"[time] shape, got {list(reward.shape)} and {list(done.shape)}; reshape "
                "batch['next', 'reward'] and batch['next', 'done'] to the batch's shape"
            )
        if reward.ndim == 1:
            reward, done = reward.unsqueeze(0), done.unsqueeze(0)
        n_envs = reward.shape[0]
        if self._carry is None:
            self._carry = torch.zeros(n_envs, dtype=torch.float64)
        elif self._carry.shape[0] != n_envs:
            raise ValueError(
                f"EpisodeReturns.update: expected {self._carry.shape[0]} envs as in the last "
                f"batch, got {n_envs}; call reset() when the envs change"
            )
        # running return of each env at every step, unfinished sums included
        running = reward.to(torch.float64).cumsum(1) + self._carry.unsqueeze(1)
        env, t = torch.nonzero(done, as_tuple=True)  # row-major: by env, then time
        if env.numel() == 0:
            self._carry = running[:, -1].clone()
            return []
        at_end = running[env, t]
        first_of_env = torch.ones_like(env, dtype=torch.bool)
        first_of_env[1:] = env[1:] != env[:-1]
        before = torch.where(first_of_env, 0.0, at_end.roll(1))  # the env's previous end
        returns = at_end - before
        last_of_env = torch.ones_like(first_of_env)
        last_of_env[:-1] = env[1:] != env[:-1]
        settled = torch.zeros(n_envs, dtype=torch.float64)
        settled[env[last_of_env]] = at_end[last_of_env]
        self._carry = running[:, -1] - settled
        order = torch.argsort(t, stable=True)
        return list(zip(t[order].tolist(), returns[order].tolist(), strict=True))
