"""The CPU set: every registered case as an asv benchmark class."""

from benchmarks._adapter import expose

expose(globals(), "cpu")
