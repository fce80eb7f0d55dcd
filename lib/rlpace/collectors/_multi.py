"""`MultiCollector`: worker processes each stepping their envs, batches through shared memory.

Each worker owns two shared-memory batch buffers laid out in the parent before the
workers start. A worker fills a free buffer, sends its index over a pipe and moves
on to the other one; the parent copies the batch out and hands the buffer back
(a semaphore per worker). Only small messages cross the pipes. Policy weights live
in a :class:`~rlpace.collectors._weights.SharedWeights`.

Workers start collecting at the first ``next()``, so seeds set before it
(:meth:`MultiCollector.set_seed`, a shared array read before each batch) apply before
the first reset. With a replay buffer the parent grants every batch; with ``sync=True``
it grants the next round only when the consumer asks for the next batch, so the
buffer holds exactly the yielded frames at each yield.

Faults: the parent waits on the pipes *and* the process sentinels, so an env error
(sent by the worker with its env index and traceback text) or a dead worker
(SIGKILL) is reported at once; no progress for ``worker_timeout`` seconds raises
``TimeoutError``.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import wait
from typing import Any

import torch
from tensordict import TensorDictBase

from rlpace.collectors._errors import WorkerDiedError, capture_remote, rebuild_remote
from rlpace.collectors._lifecycle import (
    close_quietly,
    end_processes,
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
from rlpace.collectors._rollout import Rollout, load_weights, split_frames
from rlpace.collectors._single import check_replay_buffer, check_total_frames, resolve_env
from rlpace.collectors._weights import SharedWeights


def default_start_method() -> str:
    """``fork`` where the platform has it (fast start, nothing pickled), else ``spawn``."""
    import multiprocessing as mp

    return "fork" if "fork" in mp.get_all_start_methods() else "spawn"


def resolve_policy(policy: Any, policy_factory: Any, who: str) -> Any:
    """The parent's policy instance; exactly one of ``policy`` / ``policy_factory``."""
    if (policy is None) == (policy_factory is None):
        raise ValueError(
            f"{who}: pass exactly one of policy= or policy_factory=; got "
            f"{'both' if policy is not None else 'neither'}"
        )
    if policy_factory is not None:
        if not callable(policy_factory):
            raise TypeError(
                f"{who}: policy_factory must be a zero-argument callable returning the "
                f"policy; got {type(policy_factory).__name__}"
            )
        policy = policy_factory()
    if not callable(policy):
        raise TypeError(
            f"{who}: policy must be a callable TensorDict -> TensorDict; got {type(policy).__name__}"
        )
    return policy


def split_env_fns(env_fns: Sequence[Any], num_workers: int | None, who: str) -> list[list[Any]]:
    """Contiguous chunks of ``env_fns``, one per worker, sizes differing by at most one."""
    if isinstance(env_fns, (str, bytes)) or not isinstance(env_fns, Sequence) or not env_fns:
        raise TypeError(f"{who}: env_fns must be a non-empty list of env factories")
    n = len(env_fns) if num_workers is None else num_workers
    if not 1 <= n <= len(env_fns):
        raise ValueError(
            f"{who}: num_workers must be between 1 and len(env_fns)={len(env_fns)}; got {n}"
        )
    base, extra = divmod(len(env_fns), n)
    chunks, start = [], 0
    for w in range(n):
        size = base + (w < extra)
        chunks.append(list(env_fns[start : start + size]))
        start += size
    return chunks


class WorkerSeeds:
    """Per-worker seeds in shared memory, with a version the workers poll per batch.

    Example:
        >>> import multiprocessing as mp
        >>> seeds = WorkerSeeds(2, mp.get_context("fork"))
        >>> seeds.publish([7, 8], static=False)
        >>> seeds.version, seeds.seed_of(1), seeds.static
        (1, 8, False)
    """

    def __init__(self, num_workers: int, ctx: Any) -> None:
        self._seeds = ctx.RawArray("q", num_workers)
        self._static = ctx.RawValue("b", 0)
        self._version = ctx.RawValue("q", 0)

    @property
    def version(self) -> int:
        return int(self._version.value)

    @property
    def static(self) -> bool:
        return bool(self._static.value)

    def seed_of(self, worker: int) -> int:
        return int(self._seeds[worker])

    def publish(self, seeds: Sequence[int], static: bool) -> None:
        for w, seed in enumerate(seeds):
            self._seeds[w] = seed
        self._static.value = int(static)
        self._version.value += 1  # last: a worker reading the new version sees the seeds


def spawn_seeds(seed: int, count: int) -> list[int]:
    """``count`` independent seeds derived from ``seed`` (NumPy's ``SeedSequence``).

    Example:
        >>> spawn_seeds(0, 2) == spawn_seeds(0, 2), len(set(spawn_seeds(0, 3)))
        (True, 3)
    """
    import numpy as np

    children = np.random.SeedSequence(seed).spawn(count)
    return [int(child.generate_state(1, np.uint32)[0]) for child in children]


def _worker_main(
    index: int,
    env_fns: list[Any],
    policy: Any,
    policy_factory: Any,
    frames: int,
    env_offset: int,
    num_workers: int,
    buffers: list[TensorDictBase] | None,
    replay_buffer: Any,
    weights: SharedWeights | None,
    free: Any,
    stop: Any,
    conn: Any,
    seeds: WorkerSeeds | None = None,
    max_frames_per_traj: int | None = None,
    random_rounds: int = 0,
    postproc: Any = None,
) -> None:
    torch.set_num_threads(1)
    parent = os.getppid()
    rollout = None
    try:
        if policy_factory is not None:
            policy = policy_factory()
        bind = getattr(policy, "bind_worker", None)
        if bind is not None:
            policy = bind(index)  # e.g. a client of an inference server, one slot per worker
        seen = -1
        if weights is not None:
            seen = weights.pull(policy, seen)
        envs = [resolve_env(fn, "MultiCollector worker")[0] for fn in env_fns]
        rollout = Rollout(
            envs,
            policy,
            frames,
            "MultiCollector",
            env_offset,
            index,
            num_workers,
            max_frames_per_traj=max_frames_per_traj,
        )
        slot = 0
        seeded = 0
        collected = 0
        while not stop.is_set():
            if not free.acquire(timeout=0.1):
                if os.getppid() != parent:
                    return  # the parent died: nobody will read our batches
                continue
            if stop.is_set():
                break  # shutdown releases the semaphores to wake us; that is no grant
            if weights is not None:
                seen = weights.pull(policy, seen)
            if seeds is not None and seeds.version != seeded:
                seeded = seeds.version
                rollout.set_seed(seeds.seed_of(index), seeds.static)
            batch = rollout.collect(random=collected < random_rounds)
            collected += 1
            if replay_buffer is not None:
                if postproc is not None:
                    batch = postproc(batch)
                replay_buffer.extend(batch)
                conn.send(("written", batch.numel(), seen))
                continue  # the parent grants the next batch, so it can stop at total_frames
            buffers[slot].update_(batch)
            conn.send(("batch", slot, seen))
            slot ^= 1
    except BaseException as exc:  # noqa: BLE001 - reported with its traceback, then we exit
        _send_error(conn, exc)
    finally:
        if rollout is not None:
            rollout.close()
        with contextlib.suppress(Exception):
            conn.close()


def _send_error(conn: Any, exc: BaseException) -> None:
    """Send ``exc`` with its traceback text; the parent rebuilds the chain."""
    try:
        payload: Any = capture_remote(exc)
        pickle.dumps(payload)
    except Exception:  # noqa: BLE001 - e.g. an EnvStepError around an odd original
        payload = repr(exc)
    with contextlib.suppress(Exception):
        conn.send(("error", payload, None))


class MultiCollector:
    """Worker processes each stepping a share of the envs; batches come back through shared memory.

    With ``sync=True`` each batch gathers ``frames_per_batch / num_workers`` frames from
    every worker (worker by worker, each env's frames in time order). With
    ``sync=False`` each batch is one worker's ``frames_per_batch`` frames, yielded as
    soon as that worker is done; ``("collector", "env_ids")`` says where they came from.

    Args:
        env_fns: one zero-argument env factory per env (picklable under ``spawn``).
        policy: the policy (a ``torch.nn.Module`` for weight updates); exactly one of
            ``policy`` and ``policy_factory``.
        policy_factory: zero-argument callable building the policy; called once in
            the parent (for the weight layout) and once in every worker.
        frames_per_batch: frames per yielded batch.
        sync: gather from all workers (``True``) or yield per worker (``False``).
        num_workers: processes to start (default: one per env factory).
        total_frames: frames to yield in all (last batch cut to fit); ``-1``: endless.
        replay_buffer: a buffer with ``extend`` that every worker can write to (e.g. an
            ``rlpace.data`` shared buffer); workers extend it directly and iteration
            yields ``None`` per batch written.
        start_method: ``"fork"``, ``"spawn"`` or ``"forkserver"`` (default: fork where
            available); never changes the global start method.
        worker_timeout: seconds without any worker message before ``TimeoutError``.
        max_frames_per_traj: steps after which a trajectory is truncated and its env
            reset (see :class:`Collector`); ``None`` or ``<= 0``: no limit.
        init_random_frames: frames, rounded up to whole batches, collected with the
            envs' random actions. With ``sync=True`` the first rounds; with
            ``sync=False`` each worker's first ``ceil(batches / num_workers)`` batches.
        postproc: callable applied to every batch; with ``replay_buffer=`` the
            workers apply it before writing (so it must pickle under ``spawn``).
        split_trajs: yield ``[trajectories, steps]`` padded batches with a
            ``("collector", "mask")``; not with ``replay_buffer``.

    Workers start collecting at the first ``next()``. Without a replay buffer each
    worker runs up to two batches ahead of the consumer (its two shared-memory
    buffers), so frames collected before a weight update can still arrive after it.
    With ``sync=True`` and a replay buffer, the next round starts only when the
    consumer asks for it: at each yield the buffer holds exactly the frames yielded
    so far, every one collected with the weights published before that round.

    Example:
        >>> from functools import partial
        >>> from rlpace.collectors import MultiCollector
        >>> from rlpace.collectors.testing import CountingEnv, make_mlp_policy
        >>> env_fns = [partial(CountingEnv, max_steps=5)] * 2
        >>> with MultiCollector(env_fns, make_mlp_policy(), frames_per_batch=20,
        ...                     total_frames=40) as collector:  # doctest: +SKIP
        ...     print([b.batch_size for b in collector])
        [torch.Size([20]), torch.Size([20])]
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], Any]],
        policy: Any = None,
        *,
        policy_factory: Callable[[], Any] | None = None,
        frames_per_batch: int,
        sync: bool = True,
        num_workers: int | None = None,
        total_frames: int = -1,
        replay_buffer: Any | None = None,
        start_method: str | None = None,
        worker_timeout: float = 60.0,
        max_frames_per_traj: int | None = None,
        init_random_frames: int | None = None,
        postproc: Callable[[TensorDictBase], TensorDictBase] | None = None,
        split_trajs: bool = False,
    ) -> None:
        import multiprocessing as mp

        who = type(self).__name__
        self._closed = True
        self._procs: list[Any] = []
        chunks = split_env_fns(env_fns, num_workers, who)
        check_total_frames(total_frames, who)
        check_postproc(postproc, who)
        max_frames_per_traj = check_max_frames_per_traj(max_frames_per_traj, who)
        rounds = random_batches(init_random_frames, frames_per_batch, who)
        #: frames collected with random actions (``init_random_frames`` rounded up)
        self.init_random_frames = rounds * frames_per_batch
        self.max_frames_per_traj = max_frames_per_traj
        self.postproc = postproc
        self.split_trajs = split_trajs
        self.num_workers = len(chunks)
        self.sync = sync
        self.frames_per_batch = frames_per_batch
        self.total_frames = total_frames
        self.replay_buffer = replay_buffer
        self.worker_timeout = worker_timeout
        self.frames = 0
        self.policy_version = 0
        if sync:
            if frames_per_batch <= 0 or frames_per_batch % self.num_workers:
                raise ValueError(
                    f"{who}(sync=True): frames_per_batch must be a positive multiple of "
                    f"num_workers={self.num_workers}; got {frames_per_batch}"
                )
            per_worker = frames_per_batch // self.num_workers
        else:
            per_worker = frames_per_batch
        self.policy = resolve_policy(policy, policy_factory, who)
        check_replay_buffer(replay_buffer, who, split_trajs)
        if replay_buffer is not None and total_frames != -1 and total_frames % frames_per_batch:
            raise ValueError(
                f"{who}: with replay_buffer=, workers write whole batches, so total_frames "
                f"must be a multiple of frames_per_batch={frames_per_batch}; got {total_frames}"
            )
        method = start_method or default_start_method()
        ctx = mp.get_context(method)

        # Lay out the batch buffers from one env and one step in the parent.
        probe, owned = resolve_env(chunks[0][0], who)
        try:
            numel = max(1, probe.batch_size.numel())
            for chunk in chunks:
                split_frames(per_worker, numel * len(chunk), who)
            frame = Rollout(
                [probe], self.policy, numel, who, max_frames_per_traj=max_frames_per_traj
            ).collect()[0]
        finally:
            if owned:
                probe.close()
        buffers = None
        if replay_buffer is None:
            buffers = [
                [frame.expand(per_worker).clone().share_memory_() for _ in range(2)] for _ in chunks
            ]
        self._buffers = buffers
        self._weights = (
            SharedWeights(self.policy, ctx) if isinstance(self.policy, torch.nn.Module) else None
        )
        self._stop = ctx.Event()
        self._seeds = WorkerSeeds(self.num_workers, ctx)
        # Batch buffers: two per worker, so a worker runs one batch ahead. Replay-buffer
        # writes: the parent grants each batch, so exactly total_frames get written.
        # Nothing is granted before the first next() (see _begin).
        self._free = [ctx.Semaphore(0) for _ in chunks]
        self._per_worker = per_worker
        self._granted = 0
        self._started = False
        self._regrant: list[int] = []  # sync + replay buffer: granted when next() is called
        self._conns = []
        self._closed = False
        worker_policy = self.policy if policy_factory is None else None
        offset = 0
        try:
            for w, chunk in enumerate(chunks):
                parent_conn, child_conn = ctx.Pipe(duplex=False)
                proc = ctx.Process(
                    target=_worker_main,
                    args=(
                        w,
                        chunk,
                        worker_policy,
                        policy_factory,
                        per_worker,
                        offset,
                        self.num_workers,
                        None if buffers is None else buffers[w],
                        replay_buffer,
                        self._weights,
                        self._free[w],
                        self._stop,
                        child_conn,
                        self._seeds,
                        max_frames_per_traj,
                        rounds if sync else -(-rounds // self.num_workers),
                        postproc if replay_buffer is not None else None,
                    ),
                    daemon=True,
                    name=f"rlpace-collector-worker-{w}",
                )
                proc.start()
                child_conn.close()
                self._procs.append(proc)
                self._conns.append(parent_conn)
                offset += numel * len(chunk)
        except Exception:
            self.shutdown()
            raise
        self._next_worker = 0

    def _begin(self) -> None:
        """Let the workers start: two buffers each, or one replay-buffer batch each."""
        self._started = True
        for w in range(self.num_workers):
            if self.replay_buffer is not None:
                self._grant(w)
            else:
                self._free[w].release()
                self._free[w].release()

    def _grant(self, worker: int) -> None:
        """Let ``worker`` write one more batch, unless that would pass total_frames."""
        if self.total_frames == -1 or self._granted + self._per_worker <= self.total_frames:
            self._granted += self._per_worker
            self._free[worker].release()

    # -- receiving ---------------------------------------------------------------

    def _receive(self, workers: Sequence[int]) -> tuple[int, tuple]:
        """One message from one of ``workers``; raises on errors, deaths and silence."""
        conns = {self._conns[w]: w for w in workers}
        sentinels = {self._procs[w].sentinel: w for w in workers}
        deadline = time.monotonic() + self.worker_timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.shutdown()
                raise TimeoutError(
                    f"MultiCollector: no worker sent a batch for {self.worker_timeout}s; "
                    "raise worker_timeout= for slow envs"
                )
            ready = wait([*conns, *sentinels], timeout=left)
            readable = [c for c in ready if c in conns]
            if readable:
                # Round-robin among ready workers so none starves under sync=False.
                readable.sort(key=lambda c: (conns[c] - self._next_worker) % self.num_workers)
                conn = readable[0]
                w = conns[conn]
                try:
                    msg = conn.recv()
                except EOFError:
                    msg = None
                if msg is not None and msg[0] != "error":
                    return w, msg
                self._fail(w, None if msg is None else msg[1])
            for s in ready:
                if s in sentinels:
                    w = sentinels[s]
                    if self._conns[w].poll():
                        break  # it said something before dying: read that first
                    self._fail(w, None)

    def _fail(self, worker: int, error: Any) -> None:
        proc = self._procs[worker]
        proc.join(1.0)
        exitcode = proc.exitcode
        self.shutdown()
        if isinstance(error, tuple):
            raise rebuild_remote(error)
        if isinstance(error, BaseException):
            raise error
        if error is not None:
            raise RuntimeError(f"MultiCollector worker {worker} failed: {error}")
        raise WorkerDiedError(worker, exitcode)

    def _take(self, worker: int, msg: tuple) -> TensorDictBase | None:
        kind, payload, _version = msg
        if kind == "written":
            self.frames += payload
            if self.sync:
                self._regrant.append(worker)  # once the consumer asks for the next round
            else:
                self._grant(worker)
            return None
        batch = self._buffers[worker][payload].clone()
        self._free[worker].release()
        return batch

    # -- public --------------------------------------------------------------------

    def next(self) -> TensorDictBase | None:
        """Collect one batch (``None`` when workers wrote it to the replay buffer).

        Raises:
            EnvStepError: an env raised in a worker (names the env, chains the cause).
            WorkerDiedError: a worker process ended unexpectedly.
            TimeoutError: no worker reported for ``worker_timeout`` seconds.
        """
        if self._closed:
            raise RuntimeError("MultiCollector was shut down; build a new one")
        if not self._started:
            self._begin()
        elif self._regrant:
            for w in self._regrant:
                self._grant(w)
            self._regrant = []
        if self.sync:
            parts = []
            for w in range(self.num_workers):
                _, msg = self._receive([w])
                parts.append(self._take(w, msg))
            batch = None if parts[0] is None else torch.cat(parts, 0)
            if batch is None:
                return None
        else:
            w, msg = self._receive(range(self.num_workers))
            self._next_worker = (w + 1) % self.num_workers
            batch = self._take(w, msg)
            if batch is None:
                return None
        if self.total_frames != -1:
            left = self.total_frames - self.frames
            if left < batch.numel():
                batch = batch[:left]
        self.frames += batch.numel()
        if self.postproc is not None or self.split_trajs:
            batch = finish_batch(batch, self.postproc, self.split_trajs)
        return batch

    def set_seed(self, seed: int, static_seed: bool = False) -> int:
        """Seed the workers' envs; returns the next seed to use.

        Each worker gets its own seed derived from ``seed`` (NumPy's
        ``SeedSequence``) and passes it through its envs' ``set_seed`` in turn. A
        worker applies it before its next batch: call this before the first
        ``next()`` for reproducible collection (workers start at the first ``next()``).

        Args:
            seed: the seed.
            static_seed: passed on to ``env.set_seed`` (use the seed as is).
        """
        seeds = spawn_seeds(seed, self.num_workers + 1)
        self._seeds.publish(seeds[:-1], static_seed)
        return seeds[-1]

    def state_dict(self) -> dict[str, Any]:
        """Frames so far, policy version and a copy of the policy's weights.

        The workers' envs are not included (they live in other processes).
        """
        return collector_state(self)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from :meth:`state_dict`: frames (for ``total_frames``) and weights,
        published to the workers."""
        state = check_state(state, type(self).__name__)
        if state.get("policy") is not None:
            load_weights(self.policy, state["policy"])
            if self._weights is not None:
                self._weights.publish(self.policy)
        frames = int(state["frames"])
        self._granted += frames - self.frames  # replay-buffer grants stop at total_frames
        self.frames = frames
        self.policy_version = int(state["policy_version"])

    def update_policy_weights_(self, weights: TensorDictBase | dict | None = None) -> None:
        """Publish new weights to every worker through shared memory (nothing pickled).

        Args:
            weights: a ``state_dict`` or TensorDict of parameters; ``None`` publishes
                the current weights of the ``policy`` this collector holds.

        Workers pick the new weights up before their next batch.
        """
        if self._weights is None:
            raise TypeError(
                "MultiCollector: weight updates need a torch.nn.Module policy; this one is "
                f"a {type(self.policy).__name__}"
            )
        self._weights.publish(self.policy if weights is None else weights)
        self.policy_version += 1

    def shutdown(self, timeout: float = 2.0) -> None:
        """Stop and join every worker (terminate, then kill, stragglers); idempotent."""
        if self._closed and not self._procs:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            self._stop.set()
        for free in getattr(self, "_free", []):
            with contextlib.suppress(Exception):
                free.release()  # a worker waiting for a free buffer sees the stop flag
        end_processes(self._procs, timeout)
        close_quietly(getattr(self, "_conns", []))
        self._procs = []

    __iter__ = iterate_batches
    __len__ = batches_in
    __enter__ = enter_context
    __exit__ = exit_context
    __del__ = shutdown_quietly
