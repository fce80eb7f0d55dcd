"""Collectors: environments plus a policy in, batches of experience out.

Sync, multi-process and async batched collectors with an inference server and
three backend tiers (threading, multiprocessing, Ray).

Example:
    >>> from rlpace.collectors import Collector
    >>> from rlpace.collectors.testing import CountingEnv, make_mlp_policy
    >>> collector = Collector(CountingEnv(num_envs=4), make_mlp_policy(), frames_per_batch=32)
    >>> next(iter(collector)).batch_size
    torch.Size([32])
    >>> collector.shutdown()
"""

from rlpace.collectors._async_batched import AsyncBatchedCollector
from rlpace.collectors._errors import EnvStepError, PolicyError, RemoteError, WorkerDiedError
from rlpace.collectors._multi import MultiCollector
from rlpace.collectors._server import InferenceClient, InferenceServer, ServerStats
from rlpace.collectors._single import Collector
from rlpace.collectors._transports import (
    SlotTransport,
    ThreadingTransport,
    Transport,
    TransportClosed,
)

__all__ = [
    "AsyncBatchedCollector",
    "Collector",
    "EnvStepError",
    "InferenceClient",
    "InferenceServer",
    "MultiCollector",
    "PolicyError",
    "RemoteError",
    "ServerStats",
    "SlotTransport",
    "ThreadingTransport",
    "Transport",
    "TransportClosed",
    "WorkerDiedError",
]
