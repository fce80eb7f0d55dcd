"""`InferenceServer`: batches pending policy requests into one forward pass."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import torch
from tensordict import TensorDictBase

from rlpace.collectors._rollout import direct_policy, policy_context
from rlpace.collectors._transports import Transport


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

    Example:
        >>> ServerStats(10, 4, 2.5, {}, {}).mean_batch_size
        2.5
    """

    requests: int
    batches: int
    mean_batch_size: float
    queue_latency_ms: dict[str, float]
    forward_latency_ms: dict[str, float]


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
    batch and scatters the results back to the waiting clients.

    Args:
        policy: callable ``TensorDict -> TensorDict`` writing new entries (e.g. action).
        transport: where requests come from and responses go (see ``_transports``).
        min_batch_size: requests to wait for before a forward (bounded by ``timeout``).
        max_batch_size: most requests per forward (``None``: no limit).
        timeout: seconds to wait for ``min_batch_size`` once a request is pending.

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
    """

    def __init__(
        self,
        policy: Callable[[TensorDictBase], TensorDictBase],
        transport: Transport,
        min_batch_size: int = 1,
        max_batch_size: int | None = None,
        timeout: float = 0.002,
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
        self._queue_lat: deque[float] = deque(maxlen=10_000)
        self._forward_lat: deque[float] = deque(maxlen=10_000)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def serve_once(self, poll: float = 0.1) -> int:
        """Serve one batch (waiting up to ``poll`` s for a first request); returns its size."""
        slots = self.transport.wait_requests(
            self.min_batch_size, self.max_batch_size, self.timeout, poll
        )
        if not slots:
            return 0
        start = time.perf_counter()
        submitted = self.transport.submit_times
        self._queue_lat.extend(start - submitted[s] for s in slots)
        batch = self.transport.read_requests(slots)
        if self._grad_free and torch.is_grad_enabled():
            with torch.no_grad():
                out = self._call(batch)
        else:  # a plain callable, or the serving thread entered no_grad once already
            out = self._call(batch)
        # counted before the clients wake: a client may step, and its frame be consumed,
        # before this thread runs again, and the counts must already include it
        self._requests += len(slots)
        self._batches += 1
        self.transport.write_responses(slots, out)
        self._forward_lat.append(time.perf_counter() - start)
        return len(slots)

    def _run(self) -> None:
        try:
            with policy_context(self.policy):
                while not self._stop.is_set():
                    self.serve_once()
        except BaseException as exc:  # noqa: BLE001 - kept for the collector to raise
            self.error = exc
            self.transport.close()

    def start(self) -> InferenceServer:
        """Serve in a background daemon thread until :meth:`stop`."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="rlpace-inference", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float = 2.0) -> None:
        """Stop the background thread (idempotent)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def stats(self) -> ServerStats:
        """Counts and latency percentiles so far."""
        return ServerStats(
            requests=self._requests,
            batches=self._batches,
            mean_batch_size=self._requests / self._batches if self._batches else 0.0,
            queue_latency_ms=_percentiles(self._queue_lat),
            forward_latency_ms=_percentiles(self._forward_lat),
        )
