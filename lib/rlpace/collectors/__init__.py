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

from rlpace.collectors._rollout import EnvStepError, WorkerDiedError
from rlpace.collectors._single import Collector

__all__ = ["Collector", "EnvStepError", "WorkerDiedError"]
