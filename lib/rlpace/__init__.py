"""rlpace: reinforcement learning for PyTorch, with a performance-regression harness.

The RL half is imported by training code:

- :mod:`rlpace.data` — replay buffers over shared-memory or memory-mapped storage;
- :mod:`rlpace.collectors` — sync, multi-process and async batched collectors;
- :mod:`rlpace.envs.llm` — a language-model text environment;
- :mod:`rlpace.trainers` — PPO and SAC trainers, configs, timing, checkpoints.

The harness half, :mod:`rlpace.bench` (CLI ``rlpace-bench``), runs the benchmark
suite, compares runs and renders pull-request comments. The two halves never
import each other.

Example:
    >>> import rlpace
    >>> rlpace.__version__
    '0.1.0'
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
