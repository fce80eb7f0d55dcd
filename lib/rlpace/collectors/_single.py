"""`Collector`: one env (batched or not) and a policy in the calling process."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from tensordict import TensorDictBase

from rlpace.collectors._lifecycle import (
    close_envs,
    enter_context,
    exit_context,
    iterate_batches,
    shutdown_quietly,
)
from rlpace.collectors._options import (
    batches_in,
    check_max_frames_per_traj,
    check_postproc,
    check_state,
    collector_state,
    finish_batch,
    random_batches,
)
from rlpace.collectors._rollout import Rollout, load_weights


def resolve_env(env_or_fn: Any, who: str) -> tuple[Any, bool]:
    """An ``EnvBase`` from an env or a zero-argument factory; also whether we own it."""
    from torchrl.envs import EnvBase

    if isinstance(env_or_fn, EnvBase):
        return env_or_fn, False
    if callable(env_or_fn):
        env = env_or_fn()
        if not isinstance(env, EnvBase):
            raise TypeError(
                f"{who}: the env factory must return a torchrl EnvBase; it returned "
                f"{type(env).__name__}. Wrap gymnasium envs with torchrl.envs.GymEnv."
            )
        return env, True
    raise TypeError(
        f"{who}: expected a torchrl EnvBase or a zero-argument callable returning one; "
        f"got {type(env_or_fn).__name__}"
    )


def check_total_frames(total_frames: int, who: str) -> None:
    if total_frames != -1 and total_frames <= 0:
        raise ValueError(
            f"{who}: total_frames must be -1 (endless) or a positive number of frames; "
            f"got {total_frames}"
        )


def check_replay_buffer(replay_buffer: Any, who: str, split_trajs: bool = False) -> None:
    if replay_buffer is not None and not hasattr(replay_buffer, "extend"):
        raise TypeError(
            f"{who}: replay_buffer needs an extend(batch) method (e.g. an rlpace.data "
            f"ReplayBuffer); got {type(replay_buffer).__name__}"
        )
    if replay_buffer is not None and split_trajs:
        raise ValueError(
            f"{who}: split_trajs=True pads batches to [trajectories, steps], but a "
            "replay_buffer stores flat frames; pass one of split_trajs=True and replay_buffer="
        )


class Collector:
    """Steps one environment with a policy and yields ``[frames_per_batch]`` batches.

    Each batch holds the root entries the policy saw (``"observation"``,
    ``"action"``, ...), the ``("next", ...)`` entries the env returned (reward, done,
    next observation), ``("collector", "traj_ids")`` (a new id every time an episode
    starts) and ``("collector", "env_ids")``. For a batched env the frames are laid
    out env by env, each env's frames in time order. Done envs are reset
    automatically and collection carries on across batches.

    Args:
        env: a torchrl ``EnvBase`` (batched or not) or a zero-argument callable that
            builds one (the collector then owns it and closes it on ``shutdown``).
        policy: any callable ``TensorDict -> TensorDict`` writing the action
            (e.g. a ``tensordict.nn.TensorDictModule``); modules run under ``no_grad``.
        frames_per_batch: frames per batch, a multiple of the env's batch size.
        total_frames: frames to yield in all (the last batch is cut to fit exactly);
            ``-1`` iterates forever.
        device: device the batches are moved to (``None``: left where the env put them).
        replay_buffer: an object with ``extend(batch)`` (e.g. an ``rlpace.data``
            ``ReplayBuffer``); each batch goes there and iteration yields ``None``.
        max_frames_per_traj: steps after which a trajectory is truncated
            (``("next", "truncated")`` and ``("next", "done")`` set) and its env reset,
            counted per env of a batched env and across batches; ``None`` or ``<= 0``:
            no limit.
        init_random_frames: frames, rounded up to whole batches, collected with the
            env's random actions (``env.rand_action``) before the policy is used.
        postproc: callable applied to every batch before it is yielded or written to
            the replay buffer (e.g. a torchrl ``MultiStep``).
        split_trajs: yield ``[trajectories, steps]`` batches, zero-padded, with a
            ``("collector", "mask")`` of the valid steps (torchrl's
            ``split_trajectories``); not with ``replay_buffer``.

    Example:
        >>> from rlpace.collectors import Collector
        >>> from rlpace.collectors.testing import CountingEnv, make_mlp_policy
        >>> with Collector(CountingEnv(num_envs=2, max_steps=3), make_mlp_policy(),
        ...                frames_per_batch=8, total_frames=16) as collector:
        ...     batches = list(collector)
        >>> [b.batch_size for b in batches]
        [torch.Size([8]), torch.Size([8])]
        >>> batches[0]["collector", "traj_ids"].tolist()
        [0, 0, 0, 2, 1, 1, 1, 1]
        >>> batches[0]["next", "done"].squeeze(-1).tolist()
        [False, False, True, False, False, False, False, True]
    """

    def __init__(
        self,
        env: Any,
        policy: Callable[[TensorDictBase], TensorDictBase],
        frames_per_batch: int,
        total_frames: int = -1,
        device: torch.device | str | None = None,
        replay_buffer: Any | None = None,
        *,
        max_frames_per_traj: int | None = None,
        init_random_frames: int | None = None,
        postproc: Callable[[TensorDictBase], TensorDictBase] | None = None,
        split_trajs: bool = False,
    ) -> None:
        who = type(self).__name__
        if not callable(policy):
            raise TypeError(
                f"{who}: policy must be a callable TensorDict -> TensorDict; "
                f"got {type(policy).__name__}"
            )
        check_total_frames(total_frames, who)
        check_replay_buffer(replay_buffer, who, split_trajs)
        check_postproc(postproc, who)
        max_frames_per_traj = check_max_frames_per_traj(max_frames_per_traj, who)
        #: frames collected with random actions (``init_random_frames`` rounded up)
        self.init_random_frames = (
            random_batches(init_random_frames, frames_per_batch, who) * frames_per_batch
        )
        self.env, self._owns_env = resolve_env(env, who)
        self.policy = policy
        self.frames_per_batch = frames_per_batch
        self.total_frames = total_frames
        self.device = None if device is None else torch.device(device)
        self.replay_buffer = replay_buffer
        self.max_frames_per_traj = max_frames_per_traj
        self.postproc = postproc
        self.split_trajs = split_trajs
        self.policy_version = 0
        self.frames = 0
        try:
            self._rollout = Rollout(
                [self.env], policy, frames_per_batch, who, max_frames_per_traj=max_frames_per_traj
            )
        except Exception:
            self.shutdown()
            raise
        self._closed = False

    def next(self) -> TensorDictBase | None:
        """Collect and return one batch (``None`` when a replay buffer takes it).

        Example:
            >>> from rlpace.collectors.testing import CountingEnv, make_mlp_policy
            >>> c = Collector(CountingEnv(), make_mlp_policy(), frames_per_batch=4)
            >>> c.next()["step_count"].squeeze(-1).tolist()
            [0, 1, 2, 3]
            >>> c.shutdown()
        """
        if getattr(self, "_closed", True):
            raise RuntimeError(f"{type(self).__name__} was shut down; build a new one")
        batch = self._rollout.collect(random=self.frames < self.init_random_frames)
        if self.total_frames != -1:
            left = self.total_frames - self.frames
            if left < batch.numel():
                batch = batch[:left]
        self.frames += batch.numel()
        if self.device is not None:
            batch = batch.to(self.device)
        if self.postproc is not None or self.split_trajs:
            batch = finish_batch(batch, self.postproc, self.split_trajs)
        if self.replay_buffer is not None:
            self.replay_buffer.extend(batch)
            return None
        return batch

    def update_policy_weights_(self, weights: TensorDictBase | dict | None = None) -> None:
        """Load new policy weights; with ``None`` the shared policy object is used as is.

        Args:
            weights: a ``state_dict`` or a TensorDict of parameters
                (``TensorDict.from_module(net)``), copied in place into the policy.

        Example:
            >>> import torch
            >>> from rlpace.collectors.testing import CountingEnv, make_mlp_policy
            >>> c = Collector(CountingEnv(), make_mlp_policy(seed=0), frames_per_batch=2)
            >>> c.update_policy_weights_(make_mlp_policy(seed=1).state_dict())
            >>> c.policy_version
            1
            >>> c.shutdown()
        """
        if weights is not None:
            load_weights(self.policy, weights)
        self.policy_version += 1

    def set_seed(self, seed: int | None, static_seed: bool = False) -> int | None:
        """Seed the env (torchrl's ``env.set_seed``); returns the next seed to use.

        Example:
            >>> from rlpace.collectors.testing import CountingEnv, make_mlp_policy
            >>> c = Collector(CountingEnv(), make_mlp_policy(), frames_per_batch=4)
            >>> isinstance(c.set_seed(0), int)
            True
            >>> c.shutdown()
        """
        return self._rollout.set_seed(seed, static_seed)

    def state_dict(self) -> dict[str, Any]:
        """Frames so far, policy version, a copy of the policy's and the env's state.

        Example:
            >>> from rlpace.collectors.testing import CountingEnv, make_mlp_policy
            >>> c = Collector(CountingEnv(), make_mlp_policy(), frames_per_batch=4)
            >>> _ = c.next()
            >>> state = c.state_dict()
            >>> state["frames"], sorted(state)
            (4, ['collector', 'env', 'format', 'frames', 'policy', 'policy_version'])
            >>> c.shutdown()
        """
        return collector_state(self, env=self.env.state_dict())

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from :meth:`state_dict`: frames (for ``total_frames``), weights, env state.

        Example:
            >>> from rlpace.collectors.testing import CountingEnv, make_mlp_policy
            >>> c = Collector(CountingEnv(), make_mlp_policy(), 4, total_frames=12)
            >>> _ = c.next()
            >>> resumed = Collector(CountingEnv(), make_mlp_policy(seed=1), 4, total_frames=12)
            >>> resumed.load_state_dict(c.state_dict())
            >>> [b.numel() for b in resumed]  # 8 frames were left
            [4, 4]
        """
        state = check_state(state, type(self).__name__)
        if state.get("policy") is not None:
            load_weights(self.policy, state["policy"])
        if state.get("env"):
            self.env.load_state_dict(state["env"])
        self.frames = int(state["frames"])
        self.policy_version = int(state["policy_version"])

    def shutdown(self) -> None:
        """Close the env if the collector built it; safe to call more than once."""
        self._closed = True
        if getattr(self, "_owns_env", False):
            self._owns_env = False
            rollout = getattr(self, "_rollout", None)
            if rollout is not None:
                rollout.close()
            else:
                close_envs([self.env])

    __iter__ = iterate_batches
    __len__ = batches_in
    __enter__ = enter_context
    __exit__ = exit_context
    __del__ = shutdown_quietly

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(env={type(self.env).__name__}, "
            f"frames_per_batch={self.frames_per_batch}, total_frames={self.total_frames})"
        )
