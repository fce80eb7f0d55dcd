"""Replay buffers whose shared-memory or memory-mapped storage many processes extend and sample.

The data layer knows nothing of environments, collectors or trainers: batches are
TensorDicts addressed by key.
"""
