"""A transport for env worker *processes*: slots in shared memory, only indices on pipes.

The request and response storage (one row per slot) is laid out in the parent and
put in shared memory before the workers start. A worker writes its request row and
sends one byte on its own pipe; the server (a thread in the parent) waits on all
pipes at once, reads the rows of every ready slot as one batch, writes the response
rows and answers each slot with one byte (or, when the policy raised, ``b"e"`` and
the pickled error with its traceback text).
"""

from __future__ import annotations

import pickle
import time
from multiprocessing.connection import wait
from typing import Any

import torch
from tensordict import TensorDictBase

from rlpace.collectors._errors import PolicyError, capture_remote
from rlpace.collectors._rollout import direct_policy
from rlpace.collectors._transports import Transport, TransportClosed


class SharedMemorySlotTransport(Transport):
    """Slots in shared memory for env processes; pipes carry one byte per request/answer.

    Args:
        num_slots: number of env workers (one slot each).
        request: one request (e.g. the policy's inputs for one env) to lay rows out.
        response: one response (the entries the policy adds) to lay rows out.
        ctx: the multiprocessing context the workers start with.

    Example:
        >>> import multiprocessing as mp
        >>> import torch
        >>> from tensordict import TensorDict
        >>> ctx = mp.get_context("fork")
        >>> t = SharedMemorySlotTransport(
        ...     1, TensorDict({"observation": torch.zeros(2)}),
        ...     TensorDict({"action": torch.zeros(1)}), ctx)
        >>> t.submit(0, TensorDict({"observation": torch.ones(2)}))
        >>> slots = t.wait_requests(1, None, 0.0, 1.0)
        >>> batch = t.read_requests(slots)
        >>> t.write_responses(slots, batch.set("action", batch["observation"].sum(-1, True)))
        >>> out = TensorDict({})
        >>> t.receive_into(0, out, timeout=1.0)
        >>> out["action"]
        tensor([2.])
        >>> t.close()
    """

    def __init__(
        self, num_slots: int, request: TensorDictBase, response: TensorDictBase, ctx: Any
    ) -> None:
        self.num_slots = num_slots
        self._requests = request.unsqueeze(0).expand(num_slots).clone().share_memory_()
        self._responses = response.unsqueeze(0).expand(num_slots).clone().share_memory_()
        self._request_leaves = [(k, self._requests.get(k)) for k in self._requests.keys(True, True)]
        self._response_leaves = [
            (k, self._responses.get(k)) for k in self._responses.keys(True, True)
        ]
        self._times = ctx.RawArray("d", num_slots)
        self._closed = ctx.RawValue("b", 0)
        pipes = [ctx.Pipe(duplex=True) for _ in range(num_slots)]
        self._server_conns = [a for a, _ in pipes]
        self._client_conns = [b for _, b in pipes]
        self._slot_of = {conn: i for i, conn in enumerate(self._server_conns)}
        self._deferred: list[int] = []

    @property
    def submit_times(self) -> Any:  # type: ignore[override]
        return self._times

    # -- client side (in the env worker) --------------------------------------------

    def submit(self, slot: int, request: TensorDictBase) -> None:
        for key, buf in self._request_leaves:
            buf[slot].copy_(request.get(key))
        self._times[slot] = time.perf_counter()
        self._client_conns[slot].send_bytes(b"q")

    def receive_into(self, slot: int, target: TensorDictBase, timeout: float | None = None) -> None:
        conn = self._client_conns[slot]
        deadline = None if timeout is None else time.monotonic() + timeout
        while not conn.poll(0.1):
            if self._closed.value:
                raise TransportClosed("the transport was closed while waiting for a response")
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"slot {slot}: no response from the inference server")
        answer = conn.recv_bytes()
        if answer != b"a":  # b"e" + the pickled (error, traceback text)
            raise PolicyError(*pickle.loads(answer[1:]))
        for key, buf in self._response_leaves:
            target.set(key, buf[slot].clone())

    # -- server side (in the parent) -------------------------------------------------

    def _ready_slots(self, timeout: float) -> list[int]:
        slots = []
        for conn in wait(self._server_conns, timeout):
            conn.recv_bytes()
            slots.append(self._slot_of[conn])
        return slots

    def wait_requests(
        self, min_count: int, max_count: int | None, timeout: float, poll: float
    ) -> list[int]:
        # Each slot has at most one request in flight; requests read from the pipes
        # beyond max_count are deferred to the next round.
        slots, self._deferred = self._deferred, []
        if not slots:
            slots = self._ready_slots(poll)
        if not slots:
            return slots
        deadline = time.perf_counter() + timeout
        while len(slots) < min_count:
            left = deadline - time.perf_counter()
            if left <= 0:
                break
            slots += self._ready_slots(left)
        slots += self._ready_slots(0)
        if max_count is not None and len(slots) > max_count:
            self._deferred = slots[max_count:]
            slots = slots[:max_count]
        return slots

    def read_requests(self, slots: list[int]) -> TensorDictBase:
        return self._requests[torch.tensor(slots)]

    def write_responses(self, slots: list[int], responses: TensorDictBase) -> None:
        index = torch.tensor(slots)
        for key, buf in self._response_leaves:
            buf.index_copy_(0, index, responses.get(key))
        for slot in slots:
            self._server_conns[slot].send_bytes(b"a")

    def write_errors(self, slots: list[int], error: BaseException) -> None:
        message = b"e" + pickle.dumps(capture_remote(error))
        for slot in slots:
            self._server_conns[slot].send_bytes(message)

    def close(self) -> None:
        self._closed.value = 1


class RemotePolicy:
    """The policy as seen from an env worker: submit the inputs, wait for the outputs.

    Unbound (in the parent) it calls the real policy directly, which is how the
    collector lays out its buffers; :meth:`bind_worker` gives a worker its slot.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rlpace.collectors.testing import make_mlp_policy
        >>> remote = RemotePolicy(make_mlp_policy(), transport=None, in_keys=["observation"])
        >>> remote(TensorDict({"observation": torch.zeros(4)}))["action"].shape
        torch.Size([1])
    """

    def __init__(self, policy: Any, transport: Transport | None, in_keys: list[Any] | None) -> None:
        self.policy = policy
        self.transport = transport
        self.in_keys = in_keys
        self.slot: int | None = None

    def bind_worker(self, index: int) -> RemotePolicy:
        bound = RemotePolicy(None, self.transport, self.in_keys)
        bound.slot = index
        return bound

    def __call__(self, td: TensorDictBase) -> TensorDictBase:
        if self.slot is None:
            with torch.no_grad():
                return direct_policy(self.policy)(td)
        request = td.select(*self.in_keys) if self.in_keys else td
        self.transport.submit(self.slot, request)
        self.transport.receive_into(self.slot, td)
        return td
