"""Shared fixtures of the harness tests: paths to the real result files."""

import json
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES


@pytest.fixture
def pb_base() -> Path:
    """pytest-benchmark 5 JSON with raw per-round data (the base side)."""
    return FIXTURES / "pb5_base.json"


@pytest.fixture
def pb_head() -> Path:
    """pytest-benchmark 5 JSON with raw per-round data (the head side)."""
    return FIXTURES / "pb5_head.json"


@pytest.fixture
def asv_base() -> Path:
    return FIXTURES / "asv" / "results" / "fixture-box" / "aaaaaaaa-existing-py_venv.json"


@pytest.fixture
def asv_head() -> Path:
    return FIXTURES / "asv" / "results" / "fixture-box" / "bbbbbbbb-existing-py_venv.json"


@pytest.fixture
def write_json(tmp_path):
    """Write a JSON document (or raw text) to a temporary file and return its path."""

    def write(doc, name="run.json"):
        path = tmp_path / name
        path.write_text(doc if isinstance(doc, str) else json.dumps(doc), encoding="utf-8")
        return path

    return write


@pytest.fixture
def find_processes():
    """``find(*parts)``: the pids of the processes whose command line holds every one of
    the byte strings ``parts`` (Linux ``/proc``), for tests that kill a driver and look
    for what it left running."""

    def find(*parts: bytes) -> list[int]:
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmd = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if all(part in cmd for part in parts):
                pids.append(int(entry.name))
        return pids

    return find


@pytest.fixture
def survivors(find_processes):
    """``survivors(*parts, within=20)``: waits up to ``within`` seconds for the processes
    :func:`find_processes` names to end, SIGKILLs what is left (a failing test leaves
    nothing running) and returns their pids."""
    import os
    import signal
    import time

    def left(*parts: bytes, within: float = 20) -> list[int]:
        deadline = time.monotonic() + within
        while find_processes(*parts) and time.monotonic() < deadline:
            time.sleep(0.2)
        pids = find_processes(*parts)
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        return pids

    return left
