"""The stepping loop every collector shares: policy, step, record, reset where done.

Private module: :class:`Rollout` is used by :class:`~rlpace.collectors.Collector` in
the main process and by the worker processes of
:class:`~rlpace.collectors.MultiCollector`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import torch
from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase, is_leaf_nontensor

from rlpace.collectors._errors import EnvStepError, PolicyError
from rlpace.collectors._lifecycle import close_envs

TRAJ_KEY = ("collector", "traj_ids")
ENV_KEY = ("collector", "env_ids")


def policy_context(policy: Any):
    """``torch.no_grad`` for modules (collection never needs a graph); a no-op otherwise."""
    return torch.no_grad() if isinstance(policy, torch.nn.Module) else contextlib.nullcontext()


def split_frames(frames_per_batch: int, env_batch_numel: int, who: str) -> int:
    """Steps per batch; ``frames_per_batch`` must be a multiple of the env batch size."""
    if frames_per_batch <= 0 or frames_per_batch % env_batch_numel:
        raise ValueError(
            f"{who}: frames_per_batch must be a positive multiple of the number of envs "
            f"stepped together ({env_batch_numel}); got {frames_per_batch}. "
            f"Use e.g. frames_per_batch={max(1, frames_per_batch // env_batch_numel) * env_batch_numel}."
        )
    return frames_per_batch // env_batch_numel


class Rollout:
    """Steps a list of envs with one policy and returns flat batches.

    Envs may be batched (``batch_size=[n]``) or not; each env contributes
    ``steps * numel(env.batch_size)`` frames per batch, laid out env by env with each
    env's frames in time order, so one batch is ``[frames_per_batch]``.
    ``("collector", "traj_ids")`` numbers trajectories uniquely within the rollout
    (offset by ``traj_offset``), ``("collector", "env_ids")`` says which env (by
    global index, offset by ``env_offset``) produced each frame. With
    ``max_frames_per_traj`` a trajectory that reaches that many steps is truncated
    (``("next", "truncated")`` and ``("next", "done")`` set) and its env reset.
    """

    def __init__(
        self,
        envs: Sequence[Any],
        policy: Callable[[TensorDictBase], TensorDictBase],
        frames_per_batch: int,
        who: str,
        env_offset: int = 0,
        traj_offset: int = 0,
        traj_stride: int = 1,
        max_frames_per_traj: int | None = None,
    ) -> None:
        self.envs = list(envs)
        self.max_frames_per_traj = max_frames_per_traj
        self._step_counts: list[torch.Tensor | None] = [None] * len(self.envs)
        self.policy = policy
        numels = [max(1, env.batch_size.numel()) for env in self.envs]
        total = sum(numels)
        self.steps = split_frames(frames_per_batch, total, who)
        self.frames_per_batch = frames_per_batch
        self.env_offset = env_offset
        self._roots: list[TensorDictBase | None] = [None] * len(self.envs)
        self._reward_keys = [list(env.reward_keys) for env in self.envs]
        self._call_policy = direct_policy(policy)
        self._traj: list[torch.Tensor] = []
        self._env_ids: list[torch.Tensor] = []
        start = env_offset
        # Trajectory ids are unique across workers: worker k of K uses ids k, k+K, ...
        self._next_traj = traj_offset
        self._traj_stride = traj_stride
        for env, n in zip(self.envs, numels, strict=True):
            shape = env.batch_size
            self._traj.append(self._fresh_ids(n).reshape(shape))
            self._env_ids.append(torch.arange(start, start + n, dtype=torch.int64).reshape(shape))
            start += n

    def _fresh_ids(self, n: int) -> torch.Tensor:
        ids = self._next_traj + self._traj_stride * torch.arange(n, dtype=torch.int64)
        self._next_traj += self._traj_stride * n
        return ids

    def _env_index(self, local: int) -> int:
        return self.env_offset + sum(max(1, env.batch_size.numel()) for env in self.envs[:local])

    def collect(self, random: bool = False) -> TensorDictBase:
        """One batch of ``frames_per_batch`` frames; raises :class:`EnvStepError`.

        With ``random=True`` the envs' random actions (``env.rand_action``) stand in
        for the policy (``init_random_frames``).
        """
        per_env = []
        with policy_context(self.policy):
            for i, env in enumerate(self.envs):
                per_env.append(self._collect_env(i, env, random))
        return per_env[0] if len(per_env) == 1 else torch.cat(per_env, 0)

    def set_seed(self, seed: int | None, static_seed: bool = False) -> int | None:
        """Seed every env in turn (each env's ``set_seed`` returns the next seed)."""
        for env in self.envs:
            seed = env.set_seed(seed, static_seed=static_seed)
        return seed

    def _truncate(self, i: int, nxt: TensorDictBase) -> None:
        """Count steps of env ``i``; at ``max_frames_per_traj`` mark the step truncated."""
        done = nxt.get("done")
        counts = self._step_counts[i]
        counts = torch.ones(done.shape, dtype=torch.int64) if counts is None else counts + 1
        over = counts >= self.max_frames_per_traj
        truncated = nxt.get("truncated", None)
        nxt.set("truncated", over if truncated is None else truncated | over)
        done = done | over
        nxt.set("done", done)
        self._step_counts[i] = counts.masked_fill(done, 0)

    def _collect_env(self, i: int, env: Any, random: bool = False) -> TensorDictBase:
        root = self._roots[i]
        try:
            if root is None:
                root = env.reset()
            traj = self._traj[i]
            frames = []
            trajs = []
            policy = env.rand_action if random else self._call_policy
            reward_keys = self._reward_keys[i]
            keep = None
            batched = bool(env.batch_size)
            limit = self.max_frames_per_traj
            if limit is not None and "truncated" not in env.done_keys:
                # the flag this collector adds stays in ("next", ...): a root that
                # carried it would differ in keys from the env's own reset roots
                reward_keys = [*reward_keys, "truncated"]
            for _ in range(self.steps):
                root = policy(root)
                frame = env.step(root)
                frames.append(frame)
                trajs.append(traj)
                nxt = frame.get("next")
                if limit is not None:
                    self._truncate(i, nxt)
                if keep is None:
                    keep = root_keys_after_step(nxt, reward_keys)
                root = nxt.select(*keep) if keep else nxt.exclude(*reward_keys)
                done = nxt.get("done", None)
                if done is not None and bool(done.any()):
                    if batched:
                        root.set("_reset", done.clone())
                        root = env.reset(root)
                    else:
                        root = env.reset()
                    done = done.reshape(traj.shape)
                    traj = traj.masked_scatter(done, self._fresh_ids(int(done.sum())))
            self._traj[i] = traj
            self._roots[i] = root
        except PolicyError:
            raise  # the inference server's policy failed, not this env
        except Exception as exc:  # noqa: BLE001 - re-raised with the env index
            raise EnvStepError(self._env_index(i), exc) from exc
        dim = len(env.batch_size)
        stacked = stack_frames(frames, dim)
        stacked.set(TRAJ_KEY, torch.stack(trajs, dim=dim))
        stacked.set(ENV_KEY, self._env_ids[i].unsqueeze(-1).expand(stacked.batch_size))
        return stacked.reshape(-1)

    def close(self) -> None:
        close_envs(self.envs)


def direct_policy(policy: Any) -> Callable[[TensorDictBase], TensorDictBase]:
    """A faster equivalent of ``policy`` for a plain ``TensorDictModule``.

    A plain ``TensorDictModule`` reads ``in_keys``, calls its module and writes
    ``out_keys``; doing that directly skips its per-call dispatch. Anything else
    (sequences, probabilistic actors, plain callables) is called as is.
    """
    from tensordict.nn import TensorDictModule

    if type(policy) is not TensorDictModule or policy.out_keys == []:
        return policy
    module = policy.module
    in_keys = list(policy.in_keys)
    out_keys = list(policy.out_keys)
    if len(out_keys) == 1:
        (out_key,) = out_keys

        def call_one(td: TensorDictBase) -> TensorDictBase:
            td.set(out_key, module(*[td.get(k) for k in in_keys]))
            return td

        return call_one

    def call_many(td: TensorDictBase) -> TensorDictBase:
        outs = module(*[td.get(k) for k in in_keys])
        for key, value in zip(out_keys, outs, strict=True):
            td.set(key, value)
        return td

    return call_many


def root_keys_after_step(nxt: TensorDictBase, reward_keys: list[Any]) -> list[Any]:
    """Top-level keys of ``nxt`` minus the rewards, so the next root is a cheap ``select``.

    Returns ``[]`` when a reward key is nested (the caller then uses ``exclude``).

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> nxt = TensorDict({"observation": torch.zeros(2), "reward": torch.ones(1)})
        >>> root_keys_after_step(nxt, ["reward"])
        ['observation']
    """
    if any(not isinstance(k, str) for k in reward_keys):
        return []
    return [k for k in nxt.keys() if k not in reward_keys]  # noqa: SIM118 - iterating a TensorDict walks its batch dim


def stack_frames(frames: list[TensorDictBase], dim: int = 0) -> TensorDictBase:
    """Stack same-structured frames key by key (several times faster than ``torch.stack``).

    Each frame's entries are read once per level with ``items()`` (one dict per
    frame and nested TensorDict) instead of one ``get`` per frame and nested key,
    which dominated the cost of stacking a batch of small frames.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> f = TensorDict({"a": torch.zeros(2), ("next", "a"): torch.ones(2)})
        >>> stack_frames([f, f])["next", "a"].shape
        torch.Size([2, 2])
    """
    shape = list(frames[0].batch_size)
    shape.insert(dim, len(frames))
    try:
        return _stack_level(frames, dim, shape)
    except RuntimeError:
        # ragged frames (token sequences of different lengths) cannot be stacked
        # densely; a lazy stack keeps each element as it is
        return LazyStackedTensorDict.lazy_stack(frames, dim)


def _stack_level(tds: list[TensorDictBase], dim: int, shape: list[int]) -> TensorDict:
    out = TensorDict(batch_size=shape)
    entries = [dict(td.items()) for td in tds]
    for key, value in entries[0].items():
        values = [entry[key] for entry in entries]
        if is_leaf_nontensor(type(value)):
            # text and other non-tensor entries are leaves too, so they are stacked
            # along with the tensors instead of silently dropped
            out.set(key, torch.stack(values, dim))
        else:
            out.set(key, _stack_level(values, dim, shape))
    return out


def load_weights(policy: Any, weights: TensorDictBase | dict) -> None:
    """Copy ``weights`` (a state dict or a TensorDict of parameters) into ``policy`` in place."""
    if not isinstance(policy, torch.nn.Module):
        raise TypeError(
            f"update_policy_weights_ needs a torch.nn.Module policy to load weights into; "
            f"the policy is a {type(policy).__name__}. Wrap it in a TensorDictModule."
        )
    if isinstance(weights, TensorDictBase):
        with torch.no_grad():
            TensorDict.from_module(policy).update_(weights)
    else:
        policy.load_state_dict(weights)
