"""The GPU set: cases declared with ``gpu=True``, on CUDA; skipped (n/a) without CUDA."""

from benchmarks._adapter import expose

expose(globals(), "gpu")
