"""``Trainer``: the loop shared by every algorithm, its hooks, checkpoints and run directory.

A run: ``setup`` hooks, then per iteration: collect a batch → ``pre_batch`` hooks →
:meth:`Trainer.optimize` (the algorithm; fires ``pre_optim`` / ``post_loss`` /
``post_optim`` per gradient step) → policy weights to the collector → ``post_batch``
hooks → log row → evaluation (``post_eval``) → checkpoint (``post_checkpoint``); at the
end (also after an error or Ctrl-C) ``shutdown`` hooks. Ctrl-C writes
``checkpoints/final.pt`` before the ``KeyboardInterrupt`` propagates.

Determinism: at every checkpoint the collector is rebuilt with an env seed derived from
the run seed and the batch count, so a run resumed from that checkpoint collects the
same frames and logs the same losses as the uninterrupted run (on CPU, fixed seed).
"""

from __future__ import annotations

import math
import random
import sys
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tensordict import TensorDictBase
from torchrl.envs.utils import ExplorationType, set_exploration_type

from rlpace.trainers._checkpoint import (
    CheckpointError,
    load_checkpoint,
    rng_states,
    save_checkpoint,
    set_rng_states,
)
from rlpace.trainers._config import PPOConfig, SACConfig, config_to_dict
from rlpace.trainers._envs import make_env
from rlpace.trainers._episodes import EpisodeReturns
from rlpace.trainers._logging import RunLogger
from rlpace.trainers._timing import timeit
from rlpace.trainers._wiring import buffer_backend, collector_backend, make_collector

__all__ = ["HOOK_POINTS", "Trainer"]

HOOK_POINTS = (
    "setup",
    "pre_batch",
    "post_batch",
    "pre_optim",
    "post_loss",
    "post_optim",
    "post_eval",
    "post_checkpoint",
    "shutdown",
)
"""Named points where :meth:`Trainer.register_hook` callables run, in loop order.

Each hook is called as ``hook(trainer, payload)``: the run directory (``setup``, once
before the first batch, the collector built), the collected batch (``pre_batch``,
``post_batch``, ``pre_optim``: the mini-batch), the loss TensorDict (``post_loss``), the
step's scalar dict (``post_optim``), the evaluation scalars (``post_eval``), the
checkpoint path (``post_checkpoint``) or the last logged scalars (``shutdown``, once at
the end of :meth:`Trainer.train`, also when it ends by an error or Ctrl-C, after the
collector is shut down).
"""

# Keys in a checkpoint's config that change shapes or semantics: resuming across them fails.
_COMPATIBILITY_KEYS = ("algo", "env.name", "hidden_sizes")
_RETURN_WINDOW = 10


def _dig(d: dict[str, Any], dotted: str) -> Any:
    for part in dotted.split("."):
        d = d.get(part) if isinstance(d, dict) else None
    return d


class Trainer:
    """The loop: collect, optimise, hook, log, evaluate, checkpoint. Subclass and implement
    :meth:`optimize`; :class:`PPOTrainer` and :class:`SACTrainer` are the shipped ones.

    Args:
        config: the run's config (``PPOConfig`` or ``SACConfig``).
        policy: the exploration policy (evaluation runs it deterministically).
        collection_policy: what the collector runs instead of ``policy``: the same
            network and distribution through a faster path (see
            ``_policies.collection_policy``); None runs ``policy``.
        modules: named modules whose ``state_dict`` goes into checkpoints.
        optimizers: named optimizers whose ``state_dict`` goes into checkpoints.
        buffer: a replay buffer saved with checkpoints, or None (on-policy).
        run_dir: the run's directory; None uses ``config.trainer.run_dir`` or makes
            ``runs/{algo}-{env}-s{seed}-{time}``.

    Example:
        >>> import tempfile
        >>> from rlpace.trainers import PPOConfig, PPOTrainer, TrainerConfig
        >>> cfg = PPOConfig(trainer=TrainerConfig(total_frames=256, frames_per_batch=128,
        ...                 plot=False, progress=False), mini_batch_size=64, epochs=1)
        >>> with tempfile.TemporaryDirectory() as d:
        ...     trainer = PPOTrainer(cfg, run_dir=d)
        ...     seen = []
        ...     trainer.register_hook("post_batch", lambda t, batch: seen.append(batch.numel()))
        ...     _ = trainer.train()
        ...     trainer.frames, seen, sorted(p.name for p in Path(d).iterdir())
        (256, [128, 128], ['checkpoints', 'config.yaml', 'log.csv'])
    """

    def __init__(
        self,
        config: PPOConfig | SACConfig,
        *,
        policy: torch.nn.Module,
        collection_policy: torch.nn.Module | None = None,
        modules: dict[str, torch.nn.Module],
        optimizers: dict[str, torch.optim.Optimizer],
        buffer: Any = None,
        run_dir: str | Path | None = None,
    ) -> None:
        self.config = config
        self.policy = policy
        self.collection_policy = policy if collection_policy is None else collection_policy
        self.modules = modules
        self.optimizers = optimizers
        self.buffer = buffer
        tc = config.trainer
        if run_dir is None and tc.run_dir is not None:
            run_dir = tc.run_dir
        if run_dir is None:
            stamp = time.strftime("%Y%m%d-%H%M%S")
            run_dir = Path("runs") / f"{config.algo}-{config.env.name}-s{config.seed}-{stamp}"
        self.run_dir = Path(run_dir)
        self.frames = 0
        self.batches = 0
        self.optim_steps = 0  # gradient steps taken; logged as charts/optim_steps
        self.episodes: list[tuple[int, float]] = []  # (frames at episode end, return)
        self.last_scalars: dict[str, float] = {}
        self.reached_target_at: tuple[int, float] | None = None  # (frames, seconds)
        self._hooks: dict[str, list[Callable[[Trainer, Any], Any]]] = {p: [] for p in HOOK_POINTS}
        self._wall_s = 0.0
        self._resumed = False
        self._collector: Any = None
        self._episode_returns = EpisodeReturns()
        self._eval_env: Any = None

    # ------------------------------------------------------------------ hooks
    def register_hook(self, point: str, fn: Callable[[Trainer, Any], Any]) -> None:
        """Call ``fn(trainer, payload)`` at hook ``point`` (one of :data:`HOOK_POINTS`).

        Example:
            >>> from rlpace.trainers import PPOConfig, PPOTrainer
            >>> PPOTrainer(PPOConfig(), run_dir="unused").register_hook("post_bath", print)
            Traceback (most recent call last):
            ...
            ValueError: hook point 'post_bath': expected one of setup, pre_batch, post_batch, pre_optim, post_loss, post_optim, post_eval, post_checkpoint, shutdown; fix the name
        """
        if point not in self._hooks:
            raise ValueError(
                f"hook point {point!r}: expected one of {', '.join(HOOK_POINTS)}; fix the name"
            )
        if not callable(fn):
            raise TypeError(f"hook for {point!r}: expected a callable, got {type(fn).__name__}")
        self._hooks[point].append(fn)

    def fire(self, point: str, payload: Any) -> None:
        """Run the hooks registered at ``point`` (algorithms call this from :meth:`optimize`)."""
        for fn in self._hooks[point]:
            fn(self, payload)

    # -------------------------------------------------------------- algorithm
    def optimize(self, batch: TensorDictBase) -> dict[str, float]:
        """Every gradient step for one collected batch; returns scalars to log.

        Subclasses implement it, calling ``self.fire("pre_optim", mb)``,
        ``self.fire("post_loss", loss_td)`` and ``self.fire("post_optim", scalars)`` per
        step, and adding one to ``self.optim_steps`` per gradient step.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement optimize(batch)")

    # ------------------------------------------------------------- collection
    def _env_seed(self) -> int:
        return self.config.seed + 10_007 * self.batches

    def _new_collector(self) -> Any:
        if self._collector is not None:
            self._collector.shutdown()
        name, seed, n = self.config.env.name, self._env_seed(), self.config.env.num_envs
        remaining = self.config.trainer.total_frames - self.frames
        fpb = self.config.trainer.frames_per_batch
        remaining = max(fpb, -(-remaining // fpb) * fpb)
        self._collector = make_collector(
            lambda: make_env(name, seed, n),
            self.collection_policy,
            frames_per_batch=fpb,
            total_frames=remaining,
        )
        self._batches_iter = iter(self._collector)
        self._episode_returns.reset()  # the new collector's envs start new episodes
        return self._collector

    def _record_episodes(self, batch: TensorDictBase) -> None:
        # batches are [time] or [envs, time]; episodes are recorded in the order they ended
        n_envs = 1 if batch.ndim == 1 else batch.shape[0]
        start = self.frames - batch.numel()
        reward = batch["next", "reward"].reshape(batch.shape)
        ended = self._episode_returns.update(reward, batch["next", "done"].reshape(batch.shape))
        self.episodes.extend(((t + 1) * n_envs + start, ret) for t, ret in ended)

    def recent_return(self) -> float:
        """Mean return of the last 10 finished episodes (NaN before the first).

        Example:
            >>> from rlpace.trainers import PPOConfig, PPOTrainer
            >>> t = PPOTrainer(PPOConfig(), run_dir="unused")
            >>> t.episodes = [(10, 1.0), (20, 3.0)]
            >>> t.recent_return()
            2.0
        """
        if not self.episodes:
            return math.nan
        tail = self.episodes[-_RETURN_WINDOW:]
        return sum(r for _, r in tail) / len(tail)

    # ------------------------------------------------------------- evaluation
    def evaluate(self, episodes: int | None = None) -> dict[str, float]:
        """Run the deterministic policy for ``episodes`` episodes; returns ``eval/*`` scalars.

        Example:
            >>> from rlpace.trainers import PPOConfig, PPOTrainer
            >>> out = PPOTrainer(PPOConfig(), run_dir="unused").evaluate(episodes=1)
            >>> sorted(out)
            ['eval/return', 'eval/steps']
        """
        n = episodes or self.config.trainer.eval_episodes
        if self._eval_env is None:
            self._eval_env = make_env(self.config.env.name, self.config.seed + 1_000_003)
        returns, steps = [], []
        with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
            for _ in range(n):
                td = self._eval_env.rollout(100_000, self.policy, break_when_any_done=True)
                returns.append(float(td["next", "reward"].sum()))
                steps.append(td.numel())
        return {"eval/return": float(np.mean(returns)), "eval/steps": float(np.mean(steps))}

    # ------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """Everything a resume needs: modules, optimizers, buffer, counters, episodes, RNGs."""
        return {
            "config": config_to_dict(self.config),
            "frames": self.frames,
            "batches": self.batches,
            "optim_steps": self.optim_steps,
            "episodes": list(self.episodes),
            "wall_s": self._wall_s,
            "modules": {k: m.state_dict() for k, m in self.modules.items()},
            "optimizers": {k: o.state_dict() for k, o in self.optimizers.items()},
            "buffer": self.buffer.state_dict() if self.buffer is not None else None,
            "rng": rng_states(),
        }

    def save(self, path: str | Path) -> Path:
        """Write a checkpoint to ``path`` (see :meth:`resume`)."""
        return save_checkpoint(path, self.state_dict())

    def resume(self, path: str | Path) -> None:
        """Load a checkpoint from :meth:`save`; :meth:`train` then continues from its frame.

        Raises:
            CheckpointError: the file is not a checkpoint, or was written by a config this
                trainer cannot load (another algo, env or network size), naming the keys.
        """
        state = load_checkpoint(path)
        mine, theirs = config_to_dict(self.config), state["config"]
        diffs = [
            f"{k} (checkpoint {_dig(theirs, k)!r}, this run {_dig(mine, k)!r})"
            for k in _COMPATIBILITY_KEYS
            if _dig(theirs, k) != _dig(mine, k)
        ]
        if diffs:
            raise CheckpointError(
                f"{path}: expected a checkpoint of a compatible config, got differences in "
                f"{'; '.join(diffs)}; resume with the checkpoint's settings or start a new run"
            )
        for name, module in self.modules.items():
            module.load_state_dict(state["modules"][name])
        for name, opt in self.optimizers.items():
            opt.load_state_dict(state["optimizers"][name])
        if self.buffer is not None and state["buffer"] is not None:
            self.buffer.load_state_dict(state["buffer"])
        self.frames = state["frames"]
        self.batches = state["batches"]
        self.optim_steps = state.get("optim_steps", 0)  # absent from older checkpoints
        self.episodes = [tuple(e) for e in state["episodes"]]
        self._wall_s = state["wall_s"]
        set_rng_states(state["rng"])
        self._resumed = True

    def _checkpoint(self, name: str) -> Path:
        path = self.save(self.run_dir / "checkpoints" / name)
        self.fire("post_checkpoint", path)
        return path

    # ------------------------------------------------------------------- loop
    def _write_config(self) -> None:
        import yaml

        data = {
            "rlpace_run_format": 1,
            **config_to_dict(self.config),
            "backends": {"collector": collector_backend(), "buffer": buffer_backend()},
        }
        (self.run_dir / "config.yaml").write_text(yaml.safe_dump(data, sort_keys=False))

    def _progress(self) -> Any:
        if not (self.config.trainer.progress and sys.stderr.isatty()):
            return None
        from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

        bar = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total} frames"),
            TextColumn("{task.fields[fps]:>7.0f} f/s  return {task.fields[ret]:>8.1f}"),
            TimeRemainingColumn(),
            transient=False,
        )
        bar.start()
        self._task = bar.add_task(
            f"{self.config.algo} {self.config.env.name}",
            total=self.config.trainer.total_frames,
            completed=self.frames,
            fps=0.0,
            ret=math.nan,
        )
        return bar

    def train(self) -> dict[str, float]:
        """Run until ``trainer.total_frames`` (or ``trainer.target_return``); returns the
        last logged scalars. Writes ``config.yaml``, ``log.csv``, checkpoints and the plot
        under the run directory.
        """
        tc = self.config.trainer
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._write_config()
        logger = RunLogger(self.run_dir, tensorboard=tc.tensorboard, append=self._resumed)
        bar = self._progress()
        threads = torch.get_num_threads()
        window: deque[tuple[float, int]] = deque(maxlen=5)
        start = time.perf_counter() - self._wall_s
        try:
            torch.set_num_threads(tc.num_threads)
            self._new_collector()
            self.fire("setup", self.run_dir)
            while self.frames < tc.total_frames:
                t0 = time.perf_counter()
                with timeit("trainer/collect"):
                    batch = next(self._batches_iter)
                n_envs = self.config.env.num_envs
                if batch.ndim == 1 and n_envs > 1:  # env-major flat layout -> [envs, time]
                    batch = batch.reshape(n_envs, -1)
                self.frames += batch.numel()
                self.batches += 1
                self._record_episodes(batch)
                self.fire("pre_batch", batch)
                with timeit("trainer/optimize"):
                    scalars = self.optimize(batch)
                self._collector.update_policy_weights_()
                self.fire("post_batch", batch)
                window.append((time.perf_counter() - t0, batch.numel()))
                fps = sum(n for _, n in window) / max(sum(s for s, _ in window), 1e-9)
                self._wall_s = time.perf_counter() - start
                ret = self.recent_return()
                row = {**scalars, "charts/return": ret, "charts/frames_per_s": fps}
                row["charts/episodes"] = float(len(self.episodes))
                row["charts/optim_steps"] = float(self.optim_steps)
                row["charts/wall_s"] = self._wall_s
                if tc.eval_every_batches and self.batches % tc.eval_every_batches == 0:
                    with timeit("trainer/eval"):
                        ev = self.evaluate()
                    row.update(ev)
                    self.fire("post_eval", ev)
                self.last_scalars = row
                if self.batches % tc.log_every_batches == 0:
                    # process-wide timers (mean seconds per use) ride along in the log
                    row.update((k, v) for k, v in timeit.scalars().items() if k.endswith("/mean_s"))
                    logger.log(self.frames, row)
                if bar is not None:
                    bar.update(self._task, completed=self.frames, fps=fps, ret=ret)
                if (
                    tc.target_return is not None
                    and self.reached_target_at is None
                    and len(self.episodes) >= _RETURN_WINDOW
                    and ret >= tc.target_return
                ):
                    self.reached_target_at = (self.frames, self._wall_s)
                    break
                if tc.checkpoint_every_batches and self.batches % tc.checkpoint_every_batches == 0:
                    self._checkpoint(f"batch_{self.batches:06d}.pt")
                    self._new_collector()  # re-seeded: a resume from here collects the same
        except KeyboardInterrupt:
            self._wall_s = time.perf_counter() - start
            self._checkpoint("final.pt")
            raise
        finally:
            torch.set_num_threads(threads)
            if self._collector is not None:
                self._collector.shutdown()
                self._collector = None
            if self._eval_env is not None:
                self._eval_env.close()
                self._eval_env = None
            logger.close()
            if bar is not None:
                bar.stop()
            if tc.plot and self.episodes:
                from rlpace.trainers._plots import plot_learning_curve

                plot_learning_curve(
                    self.episodes,
                    self.run_dir / "learning_curve.png",
                    title=f"{self.config.algo} on {self.config.env.name}",
                )
            self.fire("shutdown", self.last_scalars)
        self._checkpoint("final.pt")
        return self.last_scalars


def seed_everything(seed: int) -> None:
    """Seed torch, numpy's global RNG and Python's ``random``.

    Example:
        >>> seed_everything(0); a = torch.rand(1); seed_everything(0)
        >>> bool(torch.rand(1) == a)
        True
    """
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    random.seed(seed)
