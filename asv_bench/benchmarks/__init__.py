"""asv benchmarks generated from the cases of ``tests/benchmarks`` (see ``_adapter``).

``cpu`` holds every case (``device="cpu"``); ``gpu`` holds the cases declared with
``gpu=True`` on ``device="cuda"``. Select a set with ``asv run --bench '^cpu\\.'`` or
``--bench '^gpu\\.'``.
"""
