"""`InferenceServer`: batches pending policy requests into one forward pass.

Clients are either the collectors' envs (one transport slot each) or
:class:`InferenceClient` objects from :meth:`InferenceServer.client`, which call the
policy through the server (blocking, or ``submit`` for a future). A policy that
raises fails only the requests of its batch: each client re-raises a
:class:`~rlpace.collectors.PolicyError` and the server keeps serving.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass

import torch
from tensordict import TensorDictBase

from rlpace.collectors._rollout import direct_policy, load_weights, policy_context
from rlpace.collectors._transports import Transport, TransportClosed


@dataclass(frozen=True)
class ServerStats:
    """What the inference server did so far.

    Attributes:
        requests: requests answered.
        batches: forward passes run.
        mean_batch_size: ``requests / batches`` (0 before the first batch).
        queue_latency_ms: p50/p90/p99 of the time a request waited before its batch
            was formed, in milliseconds (over the latest 10,000 requests).
        forward_latency_ms: p50/p90/p99 of one forward pass (read, policy, scatter).
        policy_version: weight updates applied through
            :meth:`InferenceServer.update_policy_weights_` so far.
        failed_requests: requests answered with the policy's error instead of a
            response (included in ``requests``).

    Example:
        >>> ServerStats(10, 4, 2.5, {}, {}).mean_batch_size
        2.5
    """

    requests: int
    batches: int
    mean_batch_size: float
    queue_latency_ms: dict[str, float]
    forward_latency_ms: dict[str, float]
    policy_version: int = 0
    failed_requests: int = 0


def _percentiles(values: deque) -> dict[str, float]:
    if not values:
        return {"p50": 0.0, "p90": 0.0, "p99": 0.0}
    t = torch.tensor(list(values), dtype=torch.float64) * 1e3
    q = torch.quantile(t, torch.tensor([0.5, 0.9, 0.99], dtype=torch.float64))
    return {"p50": float(q[0]), "p90": float(q[1]), "p99": float(q[2])}


class InferenceServer:
    """Runs one batched policy forward for whatever requests are pending.

    Each round waits until ``min_batch_size`` requests are pending or ``timeout``
    seconds passed since the first one arrived, then drains every pending request
    without blocking (up to ``max_batch_size``), runs the policy once on the stacked
    batch and scatters the results back to the waiting clients. When the policy (or
    reading or writing the batch) raises, every request of that batch gets the
    error, re-raised in its client as a :class:`~rlpace.collectors.PolicyError`,
    and the server serves the next batch.

    :meth:`start` serves in a background thread (or ``with server:``, which also
    shuts it down); :meth:`client` gives a caller its own slot to call the policy
    through the server, blocking or with futures.

    Args:
        policy: callable ``TensorDict -> TensorDict`` writing new entries (e.g. action).
        transport: where requests come from and responses go (see ``_transports``).
        min_batch_size: requests to wait for before a forward (bounded by ``timeout``).
        max_batch_size: most requests per forward (``None``: no limit).
        timeout: seconds to wait for ``min_batch_size`` once a request is pending.
        client_slots: the transport slots :meth:`client` may hand out (default: all;
            a collector whose envs hold every slot passes ``()``).

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rlpace.collectors import InferenceServer, SlotTransport
        >>> from rlpace.collectors.testing import make_mlp_policy
        >>> transport = SlotTransport(num_slots=2)
        >>> server = InferenceServer(make_mlp_policy(), transport, min_batch_size=2)
        >>> for slot in range(2):
        ...     transport.submit(slot, TensorDict({"observation": torch.zeros(4)}))
        >>> server.serve_once()
        2
        >>> out = TensorDict({})
        >>> transport.receive_into(0, out, timeout=1.0)
        >>> out["action"].shape
        torch.Size([1])
        >>> server.stats().mean_batch_size
        2.0

        Served in the background, called through clients:

        >>> with InferenceServer(make_mlp_policy(), SlotTransport(num_slots=2)) as server:
        ...     client = server.client()
        ...     out = client(TensorDict({"observation": torch.zeros(4)}))
        ...     future = client.submit(TensorDict({"observation": torch.ones(4)}))
        ...     later = future.result(timeout=5)
        >>> out["action"].shape, later["action"].shape
        (torch.Size([1]), torch.Size([1]))
        >>> server.is_alive()
        False
    """

    def __init__(
        self,
        policy: Callable[[TensorDictBase], TensorDictBase],
        transport: Transport,
        min_batch_size: int = 1,
        max_batch_size: int | None = None,
        timeout: float = 0.002,
        *,
        client_slots: Iterable[int] | None = None,
    ) -> None:
        if min_batch_size < 1:
            raise ValueError(f"min_batch_size must be >= 1; got {min_batch_size}")
        if max_batch_size is not None and max_batch_size < min_batch_size:
            raise ValueError(
                f"max_batch_size ({max_batch_size}) must be >= min_batch_size ({min_batch_size})"
            )
        if timeout < 0:
            raise ValueError(f"timeout must be >= 0 seconds; got {timeout}")
        self.policy = policy
        self.transport = transport
        self.min_batch_size = min_batch_size
        self.max_batch_size = max_batch_size
        self.timeout = timeout
        self.error: BaseException | None = None
        self._call = direct_policy(policy)
        self._grad_free = isinstance(policy, torch.nn.Module)
        self._requests = 0
        self._batches = 0
        self._failed = 0
        self._queue_lat: deque[float] = deque(maxlen=10_000)
        self._forward_lat: deque[float] = deque(maxlen=10_000)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False
        #: weight updates applied so far (:meth:`update_policy_weights_`)
        self.policy_version = 0
        # held by a forward pass and by a weight update, so no forward sees half of one
        self._model_lock = threading.Lock()
        slots = range(transport.num_slots) if client_slots is None else client_slots
        self._free_slots = sorted(slots, reverse=True)  # pop() hands out the lowest
        self._slot_lock = threading.Lock()
        self._futures: dict[int, tuple[Future, TensorDictBase]] = {}
        self._in_flight: list[tuple[int, Future, TensorDictBase]] = []
        in_keys = getattr(policy, "in_keys", None)
        self._request_keys = list(in_keys) if in_keys else None

    def serve_once(self, poll: float = 0.1) -> int:
        """Serve one batch (waiting up to ``poll`` s for a first request); returns its size."""
        slots = self.transport.wait_requests(
            self.min_batch_size, self.max_batch_size, self.timeout, poll
        )
        if not slots:
            return 0
        # the futures of this batch's requests, taken before anyone is answered: a
        # client answered below may submit its next request before this round ends
        futures = self._take_futures(slots) if self._futures else None
        start = time.perf_counter()
        submitted = self.transport.submit_times
        self._queue_lat.extend(start - submitted[s] for s in slots)
        try:
            with self._model_lock:
                batch = self.transport.read_requests(slots)
                if self._grad_free and torch.is_grad_enabled():
                    with torch.no_grad():
                        out = self._call(batch)
                else:  # a plain callable, or the serving thread entered no_grad already
                    out = self._call(batch)
            # counted before the clients wake: a client may step, and its frame be
            # consumed, before this thread runs again, and the counts must include it
            self._requests += len(slots)
            self._batches += 1
            self.transport.write_responses(slots, out)
        except Exception as exc:  # noqa: BLE001 - the batch's clients get it; we go on
            self._requests += len(slots)
            self._batches += 1
            self._failed += len(slots)
            self.transport.write_errors(slots, exc)
        if futures:
            self._resolve_futures(futures)
        self._forward_lat.append(time.perf_counter() - start)
        return len(slots)

    def _take_futures(self, slots: list[int]) -> list[tuple[int, Future, TensorDictBase]]:
        futures = self._futures
        self._in_flight = [(slot, *futures.pop(slot)) for slot in slots if slot in futures]
        return self._in_flight

    def _resolve_futures(self, futures: list[tuple[int, Future, TensorDictBase]]) -> None:
        for slot, future, target in futures:
            try:
                self.transport.receive_into(slot, target, timeout=1.0)
            except BaseException as exc:  # noqa: BLE001 - the future carries it
                with contextlib.suppress(InvalidStateError):  # failed by a shutdown
                    future.set_exception(exc)
            else:
                with contextlib.suppress(InvalidStateError):
                    future.set_result(target)
        self._in_flight = []

    def _run(self) -> None:
        try:
            with policy_context(self.policy):
                while not self._stop.is_set():
                    self.serve_once()
        except BaseException as exc:  # noqa: BLE001 - kept for the collector to raise
            self.error = exc
            self.transport.close()
            self._fail_futures(exc)

    def _fail_futures(self, cause: BaseException | None) -> None:
        """Fail every future not answered yet, queued or in the current batch."""
        futures = [future for _, future, _ in self._in_flight]
        while self._futures:
            futures.append(self._futures.popitem()[1][0])
        for future in futures:
            error = TransportClosed("the inference server stopped before answering")
            error.__cause__ = cause
            with contextlib.suppress(InvalidStateError):  # answered meanwhile
                future.set_exception(error)

    def start(self) -> InferenceServer:
        """Serve in a background daemon thread until :meth:`stop` or :meth:`shutdown`."""
        if self._closed:
            raise RuntimeError("InferenceServer was shut down; build a new one")
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="rlpace-inference", daemon=True)
            self._thread.start()
        return self

    def is_alive(self) -> bool:
        """Whether the background thread is serving (``False`` after a fatal error).

        Example:
            >>> from rlpace.collectors import SlotTransport
            >>> from rlpace.collectors.testing import make_mlp_policy
            >>> server = InferenceServer(make_mlp_policy(), SlotTransport(1)).start()
            >>> server.is_alive()
            True
            >>> server.shutdown()
            >>> server.is_alive()
            False
        """
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout: float = 2.0) -> None:
        """Stop the background thread (idempotent); :meth:`start` serves again."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def shutdown(self, timeout: float = 2.0) -> None:
        """Stop serving for good: stop the thread, close the transport (clients waiting
        on it raise ``TransportClosed``, as do pending futures); idempotent."""
        self.stop(timeout)
        if not self._closed:
            self._closed = True
            self.transport.close()
        self._fail_futures(None)

    def __enter__(self) -> InferenceServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def update_policy_weights_(self, weights: TensorDictBase | dict | None = None) -> None:
        """Load new weights between two forward passes and count a new policy version.

        Args:
            weights: a ``state_dict`` or TensorDict of parameters copied into the
                served policy; ``None`` only counts a version (the policy object was
                updated in place by its owner).

        Example:
            >>> from rlpace.collectors import SlotTransport
            >>> from rlpace.collectors.testing import make_mlp_policy
            >>> server = InferenceServer(make_mlp_policy(seed=0), SlotTransport(1))
            >>> server.update_policy_weights_(make_mlp_policy(seed=1).state_dict())
            >>> server.stats().policy_version
            1
        """
        with self._model_lock:
            if weights is not None:
                load_weights(self.policy, weights)
            self.policy_version += 1

    def client(self) -> InferenceClient:
        """A client on a free transport slot: call it like the policy, or ``submit``.

        Raises:
            RuntimeError: every slot is taken (build the transport with more slots,
                or ``close()`` a client), or the transport takes no clients (Ray).
        """
        if not getattr(self.transport, "accepts_clients", True):
            raise RuntimeError(
                f"InferenceServer.client: a {type(self.transport).__name__} is driven by "
                "its env actors and takes no clients; use a SlotTransport or ThreadingTransport"
            )
        with self._slot_lock:
            if not self._free_slots:
                raise RuntimeError(
                    f"InferenceServer.client: all {self.transport.num_slots} slots of the "
                    "transport are taken; build it with more slots (one per concurrent "
                    "client) or close() a client"
                )
            slot = self._free_slots.pop()
        return InferenceClient(self, slot)

    def clients(self, num_clients: int) -> list[InferenceClient]:
        """``num_clients`` clients, one slot each (e.g. one per thread)."""
        return [self.client() for _ in range(num_clients)]

    def _release_slot(self, slot: int) -> None:
        with self._slot_lock:
            self._free_slots.append(slot)
            self._free_slots.sort(reverse=True)

    def stats(self) -> ServerStats:
        """Counts and latency percentiles so far."""
        return ServerStats(
            requests=self._requests,
            batches=self._batches,
            mean_batch_size=self._requests / self._batches if self._batches else 0.0,
            queue_latency_ms=_percentiles(self._queue_lat),
            forward_latency_ms=_percentiles(self._forward_lat),
            policy_version=self.policy_version,
            failed_requests=self._failed,
        )


class InferenceClient:
    """One slot of an :class:`InferenceServer`: call it like the policy, or submit.

    ``client(td)`` sends the policy's inputs and blocks until the server wrote the
    outputs into ``td`` (returned, like a ``TensorDictModule`` call);
    ``client.submit(td)`` returns a :class:`concurrent.futures.Future` whose result
    is a shallow copy of ``td`` with the outputs. One request per client is in flight
    at a time: take one client per concurrent caller (:meth:`InferenceServer.clients`).
    A request whose batch failed raises :class:`~rlpace.collectors.PolicyError`.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rlpace.collectors import InferenceServer, SlotTransport
        >>> from rlpace.collectors.testing import make_mlp_policy
        >>> with InferenceServer(make_mlp_policy(), SlotTransport(num_slots=4)) as server:
        ...     clients = server.clients(4)
        ...     futures = [c.submit(TensorDict({"observation": torch.zeros(4)})) for c in clients]
        ...     actions = [f.result(timeout=5)["action"] for f in futures]
        >>> len(actions), actions[0].shape
        (4, torch.Size([1]))
    """

    def __init__(self, server: InferenceServer, slot: int) -> None:
        self.server = server
        self.slot = slot
        self._closed = False
        self._future: Future | None = None

    def _request(self, td: TensorDictBase) -> TensorDictBase:
        if self._closed:
            raise RuntimeError(
                "this InferenceClient was closed; take a new one from server.client()"
            )
        if self._future is not None and not self._future.done():
            raise RuntimeError(
                f"InferenceClient (slot {self.slot}) already has a request in flight; wait "
                "for its future, or take one client per concurrent request (server.clients(n))"
            )
        if not self.server.is_alive():
            raise RuntimeError(
                "the InferenceServer is not serving: start() it (or use `with server:`)"
                + (f"; it stopped on {self.server.error!r}" if self.server.error else "")
            )
        keys = self.server._request_keys
        return td.select(*keys) if keys else td

    def __call__(self, td: TensorDictBase, timeout: float | None = None) -> TensorDictBase:
        """Run the policy on ``td`` through the server; its outputs are written into ``td``."""
        request = self._request(td)
        transport = self.server.transport
        transport.submit(self.slot, request)
        transport.receive_into(self.slot, td, timeout)
        return td

    def submit(self, td: TensorDictBase) -> Future:
        """Send ``td`` and return at once; the future's result is ``td`` plus the outputs."""
        request = self._request(td)
        future: Future = Future()
        # registered before the request is visible, so the server cannot answer first
        self.server._futures[self.slot] = (future, td.copy())
        try:
            self.server.transport.submit(self.slot, request)
        except BaseException:
            self.server._futures.pop(self.slot, None)
            raise
        self._future = future
        return future

    def close(self) -> None:
        """Give the slot back to the server (idempotent)."""
        if not self._closed:
            self._closed = True
            self.server._release_slot(self.slot)

    def __enter__(self) -> InferenceClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"InferenceClient(slot={self.slot})"
