"""`AsyncBatchedCollector`: envs step independently, an inference server batches their requests.

Backends come in three tiers, like ``device`` / ``env_device`` / ``policy_device``:
``backend`` is the default, ``env_backend`` says where the env pool runs and
``policy_backend`` which transport carries requests between envs and the server.
Every combination is checked against :data:`SUPPORTED` before anything starts.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import torch
from tensordict import TensorDictBase

from rlpace.collectors._errors import EnvStepError, PolicyError, WorkerDiedError
from rlpace.collectors._lifecycle import (
    close_envs,
    enter_context,
    exit_context,
    iterate_batches,
    join_threads,
    shutdown_quietly,
)
from rlpace.collectors._multi import resolve_policy, split_env_fns
from rlpace.collectors._options import (
    batches_in,
    check_postproc,
    check_state,
    collector_state,
    finish_batch,
)
from rlpace.collectors._rollout import (
    ENV_KEY,
    TRAJ_KEY,
    root_keys_after_step,
    stack_frames,
)
from rlpace.collectors._server import InferenceServer, ServerStats
from rlpace.collectors._single import check_replay_buffer, check_total_frames, resolve_env
from rlpace.collectors._transports import TransportClosed, make_transport

BACKENDS = ("threading", "multiprocessing", "ray")
#: (env_backend, policy_backend) pairs that run; anything else fails at construction.
SUPPORTED = {
    ("threading", "threading"): "env threads, SlotTransport or ThreadingTransport",
    ("multiprocessing", "multiprocessing"): "env processes, SharedMemorySlotTransport",
    ("ray", "ray"): "env Ray actors, RayTransport, server in the driver",
}


class FrameInbox:
    """Frames from many producer threads to one consumer, waking it once per batch.

    A ``queue`` wakes its consumer on every ``put``: one thread switch per frame on
    top of the env's and the server's. Here producers append to a deque (atomic
    under the GIL) and set an event only once ``want`` frames are waiting, so the
    consumer sleeps until a whole batch is there. Producers that run too far ahead
    block in :meth:`wait_for_room` (no polling) until the consumer takes a batch:
    the collector's one back-pressure mechanism, for env threads and for the server
    thread that drives Ray actors alike.

    Example:
        >>> inbox = FrameInbox()
        >>> for i in range(3):
        ...     inbox.put((0, 0, i))
        >>> inbox.take(2, check=lambda: None)
        [(0, 0, 0), (0, 0, 1)]
        >>> len(inbox)
        1
        >>> inbox.close()  # a shutdown: producers waiting for room return at once
        >>> inbox.wait_for_room(cap=1)
        >>> inbox.closed
        True
    """

    def __init__(self) -> None:
        self._items: deque[Any] = deque()
        self._want = 1
        self._ready = threading.Event()
        self._room = threading.Event()
        self.closed = False

    def __len__(self) -> int:
        return len(self._items)

    def put(self, item: Any) -> None:
        """Add one item; wakes the consumer once enough are waiting."""
        self._items.append(item)
        if len(self._items) >= self._want and not self._ready.is_set():
            self._ready.set()

    def close(self) -> None:
        """Stop every wait for good (an error, a shutdown): wakes the consumer and every
        blocked producer, and :meth:`wait_for_room` no longer blocks."""
        self.closed = True
        self._ready.set()
        self._room.set()

    def wait_for_room(self, cap: int, poll: float = 0.1) -> None:
        """Block while ``cap`` or more items wait (at most ``poll`` s: callers re-check
        their stop flag, or :attr:`closed`)."""
        if len(self._items) >= cap and not self.closed:
            self._room.clear()
            # the consumer took a batch, or closed us, between the check and the clear
            if len(self._items) >= cap and not self.closed:
                self._room.wait(poll)

    def take(self, want: int, check: Callable[[], None], poll: float = 0.1) -> list[Any]:
        """The oldest ``want`` items, waiting for them; ``check()`` runs on every wake-up
        (and every ``poll`` seconds) so it can raise when a producer failed."""
        items, ready = self._items, self._ready
        self._want = want
        while len(items) < want:
            ready.clear()
            if len(items) >= want:  # a producer filled up between the check and clear
                break
            ready.wait(poll)
            check()
        taken = [items.popleft() for _ in range(want)]
        self._room.set()
        return taken


def resolve_backends(
    backend: str | None, env_backend: str | None, policy_backend: str | None
) -> tuple[str, str]:
    """The (env, policy) backends after defaults; raises on unknown or unsupported pairs.

    Example:
        >>> resolve_backends(None, None, None)
        ('threading', 'threading')
        >>> resolve_backends("threading", None, "threading")
        ('threading', 'threading')
    """
    for name, value in (
        ("backend", backend),
        ("env_backend", env_backend),
        ("policy_backend", policy_backend),
    ):
        if value is not None and value not in BACKENDS:
            raise ValueError(
                f"AsyncBatchedCollector: unknown {name}={value!r}; expected one of {BACKENDS}"
            )
    default = backend or "threading"
    pair = (env_backend or default, policy_backend or default)
    if pair not in SUPPORTED:
        options = ", ".join(f"env_backend={e!r}/policy_backend={p!r}" for e, p in SUPPORTED)
        raise ValueError(
            f"AsyncBatchedCollector: env_backend={pair[0]!r} with policy_backend={pair[1]!r} "
            f"is not supported; supported combinations: {options}"
        )
    return pair


def threads_to_keep_gil_busy(env: Any, num_envs: int, probe_seconds: float = 0.05) -> int:
    """Env threads for ``num_envs`` envs like ``env``: as many as keep one GIL busy.

    A few random steps (at most 4, and none started after ``probe_seconds``) measure
    the share of a step this thread spends on the CPU, taken from the quickest step. An env that computes in
    Python or small torch ops (CartPole, most simulators written in Python) holds the
    GIL all along: one thread stepping every env in turn does the same work with the
    fewest thread switches. An env that mostly waits (sleeps, I/O, native code that
    releases the GIL) needs a thread per env to overlap the waits. In between, about
    ``1 / share`` threads. The env is left stepped: reset it before use. The random
    actions come from a fork of torch's global generator, so the caller's random
    stream is the same whether or not (and however long) the probe ran.

    Example:
        >>> from rlpace.collectors.testing import CountingEnv
        >>> threads_to_keep_gil_busy(CountingEnv(), num_envs=8)  # pure torch: GIL-bound
        1
        >>> # waits: about a thread per env (7 or 8; the probe reads CPU time, and load moves it)
        >>> threads_to_keep_gil_busy(CountingEnv(step_sleep=0.005), num_envs=8) >= 6
        True
    """
    steps: list[tuple[float, float]] = []  # (CPU, wall) seconds of each probe step
    with torch.random.fork_rng(devices=[]):
        td = env.reset()
        start = time.perf_counter()
        for _ in range(4):
            wall, cpu = time.perf_counter(), time.thread_time()
            nxt = env.rand_step(td).get("next")
            steps.append((time.thread_time() - cpu, time.perf_counter() - wall))
            done = nxt.get("done", None)
            td = env.reset() if done is not None and bool(done.any()) else nxt
            if time.perf_counter() - start > probe_seconds:
                break
    # the quickest step: another process taking the core only adds wall time (a busy env
    # would look idle), one-time costs of a first step only add CPU time (an idle env
    # would look busy); the quickest step carries the least of both
    cpu, wall = min(steps, key=lambda step: step[1])
    share = cpu / wall if wall > 0 else 1.0
    return max(1, min(num_envs, round(1 / max(share, 1e-3))))


#: Linux ``prctl`` option: the signal a process gets when its parent thread exits
_PR_SET_PDEATHSIG = 1
#: how often an env process waiting for the server checks that the collector lives
_PARENT_POLL_S = 1.0


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class _OrphanGuardedPolicy:
    """The env processes' :class:`RemotePolicy`, made to end with the collector's process.

    Its worker side (:meth:`bind_worker`, which runs in the env process) asks the
    kernel to SIGTERM the process when its parent dies (``PR_SET_PDEATHSIG``, Linux,
    only when the collector was built in the main thread: the kernel watches the
    forking *thread*), and waits for each response in rounds of ``_PARENT_POLL_S``
    seconds, raising ``TransportClosed`` once the collector's process is gone. A worker
    orphaned before either would otherwise wait on the server forever.
    """

    def __init__(self, remote: Any) -> None:
        self.remote = remote
        self.parent_pid = os.getpid()
        self.deathsig = threading.current_thread() is threading.main_thread()

    def __call__(self, td: TensorDictBase) -> TensorDictBase:
        remote = self.remote
        if remote.slot is None:  # unbound, in the collector's process
            return remote(td)
        request = td.select(*remote.in_keys) if remote.in_keys else td
        remote.transport.submit(remote.slot, request)
        while True:
            try:
                remote.transport.receive_into(remote.slot, td, timeout=_PARENT_POLL_S)
                return td
            except TimeoutError:
                self._check_parent()

    def bind_worker(self, index: int) -> _OrphanGuardedPolicy:
        bound = _OrphanGuardedPolicy(self.remote.bind_worker(index))
        bound.parent_pid, bound.deathsig = self.parent_pid, self.deathsig
        if self.deathsig and os.getppid() == self.parent_pid and sys.platform == "linux":
            with contextlib.suppress(OSError, AttributeError):
                libc = ctypes.CDLL(None, use_errno=True)
                libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        bound._check_parent()  # it may have died before the kernel was told
        return bound

    def _check_parent(self) -> None:
        if os.getppid() != self.parent_pid and not _process_alive(self.parent_pid):
            raise TransportClosed(
                f"the collector's process (pid {self.parent_pid}) died; this env process stops"
            )


def _slot_of(item: tuple[int, int, TensorDictBase]) -> int:
    return item[0]


class AsyncBatchedCollector:
    """A pool of envs stepping independently while an :class:`InferenceServer` batches them.

    Every env has a slot in a transport. An env submits its observation, waits for its
    action, steps, records the transition and carries on (resetting when done); the
    server answers whatever requests are pending with one forward pass. There is no
    barrier: fast envs do not wait for slow ones. Batches hold ``frames_per_batch``
    transitions grouped by env (each env's frames in time order) with
    ``("collector", "env_ids")`` and ``("collector", "traj_ids")``.

    Args:
        env_fns: one zero-argument factory per env; envs must be unbatched
            (``batch_size=[]``): the server does the batching.
        policy: the policy; exactly one of ``policy`` and ``policy_factory``.
        policy_factory: zero-argument callable building the policy.
        frames_per_batch: transitions per batch.
        total_frames: transitions to yield in all (last batch cut); ``-1``: endless.
        backend: default backend for both tiers: ``"threading"``,
            ``"multiprocessing"`` or ``"ray"``.
        env_backend: where the env pool runs (overrides ``backend``).
        policy_backend: the transport between envs and server (overrides ``backend``).
        transport: for threads, ``"slot"`` (:class:`SlotTransport`, default) or
            ``"queue"`` (:class:`ThreadingTransport`), or a transport instance.
        min_batch_size: requests the server waits for (bounded by ``server_timeout``).
        max_batch_size: most requests per forward pass.
        server_timeout: seconds the server waits for ``min_batch_size`` requests.
        replay_buffer: an object with ``extend``; batches go there, iteration yields
            ``None``.
        start_method: for ``env_backend="multiprocessing"``: ``"fork"`` (default where
            available), ``"spawn"`` or ``"forkserver"``; never set globally.
        ray_address: for ``backend="ray"`` when Ray is not initialized yet: the
            cluster address passed to ``ray.init`` (``None``: a local instance).
        ray_actor_options: ``.options(...)`` for every env actor (default
            ``{"num_cpus": 0}``, so more envs than CPUs fit on one machine).
        env_threads: for ``env_backend="threading"``: threads stepping the envs, each
            its share in rounds (every env once, then one submit of their requests).
            ``None`` chooses from a few random probe steps of the first env: one
            thread when a step holds the GIL (CartPole, pure-torch envs), one per env
            when a step mostly waits (sleeps, I/O), about ``1 / (CPU share of a
            step)`` in between. The choice is kept in ``env_threads``.
        postproc: callable applied to every batch before it is yielded or written.
        split_trajs: yield ``[trajectories, steps]`` padded batches with a
            ``("collector", "mask")``; not with ``replay_buffer``.

    Deliberately absent (the envs step on their own schedule, so neither would be
    reproducible): ``set_seed`` and ``init_random_frames``; for
    ``max_frames_per_traj``, wrap the env in torchrl's ``StepCounter(max_steps=n)``
    inside the env factory.

    Example:
        >>> from functools import partial
        >>> from rlpace.collectors import AsyncBatchedCollector
        >>> from rlpace.collectors.testing import CountingEnv, make_mlp_policy
        >>> env_fns = [partial(CountingEnv, max_steps=3)] * 4
        >>> with AsyncBatchedCollector(env_fns, make_mlp_policy(), frames_per_batch=16,
        ...                            total_frames=32) as collector:
        ...     sizes = [b.numel() for b in collector]
        ...     stats = collector.server_stats()
        >>> sizes
        [16, 16]
        >>> stats.requests > 0 and stats.mean_batch_size >= 1
        True
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], Any]],
        policy: Any = None,
        *,
        policy_factory: Callable[[], Any] | None = None,
        frames_per_batch: int,
        total_frames: int = -1,
        backend: str | None = None,
        env_backend: str | None = None,
        policy_backend: str | None = None,
        transport: Any = None,
        min_batch_size: int = 1,
        max_batch_size: int | None = None,
        server_timeout: float = 0.002,
        replay_buffer: Any | None = None,
        start_method: str | None = None,
        ray_address: str | None = None,
        ray_actor_options: dict[str, Any] | None = None,
        env_threads: int | None = None,
        postproc: Callable[[TensorDictBase], TensorDictBase] | None = None,
        split_trajs: bool = False,
    ) -> None:
        who = type(self).__name__
        self._closed = True
        self._threads: list[threading.Thread] = []
        self.env_backend, self.policy_backend = resolve_backends(
            backend, env_backend, policy_backend
        )
        if isinstance(env_fns, (str, bytes)) or not isinstance(env_fns, Sequence) or not env_fns:
            raise TypeError(f"{who}: env_fns must be a non-empty list of env factories")
        if frames_per_batch <= 0:
            raise ValueError(f"{who}: frames_per_batch must be positive; got {frames_per_batch}")
        check_total_frames(total_frames, who)
        check_replay_buffer(replay_buffer, who, split_trajs)
        check_postproc(postproc, who)
        self.postproc = postproc
        self.split_trajs = split_trajs
        self.policy = resolve_policy(policy, policy_factory, who)
        self.frames_per_batch = frames_per_batch
        self.total_frames = total_frames
        self.replay_buffer = replay_buffer
        self.frames = 0
        self.num_envs = len(env_fns)
        self.server_timeout = server_timeout
        self._batch_limits = (min_batch_size, max_batch_size)
        if env_threads is not None and not 1 <= env_threads <= self.num_envs:
            raise ValueError(
                f"{who}: env_threads must be between 1 and the number of envs "
                f"({self.num_envs}), or None to choose; got {env_threads}"
            )
        if env_threads is not None and self.env_backend != "threading":
            raise ValueError(
                f"{who}: env_threads applies to env_backend='threading' only; got "
                f"env_backend={self.env_backend!r}. Leave env_threads=None."
            )
        #: env threads (threads backend): each steps its share of the envs in turn
        self.env_threads = env_threads
        in_keys = getattr(self.policy, "in_keys", None)
        self._request_keys = list(in_keys) if in_keys else None
        self._envs: list[Any] = []
        self._pool: Any = None
        self._leftover: TensorDictBase | None = None
        self._results = FrameInbox()
        # Back-pressure, one mechanism for every in-process producer (env threads, and
        # the server thread driving Ray actors): while this many frames wait for the
        # consumer, producers block in FrameInbox.wait_for_room.
        self._max_buffered = 2 * frames_per_batch
        self._stop = threading.Event()
        self._traj_counter = itertools.count()
        self._error: tuple[int, BaseException] | None = None
        if self.env_backend == "threading":
            self._start_threads(env_fns, transport)
        elif self.env_backend == "multiprocessing":
            self._start_processes(env_fns, transport, start_method)
        else:
            self._start_ray(env_fns, transport, ray_address, ray_actor_options)

    def _start_threads(self, env_fns: Sequence[Callable[[], Any]], transport: Any) -> None:
        who = type(self).__name__
        self.transport = make_transport(transport, self.num_envs)
        self.server = InferenceServer(
            self.policy, self.transport, *self._batch_limits, self.server_timeout, client_slots=()
        )
        try:
            for i, fn in enumerate(env_fns):
                env, _ = resolve_env(fn, who)
                self._envs.append(env)
                if env.batch_size:
                    raise ValueError(
                        f"{who}: env {i} is batched (batch_size={list(env.batch_size)}); "
                        "give one unbatched env per slot, the server does the batching"
                    )
        except Exception:
            close_envs(self._envs)
            raise
        if self.env_threads is None:
            try:
                self.env_threads = threads_to_keep_gil_busy(self._envs[0], self.num_envs)
            except Exception:  # noqa: BLE001 - an env without random actions: the safe choice
                self.env_threads = self.num_envs
        self._closed = False
        self.server.start()
        groups = split_env_fns(range(self.num_envs), self.env_threads, who)
        for slots in groups:
            thread = threading.Thread(
                target=self._env_loop, args=(slots,), name=f"rlpace-env-{slots[0]}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def _start_processes(
        self, env_fns: Sequence[Callable[[], Any]], transport: Any, start_method: str | None
    ) -> None:
        import multiprocessing as mp

        from rlpace.collectors._multi import MultiCollector, default_start_method
        from rlpace.collectors._rollout import direct_policy, policy_context
        from rlpace.collectors._shm_transport import RemotePolicy, SharedMemorySlotTransport

        who = type(self).__name__
        if transport not in (None, "shm"):
            raise ValueError(
                f"{who}: env processes use the shared-memory slot transport; "
                f"got transport={transport!r}. Pass transport=None or 'shm'."
            )
        ctx = mp.get_context(start_method or default_start_method())
        probe, owned = resolve_env(env_fns[0], who)
        try:
            if probe.batch_size:
                raise ValueError(
                    f"{who}: env 0 is batched (batch_size={list(probe.batch_size)}); "
                    "give one unbatched env per slot, the server does the batching"
                )
            root = probe.reset()
        finally:
            if owned:
                probe.close()
        keys = self._request_keys
        request = root.select(*keys) if keys else root
        with policy_context(self.policy):
            out = direct_policy(self.policy)(request.clone())
        response = out.exclude(*request.keys(True, True))
        self.transport = SharedMemorySlotTransport(self.num_envs, request, response, ctx)
        self.server = InferenceServer(
            self.policy, self.transport, *self._batch_limits, self.server_timeout, client_slots=()
        )
        remote = _OrphanGuardedPolicy(RemotePolicy(self.policy, self.transport, keys))
        chunk = max(1, self.frames_per_batch // (2 * self.num_envs))
        self._pool = MultiCollector(
            list(env_fns),
            remote,
            frames_per_batch=chunk,
            sync=False,
            start_method=start_method,
        )
        self._closed = False
        self.server.start()

    def _start_ray(
        self,
        env_fns: Sequence[Callable[[], Any]],
        transport: Any,
        address: str | None,
        actor_options: dict[str, Any] | None,
    ) -> None:
        from rlpace.collectors._ray import RayTransport, import_ray

        if transport not in (None, "ray"):
            raise ValueError(
                f"AsyncBatchedCollector: Ray env actors use the Ray transport; got "
                f"transport={transport!r}. Pass transport=None or 'ray'."
            )
        ray = import_ray()
        if not ray.is_initialized():
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        self.transport = RayTransport(
            list(env_fns), self._request_keys, self._results, self._max_buffered, actor_options
        )
        self.server = InferenceServer(
            self.policy, self.transport, *self._batch_limits, self.server_timeout, client_slots=()
        )
        self._closed = False
        self.server.start()

    def _env_loop(self, slots: list[int]) -> None:
        """Step the envs of ``slots`` in rounds: each env once, then all their requests.

        With one env this is submit, receive, step. With several, the requests of a
        round go to the transport together (:meth:`Transport.submit_many`), so the
        server wakes once per round and answers them with one forward pass, and this
        thread blocks at most once per round: two thread switches per round instead
        of two per transition.
        """
        transport = self.transport
        results = self._results
        stop = self._stop
        keys = self._request_keys
        envs = [self._envs[slot] for slot in slots]
        reward_keys = [list(env.reward_keys) for env in envs]
        cap = self._max_buffered  # back-pressure: block while the consumer lags far behind
        keep: list[Any] = [None] * len(slots)  # root keys after a step (select < exclude)
        roots: list[Any] = []
        trajs: list[int] = []
        slot = slots[0]
        try:
            for i, env in enumerate(envs):
                slot = slots[i]  # named in the error if this reset raises
                roots.append(env.reset())
                trajs.append(next(self._traj_counter))
            transport.submit_many(slots, [r.select(*keys) for r in roots] if keys else roots)
            while not stop.is_set():
                if len(results) >= cap:
                    results.wait_for_room(cap)
                    continue
                # One round: step every env once, then submit all their requests
                # together, so the server wakes once per round for one batched forward.
                for i, slot in enumerate(slots):
                    env, root = envs[i], roots[i]
                    transport.receive_into(slot, root)
                    frame = env.step(root)
                    results.put((slot, trajs[i], frame))
                    nxt = frame.get("next")
                    if keep[i] is None:
                        keep[i] = root_keys_after_step(nxt, reward_keys[i])
                    root = nxt.select(*keep[i]) if keep[i] else nxt.exclude(*reward_keys[i])
                    done = nxt.get("done", None)
                    if done is not None and bool(done.any()):
                        root = env.reset()
                        trajs[i] = next(self._traj_counter)
                    roots[i] = root
                transport.submit_many(slots, [r.select(*keys) for r in roots] if keys else roots)
        except TransportClosed:
            return
        except BaseException as exc:  # noqa: BLE001 - reported to the main thread
            if self._error is None:
                self._error = (slot, exc)
            stop.set()
            results.close()

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            slot, exc = self._error
            self.shutdown()
            if isinstance(exc, PolicyError):
                raise exc  # the policy failed on this env's request, not the env
            raise EnvStepError(slot, exc) from exc
        if self.server.error is not None:
            exc = self.server.error
            self.shutdown()
            if isinstance(exc, (EnvStepError, WorkerDiedError)):
                raise exc
            raise RuntimeError(
                f"AsyncBatchedCollector: the inference server failed: {exc!r}"
            ) from exc

    def next(self) -> TensorDictBase | None:
        """Collect one batch of transitions (``None`` when a replay buffer takes it).

        Raises:
            EnvStepError: an env raised (names the env, chains the original).
            RuntimeError: the inference server failed (chains the original).
        """
        if self._closed:
            raise RuntimeError("AsyncBatchedCollector was shut down; build a new one")
        want = self.frames_per_batch
        if self.total_frames != -1:
            want = min(want, self.total_frames - self.frames)
        batch = (
            self._next_from_pool(want) if self._pool is not None else self._next_from_threads(want)
        )
        self.frames += batch.numel()
        if self.postproc is not None or self.split_trajs:
            batch = finish_batch(batch, self.postproc, self.split_trajs)
        if self.replay_buffer is not None:
            self.replay_buffer.extend(batch)
            return None
        return batch

    def _next_from_pool(self, want: int) -> TensorDictBase:
        parts = [] if self._leftover is None else [self._leftover]
        have = sum(p.numel() for p in parts)
        try:
            while have < want:
                if self.server.error is not None:
                    self._raise_if_failed()
                part = self._pool.next()
                parts.append(part)
                have += part.numel()
        except BaseException:
            self.shutdown()
            raise
        frames = torch.cat(parts, 0)
        self._leftover = frames[want:] if have > want else None
        batch = frames[:want]
        order = torch.sort(batch.get(ENV_KEY), stable=True).indices
        return batch[order]

    def _next_from_threads(self, want: int) -> TensorDictBase:
        items = self._results.take(want, self._raise_if_failed)
        items.sort(key=_slot_of)  # stable: each env's frames stay in time order
        batch = stack_frames([frame for _, _, frame in items])
        batch.set(ENV_KEY, torch.tensor([slot for slot, _, _ in items]))
        batch.set(TRAJ_KEY, torch.tensor([traj for _, traj, _ in items]))
        return batch

    def server_stats(self) -> ServerStats:
        """The inference server's counts and latency percentiles so far."""
        return self.server.stats()

    def update_policy_weights_(self, weights: TensorDictBase | dict | None = None) -> None:
        """Load new weights into the served policy between two forward passes.

        ``None`` only counts a new version (the policy was updated in place).
        """
        self.server.update_policy_weights_(weights)

    @property
    def policy_version(self) -> int:
        """Weight updates applied through :meth:`update_policy_weights_` so far."""
        return self.server.policy_version

    def state_dict(self) -> dict[str, Any]:
        """Frames so far, policy version and a copy of the policy's weights."""
        return collector_state(self)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from :meth:`state_dict`: frames (for ``total_frames``) and weights."""
        state = check_state(state, type(self).__name__)
        if state.get("policy") is not None:
            self.server.update_policy_weights_(state["policy"])
        self.server.policy_version = int(state["policy_version"])
        self.frames = int(state["frames"])

    def shutdown(self) -> None:
        """Stop the server and every env thread, close the envs; idempotent."""
        if self._closed and not self._threads and getattr(self, "_pool", None) is None:
            return
        self._closed = True
        self._stop.set()
        self._results.close()
        if getattr(self, "server", None) is not None:
            self.server.stop()
        if getattr(self, "transport", None) is not None:
            self.transport.close()
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        join_threads(self._threads)
        self._threads = []
        close_envs(self._envs)

    __iter__ = iterate_batches
    __len__ = batches_in
    __enter__ = enter_context
    __exit__ = exit_context
    __del__ = shutdown_quietly
