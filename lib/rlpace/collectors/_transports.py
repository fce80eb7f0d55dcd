"""Transports between env clients and the inference server, behind one small interface.

Client side (one client per slot, i.e. per env): :meth:`~Transport.submit` a request
TensorDict (or :meth:`~Transport.submit_many` for several slots at once), then
:meth:`~Transport.receive_into` the response. Server side:
:meth:`~Transport.wait_requests` (wait for ``min_count`` pending requests or a
timeout, then drain without blocking), :meth:`~Transport.read_requests` (one stacked
batch) and :meth:`~Transport.write_responses` (scatter, wake the clients).

- :class:`SlotTransport` (threads, the default): request and response storage laid
  out once, one row per slot; only slot indices go through a ``SimpleQueue`` and each
  slot has its own wake-up lock, so clients never contend on a shared lock.
- :class:`ThreadingTransport` (threads): plain queues carrying TensorDicts; simple,
  slower, the baseline.

When the policy raises, the server hands the error to the clients of that batch
(:meth:`~Transport.write_errors`) instead of responses; each re-raises it as a
:class:`~rlpace.collectors.PolicyError` chaining the original.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

from rlpace.collectors._errors import PolicyError


class TransportClosed(RuntimeError):
    """The transport was closed (the collector is shutting down) while a client waited.

    Example:
        >>> from tensordict import TensorDict
        >>> t = ThreadingTransport(num_slots=1)
        >>> t.close()  # a client waiting on slot 0 is woken, and told why
        >>> try:
        ...     t.receive_into(0, TensorDict({}), timeout=1.0)
        ... except TransportClosed as exc:
        ...     print(exc)
        the transport was closed while waiting for a response
    """


class Transport:
    """The interface every transport implements; see the module docstring.

    Attributes:
        num_slots: number of clients (one slot each).
        submit_times: ``time.perf_counter()`` of each slot's latest request, for the
            server's queue-latency statistics.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> def one_round(t: Transport) -> torch.Tensor:  # any transport, one client
        ...     t.submit(0, TensorDict({"observation": torch.ones(2)}))
        ...     slots = t.wait_requests(1, None, 0.0, 0.1)
        ...     batch = t.read_requests(slots)
        ...     t.write_responses(slots, batch.set("action", batch["observation"] + 1))
        ...     out = TensorDict({})
        ...     t.receive_into(0, out, timeout=1.0)
        ...     return out["action"]
        >>> one_round(SlotTransport(1)), one_round(ThreadingTransport(1))
        (tensor([2., 2.]), tensor([2., 2.]))
    """

    num_slots: int
    submit_times: list[float]
    #: whether :meth:`InferenceServer.client` may hand out this transport's slots
    accepts_clients: bool = True

    def submit(self, slot: int, request: TensorDictBase) -> None:
        raise NotImplementedError

    def submit_many(self, slots: list[int], requests: list[TensorDictBase]) -> None:
        """Submit several clients' requests at once (one client thread stepping several
        envs); a transport may then wake the server once for all of them."""
        for slot, request in zip(slots, requests, strict=True):
            self.submit(slot, request)

    def receive_into(self, slot: int, target: TensorDictBase, timeout: float | None = None) -> None:
        raise NotImplementedError

    def wait_requests(
        self, min_count: int, max_count: int | None, timeout: float, poll: float
    ) -> list[int]:
        raise NotImplementedError

    def read_requests(self, slots: list[int]) -> TensorDictBase:
        raise NotImplementedError

    def write_responses(self, slots: list[int], responses: TensorDictBase) -> None:
        raise NotImplementedError

    def write_errors(self, slots: list[int], error: BaseException) -> None:
        """Answer ``slots`` with ``error`` (their clients raise :class:`PolicyError`).

        A transport that cannot deliver errors re-raises ``error``, which stops the
        server (its ``error`` attribute keeps it).
        """
        raise error

    def close(self) -> None:
        raise NotImplementedError


def _drain(get, first_timeout: float, min_count: int, max_count: int | None, timeout: float):
    """Block for one item (up to ``first_timeout``), then for ``min_count`` or ``timeout``,
    then take whatever else is pending without blocking."""
    items = []
    try:
        items.append(get(True, first_timeout))
    except queue.Empty:
        return items
    if min_count > 1:
        deadline = time.perf_counter() + timeout
        while len(items) < min_count:
            left = deadline - time.perf_counter()
            if left <= 0:
                break
            try:
                items.append(get(True, left))
            except queue.Empty:
                break
    while max_count is None or len(items) < max_count:
        try:
            items.append(get(False))
        except queue.Empty:
            break
    return items


def _rows(leaves: list[tuple[Any, torch.Tensor]], num_slots: int) -> list[list[tuple[Any, Any]]]:
    """Per slot, ``(key, view of that slot's row)`` for every leaf, made once."""
    return [[(key, buf[slot]) for key, buf in leaves] for slot in range(num_slots)]


class SlotTransport(Transport):
    """Lock-free slots for threads: storage per slot, indices through a ``SimpleQueue``.

    Args:
        num_slots: number of clients.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = SlotTransport(num_slots=2)
        >>> t.submit(1, TensorDict({"observation": torch.ones(3)}))
        >>> slots = t.wait_requests(min_count=1, max_count=None, timeout=0.0, poll=0.1)
        >>> slots
        [1]
        >>> batch = t.read_requests(slots)
        >>> batch.set("action", batch["observation"].sum(-1, keepdim=True))
        ...  # doctest: +ELLIPSIS
        TensorDict(...)
        >>> t.write_responses(slots, batch)
        >>> out = TensorDict({})
        >>> t.receive_into(1, out, timeout=1.0)
        >>> out["action"]
        tensor([3.])
    """

    def __init__(self, num_slots: int) -> None:
        self.num_slots = num_slots
        self.submit_times = [0.0] * num_slots
        self._pending: queue.SimpleQueue[int] = queue.SimpleQueue()
        self._ready = [threading.Lock() for _ in range(num_slots)]
        for lock in self._ready:
            lock.acquire()
        self._layout_lock = threading.Lock()
        self._requests: TensorDictBase | None = None
        self._request_leaves: list[tuple[Any, torch.Tensor]] = []
        self._request_rows: list[list[tuple[Any, torch.Tensor]]] = []
        self._responses: TensorDictBase | None = None
        self._response_leaves: list[tuple[Any, torch.Tensor]] = []
        self._response_rows: list[list[tuple[Any, torch.Tensor]]] = []
        # The server's gather/scatter index, filled through a numpy view: building a
        # tensor from a list (torch.tensor) releases the GIL, and on the server's path
        # every GIL release lets an env thread in ahead of the forward pass.
        self._index = torch.zeros(num_slots, dtype=torch.int64)
        self._index_np = self._index.numpy()
        self._errors: list[BaseException | None] = [None] * num_slots
        self._closed = False

    def _layout_requests(self, request: TensorDictBase) -> None:
        with self._layout_lock:
            if self._requests is None:
                storage = request.unsqueeze(0).expand(self.num_slots, *request.batch_size).clone()
                self._request_leaves = [(key, storage.get(key)) for key in storage.keys(True, True)]
                self._request_rows = _rows(self._request_leaves, self.num_slots)
                self._requests = storage

    def submit(self, slot: int, request: TensorDictBase) -> None:
        if self._requests is None:
            self._layout_requests(request)
        for key, row in self._request_rows[slot]:
            row.copy_(request.get(key))
        self.submit_times[slot] = time.perf_counter()
        self._pending.put(slot)

    def submit_many(self, slots: list[int], requests: list[TensorDictBase]) -> None:
        # every row is written before the first index wakes the server: a copy_ releases
        # the GIL, and a server let in then would serve a part of the requests
        if self._requests is None:
            self._layout_requests(requests[0])
        rows = self._request_rows
        for slot, request in zip(slots, requests, strict=True):
            for key, row in rows[slot]:
                row.copy_(request.get(key))
        now = time.perf_counter()
        for slot in slots:
            self.submit_times[slot] = now
            self._pending.put(slot)

    def receive_into(self, slot: int, target: TensorDictBase, timeout: float | None = None) -> None:
        if not self._ready[slot].acquire(timeout=-1 if timeout is None else timeout):
            raise TimeoutError(f"slot {slot}: no response from the inference server in {timeout}s")
        if self._closed:
            raise TransportClosed("the transport was closed while waiting for a response")
        error = self._errors[slot]
        if error is not None:
            self._errors[slot] = None
            raise PolicyError(error) from error
        for key, row in self._response_rows[slot]:
            target.set(key, row.clone())

    def wait_requests(
        self, min_count: int, max_count: int | None, timeout: float, poll: float
    ) -> list[int]:
        return _drain(self._pending.get, poll, min_count, max_count, timeout)

    def _slot_index(self, slots: list[int]) -> torch.Tensor:
        count = len(slots)
        self._index_np[:count] = slots
        return self._index[:count]

    def read_requests(self, slots: list[int]) -> TensorDictBase:
        index = self._slot_index(slots)
        storage = self._requests
        return TensorDict(
            {key: buf.index_select(0, index) for key, buf in self._request_leaves},
            batch_size=[len(slots), *storage.batch_size[1:]],
        )

    def write_responses(self, slots: list[int], responses: TensorDictBase) -> None:
        if self._responses is None:
            keys = [
                k for k in responses.keys(True, True) if k not in self._requests.keys(True, True)
            ]
            if not keys:
                raise ValueError(
                    "the policy returned no new entries: expected it to write e.g. 'action' "
                    f"next to its inputs {list(self._requests.keys(True, True))}"
                )
            one = responses[0].select(*keys)
            self._responses = one.unsqueeze(0).expand(self.num_slots, *one.batch_size).clone()
            self._response_leaves = [(k, self._responses.get(k)) for k in keys]
            self._response_rows = _rows(self._response_leaves, self.num_slots)
        index = self._slot_index(slots)
        for key, buf in self._response_leaves:
            buf.index_copy_(0, index, responses.get(key))
        for slot in slots:
            self._ready[slot].release()

    def write_errors(self, slots: list[int], error: BaseException) -> None:
        for slot in slots:
            self._errors[slot] = error
            self._ready[slot].release()

    def close(self) -> None:
        self._closed = True
        for lock in self._ready:
            if lock.locked():
                lock.release()


class ThreadingTransport(Transport):
    """Queue-based transport for threads: requests and responses travel as TensorDicts.

    Args:
        num_slots: number of clients.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = ThreadingTransport(num_slots=1)
        >>> t.submit(0, TensorDict({"observation": torch.ones(2)}))
        >>> slots = t.wait_requests(1, None, 0.0, 0.1)
        >>> batch = t.read_requests(slots)
        >>> t.write_responses(slots, batch.set("action", batch["observation"] * 2))
        >>> out = TensorDict({})
        >>> t.receive_into(0, out, timeout=1.0)
        >>> out["action"]
        tensor([2., 2.])
    """

    def __init__(self, num_slots: int) -> None:
        self.num_slots = num_slots
        self.submit_times = [0.0] * num_slots
        self._requests: queue.Queue[tuple[int, TensorDictBase]] = queue.Queue()
        self._responses = [queue.Queue(maxsize=1) for _ in range(num_slots)]
        self._batch: dict[int, TensorDictBase] = {}
        self._request_keys: list[Any] | None = None
        self._closed = False

    def submit(self, slot: int, request: TensorDictBase) -> None:
        self.submit_times[slot] = time.perf_counter()
        self._requests.put((slot, request.clone()))

    def receive_into(self, slot: int, target: TensorDictBase, timeout: float | None = None) -> None:
        try:
            response = self._responses[slot].get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(
                f"slot {slot}: no response from the inference server in {timeout}s"
            ) from None
        if response is None:
            raise TransportClosed("the transport was closed while waiting for a response")
        if isinstance(response, BaseException):
            raise PolicyError(response) from response
        target.update(response)

    def wait_requests(
        self, min_count: int, max_count: int | None, timeout: float, poll: float
    ) -> list[int]:
        items = _drain(self._requests.get, poll, min_count, max_count, timeout)
        self._batch = dict(items)
        return [slot for slot, _ in items]

    def read_requests(self, slots: list[int]) -> TensorDictBase:
        tds = [self._batch[s] for s in slots]
        if self._request_keys is None:
            self._request_keys = list(tds[0].keys(True, True))
        return torch.stack(tds, 0)

    def write_responses(self, slots: list[int], responses: TensorDictBase) -> None:
        out = responses.exclude(*self._request_keys)
        for slot, response in zip(slots, out.unbind(0), strict=True):
            self._responses[slot].put(response)

    def write_errors(self, slots: list[int], error: BaseException) -> None:
        for slot in slots:
            self._responses[slot].put(error)

    def close(self) -> None:
        self._closed = True
        for q in self._responses:
            with contextlib.suppress(queue.Full):
                q.put_nowait(None)


def make_transport(kind: str | Transport | None, num_slots: int) -> Transport:
    """A transport by name (``"slot"``, ``"queue"``) or the instance given."""
    if isinstance(kind, Transport):
        if kind.num_slots != num_slots:
            raise ValueError(
                f"the transport has {kind.num_slots} slots but there are {num_slots} envs; "
                "build it with one slot per env"
            )
        return kind
    if kind in (None, "slot"):
        return SlotTransport(num_slots)
    if kind == "queue":
        return ThreadingTransport(num_slots)
    raise ValueError(
        f"unknown transport {kind!r} for threads; expected 'slot' (SlotTransport, default), "
        "'queue' (ThreadingTransport) or a Transport instance"
    )
