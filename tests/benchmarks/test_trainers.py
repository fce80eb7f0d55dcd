"""Trainer benchmarks: one PPO / SAC optimisation step, loop overhead, timeit overhead.

- ``test_ppo_speed`` / ``test_sac_speed``: one gradient step (loss forward, backward,
  optimizer step) on a fixed mini-batch, eager or ``torch.compile``-d loss module.
- ``test_trainer_overhead``: frames/s of a short PPO run (2 batches of 512 CartPole
  frames, 4 epochs of 2 mini-batches) through the rlpace trainer (``impl=rlpace``) and
  torchrl 0.14.1's ``PPOTrainer`` (``impl=torchrl``); ``test_trainer_loop_floor`` does the
  same work in a minimal hand-written loop over the same rlpace collector, so
  ``rlpace / floor`` is the trainer's overhead.
- ``test_timeit_overhead``: 1000 uses of ``timeit`` per call (items = uses).
"""

from __future__ import annotations

import logging
import shutil
import sys
import tempfile

import torch

from rlpace.bench.suite import SkipCase, Timed, case

FPB, BATCHES, NUM_ENVS, EPOCHS, MB = 512, 2, 8, 4, 256


def _one_thread():
    """Small MLPs are fastest on one intra-op thread; returns the undo for teardown."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    return lambda: torch.set_num_threads(before)


def _smoke_run() -> bool:
    # `make test` runs each case once with --benchmark-disable; compiling costs minutes
    return "--benchmark-disable" in sys.argv


def _ppo_parts():
    from rlpace.trainers import EnvConfig, PPOConfig, PPOTrainer, TrainerConfig
    from rlpace.trainers._envs import make_env

    cfg = PPOConfig(
        env=EnvConfig("CartPole-v1", num_envs=NUM_ENVS),
        trainer=TrainerConfig(
            total_frames=FPB * BATCHES, frames_per_batch=FPB, plot=False, progress=False
        ),
        epochs=EPOCHS,
        mini_batch_size=MB,
        anneal_lr=False,
    )
    run_dir = tempfile.mkdtemp(prefix="rlpace-bench-")
    trainer = PPOTrainer(cfg, run_dir=run_dir)
    return cfg, trainer, run_dir, make_env


def _step(loss_module, optimizer, keys, batch):
    losses = loss_module(batch)
    total = sum(losses[k] for k in keys)
    optimizer.zero_grad(set_to_none=True)
    total.backward()
    optimizer.step()


def _skip_compile_in_smoke_runs(mode):
    if mode == "compile" and _smoke_run():
        raise SkipCase("torch.compile warm-up takes minutes; timed only in benchmark runs")


def _warm_up(mode, step):
    """The first call compiles; a loss that torch.compile cannot handle here is a skip."""
    try:
        step()
    except Exception as exc:
        if mode == "eager":
            raise
        raise SkipCase(f"torch.compile of this loss fails on this machine: {exc}") from exc


def _maybe_compile(loss_module, mode):
    return loss_module if mode == "eager" else torch.compile(loss_module)


@case(params={"mode": ["eager", "compile"]}, timer="cpu")
def test_ppo_speed(mode):
    """One clipped-PPO gradient step on 256 CartPole frames (actor and critic 64x64)."""
    _skip_compile_in_smoke_runs(mode)
    restore = _one_thread()
    _, trainer, run_dir, make_env = _ppo_parts()
    env = make_env("CartPole-v1", 0, NUM_ENVS)
    with torch.no_grad():
        td = env.rollout(MB // NUM_ENVS, trainer.actor, break_when_any_done=False)
        trainer.advantage(td)
    env.close()
    batch = td.reshape(-1)
    loss = _maybe_compile(trainer.loss_module, mode)
    keys = ("loss_objective", "loss_critic")
    _warm_up(mode, lambda: _step(loss, trainer.optimizer, keys, batch))
    return Timed(
        lambda: _step(loss, trainer.optimizer, keys, batch),
        teardown=lambda: (restore(), shutil.rmtree(run_dir, ignore_errors=True)),
        items=MB,
        unit="samples",
    )


@case(params={"mode": ["eager", "compile"]}, timer="cpu")
def test_sac_speed(mode):
    """One SAC gradient step (actor, twin Q, temperature, target update) on 256 Pendulum frames."""
    from rlpace.trainers import SACConfig, SACTrainer, TrainerConfig
    from rlpace.trainers._envs import make_env

    _skip_compile_in_smoke_runs(mode)
    restore = _one_thread()
    run_dir = tempfile.mkdtemp(prefix="rlpace-bench-")
    cfg = SACConfig(trainer=TrainerConfig(total_frames=1000, frames_per_batch=100, plot=False))
    trainer = SACTrainer(cfg, run_dir=run_dir)
    env = make_env("Pendulum-v1", 0)
    with torch.no_grad():
        batch = env.rollout(256, trainer.actor, break_when_any_done=False)
    env.close()
    loss = _maybe_compile(trainer.loss_module, mode)
    keys = ("loss_actor", "loss_qvalue", "loss_alpha")

    def step():
        _step(loss, trainer.optimizer, keys, batch)
        trainer.target_updater.step()

    _warm_up(mode, step)
    return Timed(
        step,
        teardown=lambda: (restore(), shutil.rmtree(run_dir, ignore_errors=True)),
        items=256,
        unit="samples",
    )


def _rlpace_run(trainer):
    def run():
        trainer.frames = trainer.batches = 0
        trainer.episodes = []
        trainer.train()

    return run


def _torchrl_run(trainer_parts):
    from torchrl.collectors import Collector
    from torchrl.trainers.algorithms import PPOTrainer as TorchRLPPOTrainer

    cfg, ours, make_env = trainer_parts

    def run():
        collector = Collector(
            lambda: make_env("CartPole-v1", cfg.seed, NUM_ENVS),
            ours.actor,
            frames_per_batch=FPB,
            total_frames=FPB * BATCHES,
        )
        trainer = TorchRLPPOTrainer(
            collector=collector,
            total_frames=FPB * BATCHES,
            frame_skip=1,
            optim_steps_per_batch=FPB // MB,
            loss_module=ours.loss_module,
            optimizer=ours.optimizer,
            num_epochs=EPOCHS,
            batch_size=MB,
            clip_norm=cfg.max_grad_norm,
            progress_bar=False,
            enable_logging=False,
            log_rewards=False,
            log_actions=False,
            save_trainer_file=None,
            gamma=cfg.gamma,
            lmbda=cfg.gae_lambda,
        )
        trainer.train()
        collector.shutdown()

    return run


@case(params={"impl": ["rlpace", "torchrl"]}, timer="cpu")
def test_trainer_overhead(impl):
    """A 2-batch PPO run end to end (collect, GAE, 4 epochs x 2 mini-batches, log)."""
    restore = _one_thread()
    logging.getLogger("torchrl").setLevel(logging.WARNING)
    cfg, trainer, run_dir, make_env = _ppo_parts()
    if impl == "rlpace":
        fn = _rlpace_run(trainer)
    else:
        try:
            fn = _torchrl_run((cfg, trainer, make_env))
            fn()  # warm-up, and proof it runs here
        except Exception as exc:  # a peer that cannot run here is a skip, not a failure
            raise SkipCase(f"torchrl's PPOTrainer cannot run here: {exc}") from exc
    return Timed(
        fn,
        teardown=lambda: (restore(), shutil.rmtree(run_dir, ignore_errors=True)),
        items=FPB * BATCHES,
        unit="frames",
    )


@case(params={"algo": ["ppo"]}, timer="cpu")
def test_trainer_loop_floor(algo):
    """The same work as ``test_trainer_overhead`` in a bare hand-written loop (the floor)."""
    from torch import nn

    from rlpace.trainers._wiring import make_collector

    restore = _one_thread()
    cfg, trainer, run_dir, make_env = _ppo_parts()
    loss, opt, gae = trainer.loss_module, trainer.optimizer, trainer.advantage

    def run():
        collector = make_collector(
            lambda: make_env("CartPole-v1", cfg.seed, NUM_ENVS),
            trainer.actor,
            frames_per_batch=FPB,
            total_frames=FPB * BATCHES,
        )
        for batch in collector:
            batch = batch.reshape(NUM_ENVS, -1)
            with torch.no_grad():
                gae(batch)
            flat = batch.reshape(-1)
            for _ in range(EPOCHS):
                perm = torch.randperm(FPB)
                for start in range(0, FPB, MB):
                    out = loss(flat[perm[start : start + MB]])
                    total = out["loss_objective"] + out["loss_critic"]
                    opt.zero_grad(set_to_none=True)
                    total.backward()
                    nn.utils.clip_grad_norm_(loss.parameters(), cfg.max_grad_norm)
                    opt.step()
        collector.shutdown()

    return Timed(
        run,
        teardown=lambda: (restore(), shutil.rmtree(run_dir, ignore_errors=True)),
        items=FPB * BATCHES,
        unit="frames",
    )


@case(params={"use": ["context", "decorator"]}, timer="cpu")
def test_timeit_overhead(use):
    """1000 timed no-op uses of ``rlpace.trainers.timeit`` per call (target <= 2 us each)."""
    from rlpace.trainers import timeit

    n = 1000
    if use == "context":

        def fn():
            for _ in range(n):
                with timeit("bench/context"):
                    pass
    else:

        @timeit("bench/decorator")
        def noop():
            return None

        def fn():
            for _ in range(n):
                noop()

    return Timed(fn, teardown=timeit.reset, items=n, unit="uses")
