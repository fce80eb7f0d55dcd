from __future__ import annotations

import multiprocessing as mp
import signal
import threading
import time

import pytest

from rlpace.collectors import Collector, MultiCollector
from rlpace.collectors._lifecycle import end_processes, join_threads
from rlpace.collectors.testing import CountingEnv, make_mlp_policy


def _ignore_sigterm_and_sleep() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(60)


def test_end_processes_kills_a_child_that_ignores_terminate():
    ctx = mp.get_context("fork")
    stubborn = ctx.Process(target=_ignore_sigterm_and_sleep)
    quick = ctx.Process(target=time.sleep, args=(0.01,))
    stubborn.start()
    quick.start()
    time.sleep(0.2)  # let the child install its handler
    start = time.monotonic()
    end_processes([quick, stubborn], timeout=0.2)
    assert time.monotonic() - start < 2.0
    assert mp.active_children() == []
    with pytest.raises(ValueError, match="closed"):
        stubborn.is_alive()  # the process object was released too


def test_join_threads_shares_one_deadline_and_returns_stragglers():
    release = threading.Event()
    threads = [threading.Thread(target=release.wait) for _ in range(3)]
    for t in threads:
        t.start()
    start = time.monotonic()
    alive = join_threads(threads, timeout=0.2)
    assert time.monotonic() - start < 0.5, "one deadline for all, not 0.2 s each"
    assert alive == threads
    release.set()
    assert join_threads(threads, timeout=2.0) == []


def test_collectors_reject_a_replay_buffer_without_extend():
    for build in (
        lambda rb: Collector(CountingEnv(), make_mlp_policy(), 4, replay_buffer=rb),
        lambda rb: MultiCollector(
            [CountingEnv], make_mlp_policy(), frames_per_batch=4, replay_buffer=rb
        ),
    ):
        with pytest.raises(TypeError, match=r"replay_buffer needs an extend\(batch\) method"):
            build({})
    assert mp.active_children() == []
