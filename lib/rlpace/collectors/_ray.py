"""Ray backend: each env in a Ray actor, the inference server in the driver.

:class:`RayTransport` drives the actors from the server side: a request is an
actor's pending result (its next observation), a response is the next ``step``
call carrying the action. ``ray.wait`` gives "min_batch_size or timeout, then
whatever else is ready" directly. Ray is imported only when this backend is used;
the same code reaches a cluster when Ray is started (or ``ray_address`` given)
with that cluster's address.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
from tensordict import TensorDictBase

from rlpace.collectors._errors import EnvStepError, WorkerDiedError
from rlpace.collectors._transports import Transport, TransportClosed


def import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ImportError(
            "backend='ray' needs the ray package; install it with pip install 'rlpace[ray]'"
        ) from exc
    return ray


class _EnvActorBody:
    """What runs inside one Ray actor: one env, stepped on request."""

    def __init__(self, env_fn: Callable[[], Any], slot: int, stride: int, keys: Any) -> None:
        torch.set_num_threads(1)
        self.env = env_fn()
        self.slot = slot
        self.stride = stride
        self.keys = keys
        self.traj = slot
        self.next_traj = slot + stride
        self.reward_keys = list(self.env.reward_keys)
        self.root = None

    def _request(self) -> TensorDictBase:
        return self.root.select(*self.keys) if self.keys else self.root

    def reset(self) -> tuple[None, int, TensorDictBase]:
        self.root = self.env.reset()
        return None, self.traj, self._request()

    def step(self, response: TensorDictBase) -> tuple[TensorDictBase, int, TensorDictBase]:
        self.root.update(response)
        frame = self.env.step(self.root)
        traj = self.traj
        nxt = frame.get("next")
        self.root = nxt.exclude(*self.reward_keys)
        done = nxt.get("done", None)
        if done is not None and bool(done.any()):
            self.root = self.env.reset()
            self.traj, self.next_traj = self.next_traj, self.next_traj + self.stride
        return frame, traj, self._request()

    def close(self) -> None:
        self.env.close()


class RayTransport(Transport):
    """Env actors driven by the inference server; frames go to ``results``.

    Args:
        env_fns: one env factory per actor (pickled to the actors).
        request_keys: entries of the env's root the policy reads (``None``: all).
        results: the collector's :class:`~rlpace.collectors._async_batched.FrameInbox`,
            where ``(slot, traj_id, frame)`` tuples go.
        max_buffered: back-pressure: while this many frames wait in ``results``, the
            server sends no actor its next step (it waits in
            ``results.wait_for_room``, the same wait the env threads use).
        actor_options: ``.options(...)`` for every actor; the default
            ``{"num_cpus": 0}`` lets more envs than CPUs share a machine.

    Example:
        >>> from functools import partial
        >>> from rlpace.collectors._async_batched import FrameInbox
        >>> from rlpace.collectors.testing import CountingEnv
        >>> transport = RayTransport(
        ...     [partial(CountingEnv)], ["observation"], FrameInbox(),
        ...     max_buffered=10)  # doctest: +SKIP
    """

    accepts_clients = False  # its clients are the env actors

    def __init__(
        self,
        env_fns: Sequence[Callable[[], Any]],
        request_keys: list[Any] | None,
        results: Any,
        max_buffered: int,
        actor_options: dict[str, Any] | None = None,
    ) -> None:
        ray = import_ray()
        self._ray = ray
        self.num_slots = len(env_fns)
        self.submit_times = [0.0] * self.num_slots
        self._results = results
        self._max_buffered = max_buffered
        self._closed = False
        actor_cls = ray.remote(_EnvActorBody).options(**(actor_options or {"num_cpus": 0}))
        self._actors = [
            actor_cls.remote(fn, i, self.num_slots, request_keys) for i, fn in enumerate(env_fns)
        ]
        self._pending: dict[Any, int] = {}
        for slot, actor in enumerate(self._actors):
            self._pending[actor.reset.remote()] = slot
            self.submit_times[slot] = time.perf_counter()
        self._requests: dict[int, TensorDictBase] = {}
        self._request_keys: list[Any] | None = None

    def submit(self, slot: int, request: TensorDictBase) -> None:
        raise NotImplementedError("Ray env actors are driven by the server; nothing to submit")

    def receive_into(self, slot: int, target: TensorDictBase, timeout: float | None = None) -> None:
        raise NotImplementedError("Ray env actors receive actions as step() calls")

    def _collect(self, refs: list[Any]) -> list[int]:
        ray = self._ray
        slots = []
        for ref in refs:
            slot = self._pending.pop(ref)
            try:
                frame, traj, request = ray.get(ref)
            except ray.exceptions.RayActorError as exc:
                raise WorkerDiedError(slot, None) from exc
            except ray.exceptions.RayTaskError as exc:
                cause = getattr(exc, "cause", None) or exc
                raise EnvStepError(slot, cause) from cause
            if frame is not None:
                self._results.put((slot, traj, frame))
            self._requests[slot] = request
            slots.append(slot)
        return slots

    def wait_requests(
        self, min_count: int, max_count: int | None, timeout: float, poll: float
    ) -> list[int]:
        if self._closed:
            raise TransportClosed("the Ray transport was closed")
        ray = self._ray
        refs = list(self._pending)
        ready, rest = ray.wait(refs, num_returns=1, timeout=poll)
        if not ready:
            return []
        if len(ready) < min_count and rest:
            more, rest = ray.wait(rest, num_returns=min(min_count - 1, len(rest)), timeout=timeout)
            ready += more
        if rest:
            more, rest = ray.wait(rest, num_returns=len(rest), timeout=0)
            ready += more
        if max_count is not None:
            ready = ready[:max_count]
        return self._collect(ready)

    def read_requests(self, slots: list[int]) -> TensorDictBase:
        tds = [self._requests.pop(s) for s in slots]
        if self._request_keys is None:
            self._request_keys = list(tds[0].keys(True, True))
        return torch.stack(tds, 0)

    def write_responses(self, slots: list[int], responses: TensorDictBase) -> None:
        out = responses.exclude(*self._request_keys)
        results, cap = self._results, self._max_buffered
        for slot, response in zip(slots, out.unbind(0), strict=True):
            while len(results) >= cap:  # the consumer lags: hold this actor's next step
                if self._closed or results.closed:
                    raise TransportClosed("the Ray transport was closed")
                results.wait_for_room(cap)
            ref = self._actors[slot].step.remote(response.clone())
            self._pending[ref] = slot
            self.submit_times[slot] = time.perf_counter()

    def close(self) -> None:
        """Stop accepting work and kill every actor (idempotent)."""
        if self._closed:
            return
        self._closed = True
        for actor in self._actors:
            with contextlib.suppress(Exception):  # the actor may be gone already
                self._ray.kill(actor)
        self._actors = []
